r"""Measuring what a trained tiny model does with position.

* :func:`window_losses` — the loss of every scored character of validation windows of one
  length, either non-overlapping (Press et al. 2022, arXiv:2108.12409, the extrapolation
  tables) or sliding, scoring only the last ``stride`` characters of each window (their
  appendix B: every scored character then has a long context, yet the model may not use
  it); :func:`perplexity_interval` and :func:`band_losses` read them, a window the unit of
  the bootstrap; its column means are the loss by position.
* :func:`context_used` — how much context a model uses: the same characters scored with
  doubling amounts of context (:func:`context_losses`), the farthest doubling that helps.
* :func:`needle_outcomes` — each passkey sequence right or wrong, by needle distance;
  :func:`retrieval` — accuracies with intervals; :func:`effective_context_length` — the
  longest distance at which accuracy stays above a threshold
  (:func:`effective_length_interval` with its interval).
* :func:`multikey_outcomes` — the same among distractor needles (:func:`pecourse.lab.data.multikey_batch`);
  :func:`multikey_ranks` — where the target lies among them.
* :func:`scale_rope` — training-free RoPE scaling at evaluation time (PI, NTK, YaRN,
  dynamic NTK) on a copy of the model.
* :func:`task_accuracy` — accuracy on a synthetic task's answer tokens.

Everything runs under ``torch.no_grad`` on fixed evaluation sets, so a measurement is the
same on every run. The defaults are the protocol's: a smaller measurement (a quick check in
a chapter) passes its sizes explicitly.

**The evaluation protocol** every chapter's recorded numbers follow (:data:`PROTOCOL`):

* one held-out text for every scheme: the first :data:`EVAL_TOKENS` (65,536) characters of
  the validation split (:func:`pecourse.lab.data.corpus`);
* non-overlapping windows of each length score all of them
  (:func:`window_losses`); sliding windows move by :func:`sliding_stride` (``L/4``) and score
  the last stride of each window, the same 65,536 characters (from character 512 on) at every
  length up to 512;
* a perplexity carries a 95% percentile-bootstrap interval over windows
  (:func:`perplexity_interval`, :func:`bootstrap_interval`);
* retrieval uses :data:`RETRIEVAL_SAMPLES` (256) sequences per distance, each right or wrong,
  with a Wilson interval (:func:`retrieval`, :func:`wilson_interval`);
* the effective length (the longest distance up to which accuracy stays at or above 0.5)
  carries a bootstrap interval over the retrieval samples (:func:`effective_length_interval`).
"""

from __future__ import annotations

import math
import statistics

import torch
from torch.nn import functional as F

from .._validate import check_choice, check_float, check_int
from .data import corpus, encode, multikey_batch, passkey_batch, task_batch
from .model import TinyGPT, replace_rope

__all__ = [
    "EVAL_TOKENS",
    "RETRIEVAL_SAMPLES",
    "SLIDING_START",
    "PROTOCOL",
    "sliding_stride",
    "bootstrap_interval",
    "wilson_interval",
    "window_losses",
    "perplexity_interval",
    "band_losses",
    "context_losses",
    "context_used",
    "needle_outcomes",
    "multikey_length",
    "multikey_outcomes",
    "multikey_ranks",
    "needle_grid",
    "multikey_cells",
    "retrieval",
    "effective_length_interval",
    "effective_context_length",
    "scale_rope",
    "task_accuracy",
    "ROPE_SCALINGS",
]


def _check_model(model) -> TinyGPT:
    if not isinstance(model, TinyGPT):
        raise TypeError(f"model must be a pecourse.lab.model.TinyGPT, got {type(model).__name__}")
    return model


def _lengths(lengths) -> list[int]:
    if isinstance(lengths, int):
        lengths = [lengths]
    return [check_int("length", n, minimum=2) for n in lengths]


# --- the evaluation protocol ----------------------------------------------------------------

#: Characters of held-out text behind every recorded perplexity and loss by position.
EVAL_TOKENS = 65536
#: Retrieval sequences per needle distance.
RETRIEVAL_SAMPLES = 256
#: In sliding mode, the first scored character (so every length up to it scores the same text).
SLIDING_START = 512
#: Interval level and bootstrap settings of every recorded number.
LEVEL, RESAMPLES, BOOTSTRAP_SEED = 0.95, 2000, 0

#: The protocol as it is written into every recording.
PROTOCOL = {
    "text": "validation split, the first eval_tokens characters (the same for every scheme)",
    "eval_tokens": EVAL_TOKENS,
    "sliding_stride": "L/4: windows of L every L/4 characters, scoring the last L/4",
    "sliding_start": SLIDING_START,
    "retrieval_samples": RETRIEVAL_SAMPLES,
    "effective_threshold": 0.5,
    "perplexity_interval": f"{LEVEL:.0%} percentile bootstrap over windows, {RESAMPLES} resamples",
    "retrieval_interval": f"{LEVEL:.0%} Wilson score interval",
    "effective_interval": (
        f"{LEVEL:.0%} percentile bootstrap over retrieval samples (per distance), "
        f"{RESAMPLES} resamples"
    ),
}


def sliding_stride(length: int) -> int:
    """The protocol's stride for sliding-window evaluation: a quarter of the window
    (Press et al. 2022 appendix B use strides well below the window), at least 1."""
    return max(1, check_int("length", length, minimum=1) // 4)


def bootstrap_interval(
    values, *, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float]:
    r"""Percentile-bootstrap interval for the mean of ``values`` (Efron & Tibshirani 1993, §13.3).

    Draws ``resamples`` samples of ``len(values)`` with replacement, takes each mean, and
    returns the ``(1 - level)/2`` and ``(1 + level)/2`` quantiles of those means. Fixed
    ``seed``, so the interval is reproducible. Refuses an empty or non-finite input, a
    ``level`` outside (0, 1) and fewer than 100 resamples.
    """
    x = torch.as_tensor(values, dtype=torch.float64).flatten()
    if x.numel() == 0:
        raise ValueError("values must hold at least one number")
    if not torch.isfinite(x).all():
        raise ValueError("values must be finite")
    level = _check_level(level)
    resamples = check_int("resamples", resamples, minimum=100)
    g = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
    idx = torch.randint(0, x.numel(), (resamples, x.numel()), generator=g)
    means = x[idx].mean(dim=1)
    lo, hi = torch.quantile(
        means, torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=means.dtype)
    )
    return float(lo), float(hi)


def _check_level(level) -> float:
    level = check_float("level", level, minimum=0.0, maximum=1.0, strict_minimum=True)
    if level >= 1.0:
        raise ValueError(f"level must be < 1, got {level}")
    return level


def wilson_interval(successes: int, trials: int, *, level: float = LEVEL) -> tuple[float, float]:
    r"""Wilson score interval for a binomial proportion (Wilson 1927; Brown, Cai & DasGupta 2001).

    For ``k`` successes in ``n`` trials and ``z`` the normal quantile of ``(1 + level)/2``:
    centre ``(k + z²/2)/(n + z²)``, half-width ``z·sqrt(k(n-k)/n + z²/4)/(n + z²)``. Unlike
    the normal approximation it stays inside [0, 1] and is not empty at 0 or ``n`` successes.
    Refuses negative counts, ``k > n``, ``n < 1`` and a ``level`` outside (0, 1).
    """
    n = check_int("trials", trials, minimum=1)
    k = check_int("successes", successes, minimum=0, maximum=n)
    level = _check_level(level)
    z = statistics.NormalDist().inv_cdf((1 + level) / 2)
    centre = (k + z * z / 2) / (n + z * z)
    half = z * math.sqrt(k * (n - k) / n + z * z / 4) / (n + z * z)
    return max(0.0, centre - half), min(1.0, centre + half)


def _window_positions(positions, length: int, n: int):
    """Position ids for ``n`` windows of ``length``: ``None``, ``[length]`` or ``[n, length]``."""
    if positions is None:
        return None
    ids = positions(length) if callable(positions) else positions
    ids = torch.as_tensor(ids)
    if ids.shape not in ((length,), (n, length)):
        raise ValueError(
            f"positions must give ids [length={length}] or [windows={n}, length={length}], "
            f"got {tuple(ids.shape)}"
        )
    return ids


@torch.no_grad()
def window_losses(
    model,
    length: int,
    *,
    mode: str = "nonoverlapping",
    tokens: int = EVAL_TOKENS,
    stride: int | None = None,
    batch_size: int = 16,
    positions=None,
) -> torch.Tensor:
    r"""Next-character loss (nats) of every scored character, ``[windows, scored]`` float64.

    ``mode="nonoverlapping"``: the first ``tokens`` validation characters cut into windows of
    ``length``; every position is scored (``scored = length``). ``mode="sliding"``: windows
    of ``length`` every ``stride`` characters (default :func:`sliding_stride`), each scoring
    only its last ``stride`` characters, which then see at least ``length - stride``
    characters of context; the scored characters are ``tokens`` characters from
    ``max(length, SLIDING_START)`` on, so every length up to 512 scores the same text.
    A window is the unit of the bootstrap: :func:`perplexity_interval` takes these rows.
    ``positions``: ids ``[length]`` for every window, ``[windows, length]`` (one row per
    window, e.g. a fresh random draw for each), or a function of the length returning either.
    """
    _check_model(model)
    check_choice("mode", mode, ("nonoverlapping", "sliding"))
    length = check_int("length", length, minimum=2)
    tokens = check_int("tokens", tokens, minimum=length)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    data = corpus("validation")
    if mode == "nonoverlapping":
        n, score_from = tokens // length, 0
        starts = [i * length for i in range(n)]
    else:
        s = check_int(
            "stride",
            stride if stride is not None else sliding_stride(length),
            minimum=1,
            maximum=length,
        )
        first = max(length, SLIDING_START)  # the first scored character
        n, score_from = tokens // s, length - s
        # window i feeds characters up to first + (i+1)s - 1 and scores its last s predictions:
        # the targets first + i*s + 1 ... first + (i+1)*s, whatever the length
        starts = [first + s - length + i * s for i in range(n)]
    if starts[-1] + length + 1 > len(data):
        raise ValueError(f"tokens={tokens} is more than the validation text holds at {length}")
    windows = torch.stack([data[a : a + length + 1] for a in starts])
    ids = _window_positions(positions, length, n)
    out = []
    for i in range(0, n, batch_size):
        w = windows[i : i + batch_size]
        p = ids[i : i + batch_size] if ids is not None and ids.ndim == 2 else ids
        logits = model(w[:, :-1], p)[0][:, score_from:]
        out.append(
            F.cross_entropy(
                logits.transpose(1, 2).float(), w[:, 1 + score_from :], reduction="none"
            )
        )
    return torch.cat(out).double()


def perplexity_interval(losses: torch.Tensor, *, level: float = LEVEL) -> dict:
    """Perplexity of :func:`window_losses` rows with a bootstrap interval over windows.

    Returns ``{"perplexity", "ci95": [lo, hi], "windows", "tokens"}``: ``exp`` of the mean
    loss, and ``exp`` of the interval of the mean (windows are equally long, so the mean of
    window means is the mean over characters).
    """
    losses = torch.as_tensor(losses, dtype=torch.float64)
    if losses.ndim != 2 or losses.numel() == 0:
        raise ValueError(
            f"losses must be [windows, scored] and non-empty, got {tuple(losses.shape)}"
        )
    lo, hi = bootstrap_interval(losses.mean(1), level=level)
    return {
        "perplexity": round(math.exp(float(losses.mean())), 4),
        "ci95": [round(math.exp(lo), 4), round(math.exp(hi), 4)],
        "windows": losses.shape[0],
        "tokens": losses.numel(),
    }


def band_losses(losses: torch.Tensor, bands, *, level: float = LEVEL) -> dict:
    """Mean loss of position bands of :func:`window_losses` rows, each with its interval.

    ``bands``: ``(start, stop)`` pairs of positions. Returns ``{"start-stop": {"loss",
    "ci95"}}`` (``stop`` exclusive), the interval a bootstrap over windows of each band mean.
    """
    losses = torch.as_tensor(losses, dtype=torch.float64)
    out = {}
    for a, b in bands:
        a, b = check_int("band start", a, minimum=0), check_int("band stop", b, minimum=a + 1)
        if b > losses.shape[1]:
            raise ValueError(f"bands must lie within {losses.shape[1]} positions, got ({a}, {b})")
        band = losses[:, a:b].mean(1)
        lo, hi = bootstrap_interval(band, level=level)
        out[f"{a}-{b}"] = {
            "loss": round(float(band.mean()), 4),
            "ci95": [round(lo, 4), round(hi, 4)],
        }
    return out


def context_losses(model, length: int | None = None, *, tokens: int = EVAL_TOKENS) -> dict:
    r"""The loss of the same characters seen with doubling amounts of context.

    ``{c: losses [tokens]}`` for ``c = 1, 2, 4, …, length/2`` (``length``: default the model's
    training length, at most :data:`SLIDING_START`): entry ``c`` scores every character with
    ``c`` to ``2c - 1`` characters of context before it (sliding windows of ``2c`` every ``c``
    characters, :func:`window_losses`' sliding mode), and the characters are the same
    ``tokens`` validation characters for every ``c``. Cutting the context of the very same
    predictions (Khandelwal et al. 2018, ACL, arXiv:1805.04623, measure how much context an
    LSTM uses by the rise in loss when its context is truncated) lets a gain of a thousandth
    of a nat show; loss by position mixes context with which text sits at each position.
    Each character is scored at positions ``c … 2c - 1`` of its window, so for a model that
    reads absolute positions (a learned or sinusoidal table) a change with ``c`` mixes more
    context with different position ids.
    """
    _check_model(model)
    length = check_int(
        "length",
        model.config.train_len if length is None else length,
        minimum=2,
        maximum=SLIDING_START,
    )
    out, c = {}, 1
    while 2 * c <= length:
        rows = window_losses(
            model, 2 * c, mode="sliding", stride=c, tokens=tokens, batch_size=max(16, 2048 // c)
        )
        out[c] = rows.flatten()
        c *= 2
    return out


def context_used(losses: dict, *, block: int = 256, level: float = LEVEL) -> dict:
    r"""How much context a model uses: the farthest doubling of its context that still helps.

    ``losses``: :func:`context_losses` (``{c: [tokens]}``, the same characters for every
    ``c``). For each ``c`` after the first, the *gain* is the loss with ``c/2`` to ``c - 1``
    characters of context minus the loss with ``c`` to ``2c - 1``, on the same characters,
    with a percentile-bootstrap interval over blocks of ``block`` consecutive characters.
    ``context_used`` is the largest ``c`` whose gain lies wholly above zero: the model predicts
    better when it sees at least ``c`` characters than when it sees fewer (``0`` when no
    doubling helps). Only a gain beyond the interval counts, so a flat reading says the model
    gains nothing *measurable* on this text from more context, not that it reads none.

    Returns ``{"context_used", "loss": {"c-(2c-1)": {loss, ci95}}, "gain": {"c": {loss,
    ci95}}, "tokens", "blocks"}``.
    """
    if not isinstance(losses, dict) or len(losses) < 2:
        raise ValueError("losses must map at least two context sizes to character losses")
    contexts = sorted(losses)
    rows = [torch.as_tensor(losses[c], dtype=torch.float64).flatten() for c in contexts]
    n = rows[0].numel()
    block = check_int("block", block, minimum=1)
    if any(r.numel() != n for r in rows) or n < 2 * block:
        raise ValueError(
            f"losses must score the same characters at every context (at least 2 blocks of "
            f"{block}), got {[r.numel() for r in rows]}"
        )
    blocks = [r[: n - n % block].reshape(-1, block).mean(1) for r in rows]
    loss, gain, used = {}, {}, 0
    for c, b in zip(contexts, blocks):
        lo, hi = bootstrap_interval(b, level=level)
        loss[f"{c}-{2 * c - 1}"] = {
            "loss": round(float(b.mean()), 4),
            "ci95": [round(lo, 4), round(hi, 4)],
        }
    for c, before, here in zip(contexts[1:], blocks, blocks[1:]):
        drop = before - here
        lo, hi = bootstrap_interval(drop, level=level)
        gain[str(c)] = {"loss": round(float(drop.mean()), 4), "ci95": [round(lo, 4), round(hi, 4)]}
        if lo > 0:
            used = c
    return {"context_used": used, "loss": loss, "gain": gain, "tokens": n, "blocks": len(blocks[0])}


@torch.no_grad()
def needle_outcomes(
    model,
    distances,
    *,
    length: int | None = None,
    samples: int = RETRIEVAL_SAMPLES,
    key_len: int = 4,
    seed: int = 1234,
    batch_size: int = 16,
) -> dict[int, torch.Tensor]:
    """``{distance: [samples] bool}``: whether each passkey sequence was answered right.

    A sequence (:func:`pecourse.lab.data.passkey_batch`, validation text as filler, fixed
    ``seed``) is right when every key digit after the final cue is the argmax prediction.
    ``length`` is the sequence length (default: the distance plus the key and 8 characters).
    """
    _check_model(model)
    samples = check_int("samples", samples, minimum=1)
    out = {}
    for d in _lengths(distances):
        n = check_int("length", length, minimum=2) if length is not None else d + key_len + 8
        batch = passkey_batch(
            samples, n, distance=d, key_len=key_len, split="validation", seed=seed
        )
        out[d] = _answered(model, batch, batch_size)
    return out


def _answered(model, batch, batch_size: int) -> torch.Tensor:
    """``[samples] bool``: whether every marked answer of each sequence of a task batch is the
    model's argmax prediction (scored ``batch_size`` sequences at a time)."""
    ok = []
    for i in range(0, batch.inputs.shape[0], batch_size):
        x, y, a = (t[i : i + batch_size] for t in (batch.inputs, batch.targets, batch.answer))
        pred = model(x)[0].argmax(-1)
        ok.append(((pred == y) | ~a).all(dim=1))
    return torch.cat(ok)


def multikey_length(distance: int) -> int:
    """The sequence length :func:`multikey_outcomes` uses at ``distance``: the passkey
    models' training length 64, or longer when the target needs it (``distance + 16``,
    which leaves 14 characters of text before the target)."""
    return max(64, check_int("distance", distance, minimum=1) + 16)


def _multikey(distance, keys, length, samples, seed):
    n = check_int("length", length, minimum=2) if length is not None else multikey_length(distance)
    return n, multikey_batch(
        samples, n, keys=keys, distance=distance, split="validation", seed=seed
    )


@torch.no_grad()
def multikey_outcomes(
    model,
    distances,
    *,
    keys: int = 1,
    length: int | None = None,
    samples: int = RETRIEVAL_SAMPLES,
    seed: int = 1234,
    batch_size: int = 16,
) -> dict[int, torch.Tensor]:
    """``{distance: [samples] bool}``: whether the target's value was the model's argmax
    prediction in each :func:`pecourse.lab.data.multikey_batch` sequence (``keys`` needles,
    validation text as filler, fixed ``seed``).

    ``length`` defaults to :func:`multikey_length` of each distance; it does not depend on
    ``keys``, so with the same seed every ``keys`` sees the same text, target needle and
    query, and only the distractors differ. Use :func:`retrieval` for accuracies and
    Wilson intervals, and :func:`multikey_ranks` to split them by where the target lies.
    """
    _check_model(model)
    samples = check_int("samples", samples, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    out = {}
    for d in _lengths(distances):
        _, batch = _multikey(d, keys, length, samples, seed)
        out[d] = _answered(model, batch, batch_size)
    return out


def multikey_ranks(
    distances,
    *,
    keys: int = 1,
    length: int | None = None,
    samples: int = RETRIEVAL_SAMPLES,
    seed: int = 1234,
) -> dict[int, dict[str, torch.Tensor]]:
    """``{distance: {"first": [samples] bool, "nearest": [samples] bool}}``: whether the
    target is the earliest needle of each sequence of :func:`multikey_outcomes` (same
    arguments), and whether it is the latest, the one nearest the query. With one needle
    both hold; with two exactly one does.

    Splitting the outcomes by these tells apart a model that matches the key (right
    wherever the target lies) from one that copies after the first cue (right when the
    target is first) or after the nearest cue.
    """
    cue = int(encode("@")[0])
    out = {}
    for d in _lengths(distances):
        n, batch = _multikey(d, keys, length, check_int("samples", samples, minimum=1), seed)
        cues = (batch.inputs[:, :-2] == cue).long()  # the needles: every @ before the query's
        index = torch.arange(cues.shape[1])
        target = n - 2 - d  # the target's cue in the inputs
        out[d] = {
            "first": (cues * (n - index)).argmax(1) == target,
            "nearest": (cues * index).argmax(1) == target,
        }
    return out


def needle_grid(
    model, lengths, distances, *, key_len: int, samples: int = RETRIEVAL_SAMPLES
) -> dict:
    """Passkey accuracy on a grid of sequence length × needle distance, the needle-in-a-haystack
    picture (Kamradt 2023) with depth read as ``1 - distance / length``: ``{length: {distance:
    cell}}``, each distance at the lengths where the needle fits (``distance + key_len + 2 <=
    length``). The question comes last, so at a fixed distance a longer sequence adds text
    before the needle only."""
    grid = {}
    for n in lengths:
        fits = [d for d in distances if d + key_len + 2 <= n]
        outcomes = needle_outcomes(model, fits, length=n, samples=samples, key_len=key_len)
        grid[str(n)] = {str(d): cell for d, cell in retrieval(outcomes).items()}
    return grid


def multikey_cells(model, keys, distances, *, samples: int = RETRIEVAL_SAMPLES) -> dict:
    """Retrieval among ``keys`` needles (after RULER's multi-key task, Hsieh et al. 2024,
    arXiv:2404.06654): ``{"accuracy", "when_first", "when_nearest"}``, each ``{keys: {distance:
    cell}}`` over all sequences, and over those whose target is the earliest needle / the one
    nearest the query (``None`` where no sequence has the target there)."""
    out = {"accuracy": {}, "when_first": {}, "when_nearest": {}}
    for k in keys:
        ok = multikey_outcomes(model, distances, keys=k, samples=samples)
        ranks = multikey_ranks(distances, keys=k, samples=samples)
        out["accuracy"][str(k)] = {str(d): c for d, c in retrieval(ok).items()}
        for rank in ("first", "nearest"):
            out["when_" + rank][str(k)] = {
                str(d): retrieval({d: ok[d][ranks[d][rank]]})[d] if ranks[d][rank].any() else None
                for d in distances
            }
    return out


def retrieval(outcomes: dict, *, level: float = LEVEL) -> dict[int, dict]:
    """Accuracy by distance from :func:`needle_outcomes`, each with its Wilson interval:
    ``{distance: {"accuracy", "successes", "trials", "ci95": [lo, hi]}}``."""
    out = {}
    for d, ok in outcomes.items():
        ok = torch.as_tensor(ok).bool().flatten()
        k, n = int(ok.sum()), ok.numel()
        lo, hi = wilson_interval(k, n, level=level)
        out[d] = {
            "accuracy": round(k / n, 4),
            "successes": k,
            "trials": n,
            "ci95": [round(lo, 4), round(hi, 4)],
        }
    return out


def effective_length_interval(
    outcomes: dict,
    threshold: float = 0.5,
    *,
    level: float = LEVEL,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict:
    r"""The effective length (:func:`effective_context_length` at ``threshold``) with a
    percentile-bootstrap interval.

    ``outcomes``: ``{distance: [samples] bool}`` (:func:`needle_outcomes`). Each bootstrap
    replicate resamples every distance's sequences with replacement (the distances have
    their own samples), recomputes the accuracies and so the effective length; the interval
    is the ``(1 - level)/2`` and ``(1 + level)/2`` quantiles of those lengths, taken
    outward (the lengths are the measured distances, a discrete set). Returns
    ``{"effective", "ci95": [lo, hi], "threshold"}``.
    """
    threshold = check_float("threshold", threshold, minimum=0.0, maximum=1.0)
    level = _check_level(level)
    resamples = check_int("resamples", resamples, minimum=100)
    if not outcomes:
        raise ValueError("outcomes must hold at least one distance")
    ds = sorted(outcomes)
    g = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
    acc = []
    for d in ds:
        ok = torch.as_tensor(outcomes[d]).double().flatten()
        if ok.numel() == 0:
            raise ValueError(f"outcomes[{d}] holds no samples")
        acc.append(ok[torch.randint(0, ok.numel(), (resamples, ok.numel()), generator=g)].mean(1))
    passes = (torch.stack(acc, 1) >= threshold).long().cumprod(1)  # [resamples, distances]
    run = passes.sum(1)  # how many distances pass before the first failure
    table = torch.tensor([0, *ds], dtype=torch.float64)
    lengths = table[run]
    lo = torch.quantile(lengths, (1 - level) / 2, interpolation="lower")
    hi = torch.quantile(lengths, (1 + level) / 2, interpolation="higher")
    point = effective_context_length(
        {d: float(torch.as_tensor(outcomes[d]).double().mean()) for d in ds}, threshold
    )
    return {"effective": point, "ci95": [int(lo), int(hi)], "threshold": threshold}


def effective_context_length(accuracy: dict, threshold: float = 0.5) -> int:
    """The longest distance ``d`` such that accuracy is ``>= threshold`` at ``d`` and at every
    shorter distance measured (0 if it fails at the shortest)."""
    threshold = check_float("threshold", threshold, minimum=0.0, maximum=1.0)
    best = 0
    for d in sorted(accuracy):
        if accuracy[d] < threshold:
            break
        best = d
    return best


#: Training-free RoPE scalings and what they need (see pecourse.positions.rope_scaling).
ROPE_SCALINGS = ("linear", "ntk", "yarn", "dynamic", "ntk_by_parts")


def scale_rope(model, method: str, factor: float, **options) -> TinyGPT:
    """A copy of ``model`` with its RoPE layers scaled by ``factor`` at evaluation time.

    ``"linear"`` is position interpolation (Chen et al. 2023, arXiv:2306.15595); ``"ntk"``
    raises the base (bloc97, 2023); ``"yarn"`` interpolates only the slow pairs and sharpens
    the softmax (Peng et al. 2023, arXiv:2309.00071, ``beta_fast``/``beta_slow`` in
    ``options``); ``"dynamic"`` is NTK with a factor that follows the current length.
    ``original_max_position`` defaults to the model's ``train_len``.
    """
    _check_model(model)
    check_choice("method", method, ROPE_SCALINGS)
    factor = check_float("factor", factor, minimum=1.0)
    if method in ("yarn", "dynamic", "ntk_by_parts"):
        options.setdefault("original_max_position", model.config.train_len)
    return replace_rope(model, method, factor=factor, **options)


@torch.no_grad()
def task_accuracy(
    model, task: str, length: int, *, samples: int = 128, seed: int = 4321, **options
) -> float:
    """Fraction of answer tokens predicted (argmax) correctly on a synthetic task."""
    _check_model(model)
    b = task_batch(task, samples, length, seed=seed, **options)
    pred = model(b.inputs)[0].argmax(-1)
    return float((pred == b.targets)[b.answer].float().mean())
