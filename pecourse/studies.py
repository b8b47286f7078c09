r"""Seeded studies behind chapters 03, 04, 05, 10, 11, 13, 14, 15 and 16: small models trained from scratch, several
seeds, every number with its interval.

The shipped checkpoints (:mod:`pecourse.train`) are one seed each. The studies here retrain
the models a chapter draws a conclusion from, with several seeds, and evaluate them on
fixed held-out sets. Each study returns a JSON-serialisable dict (a *recording*) with

* ``protocol`` — everything needed to rerun it: model sizes, training options, evaluation
  lengths and sample counts, the interval method;
* ``seeds`` — the list of training seeds;
* ``rows`` — one entry per (variant, seed): the loss curve and the raw numbers measured;
* ``summary`` — per variant and measurement: the per-seed values, their mean, min and max;
* ``cpu_seconds`` and ``versions`` — what it cost and what it ran on.

An accuracy of one seed carries a 95% percentile-bootstrap interval over the evaluation
samples (:func:`bootstrap_interval`); the spread across seeds is reported as the per-seed
values themselves (three seeds are too few for an interval). :func:`record` writes a
recording to ``pecourse/results/<name>.json``; :func:`load` reads it back.

========================================  ==================================================
:func:`grid_width_transfer`               chapter 05: a one-layer model learns "the patch
                                          below" at one grid width with 1D or 2D RoPE;
                                          tested at other widths
:func:`cope_selective_copy`               chapter 10: CoPE vs RoPE on selective copy, RoPE
                                          given 6× the steps, tested on the training, dense
                                          and sparse splits
:func:`cope_counting`                     chapter 10: the shipped counting models, with
                                          intervals
:func:`text_extrapolation`                chapters 11 and 15: the shipped rope, nope, irope
                                          and alibi checkpoints from 64 to 512 characters
:func:`imposed_windows`                   chapter 11: the shipped rope and irope models with
                                          a sliding window imposed on their RoPE layers
:func:`windowed_passkey`                  chapter 11: passkey retrieval with windowed RoPE
                                          layers, with and without a full-attention NoPE
                                          layer
:func:`nope_anchor`                       chapter 15: RoPE, NoPE and NoPE with a start
                                          marker on text
:func:`counting_length_generalisation`    chapter 15: NoPE, RoPE and ALiBi trained on
                                          counting at 64, tested at 64, 128 and 256
:func:`extrapolation_seeds`               chapter 03: the extrapolation table (learned,
                                          sinusoidal, RoPE, T5, ALiBi, NoPE) for seeds
                                          0 (shipped), 1 and 2
:func:`sliding_seeds`                     chapter 04: sliding-window perplexity of the
                                          ALiBi, RoPE and T5 text models, seeds 0-2
:func:`retrieval_seeds`                   chapters 04 and 16: passkey retrieval by
                                          distance of the ``*_passkey`` models (each
                                          with its recipe's budget), seeds 0, 1, 2
:func:`augmentation_seeds`                chapter 13: plain RoPE, randomized positions
                                          and PoSE, seeds 0 (shipped), 1 and 2
:func:`needle_seeds`                      chapter 04: the depth × length needle grid and
                                          multi-key retrieval of the passkey models,
                                          seeds 0 (shipped), 1 and 2
:func:`extension_seeds`                   chapters 13 and 14: training-free scalings, the
                                          PI and YaRN fine-tunes and PoSE as published,
                                          each continued from its own seed's base
========================================  ==================================================

The six multi-seed studies share one mechanism (:func:`_seeded_runs`): seed 0 is the
shipped checkpoint, the other seeds are trained with the same recipe and kept as numbers
(a recipe that continues another starts from that seed's run of it), and a log lets an
interrupted run resume.

``python -m pecourse.studies run NAME`` reruns a study and rewrites its recording (minutes
of CPU each; the chapter says how many).
"""

from __future__ import annotations

import json
import logging
import math
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from tqdm.auto import tqdm

from ._validate import check_choice, check_int
from .data import task_batch
from .evaluate import bootstrap_interval, wilson_interval
from .model import ModelConfig, TinyGPT
from .results import recorded, write

logger = logging.getLogger(__name__)
#: Whether studies draw a progress bar over their models (``python -m pecourse.studies`` does).
PROGRESS = False

__all__ = [
    "bootstrap_interval",
    "per_sample_accuracy",
    "GridAttention",
    "grid_width_transfer",
    "cope_selective_copy",
    "cope_counting",
    "windowed_passkey",
    "imposed_windows",
    "text_extrapolation",
    "per_window_loss",
    "nope_anchor",
    "text_window_losses",
    "counting_length_generalisation",
    "extrapolation_seeds",
    "retrieval_seeds",
    "augmentation_seeds",
    "context_use",
    "extension_controls",
    "wilson_interval",
    "STUDIES",
    "record",
    "load",
]


# --- intervals and per-sample scores --------------------------------------------------------


@torch.no_grad()
def per_sample_accuracy(
    model: TinyGPT,
    task: str,
    length: int,
    *,
    samples: int = 256,
    seed: int = 4321,
    exact: bool = False,
    batch_size: int = 64,
    **options,
) -> torch.Tensor:
    """Accuracy of each evaluation sequence of a synthetic task, ``[samples]`` float64.

    A sequence scores the fraction of its answer tokens predicted (argmax) correctly, or with
    ``exact=True`` 1.0 only if every answer token is right — which, with teacher forcing, is
    exactly when greedy decoding reproduces the answer. The batch comes from
    :func:`pecourse.data.task_batch` with the fixed ``seed`` (a different stream from any
    training seed). Refuses a model that is not a :class:`TinyGPT` and what ``task_batch``
    refuses.
    """
    if not isinstance(model, TinyGPT):
        raise TypeError(f"model must be a pecourse.model.TinyGPT, got {type(model).__name__}")
    samples = check_int("samples", samples, minimum=1)
    b = task_batch(task, samples, length, seed=seed, **options)
    scores = []
    for i in range(0, samples, batch_size):
        x, y, a = (t[i : i + batch_size] for t in (b.inputs, b.targets, b.answer))
        right = (model(x)[0].argmax(-1) == y) & a
        if exact:
            scores.append(((right | ~a).all(dim=1)).double())
        else:
            scores.append(right.sum(1).double() / a.sum(1).clamp(min=1).double())
    return torch.cat(scores)


def _score(values: torch.Tensor) -> dict:
    lo, hi = bootstrap_interval(values)
    return {"mean": round(float(values.mean()), 4), "ci95": [round(lo, 4), round(hi, 4)]}


def _spread(per_seed: list[float]) -> dict:
    return {
        "per_seed": [round(v, 4) for v in per_seed],
        "mean": round(sum(per_seed) / len(per_seed), 4),
        "min": round(min(per_seed), 4),
        "max": round(max(per_seed), 4),
    }


def _train_one(model_kwargs: dict, train_kwargs: dict) -> tuple[TinyGPT, list, float]:
    """Train one model with :func:`pecourse.train.train`; return it, its curve and CPU time."""
    from .train import TrainConfig, train

    start = time.process_time()
    model, rec = train(
        ModelConfig(**model_kwargs), TrainConfig(**train_kwargs), progress=False, evaluate=False
    )
    return model, rec["loss_curve"], time.process_time() - start


def _hashes(names) -> dict:
    """``{checkpoint: sha256}`` of the shipped checkpoints a study reads (an empty dict when
    it trains everything itself): the hash test compares them with the shipped files."""
    from .model import checkpoint_sha256

    return {n: checkpoint_sha256(n) for n in sorted(set(names))}


def _versions() -> dict:
    return {"python": platform.python_version(), "torch": torch.__version__}


def _ALL_RECIPES() -> tuple[str, ...]:
    from .train import RECIPES, STUDY_RECIPES

    return (*RECIPES, *STUDY_RECIPES)


def _check_seeds(seeds) -> list[int]:
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds must list at least one training seed")
    return [check_int(f"seeds[{i}]", s, minimum=0) for i, s in enumerate(seeds)]


# --- chapter 05: does "below" transfer to another grid width? ------------------------------


class GridAttention(nn.Module):
    r"""One bidirectional attention head over a grid of tokens, for "copy the patch below".

    Token embedding (no position), one head whose queries and keys are rotated by
    ``scheme`` (1D RoPE on the raster index, or axial 2D RoPE on (row, column)), a linear
    read-out. The linear maps have biases, so a query and a key can carry a
    content-independent part: that is what lets attention pick a fixed *offset* whatever
    the tokens. ``forward(tokens [b, n], positions) -> logits [b, n, vocab]``.
    """

    def __init__(self, scheme, *, vocab: int = 16, d: int = 32):
        super().__init__()
        self.vocab, self.d = check_int("vocab", vocab, minimum=2), check_int("d", d, minimum=2)
        self.emb = nn.Embedding(vocab, d)
        self.q, self.k, self.v = (nn.Linear(d, d) for _ in range(3))
        self.out = nn.Linear(d, vocab)
        self.scheme = scheme

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, *, return_probs=False):
        from .attention import attention

        x = self.emb(tokens)[:, None]  # [b, 1 head, n, d]
        o, probs = attention(
            self.q(x),
            self.k(x),
            self.v(x),
            self.scheme,
            causal=False,
            q_positions=positions,
            k_positions=positions,
            return_probs=True,
        )
        logits = self.out(o[:, 0])
        return (logits, probs[:, 0]) if return_probs else logits


def _grid_batch(n: int, height: int, width: int, vocab: int, g: torch.Generator):
    """Random grids flattened in raster order; the target of a patch is the patch below it."""
    tokens = torch.randint(0, vocab, (n, height, width), generator=g)
    target = torch.full_like(tokens, -100)  # the bottom row has nothing below: not scored
    target[:, :-1] = tokens[:, 1:]
    return tokens.flatten(1), target.flatten(1)


def _grid_positions(kind: str, height: int, width: int) -> torch.Tensor:
    from .positions.multidim import grid_positions

    return torch.arange(height * width) if kind == "1d" else grid_positions(height, width)


def grid_width_transfer(
    seeds=(0, 1, 2),
    *,
    height: int = 8,
    train_width: int = 12,
    test_widths=(8, 12, 16),
    steps: int = 600,
    base: float = 100.0,
    samples: int = 256,
) -> dict:
    r"""Train :class:`GridAttention` to copy the patch below at one width; test at others.

    Two position schemes with the same head (``d = 32``) and ``base``: 1D RoPE on the raster
    index, where "below" is the offset ``W`` and so depends on the width, and axial 2D RoPE
    (Heo et al. 2024, arXiv:2403.13298), where it is ``(1, 0)`` at every width. Each seed
    trains both for ``steps`` steps of 32 random ``height × train_width`` grids (Adam, lr
    1e-2) and scores ``samples`` fixed grids of every test width: the fraction of patches
    (all but the bottom row) whose below-neighbour is predicted, with a bootstrap interval
    over grids. Chance is ``1/16``.
    """
    seeds = _check_seeds(seeds)
    height = check_int("height", height, minimum=2)
    train_width = check_int("train_width", train_width, minimum=1)
    widths = [check_int("test_widths[]", w, minimum=1) for w in test_widths]
    steps = check_int("steps", steps, minimum=1)
    samples = check_int("samples", samples, minimum=1)
    from .positions.multidim import AxialRoPE
    from .positions.rope import RoPE

    vocab, d = 16, 32
    runs, cpu = [], 0.0
    for kind in ("1d", "2d"):
        for seed in seeds:
            start = time.process_time()
            torch.manual_seed(seed)
            scheme = RoPE(d, base=base) if kind == "1d" else AxialRoPE(d, base=base)
            model = GridAttention(scheme, vocab=vocab, d=d)
            opt = torch.optim.Adam(model.parameters(), lr=1e-2)
            g = torch.Generator().manual_seed(seed)
            pos = _grid_positions(kind, height, train_width)
            curve = []
            for step in range(steps):
                x, y = _grid_batch(32, height, train_width, vocab, g)
                loss = F.cross_entropy(model(x, pos).flatten(0, 1), y.flatten())
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if step % 50 == 0 or step == steps - 1:
                    curve.append([step, round(loss.item(), 4)])
            run = {"scheme": kind, "seed": seed, "loss_curve": curve}
            with torch.no_grad():
                for w in widths:
                    x, y = _grid_batch(samples, height, w, vocab, torch.Generator().manual_seed(99))
                    logits, probs = model(x, _grid_positions(kind, height, w), return_probs=True)
                    scored = y != -100
                    per_grid = ((logits.argmax(-1) == y) & scored).sum(1).double()
                    run[f"width_{w}"] = _score(per_grid / scored.sum(1).double())
                    # where the attention of the scored patches goes: the patch below, or keys
                    # whose column offset is larger than any in a train_width-wide grid
                    r, c = _grid_positions("2d", height, w)
                    below = (r[None, :] == r[:, None] + 1) & (c[None, :] == c[:, None])
                    unseen = (c[None, :] - c[:, None]).abs() >= train_width
                    rows = probs[:, scored[0]]  # [samples, scored queries, keys]
                    run[f"width_{w}"]["attention_below"] = round(
                        float((rows * below[scored[0]]).sum(-1).mean()), 4
                    )
                    run[f"width_{w}"]["attention_unseen_offsets"] = round(
                        float((rows * unseen[scored[0]]).sum(-1).mean()), 4
                    )
            seconds = time.process_time() - start
            run["cpu_seconds"] = round(seconds, 1)
            cpu += seconds
            runs.append(run)
    summary = {
        kind: {
            f"width_{w}": _spread([r[f"width_{w}"]["mean"] for r in runs if r["scheme"] == kind])
            for w in widths
        }
        for kind in ("1d", "2d")
    }
    return {
        "name": "grid_width_transfer",
        "protocol": {
            "task": "predict the token of the patch directly below (vocabulary 16, chance 1/16)",
            "model": f"GridAttention: one bidirectional head, d = 32, RoPE base {base:g}",
            "height": height,
            "train_width": train_width,
            "test_widths": widths,
            "train": {"steps": steps, "batch": 32, "optimizer": "Adam", "lr": 1e-2},
            "eval_samples": samples,
            "eval_seed": 99,
            "interval": "95% percentile bootstrap over evaluation grids, 2000 resamples",
        },
        "checkpoints": {},
        "seeds": seeds,
        "rows": runs,
        "summary": summary,
        "cpu_seconds": round(cpu, 1),
        "versions": _versions(),
    }


# --- chapter 10: CoPE vs RoPE on selective copy ---------------------------------------------

#: The model of the shipped ``cope_selective_copy`` / ``rope_selective_copy`` checkpoints.
COPY_MODEL = dict(d_model=64, n_layers=4, n_heads=4, train_len=64)
#: Test splits: same 8 letters, fewer blanks (dense), as trained, more blanks (sparse).
COPY_SPLITS = {"dense": 32, "train": 64, "sparse": 128}


def cope_selective_copy(
    seeds=(0, 1, 2),
    *,
    steps: dict | None = None,
    samples: int = 512,
    splits: dict | None = None,
) -> dict:
    r"""CoPE vs RoPE on selective copy (Golovneva et al. 2024, arXiv:2405.18719, §5), per seed.

    Both schemes use the shipped model (4 layers, ``d = 64``, trained on length 64 with 8
    letters among blanks) and the shipped recipe, except the number of steps: ``steps``
    maps ``"cope"``/``"rope"`` to a budget (default 600 for CoPE, the shipped recipe, and
    4000 for RoPE, more than six times as many). Each model is tested on three splits of
    the same task — ``splits`` maps a name to a sequence length: fewer blanks between the 8
    letters (``dense``, 32), as in training (``train``, 64), more (``sparse``, 128) — with
    ``samples`` fixed evaluation sequences each. Scores: answer-token accuracy and exact
    match per sequence, with a bootstrap interval over sequences.
    """
    seeds = _check_seeds(seeds)
    steps = {"cope": 600, "rope": 4000, **(steps or {})}
    splits = dict(splits or COPY_SPLITS)
    samples = check_int("samples", samples, minimum=1)
    from .train import RECIPES

    base = RECIPES["cope_selective_copy"]["train"]
    for scheme in ("cope", "rope"):  # refuse a bad budget before spending minutes on training
        check_int(f"steps[{scheme!r}]", steps[scheme], minimum=1)
    runs, cpu = [], 0.0
    for scheme in ("cope", "rope"):
        for seed in seeds:
            train_kwargs = {**base, "steps": steps[scheme], "seed": seed}
            model, curve, seconds = _train_one({**COPY_MODEL, "plan": scheme}, train_kwargs)
            cpu += seconds
            run = {"scheme": scheme, "seed": seed, "cpu_seconds": round(seconds, 1)}
            run["loss_curve"] = curve
            for split, length in splits.items():
                acc = per_sample_accuracy(model, "selective_copy", length, samples=samples)
                exact = per_sample_accuracy(
                    model, "selective_copy", length, samples=samples, exact=True
                )
                run[split] = {"accuracy": _score(acc), "exact_match": _score(exact)}
            runs.append(run)
    summary = {
        scheme: {
            split: {
                metric: _spread([r[split][metric]["mean"] for r in runs if r["scheme"] == scheme])
                for metric in ("accuracy", "exact_match")
            }
            for split in splits
        }
        for scheme in ("cope", "rope")
    }
    return {
        "name": "cope_selective_copy",
        "protocol": {
            "task": "selective_copy (8 letters among blanks, then '|' and the letters)",
            "model": COPY_MODEL,
            "train": {**base, "steps": steps, "seed": "per run"},
            "splits": splits,
            "eval_samples": samples,
            "eval_seed": 4321,
            "interval": "95% percentile bootstrap over evaluation sequences, 2000 resamples",
        },
        "checkpoints": {},
        "seeds": seeds,
        "rows": runs,
        "summary": summary,
        "cpu_seconds": round(cpu, 1),
        "versions": _versions(),
    }


def cope_counting(*, lengths=(64, 128), samples: int = 512) -> dict:
    """The shipped ``cope_counting`` and ``rope_counting`` checkpoints (one seed each) on the
    counting task at the training length and at twice it: answer accuracy per sequence, with
    a bootstrap interval over ``samples`` fixed sequences. Evaluation only (seconds)."""
    from .model import checkpoint_info, load_checkpoint

    samples = check_int("samples", samples, minimum=1)
    lengths = [check_int("lengths[]", n, minimum=8) for n in lengths]
    start = time.process_time()
    rows = []
    for scheme in ("cope", "rope"):
        name = f"{scheme}_counting"
        model = load_checkpoint(name)
        row = {"model": name, "scheme": scheme, "seed": checkpoint_info(name)["train"]["seed"]}
        for n in lengths:
            row[f"length_{n}"] = _score(per_sample_accuracy(model, "counting", n, samples=samples))
        rows.append(row)
    return {
        "name": "cope_counting",
        "protocol": {
            "task": "counting ('+' since the last '*', asked after '=')",
            "checkpoints": [r["model"] for r in rows],
            "lengths": lengths,
            "eval_samples": samples,
            "eval_seed": 4321,
            "interval": "95% percentile bootstrap over evaluation sequences, 2000 resamples",
        },
        "checkpoints": _hashes(["cope_counting", "rope_counting"]),
        "seeds": sorted({r["seed"] for r in rows}),
        "rows": rows,
        "cpu_seconds": round(time.process_time() - start, 1),
        "versions": _versions(),
    }


# --- chapter 11: windows imposed on trained models; windowed RoPE with and without NoPE -------


def per_window_loss(
    model: TinyGPT, length: int, *, tokens: int = 65536, batch_size: int = 16
) -> torch.Tensor:
    """Next-character loss (nats) at every position of non-overlapping validation windows,
    ``[windows, length]`` float64: :func:`pecourse.evaluate.window_losses` (the protocol's
    one implementation), kept under this name for the studies."""
    from .evaluate import window_losses

    if not isinstance(model, TinyGPT):
        raise TypeError(f"model must be a pecourse.model.TinyGPT, got {type(model).__name__}")
    return window_losses(model, length, tokens=tokens, batch_size=batch_size)


def _perplexity(losses: torch.Tensor) -> dict:
    """Perplexity of per-window mean losses, with a bootstrap interval over windows."""
    lo, hi = bootstrap_interval(losses)
    mean = float(losses.mean())
    return {
        "perplexity": round(math.exp(mean), 3),
        "ci95": [round(math.exp(lo), 3), round(math.exp(hi), 3)],
    }


def text_extrapolation(
    checkpoints=("rope", "nope", "irope", "alibi"),
    *,
    lengths=(64, 128, 256, 512),
    tokens: int = 65536,
    bands_at: int = 256,
) -> dict:
    r"""Shipped text checkpoints (trained on 64 characters, one seed each) from 64 to 512 characters.

    Perplexity on ``tokens`` validation characters cut into non-overlapping windows of each
    length (Press et al. 2022, arXiv:2108.12409, the extrapolation protocol), with a bootstrap
    interval over windows; at ``bands_at``, the mean loss of positions 0–63, 64–127 and the
    rest, each with its interval. Evaluation only.
    """
    from .model import checkpoint_info, load_checkpoint

    lengths = [check_int("lengths[]", n, minimum=2) for n in lengths]
    start = time.process_time()
    rows = []
    for name in checkpoints:
        model = load_checkpoint(name)
        row = {"checkpoint": name, "seed": checkpoint_info(name)["train"].get("seed", 0)}
        for n in lengths:
            losses = per_window_loss(model, n, tokens=tokens)
            row[str(n)] = _perplexity(losses.mean(1))
            if n == bands_at:
                row["bands"] = {
                    f"{a}-{b - 1}": _score(losses[:, a:b].mean(1))
                    for a, b in ((0, 64), (64, 128), (128, n))
                }
        rows.append(row)
    return {
        "name": "text_extrapolation",
        "protocol": {
            "checkpoints": list(checkpoints),
            "lengths": lengths,
            "eval_tokens": tokens,
            "bands_at": bands_at,
            "split": "validation (every 20th chapter), non-overlapping windows from its start",
            "interval": "95% percentile bootstrap over windows, 2000 resamples",
        },
        "checkpoints": _hashes(checkpoints),
        "eval_tokens": tokens,
        "seeds": sorted({r["seed"] for r in rows}),
        "rows": rows,
        "cpu_seconds": round(time.process_time() - start, 1),
        "versions": _versions(),
    }


def imposed_windows(*, lengths=(64, 512), tokens: int = 65536, window: int = 64) -> dict:
    r"""Chapter 11's intervention: a sliding window imposed, at evaluation, on trained RoPE layers.

    The shipped ``rope`` and ``irope`` checkpoints (trained on 64 characters, full causal
    attention, one seed each) are evaluated as trained and with every RoPE layer restricted
    to a sliding window of ``window`` keys (:class:`pecourse.positions.window.SlidingWindow`),
    on ``tokens`` validation characters cut into windows of each length. Reports perplexity
    with a bootstrap interval over windows; at the shortest length, the loss of the first 8
    positions and of the rest; at the longest, the loss of the first ``window`` positions and
    of the rest, and the paired difference with the shortest length on the same characters
    (each long window against the short windows that tile it).
    """
    import copy

    from .model import checkpoint_info, load_checkpoint
    from .positions.rope import RoPE
    from .positions.window import SlidingWindow

    lengths = [check_int("lengths[]", n, minimum=2) for n in lengths]
    window = check_int("window", window, minimum=1)
    start = time.process_time()

    def windowed(model):
        m = copy.deepcopy(model)
        for block in m.blocks:
            if isinstance(block.attn.scheme, RoPE):
                block.attn.scheme = SlidingWindow(block.attn.scheme, window)
        return m

    rows = []
    for name in ("rope", "irope"):
        base = load_checkpoint(name)
        for variant, model in ((name, base), (f"{name}, RoPE layers windowed", windowed(base))):
            row = {
                "variant": variant,
                "checkpoint": name,
                "seed": checkpoint_info(name)["train"]["seed"],
            }
            short, long = min(lengths), max(lengths)
            by_length = {n: per_window_loss(model, n, tokens=tokens) for n in lengths}
            for n, losses in by_length.items():
                row[str(n)] = _perplexity(losses.mean(1))
            row[str(short)]["first_8_positions_loss"] = _score(by_length[short][:, :8].mean(1))
            row[str(short)]["later_positions_loss"] = _score(by_length[short][:, 8:].mean(1))
            if long > window and long % short == 0:
                losses = by_length[long]
                row[str(long)]["first_positions_loss"] = _score(losses[:, :window].mean(1))
                row[str(long)]["later_positions_loss"] = _score(losses[:, window:].mean(1))
                tiles = by_length[short].mean(1)[: len(losses) * (long // short)]
                paired = tiles.view(len(losses), long // short).mean(1) - losses.mean(1)
                row[str(long)][f"loss_{short}_minus_loss_{long}"] = _score(paired)
            rows.append(row)
    return {
        "name": "imposed_windows",
        "protocol": {
            "checkpoints": ["rope", "irope"],
            "window": window,
            "lengths": lengths,
            "eval_tokens": tokens,
            "split": "validation (every 20th chapter), non-overlapping windows from its start",
            "interval": "95% percentile bootstrap over windows, 2000 resamples",
        },
        "checkpoints": _hashes(["rope", "irope"]),
        "eval_tokens": tokens,
        "seeds": sorted({r["seed"] for r in rows}),
        "rows": rows,
        "cpu_seconds": round(time.process_time() - start, 1),
        "versions": _versions(),
    }


# --- chapter 11: can windowed RoPE layers retrieve without a NoPE layer? ---------------------

#: The model of the shipped passkey checkpoints (``rope_passkey``): sizes and recipe.
PASSKEY_MODEL = dict(d_model=64, n_layers=4, n_heads=4, train_len=64)
PASSKEY_DISTANCES = (4, 8, 12, 16, 24, 32, 48, 60)


#: The arms of :func:`windowed_passkey`: each a continuation of ``rope_passkey``.
WINDOWED_ARMS = ("rope_passkey_swa", "rope_passkey_swa_nope", "rope_passkey_swa_rope")


def windowed_passkey(
    seeds=(0, 1, 2),
    *,
    distances=PASSKEY_DISTANCES,
    samples: int = 256,
    steps: int | None = None,
    log=None,
) -> dict:
    r"""Chapter 11's comparison: windowed RoPE layers with a global NoPE layer, with a global
    RoPE layer, and with none.

    For each seed, the passkey model ``rope_passkey`` (4 layers, ``d = 64``, full-attention
    RoPE, 1000 steps retrieving 2-digit keys from 64 characters of Bible text; seed 0 the
    shipped checkpoint) is continued on its task for its own budget in three arms
    (:data:`WINDOWED_ARMS`, recipes in :data:`pecourse.train.STUDY_RECIPES`): ``swa``
    restricts all four RoPE layers to 8-key sliding windows (together they relay at most
    4·7 = 28 tokens back); ``swa_nope`` windows layers 0–2 and makes layer 3 a global NoPE
    layer (Command A's layout at toy scale); ``swa_rope`` windows layers 0–2 and keeps layer
    3 a global RoPE layer — the control that tells a global NoPE layer from any global layer.
    Each base is also scored in each arm before continuing (``step0``). Scores: passkey
    accuracy at each needle distance on ``samples`` fixed sequences of 64 characters, with a
    Wilson interval. ``steps`` and ``log`` as in :func:`extrapolation_seeds`.
    """
    from .evaluate import needle_accuracy
    from .train import recipe

    seeds = _check_seeds(seeds)
    samples = check_int("samples", samples, minimum=1)
    distances = [check_int("distances[]", d, minimum=3, maximum=61) for d in distances]
    if steps is not None:
        steps = check_int("steps", steps, minimum=1)
    key_len = recipe("rope_passkey")["train"]["task_options"]["key_len"]

    def score(model):
        acc = needle_accuracy(model, distances, length=64, samples=samples, key_len=key_len)
        out = {}
        for d in distances:
            k = round(acc[d] * samples)
            lo, hi = wilson_interval(k, samples)
            out[str(d)] = {"accuracy": round(k / samples, 4), "ci95": [round(lo, 4), round(hi, 4)]}
        return out

    def measure(model, name):
        out = {"by_distance": score(model)}
        if name == "rope_passkey":  # the base's weights in each arm's layout, not yet trained
            out["step0"] = {}
            for arm in WINDOWED_ARMS:
                windowed = TinyGPT(ModelConfig(**recipe(arm)["model"])).eval()
                windowed.load_state_dict(model.state_dict())
                out["step0"][arm] = score(windowed)
        return out

    names = ["rope_passkey", *WINDOWED_ARMS]
    key = {"study": "windowed_passkey", "distances": distances, "samples": samples, "steps": steps}
    runs = _seeded_runs(names, seeds, steps=steps, key=key, log=log, measure=measure)

    def spread(name, d, step0=False):
        if step0:
            got = [r["step0"][name][str(d)] for r in runs if r["model"] == "rope_passkey"]
        else:
            got = [r["by_distance"][str(d)] for r in runs if r["model"] == name]
        return _spread([g["accuracy"] for g in got])

    summary = {n: {str(d): spread(n, d) for d in distances} for n in names}
    summary |= {
        f"{a} step0": {str(d): spread(a, d, True) for d in distances} for a in WINDOWED_ARMS
    }
    return {
        "name": "windowed_passkey",
        "protocol": {
            **_seeded_protocol(names, steps),
            "task": f"passkey retrieval, {key_len}-digit keys, sequences of 64 characters",
            "plans": {n: recipe(n)["model"]["plan"] for n in names},
            "window": recipe(WINDOWED_ARMS[0])["model"]["position_options"]["swa_rope"]["window"],
            "distances": distances,
            "eval_samples": samples,
            "eval_seed": 1234,
            "interval": "95% Wilson interval over evaluation sequences",
        },
        **_seed_facts(runs),
        "summary": summary,
    }


# --- chapter 15: what NoPE's quality gap is made of -------------------------------------------


@torch.no_grad()
def text_window_losses(
    model: TinyGPT, *, bos: bool = False, length: int = 64, tokens: int = 65536
) -> torch.Tensor:
    """Loss at each scored position of non-overlapping validation windows, ``[windows, length-1]``.

    Every window of ``length`` characters predicts its characters 1 … ``length - 1`` (the
    first has no context in a plain window, so it is never scored). With ``bos`` the window
    is fed as :func:`pecourse.train.bos_window` — the marker, then the characters — so the
    same characters are predicted from the same context plus a start marker.
    """
    from .data import corpus
    from .train import bos_window

    if not isinstance(model, TinyGPT):
        raise TypeError(f"model must be a pecourse.model.TinyGPT, got {type(model).__name__}")
    length = check_int("length", length, minimum=2)
    tokens = check_int("tokens", tokens, minimum=length)
    data = corpus("validation")[:tokens]
    windows = data[: (tokens // length) * length].view(-1, length)
    out = []
    for i in range(0, len(windows), 64):
        text = windows[i : i + 64]
        inputs = bos_window(text) if bos else text
        logits = model(inputs)[0]
        losses = F.cross_entropy(
            logits.transpose(1, 2).float(), text if bos else text.roll(-1, 1), reduction="none"
        )
        out.append(losses[:, 1:] if bos else losses[:, :-1])  # targets: characters 1 … length-1
    return torch.cat(out).double()


def nope_anchor(seeds=(0, 1, 2), *, steps: int = 800, tokens: int = 65536) -> dict:
    r"""Is NoPE's quality gap the price of position, too little training, or the missing anchor?

    Three models on the shipped text recipe (4 layers, ``d = 64``, 64-character windows of
    the KJV, 800 steps): ``rope``, ``nope`` (the course's NoPE: random windows, no start
    marker) and ``nope+bos`` (every window starts with :data:`pecourse.data.BOS`, the anchor
    Kazemnejad et al.'s Theorem 1 construction uses). Seed 0 of ``rope`` and ``nope`` is the
    shipped checkpoint (the same recipe and seed); every other run is trained here. Each model
    predicts the same characters of ``tokens`` validation characters; reported: mean loss
    with a bootstrap interval over windows, and the loss at positions 1–7, 8–31 and 32–63.
    The loss curves (one training batch every 20 steps) show whether the gap to RoPE is
    still closing when training stops.
    """
    from .model import checkpoint_info, load_checkpoint
    from .train import RECIPES, TrainConfig

    seeds = _check_seeds(seeds)
    steps = check_int("steps", steps, minimum=1)
    base = RECIPES["nope"]["train"]
    text_model = {k: v for k, v in RECIPES["nope"]["model"].items() if k != "plan"}
    variants = {
        "rope": ("rope", "text"),
        "nope": ("nope", "text"),
        "nope+bos": ("nope", "text+bos"),
    }
    bands = {"1-7": slice(0, 7), "8-31": slice(7, 31), "32-63": slice(31, 63)}
    runs, cpu = [], 0.0
    for variant, (plan, data) in variants.items():
        for seed in seeds:
            start = time.process_time()
            recipe = TrainConfig.from_dict(base)
            shipped = data == "text" and seed == recipe.seed and steps == recipe.steps
            if shipped:  # the shipped checkpoint is this very run
                model = load_checkpoint(plan)
                curve, source = checkpoint_info(plan)["loss_curve"], f"shipped checkpoint {plan!r}"
            else:
                model, curve, _ = _train_one(
                    {**text_model, "plan": plan},
                    {**base, "data": data, "steps": steps, "seed": seed},
                )
                source = "trained by this study"
            losses = text_window_losses(model, bos=data == "text+bos", tokens=tokens)
            run = {"variant": variant, "seed": seed, "source": source, "loss_curve": curve}
            run["loss"] = _score(losses.mean(1))
            for band, where in bands.items():
                run[f"loss_{band}"] = round(float(losses[:, where].mean()), 4)
            seconds = time.process_time() - start
            run["cpu_seconds"] = round(seconds, 1)
            cpu += seconds
            runs.append(run)
    summary = {
        variant: {
            key: _spread(
                [
                    r[key]["mean"] if key == "loss" else r[key]
                    for r in runs
                    if r["variant"] == variant
                ]
            )
            for key in ("loss", *(f"loss_{b}" for b in bands))
        }
        for variant in variants
    }
    return {
        "name": "nope_anchor",
        "protocol": {
            "model": text_model,
            "variants": {v: {"plan": p, "data": d} for v, (p, d) in variants.items()},
            "train": {**base, "steps": steps, "data": "per variant", "seed": "per run"},
            "eval": "validation characters 1-63 of each 64-character window (the same targets "
            "for every variant; nope+bos sees the marker first)",
            "eval_tokens": tokens,
            "interval": "95% percentile bootstrap over windows, 2000 resamples",
        },
        "checkpoints": _hashes(["rope", "nope"]),
        "eval_tokens": tokens,
        "seeds": seeds,
        "rows": runs,
        "summary": summary,
        "cpu_seconds": round(cpu, 1),
        "versions": _versions(),
    }


#: The counting models of :func:`counting_length_generalisation` (:mod:`pecourse.train`).
COUNTING_MODELS = (
    "nope_counting",
    "rope_counting",
    "alibi_counting",
    "nope_counting_long",
    "rope_counting_long",
)


def counting_length_generalisation(
    seeds=(0, 1, 2),
    *,
    names=COUNTING_MODELS,
    lengths=(64, 128, 256),
    samples: int = 256,
    learned_at: float = 0.9,
    steps: int | None = None,
    log=None,
) -> dict:
    r"""An algorithmic length-generalisation test in the manner of Kazemnejad et al. 2023
    (arXiv:2305.19466): train short, test long, score exact answers — on the counting task.

    Each recipe of ``names`` (4 layers, ``d = 64``, sequences of 64, 600 steps — 2,400 for
    the ``*_long`` ones —, loss on the answers only; seed 0 of ``rope_counting`` is the
    shipped checkpoint) is tested on sequences of every length in ``lengths``: the same
    stream of ``+``, ``*`` and letters, so only the length changes. Scores: answer accuracy
    per sequence with a bootstrap interval over ``samples`` sequences. A model has *learned*
    the task when its accuracy at the training length is at least ``learned_at`` at every
    seed; the summary ranks the longest length among those models only, since a model that
    never learned the task says nothing about generalising it. ``steps`` and ``log`` as in
    :func:`extrapolation_seeds`.
    """
    from ._validate import check_float
    from .train import recipe

    seeds = _check_seeds(seeds)
    names = [check_choice("names[]", n, COUNTING_MODELS) for n in names]
    lengths = [check_int("lengths[]", n, minimum=8) for n in lengths]
    samples = check_int("samples", samples, minimum=1)
    learned_at = check_float("learned_at", learned_at, minimum=0.0, maximum=1.0)
    if steps is not None:
        steps = check_int("steps", steps, minimum=1)
    train_len = recipe(names[0])["model"]["train_len"]

    def measure(model, name):
        return {
            f"length_{n}": _score(per_sample_accuracy(model, "counting", n, samples=samples))
            for n in lengths
        }

    key = {"study": "counting_length_generalisation", "lengths": lengths, "samples": samples}
    runs = _seeded_runs(
        names, seeds, steps=steps, key={**key, "steps": steps}, log=log, measure=measure
    )
    summary = {
        name: {
            f"length_{n}": _spread([r[f"length_{n}"]["mean"] for r in runs if r["model"] == name])
            for n in lengths
        }
        for name in names
    }
    for name in names:
        summary[name]["learned"] = summary[name][f"length_{train_len}"]["min"] >= learned_at
    top = f"length_{max(lengths)}"
    ranked = sorted(
        (n for n in names if summary[n]["learned"]), key=lambda n: -summary[n][top]["mean"]
    )
    return {
        "name": "counting_length_generalisation",
        "protocol": {
            **_seeded_protocol(names, steps),
            "task": "counting ('+' since the last '*', asked after '='; counts stay below 10)",
            "lengths": lengths,
            "eval_samples": samples,
            "eval_seed": 4321,
            "interval": "95% percentile bootstrap over evaluation sequences, 2000 resamples",
            "learned": f"accuracy at the training length {train_len} >= {learned_at} at every seed",
        },
        **_seed_facts(runs),
        "summary": summary,
        "ranking": {"at": max(lengths), "learned_models": ranked},
    }


# --- chapter 03: the extrapolation table, three seeds ------------------------------------------


def _seeded_runs(names, seeds, *, steps, key: dict, log, measure) -> list[dict]:
    r"""Train every recipe of ``names`` with every training seed, measure each model, keep a log.

    The mechanism of every multi-seed study below: recipe ``name`` of
    :data:`pecourse.train.RECIPES` trained with ``seed`` (and its own budget, or ``steps``
    when given); the recipe's own seed with its own budget *is* the shipped checkpoint, so
    that run loads it instead of training. ``measure(model, name) -> dict`` adds the numbers.
    ``log`` (a path) keeps one JSON line per finished run and reuses the lines of an
    interrupted call with the same ``key`` (the protocol), so minutes of training are not
    lost when a long run stops halfway; a logged run of a shipped checkpoint is reused only
    while that checkpoint is unchanged. Returns the runs ordered by seed, then by ``names``.
    """
    from .model import checkpoint_info, checkpoint_sha256, load_checkpoint
    from .train import RECIPES, TrainConfig, recipe

    done = {}
    folder = tempfile.TemporaryDirectory() if log is None else None
    store = Path(folder.name) if folder else Path(log).with_name(Path(log).stem + "-weights")
    if log is not None:
        log = Path(log)
        if log.exists():
            for line in log.read_text().splitlines():
                run = json.loads(line)
                if run.pop("key") == key:
                    done[(run["model"], run["seed"])] = run
    runs = []
    pairs = [(seed, name) for seed in seeds for name in names]
    bar = tqdm(pairs, desc=key.get("study", "study"), unit="model", disable=not PROGRESS)
    for seed, name in bar:
        bar.set_postfix_str(f"{name} seed {seed}")
        train = recipe(name)["train"]
        shipped = name in RECIPES and seed == TrainConfig.from_dict(train).seed and steps is None
        if (name, seed) in done and (
            not shipped or done[(name, seed)]["sha256"] == checkpoint_sha256(name)
        ):
            logger.info("%s: %s seed %d read from %s", key.get("study"), name, seed, log)
            runs.append(done[(name, seed)])
            continue
        start = time.process_time()
        if shipped:  # the shipped checkpoint is this very run
            model, curve = load_checkpoint(name), checkpoint_info(name)["loss_curve"]
            run = {"model": name, "seed": seed, "source": "shipped checkpoint"}
            run["sha256"] = checkpoint_sha256(name)
        else:
            model, curve = _train_seed(name, seed, steps, store)
            run = {"model": name, "seed": seed, "source": "trained by this study"}
        run["train_steps"] = steps or train["steps"]
        run["loss_curve"] = curve
        run.update(measure(model, name))
        seconds = time.process_time() - start
        run["cpu_seconds"] = round(seconds, 1)
        logger.info(
            "%s: %s seed %d, %s, %.0f CPU s", key.get("study"), name, seed, run["source"], seconds
        )
        runs.append(run)
        if log is not None:
            with log.open("a") as f:
                f.write(json.dumps({**run, "key": key}) + "\n")
    if folder:
        folder.cleanup()
    order = {(n, s): i for i, (s, n) in enumerate((s, n) for s in sorted(seeds) for n in names)}
    runs.sort(key=lambda r: order[(r["model"], r["seed"])])
    return runs


def _kept(store: Path, name: str, seed: int, steps) -> Path:
    """Where :func:`_seeded_runs` keeps the weights of a run it trained (for its children,
    and for a rerun whose log lost the run)."""
    return store / f"{name}-seed{seed}-steps{steps or 'recipe'}"


def _train_seed(name: str, seed: int, steps, store: Path):
    """Train recipe ``name`` with ``seed`` (and ``steps``), a continued recipe from this
    seed's run of its parent; keep the weights in ``store``; return ``(model, curve)``.
    Weights already kept there for the same recipe options are read instead of retrained."""
    from .model import load_checkpoint, save_checkpoint
    from .train import recipe

    plan = recipe(name)
    train = {**plan["train"], "seed": seed, **({"steps": steps} if steps else {})}
    parent = train.get("init_from")
    if parent:
        train["init_from"] = _parent(parent, seed, steps, store, ensure=False)
    path = _kept(store, name, seed, steps)
    if path.with_suffix(".safetensors").exists():  # trained before, measured or not
        model = load_checkpoint(path)
        kept = model.checkpoint
        if kept.get("train") == train and model.config == ModelConfig(**plan["model"]):
            logger.info("%s seed %d: weights read from %s", name, seed, path)
            return model, kept["loss_curve"]
    if parent:
        _parent(parent, seed, steps, store)  # trained again if its weights are gone
    model, curve, _ = _train_one(plan["model"], train)
    save_checkpoint(model, path, loss_curve=curve, train=train)
    return model, curve


def _parent(name: str, seed: int, steps, store: Path, *, ensure: bool = True) -> str:
    """What a continued recipe (``init_from=name``) starts from at ``seed``: the shipped
    checkpoint when it is that very run, else the parent trained with ``seed`` (and
    ``steps``) by :func:`_seeded_runs` into ``store``; with ``ensure``, trained now if it
    is not there."""
    from .train import RECIPES, TrainConfig

    if name in RECIPES and seed == TrainConfig.from_dict(RECIPES[name]["train"]).seed and not steps:
        return name
    path = _kept(store, name, seed, steps)
    if ensure and not path.with_suffix(".safetensors").exists():  # e.g. a log kept numbers only
        _train_seed(name, seed, steps, store)
    return str(path)


def _seed_facts(runs) -> dict:
    """The part every :func:`_seeded_runs` recording shares: shipped checkpoints read, seeds,
    runs, their CPU time and the versions they ran on."""
    return {
        "checkpoints": _hashes([r["model"] for r in runs if r["source"] == "shipped checkpoint"]),
        "seeds": sorted({r["seed"] for r in runs}),
        "rows": runs,
        "cpu_seconds": round(sum(r["cpu_seconds"] for r in runs), 1),
        "versions": _versions(),
    }


def _seeded_protocol(names, steps) -> dict:
    """What the protocol of every :func:`_seeded_runs` study states: the models, their shared
    architecture, each recipe's training options, and where seed 0 comes from."""
    from .train import recipe

    return {
        "models": names,
        "model": {k: v for k, v in recipe(names[0])["model"].items() if k != "plan"},
        "train": {n: {**recipe(n)["train"], **({"steps": steps} if steps else {})} for n in names},
        "seed_0": "the shipped checkpoint (same recipe and seed); other seeds trained here",
    }


def _extrapolation_table(study, names, seeds, lengths, tokens, steps, log) -> dict:
    """The recording of :func:`extrapolation_seeds` or :func:`embedding_setup` (``study``):
    every (recipe, seed) of ``names``, its perplexity at ``lengths`` and the context it uses
    at its training length (:func:`pecourse.evaluate.context_used`)."""
    from .evaluate import context_losses, context_used, perplexity_interval, window_losses
    from .train import recipe

    seeds = _check_seeds(seeds)
    names = [check_choice("names[]", n, _ALL_RECIPES()) for n in names]
    lengths = [check_int("lengths[]", n, minimum=2) for n in lengths]
    tokens = check_int("tokens", tokens, minimum=max(lengths))
    if steps is not None:
        steps = check_int("steps", steps, minimum=1)

    def measure(model, name):
        out = {}
        for n in lengths:
            try:
                out[str(n)] = perplexity_interval(window_losses(model, n, tokens=tokens))
            except ValueError:  # a learned table has no row for these positions
                out[str(n)] = None
        used = context_used(context_losses(model, tokens=tokens))
        return {**out, "context_used": used["context_used"], "context_gain": used["gain"]}

    key = {"study": study, "lengths": lengths, "tokens": tokens, "steps": steps, "context": 1}
    runs = _seeded_runs(names, seeds, steps=steps, key=key, log=log, measure=measure)
    summary = {}
    for name in names:
        mine = [r for r in runs if r["model"] == name]
        summary[name] = {
            str(n): _spread([r[str(n)]["perplexity"] for r in mine])
            for n in lengths
            if all(r[str(n)] for r in mine)
        }
        if all(r[str(lengths[-1])] for r in mine):  # the rise from the shortest to the longest
            summary[name]["ratio"] = _spread(
                [r[str(lengths[-1])]["perplexity"] / r[str(lengths[0])]["perplexity"] for r in mine]
            )
    return {
        "name": study,
        "protocol": {
            **_seeded_protocol(names, steps),
            "embed_scale": {n: recipe(n)["model"].get("embed_scale", "scheme") for n in names},
            "mode": "nonoverlapping",
            "lengths": lengths,
            "eval_tokens": tokens,
            "split": "validation, the first eval_tokens characters (the same for every model)",
            "interval": "95% percentile bootstrap over windows, 2000 resamples",
            "ratio": f"perplexity at {lengths[-1]} / at {lengths[0]}, per seed",
            "context_used": "pecourse.evaluate.context_used at the training length (as context_use)",
        },
        "eval_tokens": tokens,
        **_seed_facts(runs),
        "summary": summary,
        "context_used": {n: [r["context_used"] for r in runs if r["model"] == n] for n in names},
    }


def extrapolation_seeds(
    seeds=(0, 1, 2),
    *,
    names=("learned", "sinusoidal", "rope", "t5", "alibi", "nope"),
    lengths=(64, 128, 256, 512),
    tokens: int = 65536,
    steps: int | None = None,
    log=None,
) -> dict:
    r"""The extrapolation table of :func:`pecourse.experiments.extrapolation` over training seeds.

    Each scheme is trained with its shipped recipe (:data:`pecourse.train.RECIPES`: 4 layers,
    ``d = 64``, 64-character windows, 800 steps) and a training seed; seed 0 is the shipped
    checkpoint itself (the same recipe and seed), the others are trained here and kept only
    as numbers. Every model is evaluated under the protocol (:mod:`pecourse.evaluate`): the
    same ``tokens`` validation characters cut into non-overlapping windows of each length,
    perplexity with a bootstrap interval over windows; a learned table has no rows past its
    training length (``None``); and the context each model uses at its training length.
    ``steps`` overrides the budget of every trained run (a test uses it; the recording uses
    the recipe's). ``log``: see :func:`_seeded_runs`.
    """
    return _extrapolation_table("extrapolation_seeds", names, seeds, lengths, tokens, steps, log)


#: The extrapolation set under one embedding setup (:data:`pecourse.train.STUDY_RECIPES`).
EMBEDDING_CONTROLS = (
    "learned_sqrt_d",
    "sinusoidal",
    "rope_sqrt_d",
    "t5_sqrt_d",
    "alibi_sqrt_d",
    "nope_sqrt_d",
    "sinusoidal_unscaled",
)


def embedding_setup(
    seeds=(0, 1, 2),
    *,
    names=EMBEDDING_CONTROLS,
    lengths=(64, 128, 256, 512),
    tokens: int = 65536,
    steps: int | None = None,
    log=None,
) -> dict:
    r"""The extrapolation table under one embedding setup: chapter 06's control.

    The shipped sinusoidal model alone multiplies its token embeddings by √d (with init std
    d^-½, Vaswani et al. 2017 §3.4); the other schemes keep GPT-2's std 0.02 and no scale.
    Here every scheme is trained with the sinusoidal model's setup (``*_sqrt_d``), and the
    sinusoidal model also without it (``sinusoidal_unscaled``), otherwise as
    :func:`extrapolation_seeds` and measured the same way, so a ranking of the schemes can be
    read under either setup. ``sinusoidal`` (its own setup) is measured again here so the
    table holds all six under √d.
    """
    return _extrapolation_table("embedding_setup", names, seeds, lengths, tokens, steps, log)


def sliding_seeds(
    seeds=(0, 1, 2),
    *,
    names=("alibi", "rope", "t5"),
    lengths=(64, 128, 256, 512),
    tokens: int = 65536,
    steps: int | None = None,
    log=None,
) -> dict:
    r"""Chapter 04's sliding-window perplexity (:func:`pecourse.experiments.effective_context`)
    over training seeds: each text recipe trained with a seed (seed 0 is the shipped
    checkpoint), every model scored on the same ``tokens`` validation characters with
    sliding windows of each length (stride ``L/4``), a bootstrap interval over windows.
    ``steps`` and ``log`` as in :func:`extrapolation_seeds`.
    """
    from .evaluate import perplexity_interval, window_losses
    from .train import RECIPES

    seeds = _check_seeds(seeds)
    names = [check_choice("names[]", n, tuple(RECIPES)) for n in names]
    lengths = [check_int("lengths[]", n, minimum=2) for n in lengths]
    tokens = check_int("tokens", tokens, minimum=max(lengths))
    if steps is not None:
        steps = check_int("steps", steps, minimum=1)

    def measure(model, name):
        return {
            "sliding": {
                str(n): perplexity_interval(window_losses(model, n, tokens=tokens, mode="sliding"))
                for n in lengths
            }
        }

    key = {"study": "sliding_seeds", "lengths": lengths, "tokens": tokens, "steps": steps}
    runs = _seeded_runs(names, seeds, steps=steps, key=key, log=log, measure=measure)
    summary = {}
    for name in names:
        mine = [r for r in runs if r["model"] == name]
        summary[name] = {
            str(n): _spread([r["sliding"][str(n)]["perplexity"] for r in mine]) for n in lengths
        }
    return {
        "name": "sliding_seeds",
        "protocol": {
            **_seeded_protocol(names, steps),
            "mode": "sliding, stride L/4",
            "lengths": lengths,
            "eval_tokens": tokens,
            "split": "validation, the first eval_tokens characters (the same for every model)",
            "interval": "95% percentile bootstrap over windows, 2000 resamples",
        },
        "eval_tokens": tokens,
        **_seed_facts(runs),
        "summary": summary,
    }


# --- every text claim: how much context do the text models use? ---------------------------

#: The text models whose context use :func:`context_use` measures: the 64-character regime
#: most chapters' text claims were first made on, and the long-window regime.
CONTEXT_MODELS = ("rope", "alibi", "rope_long")


def context_use(
    seeds=(0, 1, 2),
    *,
    names=CONTEXT_MODELS,
    tokens: int = 65536,
    steps: int | None = None,
    log=None,
) -> dict:
    r"""How much of its window each text model uses, at its training length, over seeds.

    Every recipe of ``names`` is trained with each seed (seed 0 is the shipped checkpoint);
    the same ``tokens`` validation characters are scored with doubling amounts of context up
    to the model's own training length (:func:`pecourse.evaluate.context_losses`), and
    :func:`pecourse.evaluate.context_used` reads off the farthest doubling whose gain lies
    beyond its bootstrap interval. A claim that a model reads text ``n`` characters back
    stands only on a model whose ``context_used`` reaches ``n`` at every seed (the summary's
    ``min``). ``steps`` and ``log`` as in :func:`extrapolation_seeds`.
    """
    from .evaluate import context_losses, context_used
    from .train import RECIPES

    seeds = _check_seeds(seeds)
    names = [check_choice("names[]", n, tuple(RECIPES)) for n in names]
    tokens = check_int("tokens", tokens, minimum=2)
    if steps is not None:
        steps = check_int("steps", steps, minimum=1)

    def measure(model, name):
        n = model.config.train_len
        return {"train_len": n, **context_used(context_losses(model, n, tokens=tokens))}

    key = {"study": "context_use", "tokens": tokens, "steps": steps}
    runs = _seeded_runs(names, seeds, steps=steps, key=key, log=log, measure=measure)
    summary = {}
    for name in names:
        mine = [r for r in runs if r["model"] == name]
        summary[name] = {
            "context_used": _spread([r["context_used"] for r in mine]),
            "gain": {c: _spread([r["gain"][c]["loss"] for r in mine]) for c in mine[0]["gain"]},
        }
    return {
        "name": "context_use",
        "protocol": {
            "models": names,
            "model": {n: RECIPES[n]["model"] for n in names},
            "train": {
                n: {**RECIPES[n]["train"], **({"steps": steps} if steps else {})} for n in names
            },
            "seed_0": "the shipped checkpoint (same recipe and seed); other seeds trained here",
            "mode": (
                "the same eval_tokens characters scored with c to 2c-1 characters of context "
                "(sliding windows of 2c every c), c = 1, 2, 4, ... up to half the training length"
            ),
            "eval_tokens": tokens,
            "context_used": (
                "the largest c whose gain (loss with c/2..c-1 characters minus loss with "
                "c..2c-1, same characters) has its interval above zero; percentile bootstrap "
                "over blocks of 256 consecutive characters, 2000 resamples"
            ),
        },
        "eval_tokens": tokens,
        **_seed_facts(runs),
        "summary": summary,
        "context_used": {n: summary[n]["context_used"]["per_seed"] for n in names},
    }


# --- chapters 04 and 16: passkey retrieval, scheme vs scheme, three seeds ---------------------

#: Needle distances of chapter 04 (sequences of distance + key + 8 characters) and of
#: chapter 16 (sequences of the training length, 64).
RETRIEVAL_DISTANCES = (8, 16, 32, 48, 96, 192, 384)
SHORT_DISTANCES = (8, 16, 24, 32, 40, 48, 56)


def retrieval_seeds(
    seeds=(0, 1, 2),
    *,
    names=("rope_passkey", "alibi_passkey", "t5_passkey", "rope_base_low_passkey"),
    distances=RETRIEVAL_DISTANCES,
    short_distances=SHORT_DISTANCES,
    samples: int = 256,
    steps: int | None = None,
    log=None,
) -> dict:
    r"""Passkey retrieval by distance of the ``*_passkey`` models (chapters 04 and 16) per seed.

    Each model is trained with its shipped recipe (passkeys alone, 2-digit keys, 64
    characters; :data:`pecourse.train.RECIPES`), *its own budget included*: ``alibi_passkey``
    trains 2,500 steps, the others 1,000 (the recording states it per run). Seed 0 is the
    shipped checkpoint. Every model answers the same ``samples`` validation sequences per
    distance (:func:`pecourse.evaluate.needle_outcomes`, fixed seed): for ``distances`` a
    sequence of distance + key + 8 characters (chapter 04), for ``short_distances`` one of
    the training length (chapter 16). Per distance: accuracy with a Wilson interval; per
    run: the effective length (accuracy ≥ 0.5 at every distance up to it) with a bootstrap
    interval over the samples. ``steps`` and ``log`` as in :func:`extrapolation_seeds`.
    """
    from .evaluate import effective_length_interval, needle_outcomes, retrieval
    from .train import RECIPES

    seeds = _check_seeds(seeds)
    names = [check_choice("names[]", n, tuple(RECIPES)) for n in names]
    for n in names:
        if RECIPES[n]["train"]["data"] != "passkey":
            raise ValueError(f"names must be passkey recipes (data='passkey'); {n!r} is not")
    distances = [check_int("distances[]", d, minimum=1) for d in distances]
    short_distances = [check_int("short_distances[]", d, minimum=1) for d in short_distances]
    samples = check_int("samples", samples, minimum=1)
    if steps is not None:
        steps = check_int("steps", steps, minimum=1)

    def measure(model, name):
        key_len = RECIPES[name]["train"]["task_options"]["key_len"]
        out = {}
        for label, ds, length in (
            ("retrieval", distances, None),
            ("short", short_distances, model.config.train_len),
        ):
            if not ds:
                continue
            got = needle_outcomes(model, ds, samples=samples, key_len=key_len, length=length)
            out[label] = {str(d): v for d, v in retrieval(got).items()}
            out[f"{label}_effective"] = effective_length_interval(got)
        return out

    key = {
        "study": "retrieval_seeds",
        "distances": distances,
        "short_distances": short_distances,
        "samples": samples,
        "steps": steps,
    }
    runs = _seeded_runs(names, seeds, steps=steps, key=key, log=log, measure=measure)
    summary = {}
    for name in names:
        mine = [r for r in runs if r["model"] == name]
        summary[name] = {"train_steps": mine[0]["train_steps"]}
        for label, ds in (("retrieval", distances), ("short", short_distances)):
            if ds:
                summary[name][label] = {
                    str(d): _spread([r[label][str(d)]["accuracy"] for r in mine]) for d in ds
                }
                summary[name][f"{label}_effective"] = [
                    r[f"{label}_effective"]["effective"] for r in mine
                ]
    return {
        "name": "retrieval_seeds",
        "protocol": {
            **_seeded_protocol(names, steps),
            "budgets": "each recipe's own: alibi_passkey 2,500 steps, the others 1,000",
            "distances": distances,
            "retrieval_length": "distance + key length + 8",
            "short_distances": short_distances,
            "short_length": "the training length",
            "retrieval_samples": samples,
            "eval_seed": 1234,
            "split": "validation text as filler",
            "retrieval_interval": "95% Wilson score interval",
            "effective_threshold": 0.5,
            "effective_interval": "95% percentile bootstrap over retrieval samples (per "
            "distance), 2000 resamples",
        },
        **_seed_facts(runs),
        "summary": summary,
    }


# --- chapter 13: position augmentation, three seeds --------------------------------------------


def augmentation_seeds(
    seeds=(0, 1, 2),
    *,
    names=("rope", "rope_randomized", "rope_pose"),
    lengths=(64, 128, 256, 512),
    tokens: int = 65536,
    sliding=("rope", "rope_pose"),
    steps: int | None = None,
    log=None,
) -> dict:
    r"""The augmentation comparison of :func:`pecourse.experiments.augmentation` per seed.

    Plain RoPE, randomized positions (Ruoss et al. 2023) and PoSE (Zhu et al. 2024), each
    trained with its shipped recipe (800 steps on 64-character windows; the augmented ones
    draw ids spanning 0..511) and a training seed; seed 0 is the shipped checkpoint. Every
    model: non-overlapping perplexity with ids ``0..L-1``; ``rope_randomized`` also with
    ids drawn as in training (a fresh sorted random subset of 0..511 per window, generator
    seed ``L``, as the experiment does); the models in ``sliding`` also sliding-window
    perplexity (stride ``L/4``). The same ``tokens`` validation characters for all, each
    perplexity with a bootstrap interval over windows. ``steps``, ``log``: see
    :func:`extrapolation_seeds`.
    """
    from .evaluate import perplexity_interval, window_losses
    from .positions.augmentation import randomized_positions
    from .train import RECIPES

    seeds = _check_seeds(seeds)
    names = [check_choice("names[]", n, tuple(RECIPES)) for n in names]
    sliding = [check_choice("sliding[]", n, tuple(names)) for n in sliding]
    lengths = [check_int("lengths[]", n, minimum=2) for n in lengths]
    tokens = check_int("tokens", tokens, minimum=max(lengths))
    if steps is not None:
        steps = check_int("steps", steps, minimum=1)

    def ppl(model, n, **kw):
        return perplexity_interval(window_losses(model, n, tokens=tokens, **kw))

    def measure(model, name):
        out = {str(n): ppl(model, n) for n in lengths}
        if RECIPES[name]["train"].get("augment") == "randomized":
            span = RECIPES[name]["train"]["augment_len"]
            out["random_ids"] = {}
            for n in lengths:
                g = torch.Generator().manual_seed(n)
                ids = randomized_positions(n, span, generator=g, batch=tokens // n)
                out["random_ids"][str(n)] = ppl(model, n, positions=ids)
        if name in sliding:
            out["sliding"] = {str(n): ppl(model, n, mode="sliding") for n in lengths}
        return out

    key = {"study": "augmentation_seeds", "lengths": lengths, "tokens": tokens}
    key.update(sliding=sliding, steps=steps)
    runs = _seeded_runs(names, seeds, steps=steps, key=key, log=log, measure=measure)
    summary = {}
    for name in names:
        mine = [r for r in runs if r["model"] == name]
        summary[name] = {str(n): _spread([r[str(n)]["perplexity"] for r in mine]) for n in lengths}
        for part in ("random_ids", "sliding"):
            if part in mine[0]:
                summary[name][part] = {
                    str(n): _spread([r[part][str(n)]["perplexity"] for r in mine]) for n in lengths
                }
    return {
        "name": "augmentation_seeds",
        "protocol": {
            **_seeded_protocol(names, steps),
            "mode": "nonoverlapping with ids 0..L-1; sliding (stride L/4) for "
            + ", ".join(sliding),
            "random_ids": "a sorted random subset of 0..augment_len-1 per window, generator "
            "seed = L (randomized models only)",
            "lengths": lengths,
            "eval_tokens": tokens,
            "split": "validation, the first eval_tokens characters (the same for every model)",
            "interval": "95% percentile bootstrap over windows, 2000 resamples",
        },
        "eval_tokens": tokens,
        **_seed_facts(runs),
        "summary": summary,
    }


# --- chapter 04: the depth x length grid and the multi-key variant, three seeds ----------------


def needle_seeds(
    seeds=(0, 1, 2),
    *,
    names=("alibi_passkey", "rope_passkey", "t5_passkey"),
    lengths=(64, 128, 256, 512),
    distances=(16, 48, 96, 192, 384),
    keys=(1, 2, 4, 8),
    multikey_distances=(16, 48, 96, 192),
    samples: int = 256,
    steps: int | None = None,
    log=None,
) -> dict:
    r"""Chapter 04's needle grid and multi-key retrieval per training seed.

    Each passkey model is trained with its shipped recipe and a training seed (its own
    budget: ``alibi_passkey`` 2,500 steps, the others 1,000); seed 0 is the shipped
    checkpoint. Every model is measured exactly as :func:`pecourse.experiments.needle_grid`
    (accuracy on a grid of sequence length × needle distance) and
    :func:`pecourse.experiments.multikey` (``keys`` needles, the target at each of
    ``multikey_distances``, split by whether it is the first or the nearest needle) measure
    the shipped ones, ``samples`` sequences per cell with Wilson intervals. ``steps`` and
    ``log`` as in :func:`extrapolation_seeds`.
    """
    from .experiments import multikey_cells, needle_grid_cells
    from .train import RECIPES

    seeds = _check_seeds(seeds)
    names = [check_choice("names[]", n, tuple(RECIPES)) for n in names]
    for n in names:
        if RECIPES[n]["train"]["data"] != "passkey":
            raise ValueError(f"names must be passkey recipes (data='passkey'); {n!r} is not")
    lengths = [check_int("lengths[]", n, minimum=2) for n in lengths]
    distances = [check_int("distances[]", d, minimum=1) for d in distances]
    keys = [check_int("keys[]", k, minimum=1, maximum=10) for k in keys]
    multikey_distances = [
        check_int("multikey_distances[]", d, minimum=1) for d in multikey_distances
    ]
    samples = check_int("samples", samples, minimum=1)
    if steps is not None:
        steps = check_int("steps", steps, minimum=1)

    def measure(model, name):  # a model trained here has no checkpoint to read its key length from
        key_len = RECIPES[name]["train"]["task_options"]["key_len"]
        grid = needle_grid_cells(model, lengths, distances, key_len=key_len, samples=samples)
        return {"grid": grid, **multikey_cells(model, keys, multikey_distances, samples=samples)}

    key = {"study": "needle_seeds", "lengths": lengths, "distances": distances, "keys": keys}
    key.update(multikey_distances=multikey_distances, samples=samples, steps=steps)
    runs = _seeded_runs(names, seeds, steps=steps, key=key, log=log, measure=measure)
    summary = {}
    for name in names:
        mine = [r for r in runs if r["model"] == name]
        summary[name] = {
            "grid": {
                f"{n}/{d}": _spread([r["grid"][str(n)][str(d)]["accuracy"] for r in mine])
                for n in lengths
                for d in distances
                if str(d) in mine[0]["grid"][str(n)]
            },
            "multikey": {
                f"{k}/{d}": _spread([r["accuracy"][str(k)][str(d)]["accuracy"] for r in mine])
                for k in keys
                for d in multikey_distances
            },
        }
    return {
        "name": "needle_seeds",
        "protocol": {
            **_seeded_protocol(names, steps),
            "budgets": "each recipe's own: alibi_passkey 2,500 steps, the others 1,000",
            "lengths": lengths,
            "distances": distances,
            "grid": "pecourse.experiments.needle_grid's cells: a distance where the needle fits",
            "keys": keys,
            "multikey_distances": multikey_distances,
            "multikey": "pecourse.experiments.multikey's cells (length max(64, distance + 16))",
            "retrieval_samples": samples,
            "retrieval_interval": "95% Wilson score interval",
            "summary_keys": "grid 'length/distance', multikey 'needles/distance'",
        },
        **_seed_facts(runs),
        "summary": summary,
    }


# --- chapters 13 and 14: extending the context of a RoPE model, three seeds --------------------

#: Training-free scalings of chapter 14 at the study's factor (YaRN with the betas of a 16-dim
#: head, as :data:`pecourse.experiments.YARN_BETAS`).
EXTENSION_SCALINGS = ("none", "PI", "NTK", "YaRN", "dynamic NTK")


def _extension_measure(factor, lengths, tokens, distances, samples, train_len):
    """What :func:`extension_seeds` and :func:`extension_controls` measure of one model: a
    text model's perplexity at ``lengths`` (non-overlapping, and sliding with stride ``L/4``)
    and its loss by band at the longest; a passkey model's accuracy by needle distance; a
    base model (no ``init_from``) under each training-free scaling as well."""
    from . import evaluate as ev
    from .experiments import _bands, _scaled_variants
    from .train import RECIPES

    top = max(lengths)
    bands = _bands(train_len, int(round(factor * train_len)), top)

    def text(model, slide: bool):
        losses = {n: ev.window_losses(model, n, tokens=tokens) for n in lengths}
        out = {str(n): ev.perplexity_interval(x) for n, x in losses.items()}
        out["bands"] = ev.band_losses(losses[top], bands)
        if slide:
            out["sliding"] = {
                str(n): ev.perplexity_interval(
                    ev.window_losses(model, n, tokens=tokens, mode="sliding")
                )
                for n in lengths
            }
        return out

    def passkey(model, name):
        key_len = RECIPES[name]["train"]["task_options"]["key_len"]
        got = ev.needle_outcomes(model, distances, samples=samples, key_len=key_len)
        return {
            "retrieval": {str(d): v for d, v in ev.retrieval(got).items()},
            "effective": ev.effective_length_interval(got),
        }

    def measure(model, name):
        base = not RECIPES[name]["train"].get("init_from")
        if RECIPES[name]["train"]["data"] == "passkey":
            if not base:
                return passkey(model, name)
            return {
                "scaled": {k: passkey(m, name) for k, m in _scaled_variants(model, factor).items()}
            }
        if not base:
            return text(model, slide=True)
        return {
            "scaled": {
                k: text(m, slide=k == "none") for k, m in _scaled_variants(model, factor).items()
            }
        }

    return measure


def _extension_runs(
    study, names, seeds, train_len, *, factor, lengths, tokens, distances, samples, steps, log
):
    """The runs of :func:`extension_seeds` or :func:`extension_controls` (``study``): its
    settings checked, every (recipe, seed) trained or read and measured by
    :func:`_extension_measure`, resumable from ``log`` under a key naming the study and its
    settings. Returns ``(runs, settings)``, the settings in the order of the arguments."""
    from ._validate import check_float

    lengths = [check_int("lengths[]", n, minimum=2) for n in lengths]
    settings = {
        "factor": check_float("factor", factor, minimum=1.0),
        "lengths": lengths,
        "tokens": check_int("tokens", tokens, minimum=max(lengths)),
        "distances": [check_int("distances[]", d, minimum=1) for d in distances],
        "samples": check_int("samples", samples, minimum=1),
        "steps": None if steps is None else check_int("steps", steps, minimum=1),
    }
    measure = _extension_measure(
        *(settings[k] for k in ("factor", "lengths", "tokens", "distances", "samples")), train_len
    )
    key = {"study": study, **settings}
    runs = _seeded_runs(names, seeds, steps=settings["steps"], key=key, log=log, measure=measure)
    return runs, settings


def extension_seeds(
    seeds=(0, 1, 2),
    *,
    names=(
        "rope",
        "rope_pi_finetune",
        "rope_yarn_finetune",
        "rope_pose_pi_finetune",
        "rope_passkey",
        "rope_passkey_pi_finetune",
        "rope_passkey_pose_pi_finetune",
    ),
    factor: float = 4.0,
    lengths=(64, 128, 256, 512),
    tokens: int = 65536,
    distances=(48, 96, 192, 384),
    samples: int = 256,
    steps: int | None = None,
    log=None,
) -> dict:
    r"""Context extension of a RoPE model trained at 64, per training seed (chapters 13, 14).

    For each seed: the base models (``rope`` on text, ``rope_passkey`` on passkeys) trained
    with their shipped recipes, then continued from *that seed's* base with each fine-tune
    recipe of ``names`` (:data:`pecourse.train.RECIPES`): position interpolation (Chen et
    al. 2023) and YaRN (Peng et al. 2023) on windows of ``factor × 64``, and PoSE with PI as
    Zhu et al. (2024) publish it, on 64-character windows whose ids are skipped over
    ``factor × 64``. Seed 0 is the shipped checkpoints. Every text model: non-overlapping
    perplexity at ``lengths`` on the same ``tokens`` validation characters, the loss by
    position band at the longest length (before 64, to the extended window, beyond it),
    and sliding-window perplexity (stride ``L/4``); the base text model also under the
    training-free scalings of :data:`EXTENSION_SCALINGS` (non-overlapping). Every passkey
    model: accuracy by needle distance (``samples`` sequences each, Wilson intervals); the
    base passkey model also under each training-free scaling. ``steps`` overrides every
    trained run's budget (tests); ``log``: see :func:`_seeded_runs`.
    """
    from .experiments import YARN_BETAS
    from .train import RECIPES

    seeds = _check_seeds(seeds)
    names = [check_choice("names[]", n, tuple(RECIPES)) for n in names]
    for n in names:  # a fine-tune needs its parent earlier in the list (trained first)
        parent = RECIPES[n]["train"].get("init_from")
        if parent and parent not in names[: names.index(n)]:
            raise ValueError(f"names must list {parent!r} before {n!r}, which continues it")
    train_len = RECIPES[names[0]]["model"]["train_len"]
    runs, settings = _extension_runs(
        "extension_seeds",
        names,
        seeds,
        train_len,
        factor=factor,
        lengths=lengths,
        tokens=tokens,
        distances=distances,
        samples=samples,
        steps=steps,
        log=log,
    )
    factor, lengths, tokens, distances, samples, steps = settings.values()
    extended = int(round(factor * train_len))
    top = max(lengths)

    def rows(run):  # the run as {row label: measurements}: a base run has one row per scaling
        if "scaled" in run:
            return {f"{run['model']} {k}": v for k, v in run["scaled"].items()}
        return {run["model"]: run}

    summary = {}
    for s in sorted(seeds):
        for run in (r for r in runs if r["seed"] == s):
            for label, cells in rows(run).items():
                entry = summary.setdefault(label, {})
                if "retrieval" in cells:
                    for d in distances:
                        entry.setdefault(f"d{d}", []).append(cells["retrieval"][str(d)]["accuracy"])
                else:
                    for n in lengths:
                        entry.setdefault(str(n), []).append(cells[str(n)]["perplexity"])
                    for n in lengths if "sliding" in cells else ():
                        entry.setdefault(f"sliding {n}", []).append(
                            cells["sliding"][str(n)]["perplexity"]
                        )
    summary = {label: {k: _spread(v) for k, v in entry.items()} for label, entry in summary.items()}
    return {
        "name": "extension_seeds",
        "protocol": {
            **_seeded_protocol(names, steps),
            "factor": factor,
            "train_len": train_len,
            "extended_window": extended,
            "scalings": list(EXTENSION_SCALINGS),
            "yarn": YARN_BETAS,
            "lengths": lengths,
            "eval_tokens": tokens,
            "mode": "nonoverlapping; sliding (stride L/4) for the unscaled base and every fine-tune",
            "bands_at": top,
            "split": "validation, the first eval_tokens characters (the same for every model)",
            "interval": "95% percentile bootstrap over windows, 2000 resamples",
            "distances": distances,
            "retrieval_length": "distance + key length + 8",
            "retrieval_samples": samples,
            "retrieval_interval": "95% Wilson score interval",
            "budgets": "each fine-tune 100 steps from its seed's base; characters per step: "
            "rope_pi_finetune, rope_yarn_finetune 4 x 256, rope_pose_pi_finetune 16 x 64; "
            "keys per step: 16 for both passkey fine-tunes",
        },
        "eval_tokens": tokens,
        **_seed_facts(runs),
        "summary": summary,
    }


#: Each control of :func:`extension_controls` and the recipe it is the control of.
EXTENSION_CONTROLS = {
    "rope_finetune": "rope_pi_finetune",
    "rope_pi_finetune_64": "rope_pose_pi_finetune",
    "rope_passkey_finetune": "rope_passkey_pi_finetune",
    "rope_passkey_pi_finetune_64": "rope_passkey_pose_pi_finetune",
}


def extension_controls(
    seeds=(0, 1, 2),
    *,
    names=tuple(EXTENSION_CONTROLS),
    factor: float = 4.0,
    lengths=(64, 128, 256, 512),
    tokens: int = 65536,
    distances=(48, 96, 192, 384),
    samples: int = 256,
    steps: int | None = None,
    log=None,
) -> dict:
    r"""The controls of chapter 13's and 14's extension recipes, per seed of the base model.

    Each control continues the same seed's base model (``rope`` or ``rope_passkey``, seed 0
    the shipped checkpoint) with one thing of the recipe it controls taken away
    (:data:`EXTENSION_CONTROLS`): a fine-tune on 256-character windows with no RoPE scaling
    (the baseline of Chen et al. 2023 for PI + fine-tune), and PI on 64-character windows
    with plain ids (for PoSE + PI: the same windows and budget without the skipped ids).
    Each is measured as :func:`extension_seeds` measures the recipe it controls, on the same
    text and samples, so the two recordings' rows compare seed by seed. ``steps`` and
    ``log`` as in :func:`extrapolation_seeds`.
    """
    from .train import RECIPES

    seeds = _check_seeds(seeds)
    names = [check_choice("names[]", n, tuple(EXTENSION_CONTROLS)) for n in names]
    runs, settings = _extension_runs(
        "extension_controls",
        names,
        seeds,
        RECIPES["rope"]["model"]["train_len"],
        factor=factor,
        lengths=lengths,
        tokens=tokens,
        distances=distances,
        samples=samples,
        steps=steps,
        log=log,
    )
    factor, lengths, tokens, distances, samples, steps = settings.values()
    summary = {}
    for name in names:
        mine = [r for r in runs if r["model"] == name]
        if "retrieval" in mine[0]:
            cells = {f"d{d}": [r["retrieval"][str(d)]["accuracy"] for r in mine] for d in distances}
        else:
            cells = {str(n): [r[str(n)]["perplexity"] for r in mine] for n in lengths}
            cells |= {
                f"sliding {n}": [r["sliding"][str(n)]["perplexity"] for r in mine] for n in lengths
            }
        summary[name] = {k: _spread(v) for k, v in cells.items()}
    return {
        "name": "extension_controls",
        "protocol": {
            "models": names,
            "controls": {n: EXTENSION_CONTROLS[n] for n in names},
            "model": {n: RECIPES[n]["model"] for n in names},
            "train": {
                n: {**RECIPES[n]["train"], **({"steps": steps} if steps else {})} for n in names
            },
            "base": "each seed's own base model (seed 0: the shipped checkpoint)",
            "factor": factor,
            "lengths": lengths,
            "eval_tokens": tokens,
            "mode": "nonoverlapping and sliding (stride L/4), as extension_seeds",
            "distances": distances,
            "retrieval_length": "distance + key length + 8",
            "retrieval_samples": samples,
        },
        "eval_tokens": tokens,
        **_seed_facts(runs),
        "summary": summary,
    }


# --- recordings -------------------------------------------------------------------------------

#: Study name -> function.
STUDIES = {
    "grid_width_transfer": grid_width_transfer,
    "cope_selective_copy": cope_selective_copy,
    "cope_counting": cope_counting,
    "windowed_passkey": windowed_passkey,
    "imposed_windows": imposed_windows,
    "text_extrapolation": text_extrapolation,
    "nope_anchor": nope_anchor,
    "counting_length_generalisation": counting_length_generalisation,
    "extrapolation_seeds": extrapolation_seeds,
    "retrieval_seeds": retrieval_seeds,
    "augmentation_seeds": augmentation_seeds,
    "extension_seeds": extension_seeds,
    "needle_seeds": needle_seeds,
    "sliding_seeds": sliding_seeds,
    "context_use": context_use,
    "extension_controls": extension_controls,
    "embedding_setup": embedding_setup,
}


def record(result: dict, folder=None) -> Path:
    """Write a study's recording to ``folder/<name>.json`` (default ``pecourse/results``),
    validated by :func:`pecourse.results.write`."""
    if not isinstance(result, dict) or "name" not in result:
        raise TypeError("result must be a study's dict, with a 'name'")
    check_choice("result['name']", result["name"], tuple(STUDIES))
    return write(result, folder)


def load(name: str) -> dict:
    """A recorded study (``pecourse/results/<name>.json``) as a dict: the one loader,
    :func:`pecourse.results.recorded`, refusing names that are not studies."""
    check_choice("name", name, tuple(STUDIES))
    return recorded(name)


def main(argv=None) -> int:
    """``python -m pecourse.studies run NAME … [--out FOLDER] [--log-dir FOLDER]``.

    Each study draws a bar over its models and logs every finished model with its CPU time;
    with ``--log-dir`` a study that trains seeds keeps a log there and an interrupted run
    resumes from it (``make results`` passes one). The CPU time of each study and of all of
    them is logged at the end.
    """
    import argparse
    import inspect

    global PROGRESS
    p = argparse.ArgumentParser(prog="python -m pecourse.studies")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="rerun studies and rewrite their recordings")
    r.add_argument("names", nargs="+", choices=sorted(STUDIES))
    r.add_argument("--out", default=None, help="folder for the recordings (default: shipped)")
    r.add_argument("--log-dir", default=None, help="folder of resumable run logs")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    PROGRESS = True
    torch.set_num_threads(1)
    total = 0.0
    for name in args.names:
        study = STUDIES[name]
        kwargs = {}
        if args.log_dir and "log" in inspect.signature(study).parameters:
            Path(args.log_dir).mkdir(parents=True, exist_ok=True)
            kwargs["log"] = Path(args.log_dir) / f"{name}.jsonl"
        result = study(**kwargs)
        path = record(result, args.out)
        total += result["cpu_seconds"]
        logger.info("%s: %.0f CPU s -> %s", name, result["cpu_seconds"], path)
    logger.info("%d studies: %.0f CPU s (%.1f CPU min)", len(args.names), total, total / 60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
