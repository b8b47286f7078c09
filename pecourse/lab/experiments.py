r"""The experiments chapters 03, 04, 08, 12, 13 and 14 show, measured on the shipped checkpoints.

Every function loads checkpoints (:func:`pecourse.lab.model.load_checkpoint`), measures them
under the evaluation protocol of :mod:`pecourse.lab.evaluate` (:data:`pecourse.lab.evaluate.PROTOCOL`:
the same 65,536 held-out characters for every scheme, sliding windows at stride ``L/4``,
bootstrap intervals over windows, 256 retrieval samples per distance with Wilson intervals)
and returns a *recording*: a JSON-serialisable dict of numbers, never an interpretation
(that is the chapter's prose, guarded by assertions on these numbers). Every recording has

* ``protocol`` — the evaluation parameters and what was measured;
* ``seeds`` — the training seeds of the checkpoints measured, and ``eval_tokens``;
* ``checkpoints`` — the sha256 of every checkpoint file it came from (a test compares them
  with the shipped files, so a retrained checkpoint cannot leave a stale recording);
* ``rows`` — one per (model, seed): the raw numbers, each with its ``ci95``;
* ``cpu_seconds`` and ``versions``.

=============================  ==================================================
:func:`extrapolation`          Press et al. 2022 (arXiv:2108.12409), Tables 2–3
:func:`loss_by_position`       the same: where, in a long window, each scheme breaks
:func:`position_shift`         RoPE's relative property in a trained model: every
                               position id shifted, the loss paired with the unshifted
:func:`effective_context`      the same paper, appendix B: sliding-window perplexity
                               and passkey retrieval by distance
:func:`needle_grid`            needle in a haystack (Kamradt 2023): depth × length
:func:`multikey`               RULER's multi-key needle task (Hsieh et al. 2024,
                               arXiv:2404.06654): retrieval among distractor needles
:func:`rope_scaling`           PI, NTK, YaRN, dynamic NTK without training; PI and
                               YaRN with a short fine-tune; retrieval with scaling
:func:`augmentation`           randomized positions (Ruoss et al. 2023) vs PoSE
:func:`rope_base`              the base bound of Men et al. 2024 (arXiv:2405.14591)
=============================  ==================================================

``python -m pecourse.lab.experiments run [NAME …] [--save]`` measures and prints them (and
records them in ``pecourse/lab/results``; ``make results`` rewrites every recording);
``python -m pecourse.lab.experiments retrain`` retrains every shipped checkpoint from scratch.

The checkpoints are tiny (4 layers, 64 wide, 4 heads of 16 dimensions, characters, trained
on 64-character windows for a few minutes of CPU), one training seed each: the intervals
are over evaluation windows and samples, not over training runs.
:func:`pecourse.lab.studies.extrapolation_seeds` repeats :func:`extrapolation` for training seeds
1 and 2 of the same recipes; :func:`pecourse.lab.studies.retrieval_seeds` does so for the
retrieval half of :func:`effective_context` and :func:`rope_base`, and
:func:`pecourse.lab.studies.augmentation_seeds` for :func:`augmentation`.
"""

from __future__ import annotations

import json
import platform
import sys
import time

import torch

from ..derivations import rope_base_lower_bound
from . import evaluate as ev
from .model import checkpoint_info, checkpoint_sha256, load_checkpoint

__all__ = [
    "EXPERIMENTS",
    "extrapolation",
    "loss_by_position",
    "position_shift",
    "effective_context",
    "needle_grid",
    "multikey",
    "rope_scaling",
    "augmentation",
    "rope_base",
    "retrain",
    "record",
    "load",
]

EXTRAPOLATION_SET = ("learned", "sinusoidal", "rope", "t5", "alibi", "nope")
LENGTHS = (64, 128, 256, 512)
DISTANCES = (8, 16, 32, 48, 96, 192, 384)


def _lengths(lengths) -> list[int]:
    from .._validate import check_int

    lengths = [check_int("lengths[]", n, minimum=2) for n in lengths]
    if not lengths:
        raise ValueError("lengths must hold at least one length")
    return lengths


def _train_facts(name: str) -> dict:
    """The seed and budget of a shipped checkpoint, as a recording states them."""
    t = checkpoint_info(name).get("train", {})
    return {
        "seed": t.get("seed", 0),
        "train_steps": t.get("steps"),
        "init_from": t.get("init_from"),
    }


def _recording(name: str, rows: list, checkpoints, protocol: dict, start: float, **extra) -> dict:
    seeds = sorted({r["seed"] for r in rows if "seed" in r})
    return {
        "name": name,
        "protocol": {**ev.PROTOCOL, **protocol},
        "seeds": seeds,
        "eval_tokens": protocol.get("eval_tokens", ev.EVAL_TOKENS),
        "checkpoints": {c: checkpoint_sha256(c) for c in sorted(set(checkpoints))},
        "rows": rows,
        **extra,
        "cpu_seconds": round(time.process_time() - start, 1),
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
    }


def _ppl(model, n: int, **kw) -> dict:
    return ev.perplexity_interval(ev.window_losses(model, n, **kw))


def _key_len(model) -> int:
    """The passkey length a shipped checkpoint was trained on (its record's ``task_options``)."""
    train = getattr(model, "checkpoint", {}).get("train")
    if train is None:  # e.g. a model trained in this process: no record to read it from
        raise ValueError("the model carries no training record: pass key_len explicitly")
    return train.get("task_options", {}).get("key_len", 4)  # TrainConfig's default


# --- 1. extrapolation -----------------------------------------------------------------


def extrapolation(
    lengths=LENGTHS, names=EXTRAPOLATION_SET, *, tokens: int = ev.EVAL_TOKENS
) -> dict:
    """Train short, test long (Press et al. 2022, arXiv:2108.12409, Tables 2–3).

    Every model was trained at 64 characters; each is evaluated on the same ``tokens``
    validation characters cut into non-overlapping windows of each length. A learned table
    has no rows past its training length: that cell is ``None`` and ``unavailable`` keeps
    the error message. Row: ``{model, seed, train_steps, "<L>": {perplexity, ci95, …}}``.
    """
    start = time.process_time()
    lengths = _lengths(lengths)
    rows, unavailable = [], {}
    for name in names:
        model = load_checkpoint(name)
        row = {"model": name, **_train_facts(name)}
        for n in lengths:
            try:
                row[str(n)] = _ppl(model, n, tokens=tokens)
            except ValueError as exc:  # a learned table has no row for these positions
                row[str(n)] = None
                unavailable.setdefault(name, str(exc))
        rows.append(row)
    protocol = {
        "mode": "nonoverlapping",
        "lengths": lengths,
        "eval_tokens": tokens,
        "train_len": 64,
    }
    return _recording("extrapolation", rows, names, protocol, start, unavailable=unavailable)


def loss_by_position(
    names=("sinusoidal", "rope", "t5", "alibi", "nope"),
    length: int = 256,
    *,
    tokens: int = ev.EVAL_TOKENS,
    bands=((0, 64), (64, 128), (128, 256)),
) -> dict:
    """Mean loss at each position of ``length``-character windows (``tokens`` characters),
    and the mean of each band of positions with its interval (bootstrap over windows).

    Every model was trained on 64 characters, so positions 64 and beyond are new to it.
    Row: ``{model, seed, curve: [length], bands: {"a-b": {loss, ci95}}, windows}``.
    """
    start = time.process_time()
    rows = []
    for name in names:
        losses = ev.window_losses(load_checkpoint(name), length, tokens=tokens)
        rows.append(
            {
                "model": name,
                **_train_facts(name),
                "curve": [round(v, 4) for v in losses.mean(0).tolist()],
                "bands": ev.band_losses(losses, bands),
                "windows": losses.shape[0],
            }
        )
    protocol = {"mode": "nonoverlapping", "length": length, "eval_tokens": tokens, "train_len": 64}
    return _recording("loss_by_position", rows, names, protocol, start)


def position_shift(
    names=("rope", "sinusoidal"),
    shifts=(0, 100, 1_000, 10_000),
    length: int = 64,
    *,
    tokens: int = ev.EVAL_TOKENS,
) -> dict:
    """Loss with every position id shifted: windows of ``length`` scored with ids
    ``s .. s+length-1`` instead of ``0 .. length-1`` (chapter 08).

    RoPE's scores depend on ``i - j`` only (Su et al. 2021, arXiv:2104.09864, eq. 16), so a
    shift changes its loss by float rounding alone; a sinusoidal model meets position
    vectors it never saw. The same ``tokens`` validation characters at every shift, so the
    difference from shift 0 is *paired*: taken window by window, with a bootstrap interval
    over windows. Row: ``{model, seed, train_steps, loss: {shift: {loss, ci95}},
    paired: {shift: {difference, ci95, max_abs}}}`` (``max_abs``: the largest change of any
    one character's loss, in nats; differences unrounded).
    """
    from .._validate import check_int

    start = time.process_time()
    length = check_int("length", length, minimum=2)
    shifts = [check_int("shifts[]", s, minimum=0) for s in shifts]
    if not shifts or shifts[0] != 0:
        raise ValueError(f"shifts must start with 0, the unshifted reference, got {shifts}")
    rows = []
    for name in names:
        model = load_checkpoint(name)
        row = {"model": name, **_train_facts(name), "loss": {}, "paired": {}}
        base = None
        for s in shifts:
            losses = ev.window_losses(
                model, length, tokens=tokens, positions=torch.arange(length) + s
            )
            base = losses if base is None else base
            row["loss"][str(s)] = ev.band_losses(losses, [(0, length)])[f"0-{length}"]
            change = losses - base  # the same characters, scored at two sets of positions
            lo, hi = ev.bootstrap_interval(change.mean(1))
            row["paired"][str(s)] = {
                "difference": float(change.mean()),
                "ci95": [lo, hi],
                "max_abs": float(change.abs().max()),
            }
        rows.append(row)
    protocol = {
        "mode": "nonoverlapping",
        "length": length,
        "shifts": shifts,
        "positions": "shift .. shift + length - 1 in every window",
        "paired_interval": "95% percentile bootstrap over windows of the per-window mean difference",
        "eval_tokens": tokens,
        "train_len": 64,
    }
    return _recording("position_shift", rows, names, protocol, start)


# --- 2. effective vs nominal context -----------------------------------------------------


def _retriever(name: str) -> str:
    """The ``<name>_passkey`` checkpoint if shipped, else ``name`` itself."""
    from .model import list_checkpoints

    return f"{name}_passkey" if f"{name}_passkey" in list_checkpoints() else name


def _retrieval(model, distances, samples: int, **kw) -> tuple[dict, dict]:
    outcomes = ev.needle_outcomes(model, distances, samples=samples, key_len=_key_len(model), **kw)
    table = {str(d): v for d, v in ev.retrieval(outcomes).items()}
    return table, ev.effective_length_interval(outcomes)


def effective_context(
    names=("alibi", "rope", "t5"),
    distances=DISTANCES,
    lengths=LENGTHS,
    *,
    tokens: int = ev.EVAL_TOKENS,
    samples: int = ev.RETRIEVAL_SAMPLES,
) -> dict:
    """Sliding-window perplexity vs needle retrieval by distance (Press et al. 2022, appendix B).

    Sliding windows (stride ``L/4``) of the text model score the same ``tokens`` characters
    at every length, each with at least ``3L/4`` characters of context. Retrieval is
    measured on the same architecture trained on the passkey task (``<scheme>_passkey``,
    whose training budget the row states): accuracy at each distance over ``samples``
    sequences with a Wilson interval, and the effective length (accuracy ≥ 0.5 at every
    distance up to it) with a bootstrap interval.
    """
    start = time.process_time()
    lengths = _lengths(lengths)
    rows, used = [], []
    for name in names:
        model = load_checkpoint(name)
        rname = _retriever(name)
        table, effective = _retrieval(load_checkpoint(rname), distances, samples)
        facts = _train_facts(rname)
        rows.append(
            {
                "model": name,
                **_train_facts(name),
                "sliding": {str(n): _ppl(model, n, mode="sliding", tokens=tokens) for n in lengths},
                "retrieval_model": rname,
                "retrieval_seed": facts["seed"],
                "retrieval_train_steps": facts["train_steps"],
                "retrieval": table,
                "effective": effective,
            }
        )
        used += [name, rname]
    protocol = {
        "mode": "sliding",
        "lengths": lengths,
        "eval_tokens": tokens,
        "distances": [int(d) for d in distances],
        "retrieval_samples": samples,
        "retrieval_length": "distance + key length + 8",
        "train_len": 64,
    }
    return _recording("effective_context", rows, used, protocol, start)


GRID_LENGTHS = (64, 128, 256, 512)
GRID_DISTANCES = (16, 48, 96, 192, 384)


def needle_grid(
    names=("alibi", "rope", "t5"),
    lengths=GRID_LENGTHS,
    distances=GRID_DISTANCES,
    *,
    samples: int = ev.RETRIEVAL_SAMPLES,
) -> dict:
    """Passkey accuracy on a grid of sequence length × needle distance: the needle-in-a-haystack
    picture (Kamradt 2023, depth × length), with depth read as ``1 - distance / length``.

    The question always comes last, so at a fixed distance a longer sequence adds text
    *before* the needle only: the model then attends over more keys and sees larger absolute
    positions, while the distance it must reach back stays the same. Each cell is measured on
    ``samples`` sequences with a Wilson interval; a distance is measured at a length when the
    needle fits (``distance + key length + 2 <= length``).
    """
    start = time.process_time()
    lengths, distances = _lengths(lengths), _lengths(distances)
    rows, used = [], []
    for name in names:
        rname = _retriever(name)
        model = load_checkpoint(rname)
        grid = needle_grid_cells(model, lengths, distances, samples=samples)
        facts = _train_facts(rname)
        rows.append(
            {
                "model": name,
                "retrieval_model": rname,
                **facts,
                "key_len": _key_len(model),
                "grid": grid,
            }
        )
        used.append(rname)
    protocol = {
        "lengths": lengths,
        "distances": distances,
        "retrieval_samples": samples,
        "retrieval_length": "the grid's length; the question is the last character",
        "eval_tokens": ev.EVAL_TOKENS,
        "train_len": 64,
    }
    return _recording("needle_grid", rows, used, protocol, start)


def needle_grid_cells(
    model, lengths, distances, *, key_len: int | None = None, samples: int = ev.RETRIEVAL_SAMPLES
) -> dict:
    """One model's grid for :func:`needle_grid`: ``{length: {distance: cell}}``, each distance
    measured at the lengths where the needle fits (``distance + key length + 2 <= length``).
    ``key_len``: the key length the model was trained on (default: its checkpoint's)."""
    k = _key_len(model) if key_len is None else key_len
    grid = {}
    for n in lengths:
        fits = [d for d in distances if d + k + 2 <= n]
        outcomes = ev.needle_outcomes(model, fits, length=n, samples=samples, key_len=k)
        grid[str(n)] = {str(d): cell for d, cell in ev.retrieval(outcomes).items()}
    return grid


def multikey_cells(model, keys, distances, *, samples: int = ev.RETRIEVAL_SAMPLES) -> dict:
    """One model's cells for :func:`multikey`: ``{"accuracy", "when_first", "when_nearest"}``,
    each ``{keys: {distance: cell}}`` (``None`` where no sequence has the target there)."""
    out = {"accuracy": {}, "when_first": {}, "when_nearest": {}}
    for k in keys:
        ok = ev.multikey_outcomes(model, distances, keys=k, samples=samples)
        ranks = ev.multikey_ranks(distances, keys=k, samples=samples)
        out["accuracy"][str(k)] = {str(d): c for d, c in ev.retrieval(ok).items()}
        for rank in ("first", "nearest"):
            out["when_" + rank][str(k)] = {
                str(d): ev.retrieval({d: ok[d][ranks[d][rank]]})[d]
                if ranks[d][rank].any()
                else None
                for d in distances
            }
    return out


MULTIKEY_KEYS = (1, 2, 4, 8)
#: Two distances inside the passkey training window (needles 3-62 back) and two beyond it.
MULTIKEY_DISTANCES = (16, 48, 96, 192)


def multikey(
    names=("alibi", "rope", "t5"),
    keys=MULTIKEY_KEYS,
    distances=MULTIKEY_DISTANCES,
    *,
    samples: int = ev.RETRIEVAL_SAMPLES,
) -> dict:
    """Passkey retrieval among distractor needles, after RULER's multi-key needle task
    (Hsieh et al. 2024, arXiv:2404.06654): :func:`pecourse.lab.data.multikey_batch` with
    ``keys`` needles ``@ab`` of distinct key digits, the target ``distance`` before the
    query ``@a``, only the value ``b`` scored (chance 1/10). Zero-shot: the ``_passkey``
    models were trained with one needle.

    Each cell is ``samples`` sequences at length :func:`pecourse.lab.evaluate.multikey_length`
    (64, or ``distance + 16`` beyond it), the same text and target at every ``keys``. Row:
    ``{model, retrieval_model, seed, train_steps, accuracy, when_first, when_nearest}``,
    each of the last three ``{keys: {distance: cell}}`` with a Wilson interval: the
    accuracy over all sequences, and over those whose target is the earliest needle /
    the nearest to the query (:func:`pecourse.lab.evaluate.multikey_ranks`; ``None`` where no
    sequence has the target there).
    """
    from .._validate import check_int

    start = time.process_time()
    keys = [check_int("keys[]", k, minimum=1, maximum=10) for k in keys]
    distances = _lengths(distances)
    if not keys:
        raise ValueError("keys must hold at least one number of needles")
    rows, used = [], []
    for name in names:
        rname = _retriever(name)
        model = load_checkpoint(rname)
        row = {"model": name, "retrieval_model": rname, **_train_facts(rname)}
        row.update(multikey_cells(model, keys, distances, samples=samples))
        rows.append(row)
        used.append(rname)
    protocol = {
        "keys": keys,
        "distances": distances,
        "retrieval_samples": samples,
        "retrieval_length": "max(64, distance + 16), the same for every number of keys",
        "scored": "the value digit after the final '@' and key digit; chance 1/10",
        "when_first": "the sequences whose target is the earliest needle",
        "when_nearest": "the sequences whose target is the last needle before the query",
        "eval_tokens": ev.EVAL_TOKENS,
        "train_len": 64,
    }
    return _recording("multikey", rows, used, protocol, start)


# --- 3. RoPE scaling --------------------------------------------------------------------

#: YaRN's ramp for a 16-dimensional head trained at 64 (see chapter 14).
YARN_BETAS = {"beta_fast": 8.0, "beta_slow": 1.0}


def _bands(train_len: int, extended: int, top: int) -> list[tuple[int, int]]:
    """Position bands of a window of ``top``: before the training length, up to the extended
    window, beyond it (the ones that fit)."""
    cuts = sorted({0, min(train_len, top), min(extended, top), top})
    return list(zip(cuts[:-1], cuts[1:]))


def _scaled_variants(base, factor: float) -> dict:
    return {
        "none": base,
        "PI": ev.scale_rope(base, "linear", factor),
        "NTK": ev.scale_rope(base, "ntk", factor),
        "YaRN": ev.scale_rope(base, "yarn", factor, **YARN_BETAS),
        "dynamic NTK": ev.scale_rope(base, "dynamic", factor),
    }


def rope_scaling(
    factor: float = 4.0,
    lengths=LENGTHS,
    *,
    tokens: int = ev.EVAL_TOKENS,
    distances=(48, 96, 192, 384),
    samples: int = ev.RETRIEVAL_SAMPLES,
) -> dict:
    r"""Training-free RoPE scaling by ``factor``, then PI and YaRN with a short fine-tune.

    The ``rope`` checkpoint (trained at 64) at each length as it is and with position
    interpolation (PI), NTK-aware scaling, YaRN (``beta_fast=8, beta_slow=1``, see chapter
    14) and dynamic NTK, no training; then ``rope_pi_finetune`` and ``rope_yarn_finetune``:
    the same weights trained 100 more steps on 256-character windows with the scaling on.
    The extended window is ``factor × 64``; lengths beyond it are outside what any of them
    was built or tuned for. At the longest length each row also has its loss by band
    (before 64, 64 to the extended window, beyond it). Then retrieval: the ``rope_passkey``
    checkpoint with the same training-free scalings, by needle distance.
    """
    from .._validate import check_float

    start = time.process_time()
    factor = check_float("factor", factor, minimum=1.0)
    lengths = _lengths(lengths)
    base = load_checkpoint("rope")
    train_len = base.config.train_len
    extended = int(round(factor * train_len))
    variants = {k: (v, "rope") for k, v in _scaled_variants(base, factor).items()}
    for label, name in (
        ("PI + fine-tune", "rope_pi_finetune"),
        ("YaRN + fine-tune", "rope_yarn_finetune"),
    ):
        variants[label] = (load_checkpoint(name), name)
    top = lengths[-1]
    bands = _bands(train_len, extended, top)
    rows, yarn_losses = [], {}
    for label, (model, name) in variants.items():
        row = {"model": label, "checkpoint": name, **_train_facts(name)}
        for n in lengths:
            losses = ev.window_losses(model, n, tokens=tokens)
            row[str(n)] = ev.perplexity_interval(losses)
            if label == "YaRN":
                yarn_losses[n] = losses
            if n == top:
                row["bands"] = ev.band_losses(losses, bands)
        rows.append(row)
    # YaRN's temperature applied never or twice instead of once, at the extended window and the
    # longest length, with the paired difference in mean loss from the correct (once) model
    from ..positions.rope_scaling import yarn_mscale

    once = yarn_mscale(factor)
    temperature = []
    for label, a in (("never", 1.0), ("once", once), ("twice", once**2)):
        entry = {"applied": label, "attention_factor": round(a, 6)}
        model = ev.scale_rope(base, "yarn", factor, attention_factor=a, **YARN_BETAS)
        for n in sorted({n for n in (extended, top) if n in lengths}):  # lengths measured above
            losses = (
                yarn_losses[n] if label == "once" else ev.window_losses(model, n, tokens=tokens)
            )
            entry[str(n)] = ev.perplexity_interval(losses)
            diff = (losses - yarn_losses[n]).mean(1)
            lo, hi = ev.bootstrap_interval(diff)
            entry[str(n)]["loss_minus_once"] = {
                "mean": round(float(diff.mean()), 5),
                "ci95": [round(lo, 5), round(hi, 5)],
            }
        temperature.append(entry)
    # a stale dynamic-NTK table: after an input of the longest length, a window of train_len
    # keeps the effective factor factor * top / train_len - (factor - 1)
    stale_factor = factor * top / train_len - (factor - 1)
    stale = {
        "effective_factor": stale_factor,
        str(train_len): _ppl(ev.scale_rope(base, "ntk", stale_factor), train_len, tokens=tokens),
    }
    passkey = load_checkpoint("rope_passkey")
    retrieval_rows = []
    for label, model in _scaled_variants(passkey, factor).items():
        table, effective = _retrieval(model, distances, samples)
        retrieval_rows.append({"model": label, "retrieval": table, "effective": effective})
    protocol = {
        "mode": "nonoverlapping",
        "factor": factor,
        "train_len": train_len,
        "extended_window": extended,
        "lengths": lengths,
        "eval_tokens": tokens,
        "bands_at": top,
        "yarn": YARN_BETAS,
        "retrieval_checkpoint": "rope_passkey",
        "distances": [int(d) for d in distances],
        "retrieval_samples": samples,
    }
    names = ["rope", "rope_pi_finetune", "rope_yarn_finetune", "rope_passkey"]
    return _recording(
        "rope_scaling",
        rows,
        names,
        protocol,
        start,
        retrieval=retrieval_rows,
        temperature=temperature,
        stale_dynamic=stale,
    )


# --- 4. position augmentation ------------------------------------------------------------


def augmentation(
    lengths=LENGTHS,
    *,
    tokens: int = ev.EVAL_TOKENS,
    sliding=("rope", "rope_pose"),
    names=("rope", "rope_randomized", "rope_pose"),
) -> dict:
    """Randomized positions (Ruoss et al. 2023) vs PoSE (Zhu et al. 2024) vs plain RoPE.

    All three were trained on 64-token windows; the augmented ones saw position ids spread
    over 0..511 (randomized: a sorted random subset; PoSE: two chunks with a random skip).
    Non-overlapping perplexity with ids ``0..L-1``, and for ``rope_randomized`` also with
    ids drawn as in training: a fresh sorted random subset of 0..511 for every window (the
    protocol of Ruoss et al.'s code, which randomizes at evaluation too; fixed generator).
    For the checkpoints in ``sliding``, sliding-window perplexity (stride ``L/4``) as well,
    the measure PoSE's paper reports.
    """
    from ..positions.augmentation import randomized_positions

    start = time.process_time()
    lengths = _lengths(lengths)
    names = tuple(names)
    models = {n: load_checkpoint(n) for n in names}
    span = checkpoint_info("rope_randomized")["train"]["augment_len"]
    rows = []
    for name in names:
        row = {"model": name, "ids": "0..L-1", **_train_facts(name)}
        row.update({str(n): _ppl(models[name], n, tokens=tokens) for n in lengths})
        if name in sliding:
            row["sliding"] = {
                str(n): _ppl(models[name], n, mode="sliding", tokens=tokens) for n in lengths
            }
        rows.append(row)
    if "rope_randomized" in names:  # evaluated as trained: fresh sorted random ids per window
        row = {"model": "rope_randomized", "ids": "random", **_train_facts("rope_randomized")}
        for n in lengths:
            g = torch.Generator().manual_seed(n)
            ids = randomized_positions(n, span, generator=g, batch=tokens // n)
            row[str(n)] = _ppl(models["rope_randomized"], n, tokens=tokens, positions=ids)
        rows.append(row)
    protocol = {
        "mode": "nonoverlapping, and sliding for " + ", ".join(sliding),
        "lengths": lengths,
        "eval_tokens": tokens,
        "augment_len": span,
        "random_ids": "a sorted random subset of 0..augment_len-1 per window, generator seed = L",
        "train_len": 64,
    }
    return _recording("augmentation", rows, names, protocol, start)


# --- 5. RoPE base bound ------------------------------------------------------------------


def rope_base(
    distances=(8, 16, 24, 32, 40, 48, 56),
    *,
    tokens: int = ev.EVAL_TOKENS,
    samples: int = ev.RETRIEVAL_SAMPLES,
) -> dict:
    """Base below vs above the bound of Men et al. 2024: perplexity at 64 and retrieval.

    ``rope_base_low`` and ``rope`` (text, 800 steps) give the perplexity at the training
    length; their ``_passkey`` counterparts (1000 steps) the passkey accuracy at each
    distance in sequences of 64, with Wilson intervals. ``bound``: the smallest base whose
    ``B(m)`` stays non-negative up to 64 for a 16-dimensional head.
    """
    start = time.process_time()
    names = ("rope_base_low", "rope")
    cfg = load_checkpoint("rope").config
    head_dim, n = cfg.d_model // cfg.n_heads, cfg.train_len
    rows, used = [], []
    for name in names:
        model = load_checkpoint(name)
        rname = _retriever(name)
        table, effective = _retrieval(load_checkpoint(rname), distances, samples, length=n)
        rows.append(
            {
                "model": name,
                **_train_facts(name),
                "base": model.blocks[0].attn.scheme.base,
                "64": _ppl(model, n, tokens=tokens),
                "retrieval_model": rname,
                "retrieval_train_steps": _train_facts(rname)["train_steps"],
                "retrieval": table,
                "effective": effective,
            }
        )
        used += [name, rname]
    protocol = {
        "head_dim": head_dim,
        "train_len": n,
        "eval_tokens": tokens,
        "distances": [int(d) for d in distances],
        "retrieval_samples": samples,
        "retrieval_length": n,
    }
    bound = rope_base_lower_bound(n, head_dim)
    return _recording("rope_base", rows, used, protocol, start, bound=round(bound, 1))


EXPERIMENTS = {
    "extrapolation": extrapolation,
    "loss_by_position": loss_by_position,
    "position_shift": position_shift,
    "effective_context": effective_context,
    "needle_grid": needle_grid,
    "multikey": multikey,
    "rope_scaling": rope_scaling,
    "augmentation": augmentation,
    "rope_base": rope_base,
}


def record(result: dict, folder=None):
    """Write an experiment's recording to ``folder/<name>.json`` (default ``pecourse/lab/results``),
    validated by :func:`pecourse.lab.results.write`."""
    from .._validate import check_choice
    from .results import write

    if not isinstance(result, dict) or "name" not in result:
        raise TypeError("result must be an experiment's recording (a dict with a 'name')")
    check_choice("result['name']", result["name"], tuple(EXPERIMENTS))
    return write(result, folder)


def load(name: str) -> dict:
    """A recorded experiment (``pecourse/lab/results/<name>.json``) as a dict."""
    from .results import recorded

    return recorded(name)


def retrain(names=None, *, out_dir=None, progress: bool = True, **overrides) -> dict:
    """Retrain the shipped checkpoints from scratch (all of :data:`pecourse.lab.train.RECIPES`).

    ``overrides`` change training options of every recipe (``threads=1``).
    """
    from .train import RECIPES, train_recipe

    records = {}
    for name in names or list(RECIPES):
        _, rec = train_recipe(name, out_dir=out_dir, progress=progress, **overrides)
        records[name] = rec.get("metrics", {})
        print(name, records[name], f"{rec['seconds']}s", flush=True)
    return records


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m pecourse.lab.experiments")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("retrain", help="retrain every shipped checkpoint from scratch")
    r.add_argument("names", nargs="*")
    r.add_argument("--out", default=None)
    r.add_argument(
        "--threads", type=int, default=1, help="torch threads per run (the shipped runs used 1)"
    )
    x = sub.add_parser("run", help="run experiments and print their tables")
    x.add_argument("names", nargs="*")
    x.add_argument("--save", action="store_true", help="write pecourse/lab/results/<name>.json")
    x.add_argument("--out", default=None, help="folder for the recordings (default: shipped)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)  # recordings are made with one thread (bit-for-bit reproducible)
    if args.cmd == "retrain":
        retrain(args.names or None, out_dir=args.out, threads=args.threads)
        return 0
    for name in args.names or list(EXPERIMENTS):
        if name not in EXPERIMENTS:
            p.error(f"unknown experiment {name!r}; choose from {sorted(EXPERIMENTS)}")
        res = EXPERIMENTS[name]()
        if args.save:
            print(record(res, args.out), f"{res['cpu_seconds']} CPU s", flush=True)
        else:
            print(json.dumps(res, indent=1), "\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
