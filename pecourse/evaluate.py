r"""Measuring what a trained tiny model does with position.

* :func:`perplexity_by_length` — validation perplexity at several context lengths, either
  on non-overlapping windows (Press et al. 2022, arXiv:2108.12409, the extrapolation tables)
  or with a sliding window that scores only the last ``stride`` tokens of each window
  (their appendix B: every scored token then has a long context, yet the model may not use it).
* :func:`loss_by_position` — mean loss at each position of a window.
* :func:`needle_accuracy` — passkey retrieval accuracy by needle distance;
  :func:`effective_context_length` — the longest distance at which it stays above a threshold.
* :func:`scale_rope` — training-free RoPE scaling at evaluation time (PI, NTK, YaRN,
  dynamic NTK) on a copy of the model.
* :func:`task_accuracy` — accuracy on a synthetic task's answer tokens.

Everything runs under ``torch.no_grad`` on small, fixed evaluation sets, so a measurement
takes seconds on a CPU and is the same on every run.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from ._validate import check_choice, check_float, check_int
from .data import corpus, passkey_batch, task_batch
from .model import TinyGPT, replace_rope

__all__ = [
    "validation_loss",
    "perplexity_by_length",
    "loss_by_position",
    "needle_accuracy",
    "effective_context_length",
    "scale_rope",
    "task_accuracy",
    "ROPE_SCALINGS",
]


def _check_model(model) -> TinyGPT:
    if not isinstance(model, TinyGPT):
        raise TypeError(f"model must be a pecourse.model.TinyGPT, got {type(model).__name__}")
    return model


def _lengths(lengths) -> list[int]:
    if isinstance(lengths, int):
        lengths = [lengths]
    return [check_int("length", n, minimum=2) for n in lengths]


@torch.no_grad()
def _sum_loss(
    model, windows: torch.Tensor, score_from: int, batch_size: int, positions=None
) -> tuple[float, int]:
    """Summed next-token loss over positions ``score_from..`` of each window ``[n, L+1]``."""
    total, count = 0.0, 0
    ids = positions(windows.shape[1] - 1) if callable(positions) else positions
    for i in range(0, len(windows), batch_size):
        w = windows[i : i + batch_size]
        logits, _ = model(w[:, :-1], ids)
        lp = F.cross_entropy(
            logits[:, score_from:].flatten(0, 1).float(),
            w[:, 1 + score_from :].flatten(),
            reduction="sum",
        )
        total += float(lp)
        count += w[:, 1 + score_from :].numel()
    return total, count


def validation_loss(
    model, length: int, *, tokens: int = 8192, batch_size: int = 8, positions=None
) -> float:
    """Mean next-character loss (nats) on non-overlapping validation windows of ``length``.

    ``positions``: position ids ``[length]`` for every window, or a function of the length
    returning them (default ``0..length-1``).
    """
    _check_model(model)
    length = check_int("length", length, minimum=2)
    tokens = check_int("tokens", tokens, minimum=length)
    data = corpus("validation")[: tokens + 1]
    n = tokens // length
    windows = torch.stack([data[i * length : i * length + length + 1] for i in range(n)])
    total, count = _sum_loss(model, windows, 0, batch_size, positions)
    return total / count


def perplexity_by_length(
    model,
    lengths,
    *,
    mode: str = "nonoverlapping",
    stride: int | None = None,
    tokens: int = 8192,
    batch_size: int = 8,
    positions=None,
) -> dict[int, float]:
    r"""``{length: perplexity}`` on the validation text (``exp`` of the mean loss in nats).

    ``mode="nonoverlapping"``: the first ``tokens`` validation characters cut into windows
    of ``length`` (Press et al. 2022, arXiv:2108.12409, Tables 2–3); every position
    ``0..length-1`` is scored, so early tokens with little context are included.
    ``mode="sliding"``: windows of ``length`` every ``stride`` characters (default
    ``length // 4``), scoring only each window's last ``stride`` tokens, so every scored
    token sees at least ``length - stride`` characters of context (their appendix B).
    The same number of tokens is scored at every length (in sliding mode the scored span
    starts at ``length - stride``, so it shifts with the length). ``positions`` (a function of the window
    length returning ids ``[length]``) replaces the default ids ``0..length-1``, e.g. to
    evaluate a model trained with randomized positions the way it was trained. A model
    with a learned table refuses a length beyond it (the ``ValueError`` names
    ``max_positions``).
    """
    _check_model(model)
    check_choice("mode", mode, ("nonoverlapping", "sliding"))
    tokens = check_int("tokens", tokens, minimum=2)
    out = {}
    for length in _lengths(lengths):
        if mode == "nonoverlapping":
            out[length] = math.exp(
                validation_loss(
                    model,
                    length,
                    tokens=max(tokens, length),
                    batch_size=batch_size,
                    positions=positions,
                )
            )
            continue
        s = check_int(
            "stride",
            stride if stride is not None else max(1, length // 4),
            minimum=1,
            maximum=length,
        )
        data = corpus("validation")[: tokens + length + 1]
        starts = range(0, tokens - s + 1, s)  # window ends at start+length, scores the last s
        windows = torch.stack([data[a : a + length + 1] for a in starts])
        total, count = _sum_loss(model, windows, length - s, batch_size, positions)
        out[length] = math.exp(total / count)
    return out


@torch.no_grad()
def loss_by_position(
    model, length: int, *, tokens: int = 8192, batch_size: int = 8
) -> torch.Tensor:
    """Mean loss (nats) at each position ``0..length-1`` of non-overlapping validation windows."""
    _check_model(model)
    length = check_int("length", length, minimum=2)
    tokens = check_int("tokens", tokens, minimum=length)
    data = corpus("validation")[: tokens + 1]
    windows = torch.stack(
        [data[i * length : i * length + length + 1] for i in range(tokens // length)]
    )
    total = torch.zeros(length)
    for i in range(0, len(windows), batch_size):
        w = windows[i : i + batch_size]
        logits, _ = model(w[:, :-1])
        lp = F.cross_entropy(logits.transpose(1, 2).float(), w[:, 1:], reduction="none")
        total += lp.sum(0)
    return total / len(windows)


@torch.no_grad()
def needle_accuracy(
    model,
    distances,
    *,
    length: int | None = None,
    samples: int = 32,
    key_len: int = 4,
    seed: int = 1234,
    batch_size: int = 16,
) -> dict[int, float]:
    """``{distance: accuracy}`` on passkey retrieval (:func:`pecourse.data.passkey_batch`).

    A sample counts as correct when every key digit after the final cue is the argmax
    prediction. ``length`` is the sequence length (default: just long enough for each
    distance, plus 8 characters of text before the needle). Validation text is the filler;
    the seed is fixed, so the numbers are reproducible.
    """
    _check_model(model)
    samples = check_int("samples", samples, minimum=1)
    out = {}
    for d in _lengths(distances):
        n = check_int("length", length, minimum=2) if length is not None else d + key_len + 8
        batch = passkey_batch(
            samples, n, distance=d, key_len=key_len, split="validation", seed=seed
        )
        correct = 0
        for i in range(0, samples, batch_size):
            x, y, a = (t[i : i + batch_size] for t in (batch.inputs, batch.targets, batch.answer))
            pred = model(x)[0].argmax(-1)
            ok = ((pred == y) | ~a).all(dim=1)
            correct += int(ok.sum())
        out[d] = correct / samples
    return out


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
