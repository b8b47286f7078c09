r"""Every measurement the chapters read: small models at three training seeds, every number with
its interval.

The shipped checkpoints (:mod:`pecourse.lab.train`) are seed 0 of their recipes. Each study
trains seeds 1 and 2 of the models a chapter draws a conclusion from (once, into a folder the
studies share) and evaluates all three on fixed held-out sets. Each study returns a
JSON-serialisable dict (a *recording*) with

* ``protocol`` — everything needed to rerun it: model sizes, training options, evaluation
  lengths and sample counts, the interval method;
* ``seeds`` — the list of training seeds;
* ``rows`` — one entry per (variant, seed): the loss curve and the raw numbers measured;
* ``summary`` — per variant and measurement: the per-seed values, their mean, min and max;
* ``cpu_seconds`` and ``versions`` — what it cost and what it ran on.

An accuracy of one seed carries a 95% percentile-bootstrap interval over the evaluation
samples (:func:`bootstrap_interval`); the spread across seeds is reported as the per-seed
values themselves (three seeds are too few for an interval). :func:`record` writes a
recording to ``pecourse/lab/results/<name>.json``; :func:`load` reads it back.

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
:func:`extension_controls`               chapters 13 and 14: the same fine-tunes with no
                                          scaling, and PI without PoSE's skipped ids
:func:`embedding_setup`                   chapters 06, 09, 12: every scheme under the
                                          sinusoidal model's embedding setup
:func:`context_use`                       chapters 04, 12, 14: how much context each text
                                          regime's models use
:func:`loss_by_position`                  chapters 04, 08, 09, 12: loss at each position of
                                          256-character windows, by band
:func:`position_shift`                    chapters 07 and 08: every position id shifted,
                                          the loss paired with the unshifted
:func:`rope_base`                         chapter 16: base 100 against 10,000 on text,
                                          beside Men et al.'s bound
:func:`scaling_mistakes`                  chapter 14: YaRN's temperature never or twice,
                                          and a stale dynamic-NTK table
:func:`table_extension`                   chapter 01: the learned table's main direction,
                                          and the table doubled by random, copied or
                                          interpolated rows, seeds 0-2
:func:`table_finetune`                    chapter 01: the same doubled tables, each
                                          fine-tuned 100 steps at 128, seeds 0-2
:func:`alibi_windows`                     chapter 03: each ALiBi head's window on text
                                          against its slope's prior, and the slopes
                                          swapped, seeds 0-2
:func:`t5_far_keys`                       chapter 07: the T5 model at 512 with its
                                          untrained far buckets edited or masked,
                                          seeds 0-2
========================================  ==================================================

Most studies are declared as data (:class:`Study`: recipes × seeds × one measurement) and
run by one runner (:func:`_seeded_runs`): seed 0 of a shipped recipe is its checkpoint, every
other (recipe, seed) is trained once into a weights folder the studies share (a continued
recipe starts from that seed's run of its parent), a log lets an interrupted run resume, and
the summary is the rows read over seeds (:func:`summarise`; :meth:`Study.reread` rebuilds it
from the rows, and a test compares it with each shipped recording).

``python -m pecourse.lab.studies run NAME`` reruns a study and rewrites its recording (minutes
of CPU each; the chapter says how many).
"""

from __future__ import annotations

import json
import logging
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from tqdm.auto import tqdm

from .._validate import check_choice, check_int
from .data import task_batch
from .evaluate import (
    band_losses,
    bootstrap_interval,
    context_losses,
    context_used,
    effective_length_interval,
    multikey_cells,
    needle_grid,
    needle_outcomes,
    perplexity_interval,
    retrieval,
    scale_rope,
    wilson_interval,
    window_losses,
)
from .model import (
    ModelConfig,
    TinyGPT,
    checkpoint_info,
    checkpoint_sha256,
    load_checkpoint,
    save_checkpoint,
)
from .results import recorded, write
from .train import RECIPES, STUDY_RECIPES, TrainConfig, bos_window, recipe

logger = logging.getLogger(__name__)
#: Whether studies draw a progress bar over their models (``python -m pecourse.lab.studies`` does).
PROGRESS = False

__all__ = [
    "Study",
    "summarise",
    "bootstrap_interval",
    "per_sample_accuracy",
    "GridAttention",
    "grid_width_transfer",
    "cope_selective_copy",
    "cope_counting",
    "windowed_passkey",
    "imposed_windows",
    "text_extrapolation",
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
    :func:`pecourse.lab.data.task_batch` with the fixed ``seed`` (a different stream from any
    training seed). Refuses a model that is not a :class:`TinyGPT` and what ``task_batch``
    refuses.
    """
    if not isinstance(model, TinyGPT):
        raise TypeError(f"model must be a pecourse.lab.model.TinyGPT, got {type(model).__name__}")
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
    """Train one model with :func:`pecourse.lab.train.train`; return it, its curve and CPU time."""
    from .train import TrainConfig, train

    start = time.process_time()
    model, rec = train(
        ModelConfig(**model_kwargs), TrainConfig(**train_kwargs), progress=False, evaluate=False
    )
    return model, rec["loss_curve"], time.process_time() - start


def _hashes(names) -> dict:
    """``{checkpoint: sha256}`` of the shipped checkpoints a study reads (an empty dict when
    it trains everything itself): the hash test compares them with the shipped files."""

    return {n: checkpoint_sha256(n) for n in sorted(set(names))}


def _versions() -> dict:
    return {"python": platform.python_version(), "torch": torch.__version__}


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
        from ..attention import attention

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
    from ..positions.multidim import grid_positions

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
    from ..positions.multidim import AxialRoPE
    from ..positions.rope import RoPE

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


# --- chapter 15: what NoPE's quality gap is made of -------------------------------------------


@torch.no_grad()
def text_window_losses(
    model: TinyGPT, *, bos: bool = False, length: int = 64, tokens: int = 65536
) -> torch.Tensor:
    """Loss at each scored position of non-overlapping validation windows, ``[windows, length-1]``.

    Every window of ``length`` characters predicts its characters 1 … ``length - 1`` (the
    first has no context in a plain window, so it is never scored). With ``bos`` the window
    is fed as :func:`pecourse.lab.train.bos_window` — the marker, then the characters — so the
    same characters are predicted from the same context plus a start marker.
    """
    from .data import corpus

    if not isinstance(model, TinyGPT):
        raise TypeError(f"model must be a pecourse.lab.model.TinyGPT, got {type(model).__name__}")
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


# --- training and reading the runs of a study ---------------------------------------------------


def _seeded_runs(names, seeds, *, steps, key: dict, log, measure) -> list[dict]:
    r"""Train every recipe of ``names`` with every training seed, measure each model, keep a log.

    The mechanism of every multi-seed study below: recipe ``name`` of
    :data:`pecourse.lab.train.RECIPES` trained with ``seed`` (and its own budget, or ``steps``
    when given); the recipe's own seed with its own budget *is* the shipped checkpoint, so
    that run loads it instead of training. ``measure(model, name) -> dict`` adds the numbers.
    ``log`` (a path) keeps one JSON line per finished run and reuses the lines of an
    interrupted call with the same ``key`` (the protocol), so minutes of training are not
    lost when a long run stops halfway; a logged run of a shipped checkpoint is reused only
    while that checkpoint is unchanged. Returns the runs ordered by seed, then by ``names``.
    """

    done = {}
    folder = tempfile.TemporaryDirectory() if log is None else None
    store = Path(folder.name) if folder else Path(log).parent / "weights"  # shared by studies
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
            # trained once into the store every study reads, by whichever study needed it first
            model, curve = _train_seed(name, seed, steps, store)
            run = {"model": name, "seed": seed, "source": "trained for the studies"}
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
    # read back, so a model trained now carries its checkpoint's record (its training seed,
    # which a measure may read) exactly as one read from the store does
    return load_checkpoint(path), curve


def _parent(name: str, seed: int, steps, store: Path, *, ensure: bool = True) -> str:
    """What a continued recipe (``init_from=name``) starts from at ``seed``: the shipped
    checkpoint when it is that very run, else the parent trained with ``seed`` (and
    ``steps``) by :func:`_seeded_runs` into ``store``; with ``ensure``, trained now if it
    is not there."""

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

    return {
        "models": names,
        "model": {k: v for k, v in recipe(names[0])["model"].items() if k != "plan"},
        "train": {n: {**recipe(n)["train"], **({"steps": steps} if steps else {})} for n in names},
        "seed_0": "the shipped checkpoint (same recipe and seed); other seeds trained here",
    }


# --- the study layer: a study is data; one runner trains, measures, resumes and records ----

#: The fields of a run that say which run it is rather than what it measured.
_RUN_FACTS = ("model", "seed", "source", "sha256", "train_steps", "loss_curve", "cpu_seconds")
#: Sizes of a measurement, not measurements: left out of the summary.
_SIZES = ("windows", "tokens", "blocks", "successes", "trials", "threshold", "train_len")
#: The number that stands for a measurement (a dict), in this order of preference.
_HEADLINES = ("perplexity", "accuracy", "mean", "loss", "effective")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _over_seeds(runs: list[dict]) -> dict:
    """The spread over seeds of what the runs measured, nested as the runs are: a measurement
    (a dict with a number among :data:`_HEADLINES`) becomes the :func:`_spread` of that
    number, a group stays a group, and a part some run lacks (a learned table past its rows)
    is left out."""
    out = {}
    for key, first in runs[0].items():
        values = [r.get(key) for r in runs]
        if key in _SIZES or any(v is None for v in values):
            continue
        if isinstance(first, dict) and all(isinstance(v, dict) for v in values):
            head = next((h for h in _HEADLINES if _is_number(first.get(h))), None)
            if head and all(_is_number(v.get(head)) for v in values):
                out[key] = _spread([v[head] for v in values])
            elif nested := _over_seeds(values):
                out[key] = nested
        elif all(_is_number(v) for v in values):
            out[key] = _spread(values)
    return out


def summarise(runs: list[dict], models) -> dict:
    """``{model: its runs' measurements over seeds}`` (:func:`_over_seeds`), the runs of each
    model in seed order: the reading a chapter asserts, recomputable from the rows."""
    return {
        m: _over_seeds(
            [{k: v for k, v in r.items() if k not in _RUN_FACTS} for r in runs if r["model"] == m]
        )
        for m in models
    }


def _setting(name: str, value, default):
    """``value`` checked against the kind of ``default``: counts and lengths are positive ints,
    lists hold positive ints (or names), a float is a non-negative number."""
    from .._validate import check_float

    if isinstance(default, bool) or default is None:
        return value
    if isinstance(default, int):
        return check_int(name, value, minimum=1)
    if isinstance(default, float):
        return check_float(name, value, minimum=0.0)
    if isinstance(default, (tuple, list)):
        if not isinstance(value, (tuple, list)) or not value and default:
            raise TypeError(f"{name} must be a non-empty list like {list(default)}, got {value!r}")
        if all(isinstance(d, int) for d in default):
            return [check_int(f"{name}[]", v, minimum=1) for v in value]
        return list(value)
    return value


@dataclass(frozen=True)
class Study:
    r"""A study as data: which recipes, trained at which seeds, measured how.

    ``models`` are recipe names (:func:`pecourse.lab.train.recipe`), each continued recipe after
    the one it continues. ``measure(settings)`` returns the function that measures one model,
    ``(model, recipe name) -> dict``; ``settings`` are its parameters with their defaults (a
    call may override any; they enter the protocol and the resume key); ``protocol`` says
    what the settings do not. ``read(recording, settings)`` adds fields a chapter reads
    (a ranking); ``summary(runs, models, settings)`` replaces the generic reading
    (:func:`summarise`) where a chapter reads another shape.

    Calling a study runs it (:func:`_seeded_runs`: seed 0 of a shipped recipe is its
    checkpoint, the rest trained once and kept, a log resumes an interrupted run) and
    returns its recording, valid under :data:`pecourse.lab.results.SCHEMA`.
    """

    name: str
    about: str
    models: tuple
    measure: Callable
    settings: dict = field(default_factory=dict)
    protocol: dict = field(default_factory=dict)
    read: Callable | None = None
    summary: Callable | None = None

    def __post_init__(self):
        object.__setattr__(self, "__doc__", self.about)

    def __call__(self, seeds=(0, 1, 2), *, models=None, steps=None, log=None, **settings) -> dict:
        seeds = _check_seeds(seeds)
        models = [check_choice("models[]", n, tuple(self.models)) for n in models or self.models]
        for i, n in enumerate(models):  # a continued recipe needs its parent first
            parent = recipe(n)["train"].get("init_from")
            if parent in self.models and parent not in models[:i]:
                raise ValueError(f"models must list {parent!r} before {n!r}, which continues it")
        unknown = sorted(set(settings) - set(self.settings))
        if unknown:
            raise TypeError(
                f"{self.name} has no settings {unknown}; it has {sorted(self.settings)}"
            )
        settings = {k: _setting(k, settings.get(k, v), v) for k, v in self.settings.items()}
        steps = None if steps is None else check_int("steps", steps, minimum=1)
        # the protocol says what is measured: a log written under another one is not reused
        key = {"study": self.name, **settings, "steps": steps, "protocol": self.protocol}
        runs = _seeded_runs(
            models, seeds, steps=steps, key=key, log=log, measure=self.measure(settings)
        )
        return self._record(runs, models, steps, settings)

    def reread(self, recording: dict) -> dict:
        """``recording`` with everything but its runs rebuilt from its runs, under this study's
        declared settings: what rerunning the study would write if training and measuring gave
        the same rows. A test compares each shipped recording with it."""
        models, steps = recording["protocol"]["models"], None
        return self._record(recording["rows"], models, steps, dict(self.settings)) | {
            k: recording[k] for k in ("cpu_seconds", "versions", "checkpoints")
        }

    def _record(self, runs, models, steps, settings) -> dict:
        settings = {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()}
        summary = (self.summary or (lambda r, m, s: summarise(r, m)))(runs, models, settings)
        recording = {
            "name": self.name,
            "protocol": {**_seeded_protocol(models, steps), **self.protocol, **settings},
            **_seed_facts(runs),
            "summary": summary,
        }
        if "tokens" in settings:
            recording["eval_tokens"] = settings["tokens"]
        used = {m: [r.get("context_used") for r in runs if r["model"] == m] for m in models}
        used = {m: u for m, u in used.items() if None not in u}  # the models that scored text
        if used:
            recording["context_used"] = used
        return recording | (self.read(recording, settings) if self.read else {})


# --- the declared studies: three seeds of every model a chapter's conclusion rests on --------

_TEXT = {
    "split": "validation, the first eval_tokens characters (the same for every model)",
    "interval": "95% percentile bootstrap over windows, 2000 resamples",
}
_RETRIEVAL = {
    "eval_seed": 1234,
    "retrieval_interval": "95% Wilson score interval",
    "split": "validation text as filler",
}
_CONTEXT = (
    "the same eval_tokens characters scored with c to 2c-1 characters of context (sliding "
    "windows of 2c every c), c = 1, 2, 4, ... up to half the training length; context_used is "
    "the largest c whose gain over c/2 (same characters) has its interval above zero: "
    "percentile bootstrap over blocks of 256 consecutive characters, 2000 resamples"
)


def _losses(s: dict, model, **kw) -> dict:
    """Window losses at each of ``s["lengths"]`` on ``s["tokens"]`` validation characters
    (:func:`pecourse.lab.evaluate.window_losses`; ``None`` where a learned table has no rows)."""
    out = {}
    for n in s["lengths"]:
        try:
            out[n] = window_losses(model, n, tokens=s["tokens"], **kw)
        except ValueError:  # a learned table has no row for these positions
            out[n] = None
    return out


def _perplexities(s: dict, model, losses: dict | None = None, **kw) -> dict:
    """Perplexity with its interval at each length, from ``losses`` (:func:`_losses`) when the
    caller already has them."""
    losses = _losses(s, model, **kw) if losses is None else losses
    return {str(n): None if x is None else perplexity_interval(x) for n, x in losses.items()}


def _context_of(model, name, s: dict) -> dict:
    """``context_used`` and its gains (:func:`pecourse.evaluate.context_used`) at the model's
    training length, for a model trained on plain text (others get nothing)."""

    if recipe(name)["train"]["data"] != "text":
        return {}
    used = context_used(context_losses(model, tokens=s["tokens"]))
    return {"context_used": used["context_used"], "context_gain": used["gain"]}


def _extrapolation(s: dict):
    def measure(model, name):
        out = _perplexities(s, model)
        first, last = out[str(s["lengths"][0])], out[str(s["lengths"][-1])]
        if first and last:  # the rise from the shortest length to the longest
            out["ratio"] = round(last["perplexity"] / first["perplexity"], 4)
        return {**out, **_context_of(model, name, s)}

    return measure


_EXTRAPOLATION = dict(
    settings={"lengths": (64, 128, 256, 512), "tokens": 65536},
    measure=_extrapolation,
    protocol={
        "mode": "nonoverlapping",
        **_TEXT,
        "ratio": "perplexity at the longest length / at the shortest, per seed",
        "context_used": _CONTEXT + " (at the training length)",
    },
)

extrapolation_seeds = Study(
    "extrapolation_seeds",
    r"""Chapter 03's extrapolation table (Press et al. 2022, arXiv:2108.12409) at three seeds.

    Each scheme's shipped recipe (4 layers, ``d = 64``, 64-character windows, 800 steps) at each
    seed, seed 0 the shipped checkpoint. Every model: perplexity with a bootstrap interval on the
    same validation characters cut into non-overlapping windows of each length (a learned table
    has none past 64), the rise from the shortest to the longest, and the context it uses at
    its training length (:func:`pecourse.lab.evaluate.context_used`).""",
    ("learned", "sinusoidal", "rope", "t5", "alibi", "nope"),
    **_EXTRAPOLATION,
)

#: The extrapolation set under one embedding setup (:data:`pecourse.lab.train.STUDY_RECIPES`).
EMBEDDING_CONTROLS = (
    "learned_sqrt_d",
    "sinusoidal",
    "rope_sqrt_d",
    "t5_sqrt_d",
    "alibi_sqrt_d",
    "nope_sqrt_d",
    "sinusoidal_unscaled",
)

embedding_setup = Study(
    "embedding_setup",
    r"""The extrapolation table under one embedding setup: chapter 06's control.

    The shipped sinusoidal model alone multiplies its token embeddings by √d (with init std
    d^-½, Vaswani et al. 2017 §3.4); the others keep GPT-2's std 0.02 and no scale. Here every
    scheme is trained with the sinusoidal model's setup (``*_sqrt_d``) and the sinusoidal model
    also without it (``sinusoidal_unscaled``), measured as :data:`extrapolation_seeds` measures,
    so the schemes can be ranked under either setup.""",
    EMBEDDING_CONTROLS,
    **_EXTRAPOLATION,
)


def _sliding(s: dict):
    return lambda model, name: {
        "sliding": _perplexities(s, model, mode="sliding"),
        **_context_of(model, name, s),
    }


sliding_seeds = Study(
    "sliding_seeds",
    r"""Chapter 04's sliding-window perplexity of the ALiBi, RoPE and T5 text models at three
    seeds: the same validation characters, sliding windows of each length at stride ``L/4``.""",
    ("alibi", "rope", "t5"),
    _sliding,
    {"lengths": (64, 128, 256, 512), "tokens": 65536},
    {
        "mode": "sliding, stride L/4",
        **_TEXT,
        "context_used": _CONTEXT + " (at the training length, models trained on plain text)",
    },
)


def _context(s: dict):
    def measure(model, name):
        n = model.config.train_len
        return {"train_len": n, **context_used(context_losses(model, n, tokens=s["tokens"]))}

    return measure


#: The text models whose context use :data:`context_use` measures: the 64-character regime
#: most chapters' text claims were first made on, and the long-window regime.
CONTEXT_MODELS = ("rope", "alibi", "rope_long")

context_use = Study(
    "context_use",
    r"""How much context each text regime's models use (after Khandelwal et al. 2018, ACL,
    arXiv:1805.04623: the same predictions with their context cut): for ``c = 1, 2, 4, …``
    up to half the training length, the loss of the same characters seen with ``c`` to
    ``2c - 1`` characters of context, and the largest ``c`` that still helps beyond its
    interval (:func:`pecourse.lab.evaluate.context_used`).""",
    CONTEXT_MODELS,
    _context,
    {"tokens": 65536},
    {"mode": _CONTEXT},
)


def _by_position(s: dict):
    cuts = [0, *s["cuts"], s["length"]]
    if cuts != sorted(set(cuts)):
        raise ValueError(
            f"cuts must rise strictly inside (0, length={s['length']}), got {s['cuts']}"
        )
    bands = list(zip(cuts[:-1], cuts[1:]))

    def measure(model, name):
        losses = window_losses(model, s["length"], tokens=s["tokens"])
        return {
            "curve": [round(v, 4) for v in losses.mean(0).tolist()],
            "bands": band_losses(losses, bands),
            "windows": losses.shape[0],
            **_context_of(model, name, s),
        }

    return measure


loss_by_position = Study(
    "loss_by_position",
    r"""Where in a long window each text model breaks (chapters 04, 08, 09, 12), at three seeds.

    Every model was trained on 64-character windows (800 steps; seed 0 the shipped checkpoint)
    and reads the same ``tokens`` validation characters in non-overlapping windows of
    ``length``: the mean loss at each position (``curve``) and the mean of each band of
    positions between ``cuts`` with a bootstrap interval over windows (``bands``). Positions
    from 64 on are new to every model.""",
    ("sinusoidal", "rope", "t5", "alibi", "nope"),
    _by_position,
    {"length": 256, "tokens": 65536, "cuts": (64, 128)},
    {"mode": "nonoverlapping", **_TEXT, "context_used": _CONTEXT + " (at the training length)"},
)


def _shifted(s: dict):
    def measure(model, name):
        n, out = s["length"], {"loss": {}, "paired": {}}
        base = None
        for shift in (0, *s["shifts"]):
            losses = window_losses(model, n, tokens=s["tokens"], positions=torch.arange(n) + shift)
            base = losses if base is None else base
            out["loss"][str(shift)] = band_losses(losses, [(0, n)])[f"0-{n}"]
            change = losses - base  # the same characters, scored at two sets of positions
            lo, hi = bootstrap_interval(change.mean(1))
            out["paired"][str(shift)] = {
                "difference": float(change.mean()),
                "ci95": [lo, hi],
                "max_abs": float(change.abs().max()),
            }
        return {**out, **_context_of(model, name, s)}

    return measure


position_shift = Study(
    "position_shift",
    r"""RoPE's relative property in trained models (chapters 07 and 08), at three seeds.

    Every window of ``length`` is scored with position ids ``shift .. shift + length - 1``
    instead of ``0 .. length - 1``. RoPE's scores depend on ``i - j`` only (Su et al. 2021,
    arXiv:2104.09864, eq. 16), so a shift changes its loss by float rounding alone; a
    sinusoidal model meets position vectors it never saw. The same characters at every shift,
    so the change is paired: per window, with a bootstrap interval over windows, and the
    largest change of any one character's loss (``max_abs``, nats, unrounded).""",
    ("rope", "sinusoidal"),
    _shifted,
    {"length": 64, "tokens": 65536, "shifts": (100, 1_000, 10_000)},
    {
        "mode": "nonoverlapping",
        **_TEXT,
        "positions": "shift .. shift + length - 1 in every window; shift 0 is the reference",
        "paired_interval": "95% percentile bootstrap over windows of the per-window mean difference",
        "context_used": _CONTEXT + " (at the training length)",
    },
)


def _base_text(s: dict):
    def measure(model, name):
        n = model.config.train_len
        return {
            "base": model.blocks[0].attn.scheme.base,
            str(n): perplexity_interval(window_losses(model, n, tokens=s["tokens"])),
            **_context_of(model, name, s),
        }

    return measure


def _base_bound(recording: dict, s: dict) -> dict:
    """Men et al.'s smallest base for the models' head size and training length."""
    from ..derivations import rope_base_lower_bound

    m = recording["protocol"]["model"]
    bound = rope_base_lower_bound(m["train_len"], m["d_model"] // m["n_heads"])
    return {"bound": round(bound, 1)}


rope_base = Study(
    "rope_base",
    r"""A base below Men et al.'s bound against one above it, on text (chapter 16), three seeds.

    ``rope_base_low`` (base 100) and ``rope`` (base 10,000), both 800 steps on 64-character
    windows (seed 0 the shipped checkpoints): perplexity at the training length on the same
    validation characters with a bootstrap interval, and the context each uses. ``bound`` is
    the smallest base whose ``B_m`` stays non-negative up to the training length for the
    models' head size (Men et al. 2024, arXiv:2405.14591). The passkey half of the chapter is
    :data:`retrieval_seeds` (``short``).""",
    ("rope_base_low", "rope"),
    _base_text,
    {"tokens": 65536},
    {"mode": "nonoverlapping, at the training length", **_TEXT, "context_used": _CONTEXT},
    read=_base_bound,
)

#: Needle distances of chapter 04 (sequences of distance + key + 8 characters) and of
#: chapter 16 (inside the 64-character training window).
RETRIEVAL_DISTANCES = (8, 16, 32, 48, 96, 192, 384)
SHORT_DISTANCES = (8, 16, 24, 32, 40, 48, 56)
#: A retrieval run has *learned* the task when it finds the key more often than this at every
#: distance inside its training length: a run below it failed to train, and says nothing about
#: how far its scheme reaches.
LEARNED_ACCURACY = 0.75


def _retrieval(s: dict):
    def measure(model, name):
        key_len = recipe(name)["train"]["task_options"]["key_len"]
        out = {}
        for label, ds, length in (
            ("retrieval", s["distances"], None),
            ("short", s["short_distances"], model.config.train_len),
        ):
            got = needle_outcomes(model, ds, samples=s["samples"], key_len=key_len, length=length)
            out[label] = {str(d): v for d, v in retrieval(got).items()}
            out[f"{label}_effective"] = effective_length_interval(got)
        out["learned"] = min(c["accuracy"] for c in out["short"].values()) > s["learned_above"]
        return out

    return measure


retrieval_seeds = Study(
    "retrieval_seeds",
    r"""Passkey retrieval by distance of the ``*_passkey`` models (chapters 04 and 16) at three
    seeds, each with its recipe's own budget (``alibi_passkey`` 2,500 steps, the others 1,000).
    Every model answers the same ``samples`` sequences per distance: distance + key + 8
    characters for ``distances``, the training length for ``short_distances``. Per distance:
    accuracy with a Wilson interval; per run: the effective length (accuracy ≥ 0.5 at every
    distance up to it) with a bootstrap interval over the samples, and ``learned``: accuracy
    above ``learned_above`` at every short distance (a run that is not did not learn the task,
    and a chapter reads no reach from it).""",
    ("rope_passkey", "alibi_passkey", "t5_passkey", "rope_base_low_passkey"),
    _retrieval,
    {
        "distances": RETRIEVAL_DISTANCES,
        "short_distances": SHORT_DISTANCES,
        "samples": 256,
        "learned_above": LEARNED_ACCURACY,
    },
    {
        **_RETRIEVAL,
        "retrieval_length": "distance + key length + 8",
        "short_length": "the training length",
        "effective_threshold": 0.5,
        "effective_interval": "95% percentile bootstrap over retrieval samples (per distance), "
        "2000 resamples",
    },
)


def _augmentation(s: dict):
    def measure(model, name):
        from ..positions.augmentation import randomized_positions

        out = _perplexities(s, model)
        train = recipe(name)["train"]
        if train.get("augment") == "randomized":  # also with ids drawn as in training
            out["random_ids"] = {}
            for n in s["lengths"]:
                g = torch.Generator().manual_seed(n)
                ids = randomized_positions(
                    n, train["augment_len"], generator=g, batch=s["tokens"] // n
                )
                out["random_ids"] |= _perplexities({**s, "lengths": [n]}, model, positions=ids)
        if name in s["sliding"]:
            out["sliding"] = _perplexities(s, model, mode="sliding")
        return {**out, **_context_of(model, name, s)}

    return measure


augmentation_seeds = Study(
    "augmentation_seeds",
    r"""Chapter 13's position augmentation at three seeds: plain RoPE, randomized positions
    (Ruoss et al. 2023) and PoSE (Zhu et al. 2024), each with its shipped recipe (64-character
    windows whose ids span 0..511 for the augmented ones). Every model: non-overlapping
    perplexity with ids ``0..L-1``; ``rope_randomized`` also with ids drawn as in training (a
    sorted random subset of 0..511 per window, generator seed ``L``); the models in
    ``sliding`` also sliding-window perplexity (stride ``L/4``).""",
    ("rope", "rope_randomized", "rope_pose"),
    _augmentation,
    {"lengths": (64, 128, 256, 512), "tokens": 65536, "sliding": ("rope", "rope_pose")},
    {
        "mode": "nonoverlapping with ids 0..L-1, sliding (stride L/4) where listed",
        **_TEXT,
        "context_used": _CONTEXT + " (at the training length, ids 0..2c-1)",
    },
)


def _needles(s: dict):
    def measure(model, name):
        key_len = recipe(name)["train"]["task_options"]["key_len"]
        grid = needle_grid(
            model, s["lengths"], s["distances"], key_len=key_len, samples=s["samples"]
        )
        keys, distances = s["keys"], s["multikey_distances"]
        return {"grid": grid, **multikey_cells(model, keys, distances, samples=s["samples"])}

    return measure


needle_seeds = Study(
    "needle_seeds",
    r"""Chapter 04's needle grid and multi-key retrieval at three seeds of each passkey model:
    accuracy on a grid of sequence length × needle distance (where the needle fits), and with
    ``keys`` needles the target at each of ``multikey_distances``, also split by whether it is
    the first or the nearest needle; ``samples`` sequences per cell, Wilson intervals.""",
    ("alibi_passkey", "rope_passkey", "t5_passkey"),
    _needles,
    {
        "lengths": (64, 128, 256, 512),
        "distances": (16, 48, 96, 192, 384),
        "keys": (1, 2, 4, 8),
        "multikey_distances": (16, 48, 96, 192),
        "samples": 256,
    },
    {**_RETRIEVAL, "multikey": "length max(64, distance + 16)"},
)


#: The needle distances of :data:`windowed_passkey` (inside its 64-character sequences).
PASSKEY_DISTANCES = (4, 8, 12, 16, 24, 32, 48, 60)
#: The arms of :data:`windowed_passkey`: each a continuation of ``rope_passkey``.
WINDOWED_ARMS = ("rope_passkey_swa", "rope_passkey_swa_nope", "rope_passkey_swa_rope")


def _windowed(s: dict):
    def score(model):
        key_len = recipe("rope_passkey")["train"]["task_options"]["key_len"]
        got = needle_outcomes(
            model, s["distances"], length=64, samples=s["samples"], key_len=key_len
        )
        return {str(d): {k: c[k] for k in ("accuracy", "ci95")} for d, c in retrieval(got).items()}

    def measure(model, name):
        out = {"by_distance": score(model)}
        if name == "rope_passkey":  # the base's weights in each arm's layout, not yet trained
            out["step0"] = {}
            for arm in WINDOWED_ARMS:
                windowed = TinyGPT(ModelConfig(**recipe(arm)["model"])).eval()
                windowed.load_state_dict(model.state_dict())
                out["step0"][arm] = score(windowed)
        return out

    return measure


windowed_passkey = Study(
    "windowed_passkey",
    r"""Chapter 11: windowed RoPE layers with a global NoPE layer, with a global RoPE layer,
    and with none.

    For each seed the passkey model ``rope_passkey`` (full-attention RoPE, 1000 steps
    retrieving 2-digit keys from 64 characters; seed 0 the shipped checkpoint) is continued on
    its task for its own budget in three arms (:data:`WINDOWED_ARMS`): ``swa`` restricts all
    four RoPE layers to 8-key sliding windows (together they relay at most 4·7 = 28 tokens
    back); ``swa_nope`` windows layers 0–2 and makes layer 3 a global NoPE layer (Command A's
    layout); ``swa_rope`` keeps layer 3 a global RoPE layer — the control that tells a global
    NoPE layer from any global layer. Each base is also scored in each arm's layout before
    continuing (``step0``). Scores: accuracy at each needle distance on ``samples`` fixed
    sequences of 64, with a Wilson interval.""",
    ("rope_passkey", *WINDOWED_ARMS),
    _windowed,
    {"distances": PASSKEY_DISTANCES, "samples": 256},
    {
        **_RETRIEVAL,
        "task": "passkey retrieval, 2-digit keys, sequences of 64 characters",
        "window": STUDY_RECIPES["rope_passkey_swa"]["model"]["position_options"]["swa_rope"][
            "window"
        ],
    },
)


# --- chapter 10: CoPE against RoPE on the CoPE paper's tasks ----------------------------------

#: Selective copy's test splits: the same 8 letters among fewer blanks (dense), as trained,
#: and more (sparse); name -> sequence length.
COPY_SPLITS = {"dense": 32, "train": 64, "sparse": 128}


def _copying(s: dict):
    def measure(model, name):
        out = {}
        for split, n in s["splits"].items():
            out[split] = {
                metric: _score(
                    per_sample_accuracy(
                        model, "selective_copy", n, samples=s["samples"], exact=exact
                    )
                )
                for metric, exact in (("accuracy", False), ("exact_match", True))
            }
        return out

    return measure


cope_selective_copy = Study(
    "cope_selective_copy",
    r"""CoPE against RoPE on selective copy (Golovneva et al. 2024, arXiv:2405.18719, §5) at three
    seeds: the shipped CoPE recipe (4 layers, ``d = 64``, length 64 with 8 letters among blanks,
    600 steps) and RoPE given 4,000 steps, more than six times as many. Each model is tested on
    three splits (:data:`COPY_SPLITS`) with ``samples`` fixed sequences each: answer-token
    accuracy and exact match per sequence, with a bootstrap interval over sequences.""",
    ("cope_selective_copy", "rope_selective_copy_4000"),
    _copying,
    {"splits": COPY_SPLITS, "samples": 512},
    {
        "task": "selective_copy (8 letters among blanks, then '|' and the letters)",
        "eval_seed": 4321,
        "interval": "95% percentile bootstrap over evaluation sequences, 2000 resamples",
    },
)


def _counting_at(s: dict):
    def measure(model, name):
        samples = s["samples"]
        return {
            f"length_{n}": _score(per_sample_accuracy(model, "counting", n, samples=samples))
            for n in s["lengths"]
        }

    return measure


cope_counting = Study(
    "cope_counting",
    r"""CoPE against RoPE on counting at three seeds of the shipped recipes (600 steps each):
    answer accuracy at the training length and at twice it, with a bootstrap interval over
    ``samples`` fixed sequences; and RoPE given four times the steps (``rope_counting_long``,
    2,400), the control that tells learning faster from counting better.""",
    ("cope_counting", "rope_counting", "rope_counting_long"),
    _counting_at,
    {"lengths": (64, 128), "samples": 512},
    {
        "task": "counting ('+' since the last '*', asked after '=')",
        "eval_seed": 4321,
        "interval": "95% percentile bootstrap over evaluation sequences, 2000 resamples",
    },
)


#: The counting models of :data:`counting_length_generalisation` (:mod:`pecourse.lab.train`).
COUNTING_MODELS = (
    "nope_counting",
    "rope_counting",
    "alibi_counting",
    "nope_counting_long",
    "rope_counting_long",
)


def _learned_ranking(recording: dict, s: dict) -> dict:
    """Which models learned the task at the training length (accuracy ≥ ``learned_at`` at every
    seed), and those models ranked at the longest length: a model that never learned the task
    says nothing about generalising it."""
    summary, train_len = recording["summary"], recording["protocol"]["model"]["train_len"]
    learned = {m: summary[m][f"length_{train_len}"]["min"] >= s["learned_at"] for m in summary}
    top = f"length_{max(s['lengths'])}"
    ranked = sorted((m for m in summary if learned[m]), key=lambda m: -summary[m][top]["mean"])
    return {"ranking": {"at": max(s["lengths"]), "learned": learned, "learned_models": ranked}}


counting_length_generalisation = Study(
    "counting_length_generalisation",
    r"""Train short, test long on counting, in the manner of Kazemnejad et al. 2023
    (arXiv:2305.19466): each recipe (4 layers, ``d = 64``, sequences of 64, 600 steps — 2,400
    for the ``*_long`` ones —, loss on the answers only; seed 0 of ``rope_counting`` is the
    shipped checkpoint) tested on sequences of every length: the same stream of ``+``, ``*``
    and letters, only longer. Scores: answer accuracy per sequence with a bootstrap interval
    over ``samples`` sequences; the ranking at the longest length is among the models that
    learned the task at the training length only.""",
    COUNTING_MODELS,
    _counting_at,
    {"lengths": (64, 128, 256), "samples": 256, "learned_at": 0.9},
    {
        "task": "counting ('+' since the last '*', asked after '='; counts stay below 10)",
        "eval_seed": 4321,
        "interval": "95% percentile bootstrap over evaluation sequences, 2000 resamples",
    },
    read=_learned_ranking,
)


# --- chapters 11 and 15: the shipped text models past their training length ------------------


def _text_extrapolation(s: dict):
    def measure(model, name):
        top = s["bands_at"]
        bands = ((0, 64), (64, 128), (128, top))
        losses = _losses(s, model)
        at_top = losses.get(top)
        if at_top is None:  # bands_at is not among the lengths
            at_top = window_losses(model, top, tokens=s["tokens"])
        used = context_used(context_losses(model, tokens=s["tokens"]))
        return {
            **_perplexities(s, model, losses),
            "bands": band_losses(at_top, bands),
            "context_used": used["context_used"],
        }

    return measure


text_extrapolation = Study(
    "text_extrapolation",
    r"""The text models of chapters 11 and 15 (RoPE, NoPE, iRoPE, ALiBi: 4 layers, ``d = 64``,
    trained on 64 characters, 800 steps) from 64 to 512 characters at three seeds: perplexity
    on the same validation characters cut into non-overlapping windows of each length (Press
    et al. 2022's protocol), the loss of positions 0–63, 64–127 and the rest of windows of
    ``bands_at``, and the context each model uses at its training length.""",
    ("rope", "nope", "irope", "alibi"),
    _text_extrapolation,
    {"lengths": (64, 128, 256, 512), "tokens": 65536, "bands_at": 256},
    {"mode": "nonoverlapping", **_TEXT, "context_used": _CONTEXT + " (at the training length)"},
)


def _imposed(s: dict):
    def windowed(model):
        import copy

        from ..positions.rope import RoPE
        from ..positions.window import SlidingWindow

        m = copy.deepcopy(model)
        for block in m.blocks:
            if isinstance(block.attn.scheme, RoPE):
                block.attn.scheme = SlidingWindow(block.attn.scheme, s["window"])
        return m

    def cells(model):
        short, long = min(s["lengths"]), max(s["lengths"])
        losses = _losses(s, model)
        out = _perplexities(s, model, losses)
        out[str(short)] |= {
            "first_8_positions_loss": _score(losses[short][:, :8].mean(1)),
            "later_positions_loss": _score(losses[short][:, 8:].mean(1)),
        }
        if long > s["window"] and long % short == 0:  # the same characters, long windows vs short
            w, x = s["window"], losses[long]
            tiles = losses[short].mean(1)[: len(x) * (long // short)].view(len(x), -1).mean(1)
            out[str(long)] |= {
                "first_positions_loss": _score(x[:, :w].mean(1)),
                "later_positions_loss": _score(x[:, w:].mean(1)),
                f"loss_{short}_minus_loss_{long}": _score(tiles - x.mean(1)),
            }
        return out

    return lambda model, name: {
        "as_trained": cells(model),
        "windowed": cells(windowed(model)),
        **_context_of(model, name, s),
    }


imposed_windows = Study(
    "imposed_windows",
    r"""Chapter 11's intervention: a sliding window imposed at evaluation on trained RoPE layers.

    The ``rope`` and ``irope`` text models (trained on 64 characters, full causal attention) at
    three seeds, each evaluated as trained and with every RoPE layer restricted to a window of
    ``window`` keys (:class:`pecourse.positions.window.SlidingWindow`): perplexity at each
    length; at the shortest, the loss of the first 8 positions and of the rest; at the longest,
    the loss of the first ``window`` positions and of the rest, and the paired difference with
    the shortest length on the same characters.""",
    ("rope", "irope"),
    _imposed,
    {"lengths": (64, 512), "tokens": 65536, "window": 64},
    {
        "mode": "nonoverlapping",
        **_TEXT,
        "context_used": _CONTEXT + " (at the training length, models trained on plain text)",
    },
)


def _anchor(s: dict):
    def measure(model, name):
        bos = recipe(name)["train"]["data"] == "text+bos"
        losses = text_window_losses(model, bos=bos, tokens=s["tokens"])
        bands = {"1-7": slice(0, 7), "8-31": slice(7, 31), "32-63": slice(31, 63)}
        out = {"loss": _score(losses.mean(1))}
        out |= {f"loss_{b}": round(float(losses[:, w].mean()), 4) for b, w in bands.items()}
        return out | _context_of(model, name, s)

    return measure


nope_anchor = Study(
    "nope_anchor",
    r"""Chapter 15: is NoPE's quality gap the price of position, or the missing anchor?

    RoPE, NoPE and NoPE with a start marker at the head of every training window
    (``nope_bos``, the anchor Kazemnejad et al.'s Theorem 1 construction uses), each on the
    shipped text recipe at three seeds, predict the same characters 1–63 of each 64-character
    validation window (``nope_bos`` sees the marker first): mean loss with a bootstrap interval
    over windows, and the loss at positions 1–7, 8–31 and 32–63. The loss curves show whether
    the gap is still closing when training stops.""",
    ("rope", "nope", "nope_bos"),
    _anchor,
    {"tokens": 65536},
    {
        "eval": "validation characters 1-63 of each 64-character window",
        **_TEXT,
        "context_used": _CONTEXT + " (at the training length, models trained on plain text)",
    },
)


# --- chapters 13 and 14: extending the context of a RoPE model ---------------------------------

#: Training-free scalings of chapter 14 at the study's factor.
EXTENSION_SCALINGS = ("none", "PI", "NTK", "YaRN", "dynamic NTK")
#: YaRN's ramp for a 16-dimensional head trained at 64 (chapter 14 shows which pairs it moves).
YARN_BETAS = {"beta_fast": 8.0, "beta_slow": 1.0}


def _bands(train_len: int, extended: int, top: int) -> list[tuple[int, int]]:
    """Position bands of a window of ``top``: before the training length, up to the extended
    window, beyond it (the ones that fit)."""
    cuts = sorted({0, min(train_len, top), min(extended, top), top})
    return list(zip(cuts[:-1], cuts[1:]))


def _scaled_variants(base, factor: float) -> dict:
    """``base`` under each of :data:`EXTENSION_SCALINGS`, without training."""
    return {
        "none": base,
        "PI": scale_rope(base, "linear", factor),
        "NTK": scale_rope(base, "ntk", factor),
        "YaRN": scale_rope(base, "yarn", factor, **YARN_BETAS),
        "dynamic NTK": scale_rope(base, "dynamic", factor),
    }


def _extension(s: dict):
    """What the extension studies measure of one model: a text model's perplexity at
    ``lengths`` (non-overlapping, and sliding with stride ``L/4``) and its loss by band at the
    longest; a passkey model's accuracy by needle distance; a base model (no ``init_from``)
    under each training-free scaling as well."""
    train_len = recipe("rope")["model"]["train_len"]
    top = max(s["lengths"])
    bands = _bands(train_len, int(round(s["factor"] * train_len)), top)

    def text(model, slide: bool):
        losses = _losses(s, model)
        out = _perplexities(s, model, losses)
        out["bands"] = band_losses(losses[top], bands)
        if slide:
            out["sliding"] = _perplexities(s, model, mode="sliding")
        return out

    def passkey(model, name):
        key_len = recipe(name)["train"]["task_options"]["key_len"]
        got = needle_outcomes(model, s["distances"], samples=s["samples"], key_len=key_len)
        return {
            "retrieval": {str(d): v for d, v in retrieval(got).items()},
            "effective": effective_length_interval(got),
        }

    def measure(model, name):
        train = recipe(name)["train"]
        scaled = {} if train.get("init_from") else _scaled_variants(model, s["factor"])
        if train["data"] == "passkey":
            return (
                {"scaled": {k: passkey(m, name) for k, m in scaled.items()}}
                if scaled
                else passkey(model, name)
            )
        context = _context_of(model, name, s)  # the model as trained, with no scaling
        if scaled:
            return {"scaled": {k: text(m, slide=k == "none") for k, m in scaled.items()}, **context}
        return {**text(model, slide=True), **context}

    return measure


def _by_label(runs, models, s) -> dict:
    """Extension rows read by label: a fine-tune by its recipe, a base under each training-free
    scaling as ``"<base> <scaling>"``; per label, perplexity at each length (``"<L>"``, and
    ``"sliding <L>"``) or accuracy at each distance (``"d<D>"``) over seeds."""
    summary = {}
    for run in sorted(runs, key=lambda r: r["seed"]):
        rows = (
            {f"{run['model']} {k}": v for k, v in run["scaled"].items()}
            if "scaled" in run
            else {run["model"]: run}
        )
        for label, cells in rows.items():
            entry = summary.setdefault(label, {})
            if "retrieval" in cells:
                for d in s["distances"]:
                    entry.setdefault(f"d{d}", []).append(cells["retrieval"][str(d)]["accuracy"])
                continue
            for n in s["lengths"]:
                entry.setdefault(str(n), []).append(cells[str(n)]["perplexity"])
                if "sliding" in cells:
                    entry.setdefault(f"sliding {n}", []).append(
                        cells["sliding"][str(n)]["perplexity"]
                    )
    return {label: {k: _spread(v) for k, v in entry.items()} for label, entry in summary.items()}


def _extension_protocol(recording: dict, s: dict) -> dict:
    """The extended window and YaRN's betas, which the chapters read from the protocol."""
    train_len = recipe("rope")["model"]["train_len"]
    extended = int(round(s["factor"] * train_len))
    return {"protocol": {**recording["protocol"], "extended_window": extended, "yarn": YARN_BETAS}}


_EXTENSION = dict(
    measure=_extension,
    read=_extension_protocol,
    settings={
        "factor": 4.0,
        "lengths": (64, 128, 256, 512),
        "tokens": 65536,
        "distances": (48, 96, 192, 384),
        "samples": 256,
    },
    protocol={
        "mode": "nonoverlapping; sliding (stride L/4) for the unscaled base and every fine-tune",
        **_TEXT,
        **_RETRIEVAL,
        "scalings": list(EXTENSION_SCALINGS),
        "retrieval_length": "distance + key length + 8",
        "base": "each seed's own base model (seed 0: the shipped checkpoint)",
        "budgets": "each fine-tune 100 steps from its seed's base; characters per step: "
        "4 x 256 on 256-character windows, 16 x 64 on 64-character ones; 16 keys per passkey step",
        "context_used": _CONTEXT + " (each text model as trained, at its training length)",
    },
    summary=_by_label,
)

extension_seeds = Study(
    "extension_seeds",
    r"""Context extension of a RoPE model trained at 64, per seed of the base (chapters 13, 14).

    For each seed: the base models (``rope`` on text, ``rope_passkey`` on passkeys), then
    continued from *that seed's* base with position interpolation (Chen et al. 2023) and YaRN
    (Peng et al. 2023) on windows of ``factor × 64``, and PoSE with PI as Zhu et al. (2024)
    publish it, on 64-character windows whose ids are skipped over ``factor × 64``. Every text
    model: non-overlapping perplexity, loss by position band at the longest length, and
    sliding-window perplexity; every passkey model: accuracy by needle distance; each base
    also under the training-free scalings of :data:`EXTENSION_SCALINGS`.""",
    (
        "rope",
        "rope_pi_finetune",
        "rope_yarn_finetune",
        "rope_pose_pi_finetune",
        "rope_passkey",
        "rope_passkey_pi_finetune",
        "rope_passkey_pose_pi_finetune",
    ),
    **_EXTENSION,
)

#: Each control of :data:`extension_controls` and the recipe it is the control of.
EXTENSION_CONTROLS = {
    "rope_finetune": "rope_pi_finetune",
    "rope_pi_finetune_64": "rope_pose_pi_finetune",
    "rope_passkey_finetune": "rope_passkey_pi_finetune",
    "rope_passkey_pi_finetune_64": "rope_passkey_pose_pi_finetune",
}

extension_controls = Study(
    "extension_controls",
    r"""The controls of chapter 13's and 14's extension recipes, per seed of the base model:
    each continues the same seed's base with one thing of the recipe it controls taken away
    (:data:`EXTENSION_CONTROLS`): a fine-tune on 256-character windows with no RoPE scaling
    (the baseline of Chen et al. 2023 for PI + fine-tune), and PI on 64-character windows with
    plain ids (for PoSE + PI: the same windows and budget without the skipped ids). Measured
    as :data:`extension_seeds` measures the recipe it controls.""",
    tuple(EXTENSION_CONTROLS),
    **{**_EXTENSION, "protocol": {**_EXTENSION["protocol"], "controls": EXTENSION_CONTROLS}},
)


def _mistakes(s: dict):
    from ..positions.rope_scaling import yarn_mscale

    def measure(model, name):
        factor, n = s["factor"], model.config.train_len
        extended, top = int(round(factor * n)), s["longest"]
        # YaRN's temperature applied never or twice instead of once: the paired change in loss
        once = yarn_mscale(factor)
        right, temperature = {}, {}
        for label, a in (("once", once), ("never", 1.0), ("twice", once**2)):
            entry = {"applied": label, "attention_factor": round(a, 6)}
            scaled = scale_rope(model, "yarn", factor, attention_factor=a, **YARN_BETAS)
            for length in (extended, top):
                losses = window_losses(scaled, length, tokens=s["tokens"])
                right.setdefault(length, losses)
                diff = (losses - right[length]).mean(1)
                lo, hi = bootstrap_interval(diff)
                entry[str(length)] = perplexity_interval(losses) | {
                    "loss_minus_once": {
                        "mean": round(float(diff.mean()), 5),
                        "ci95": [round(lo, 5), round(hi, 5)],
                    }
                }
            temperature[label] = entry
        # a stale dynamic-NTK table: after an input of the longest length, a window of the
        # training length keeps the effective factor factor * top / train_len - (factor - 1)
        stale = factor * top / n - (factor - 1)
        losses = window_losses(scale_rope(model, "ntk", stale), n, tokens=s["tokens"])
        return {
            "temperature": [temperature[k] for k in ("never", "once", "twice")],
            "stale_dynamic": {"effective_factor": stale, str(n): perplexity_interval(losses)},
            **_context_of(model, name, s),
        }

    return measure


scaling_mistakes = Study(
    "scaling_mistakes",
    r"""Two ways to get RoPE scaling wrong, measured on the text model ``rope`` at three seeds
    (chapter 14): YaRN's attention temperature applied never or twice instead of once, at the
    extended window (``factor × 64``) and the longest length, with the paired change in mean
    loss against the correct model (the same windows); and a stale dynamic-NTK table, which
    after an input of the longest length runs a window of the training length at the factor
    that length set.""",
    ("rope",),
    _mistakes,
    {"factor": 4.0, "longest": 512, "tokens": 65536},
    {
        "mode": "nonoverlapping",
        **_TEXT,
        "yarn": YARN_BETAS,
        "paired_interval": "95% percentile bootstrap over windows of the per-window mean difference",
        "context_used": _CONTEXT + " (the unscaled model, at its training length)",
    },
)

# --- chapter 01: what a trained position table holds, and extending it without training ------


def _dial_share(table: torch.Tensor) -> float:
    """The fraction of a position table's variance along its first principal direction
    (rows centred over positions)."""
    centred = table - table.mean(dim=0)
    singular = torch.linalg.svdvals(centred.double())
    return float(singular[0] ** 2 / (singular**2).sum())


def _with_table(model: TinyGPT, rows: torch.Tensor) -> TinyGPT:
    """``model`` with its learned position table replaced by ``rows`` (any number of rows)."""
    options = {"learned": {"max_positions": rows.shape[0]}}
    config = ModelConfig.from_dict({**model.config.to_dict(), "position_options": options})
    new = TinyGPT(config)
    new.load_state_dict(dict(model.state_dict(), **{"input_scheme.table.weight": rows}))
    return new.eval()


#: The training-free ways chapter 01 extends a 64-row table to 128 rows.
TABLE_EXTENSIONS = ("random", "copied", "interpolated")


def _extended_tables(old: torch.Tensor, random_seeds) -> dict:
    """``old`` ``[n, d]`` doubled to ``2n`` rows: new rows drawn at random (one table per seed
    of ``random_seeds``, at the trained rows' standard deviation), the old rows copied
    (slot t reads row t mod n, Longformer's copy), or the old table stretched by linear
    interpolation (slot t reads old position t(n-1)/(2n-1), ``align_corners=True``)."""
    n, d = old.shape
    out = {
        f"random {s}": torch.cat(
            [old, torch.randn(n, d, generator=torch.Generator().manual_seed(s)) * old.std()]
        )
        for s in random_seeds
    }
    out["copied"] = old[torch.arange(2 * n) % n]
    out["interpolated"] = F.interpolate(old.T[None], size=2 * n, mode="linear", align_corners=True)[
        0
    ].T
    return out


def _table_similarity(table: torch.Tensor, offsets=(1, 8, 32)) -> dict:
    """The cosine similarity of a position table's rows: its mean over all pairs ``offset``
    apart, and between the first eight rows and the last eight (``corner``)."""
    unit = F.normalize(table.detach().double(), dim=-1)
    sim = unit @ unit.T
    out = {f"offset {k}": round(float(sim.diagonal(k).mean()), 4) for k in offsets}
    out["corner"] = round(float(sim[:8, -8:].mean()), 4)
    return out


def _rows_moved(model: TinyGPT) -> dict:
    """How far training moved each row of a learned table from its start, and what is left
    once the mean and the main direction are taken out (chapter 01, "which rows moved").

    The start is rebuilt as training built it (:func:`pecourse.seed.seed_everything` with the
    run's seed, then a fresh model); ``start_cosine`` (mean cosine of trained and started
    rows) shows the rebuild is that run's start. ``corr_moved_dial``: the correlation of each
    row's displacement with its distance along the main direction; ``net``: the displacement
    with the mean displacement and its component along that direction removed, for row 0,
    rows 1-3, the middle rows 24-39, the late rows 56-62 and the last row."""
    from ..seed import seed_everything

    trained = model.input_scheme.table.weight.detach()
    seed_everything(model.checkpoint["train"]["seed"])
    start = TinyGPT(model.config).input_scheme.table.weight.detach()
    moved = (trained - start).norm(dim=-1)
    centred = trained - trained.mean(dim=0)
    dial = torch.linalg.svd(centred, full_matrices=False)[2][0]
    corr = torch.corrcoef(torch.stack([moved, (centred @ dial).abs()]))[0, 1]
    shift = (trained - start) - (trained - start).mean(dim=0)
    net = (shift - (shift @ dial)[:, None] * dial).norm(dim=-1)
    parts = {
        "0": net[0:1],
        "1-3": net[1:4],
        "24-39": net[24:40],
        "56-62": net[56:63],
        "63": net[63:64],
    }
    return {
        "start_cosine": round(float(F.cosine_similarity(trained, start, dim=-1).mean()), 4),
        "corr_moved_dial": round(float(corr), 4),
        "net": {k: round(float(v.mean()), 4) for k, v in parts.items()},
        "net_min_1_3": round(float(net[1:4].min()), 4),
    }


def _table_extension(s: dict):
    def measure(model, name):
        old = model.input_scheme.table.weight.detach()
        n = old.shape[0]
        at_n = window_losses(model, n, tokens=s["tokens"])
        out = {
            "dial_share": round(_dial_share(old), 4),
            "similarity": _table_similarity(old),
            "moved": _rows_moved(model),
            "trained": perplexity_interval(at_n),
        }
        past = {}  # per-window mean loss at the new slots n..2n-1, for the paired comparisons
        for label, rows in _extended_tables(old, s["random_seeds"]).items():
            variant = _with_table(model, rows)
            # the old rows kept: at n the variant *is* the trained model
            short = (
                at_n
                if torch.equal(rows[:n], old)
                else window_losses(variant, n, tokens=s["tokens"])
            )
            long = window_losses(variant, 2 * n, tokens=s["tokens"])
            past[label] = long[:, n:].mean(1)
            cell = {str(n): perplexity_interval(short), str(2 * n): perplexity_interval(long)}
            cell["rise"] = round(cell[str(2 * n)]["perplexity"] / out["trained"]["perplexity"], 4)
            cell["new_slots"] = band_losses(long, [(n, 2 * n)])[f"{n}-{2 * n}"]
            out[label] = cell
        copied = {}
        for seed in s["random_seeds"]:
            diff = past["copied"] - past[f"random {seed}"]
            lo, hi = bootstrap_interval(diff)
            copied[str(seed)] = {
                "mean": round(float(diff.mean()), 4),
                "ci95": [round(lo, 4), round(hi, 4)],
            }
        out["copied_minus_random"] = copied
        return {**out, **_context_of(model, name, s)}

    return measure


table_extension = Study(
    "table_extension",
    r"""Chapter 01: the learned position table of the text model at three seeds, and three
    ways to double it without training.

    For each seed of ``learned`` (4 layers, ``d = 64``, a 64-row table, 800 steps on
    64-character windows; seed 0 the shipped checkpoint): the share of the table's variance
    along its first principal direction (``dial_share``), the similarity of its rows
    (:func:`_table_similarity`), how far training moved each row
    net of that direction (:func:`_rows_moved`), and perplexity at 64 and 128
    characters with the table extended to 128 rows by random new rows (one table per seed of
    ``random_seeds``), copied rows (Beltagy et al. 2020, arXiv:2004.05150) or interpolated
    rows, each with its interval, its rise from the trained model's perplexity at 64, the
    mean loss at the new slots 64-127, and the per-window paired difference of that loss
    between copied and random rows.""",
    ("learned",),
    _table_extension,
    {"tokens": 65536, "random_seeds": (3, 4, 5)},
    {
        "mode": "nonoverlapping",
        **_TEXT,
        "extensions": {
            "random": "rows 64-127 drawn from N(0, std of the trained rows), one table per seed",
            "copied": "slot t reads trained row t mod 64",
            "interpolated": "the table stretched to 128 rows, linear, align_corners=True",
        },
        "paired_interval": "95% percentile bootstrap over windows of the per-window mean difference",
        "context_used": _CONTEXT + " (at the training length)",
    },
)


def _table_finetune(s: dict):
    from .train import train

    def measure(model, name):
        seed = model.checkpoint["train"]["seed"]  # the data of every fine-tune of this seed
        old = model.input_scheme.table.weight.detach()
        n, out = old.shape[0], {}
        tables = _extended_tables(old, s["random_seeds"])
        with tempfile.TemporaryDirectory() as folder:
            for label, rows in tables.items():
                start = Path(folder) / label.replace(" ", "_")
                extended = _with_table(model, rows)
                save_checkpoint(extended, start)
                config = ModelConfig.from_dict({**extended.config.to_dict(), "train_len": 2 * n})
                options = {**s["train"], "seed": seed, "init_from": str(start)}
                tuned, rec = train(config, TrainConfig(**options), progress=False, evaluate=False)
                cell = {
                    str(length): perplexity_interval(
                        window_losses(tuned, length, tokens=s["tokens"])
                    )
                    for length in (n, 2 * n)
                }
                used = context_used(context_losses(tuned, tokens=s["tokens"]))
                cell["context_used"] = used["context_used"]
                cell["loss_curve"] = rec["loss_curve"]
                out[label] = cell
        return {**out, **_context_of(model, name, s)}

    return measure


table_finetune = Study(
    "table_finetune",
    r"""Chapter 01: the extended tables of :data:`table_extension`, each followed by a short
    fine-tune at the new length (as Longformer did after copying, Beltagy et al. 2020).

    For each seed of ``learned`` (seed 0 the shipped checkpoint): the table doubled to 128 rows
    by random new rows (seed ``random_seeds``), copied rows or interpolated rows, then the whole
    model trained ``train["steps"]`` steps on 128-character windows (the same batches for the
    three tables of a seed: the data seed is the model's). Perplexity at 64 and 128 with its
    interval, and the context each fine-tuned model uses at 128.""",
    ("learned",),
    _table_finetune,
    {
        "tokens": 65536,
        "random_seeds": (3,),
        "train": {"steps": 100, "lr": 1e-3, "warmup": 10, "batch_size": 8, "data": "text"},
    },
    {
        "mode": "nonoverlapping",
        **_TEXT,
        "extensions": "as table_extension; each then fine-tuned at 128 (train: 8 x 128 characters "
        "a step, 100 steps, peak lr 1e-3 after 10 warm-up steps, cosine decay)",
        "context_used": _CONTEXT + " (the model as trained at 64; each fine-tune at 128)",
    },
)

# --- chapter 03: each ALiBi head's window on text, against its slope's prior -------------------


@torch.no_grad()
def _attention_by_distance(model: TinyGPT, windows: torch.Tensor, first: int) -> torch.Tensor:
    """``[windows, layers, heads, length]``: for each window, the attention the queries
    ``first..length-1`` put on keys at each distance back, averaged over those queries."""
    from functools import partial

    captured = {}

    def keep(module, args, output, layer):
        captured[layer] = type(module).forward(module, args[0], args[1], return_probs=True)[1]

    n = windows.shape[1]
    queries = torch.arange(first, n)
    back = queries[:, None] - torch.arange(n)[None, :]  # distance of every key; < 0: future
    visible = back >= 0
    out = []
    hooks = [
        b.attn.register_forward_hook(partial(keep, layer=i)) for i, b in enumerate(model.blocks)
    ]
    try:
        for i in range(0, len(windows), 16):
            model(windows[i : i + 16])
            per_layer = []
            for layer in range(len(model.blocks)):
                w = captured[layer][:, :, first:].double()  # [batch, heads, queries, keys]
                hist = torch.zeros(*w.shape[:2], n, dtype=torch.float64)
                hist.index_add_(2, back[visible], w[:, :, visible])
                per_layer.append(hist / len(queries))
            out.append(torch.stack(per_layer, 1))
    finally:
        for h in hooks:
            h.remove()
    return torch.cat(out)


def _reach(by_distance: torch.Tensor, share: float) -> torch.Tensor:
    """The smallest distance holding ``share`` of the attention, for each row of
    ``[..., distances]``."""
    return (by_distance.cumsum(-1) >= share - 1e-9).double().argmax(-1)


def _window_interval(hist: torch.Tensor, share: float) -> dict:
    """The window (:func:`_reach`) of the attention averaged over windows ``[windows,
    distances]``, with a percentile-bootstrap interval over windows (taken outward: a
    distance is a whole number)."""
    from .evaluate import BOOTSTRAP_SEED, LEVEL, RESAMPLES

    w = hist.shape[0]
    g = torch.Generator().manual_seed(BOOTSTRAP_SEED)
    idx = torch.randint(0, w, (RESAMPLES, w), generator=g)
    counts = torch.zeros(RESAMPLES, w, dtype=torch.float64).scatter_add_(
        1, idx, torch.ones(RESAMPLES, w, dtype=torch.float64)
    )
    reach = _reach(counts @ hist / w, share).double()
    lo = torch.quantile(reach, (1 - LEVEL) / 2, interpolation="lower")
    hi = torch.quantile(reach, (1 + LEVEL) / 2, interpolation="higher")
    return {"distance": int(_reach(hist.mean(0), share)), "ci95": [int(lo), int(hi)]}


def _alibi_windows(s: dict):
    import copy

    from .data import corpus

    def measure(model, name):
        n, first = s["length"], s["length"] - s["queries"]
        windows = corpus("validation")[: (s["tokens"] // n) * n].view(-1, n)
        hist = _attention_by_distance(model, windows, first)
        queries = torch.arange(first, n)
        back = (queries[:, None] - torch.arange(n)[None, :]).double()
        slopes_ = model.blocks[0].attn.scheme.slopes.double()
        heads = {}
        for h, m in enumerate(slopes_.tolist()):
            prior = torch.exp(-m * back.clamp(min=0)).masked_fill(back < 0, 0)
            prior = prior / prior.sum(-1, keepdim=True)  # equal content: the bias alone
            by_distance = torch.zeros(n, dtype=torch.float64)
            by_distance.index_add_(0, back[back >= 0].long(), prior[back >= 0])
            by_distance /= len(queries)
            cell = {"slope": m}
            for share in s["shares"]:
                cell[f"prior_{share:g}"] = int(_reach(by_distance, share))
            for layer in range(hist.shape[1]):
                cell[f"layer {layer}"] = {
                    f"{share:g}": _window_interval(hist[:, layer, h], share)
                    for share in s["shares"]
                }
            heads[f"1/{1 / m:.0f}"] = cell
        swapped = {}
        for label, slope in (
            ("as trained", None),
            ("all steepest", max(slopes_)),
            ("all shallowest", min(slopes_)),
        ):
            variant = copy.deepcopy(model)
            if slope is not None:
                for block in variant.blocks:
                    block.attn.scheme.slopes = torch.full_like(
                        block.attn.scheme.slopes, float(slope)
                    )
            swapped[label] = perplexity_interval(
                window_losses(variant, model.config.train_len, tokens=s["tokens"])
            )
        return {
            "heads": heads,
            "slope_swap": swapped,
            "attention_windows": len(windows),
            **_context_of(model, name, s),
        }

    return measure


alibi_windows = Study(
    "alibi_windows",
    r"""Chapter 03: does each trained ALiBi head spend its attention on text as its slope alone
    would? At three seeds of the text model ``alibi`` (4 layers of 4 heads, slopes 1/4, 1/16,
    1/64, 1/256; 800 steps on 64-character windows; seed 0 the shipped checkpoint).

    The validation characters cut into windows of ``length``; for the last ``queries``
    queries of each window, the attention each head puts on keys at each distance back,
    averaged over those queries. Each head's window is the distance within which the average
    holds each share of ``shares``, with a percentile-bootstrap interval over windows, beside
    the prior: the same with equal content (the bias alone). Also the perplexity at the
    training length with every slope set to the steepest or to the shallowest
    (Press et al. 2022, arXiv:2108.12409, §3, choose a geometric set).""",
    ("alibi",),
    _alibi_windows,
    {"length": 256, "queries": 64, "tokens": 65536, "shares": (0.5, 0.9)},
    {
        **_TEXT,
        "window": "the smallest distance back holding the share of the attention averaged over "
        "the queries and windows; interval: 95% percentile bootstrap over windows, 2000 "
        "resamples, taken outward",
        "slope_swap": "every head of every layer given one slope, no retraining; perplexity at "
        "the training length, non-overlapping windows",
        "context_used": _CONTEXT + " (at the training length)",
    },
)


# --- chapter 07: what hurts a T5-bias model at 512: the far buckets or the far keys ----------


def _t5_far_keys(s: dict):
    import copy

    from ..positions.relative import t5_bucket

    def measure(model, name):
        scheme = model.blocks[0].attn.scheme
        n, long = model.config.train_len, s["length"]

        def bucket(d):  # the causal bucket of keys d back (relative position key - query = -d)
            return t5_bucket(
                -torch.as_tensor(d),
                bidirectional=False,
                num_buckets=scheme.num_buckets,
                max_distance=scheme.max_distance,
            )

        last = int(bucket(n - 1))  # the farthest bucket training reached
        mid = bucket(torch.arange(*s["mid"]))
        tables = [b.attn.scheme.table.weight.detach() for b in model.blocks]

        def mid_mean(w):
            w[last + 1 :] = w[mid].mean(0)

        def copy_last(w):
            w[last + 1 :] = w[last]

        def mask_far(w):
            w[last + 1 :] = -1e4

        base = window_losses(model, long, tokens=s["tokens"])
        out = {
            "last_trained_bucket": last,
            "bonus_left_by_copying": round(
                min(float((w[last] - w[mid].mean(0)).min()) for w in tables), 4
            ),
            str(n): perplexity_interval(window_losses(model, n, tokens=s["tokens"])),
            str(long): perplexity_interval(base),
        }
        for label, edit in (
            ("far buckets = last trained", copy_last),
            ("far buckets = mid mean", mid_mean),
            ("far keys masked", mask_far),
        ):
            variant = copy.deepcopy(model)
            with torch.no_grad():
                for block in variant.blocks:
                    edit(block.attn.scheme.table.weight)
            losses = window_losses(variant, long, tokens=s["tokens"])
            change = (losses - base).mean(1)
            lo, hi = bootstrap_interval(change)
            out[label] = {
                str(long): perplexity_interval(losses),
                "change": {
                    "mean": round(float(change.mean()), 4),
                    "ci95": [round(lo, 4), round(hi, 4)],
                },
            }
        return {**out, **_context_of(model, name, s)}

    return measure


t5_far_keys = Study(
    "t5_far_keys",
    r"""Chapter 07: what hurts a T5-bias model on inputs eight times its training length?

    At three seeds of ``t5`` (4 layers of 4 heads, a causal table of 32 buckets with
    max_distance 128 in every layer; 800 steps on 64-character windows; seed 0 the shipped
    checkpoint), the buckets past the last one training reached (distances beyond 66 at
    64) hold their untrained values, near zero: a bonus over the mild penalty the heads learned
    at middle distances. Three edits, without retraining, scored at ``length`` on the same
    windows as the model as trained (paired per window): the far buckets set to the last
    trained bucket, set to each head's mean over the distances ``mid`` (no bonus left), or
    masked (no far keys at all).""",
    ("t5",),
    _t5_far_keys,
    {"length": 512, "tokens": 65536, "mid": (20, 61)},
    {
        "mode": "nonoverlapping",
        **_TEXT,
        "mid": "distances mid[0] .. mid[1] - 1: each head's mean bias over them",
        "paired_interval": "95% percentile bootstrap over windows of the per-window mean difference",
        "context_used": _CONTEXT + " (at the training length)",
    },
)


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
    "loss_by_position": loss_by_position,
    "position_shift": position_shift,
    "rope_base": rope_base,
    "scaling_mistakes": scaling_mistakes,
    "table_extension": table_extension,
    "table_finetune": table_finetune,
    "alibi_windows": alibi_windows,
    "t5_far_keys": t5_far_keys,
}


def record(result: dict, folder=None) -> Path:
    """Write a study's recording to ``folder/<name>.json`` (default ``pecourse/lab/results``),
    validated by :func:`pecourse.lab.results.write`."""
    if not isinstance(result, dict) or "name" not in result:
        raise TypeError("result must be a study's dict, with a 'name'")
    check_choice("result['name']", result["name"], tuple(STUDIES))
    return write(result, folder)


def load(name: str) -> dict:
    """A recorded study (``pecourse/lab/results/<name>.json``) as a dict: the one loader,
    :func:`pecourse.lab.results.recorded`, refusing names that are not studies."""
    check_choice("name", name, tuple(STUDIES))
    return recorded(name)


def main(argv=None) -> int:
    """``python -m pecourse.lab.studies run NAME … [--out FOLDER] [--log-dir FOLDER]``.

    Each study draws a bar over its models and logs every finished model with its CPU time;
    with ``--log-dir`` a study that trains seeds keeps a log there and an interrupted run
    resumes from it (``make results`` passes one). The CPU time of each study and of all of
    them is logged at the end.
    """
    import argparse
    import inspect

    global PROGRESS
    p = argparse.ArgumentParser(prog="python -m pecourse.lab.studies")
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
