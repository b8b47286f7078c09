r"""Training-free length extension at inference: ReRoPE, leaky ReRoPE, Self-Extend.

A RoPE model only knows the offsets ``Δ = m - n`` (query ``m``, key ``n``) it met in
training, ``0 ≤ Δ < L``. These methods keep nearby offsets exact and *remap* the far ones
into the trained range, so a model can read past ``L`` without fine-tuning:

* **ReRoPE** (Jianlin Su 2023, "Rectified Rotary Position Embeddings",
  github.com/bojone/rerope; blog post https://kexue.fm/archives/9708): inside a window
  ``w`` the offset is exact; beyond it every offset is clipped to ``w``,
  ``Δ' = min(Δ, w)``.
* **Leaky ReRoPE** (same post and repository): beyond ``w`` the offset keeps growing, but
  with slope ``1/ratio``: ``Δ' = w + (Δ - w)/ratio`` (``ratio → ∞`` is ReRoPE,
  ``ratio = 1`` is RoPE). The reference patches also multiply each query by
  ``max(1, log(m+1)/log L)`` (log-n scaling); that is left out here.
* **Self-Extend** (Jin et al. 2024, "LLM Maybe LongLM: Self-Extend LLM Context Window
  Without Tuning", arXiv:2401.01325): neighbour attention inside ``w``; beyond it,
  *grouped* positions ``⌊p/G⌋`` for both query and key, with the query shifted by
  ``w - ⌊w/G⌋`` so the two regions meet: ``Δ' = ⌊m/G⌋ - ⌊n/G⌋ + w - ⌊w/G⌋`` (≈ ``w`` at
  ``Δ = w``). (The reference code's full-sequence path shifts by ``w - w/G`` with true
  division; the two agree when ``G`` divides ``w``, as in every published setting.)

RoPE cannot express such a remapped offset with *one* rotation per token (the map is not
``f(m) - g(n)`` in the window and outside it at once), so every method computes two
score matrices — the ordinary rotated one for the window and a second one from
re-positioned queries and keys for the rest — and merges them with a mask on ``Δ``. For
keys *after* the query (``causal=False``) the remap is mirrored: ``Δ' = -f(-Δ)``.

**Design choice.** The pure functions :func:`rerope_scores`, :func:`leaky_rerope_scores`
and :func:`self_extend_scores` return the merged logits ``q'·k'/√d``, ``[b, h, Lq, Lk]``.
The schemes (:class:`ReRoPE`, :class:`LeakyReRoPE`, :class:`SelfExtend`) plug them into
:func:`pecourse.attention.attention` without a special attention function: they leave
``rotate`` alone (so they use only the scores place), and ``score_bias`` returns
``merged - q·kᵀ/√d``, so that the logits
attention forms (``q·kᵀ/√d + bias``) are the merged ones (to float round-off of the
plain logits). This keeps one attention function for the whole course, at the cost of one
extra score matrix; a production kernel would fuse the two passes instead. Every function
and scheme here takes ``backend=`` (:class:`~pecourse.positions.rotary.Rotary`), which
builds the tables and rotates.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from .._validate import check_base, check_choice, check_float, check_int, check_positions
from ..attention import PositionScheme, relative_offsets
from .rotary import (
    PAIRINGS,
    REFERENCE,
    Rotary,
    _check_backend,
    _check_rope_args,
    compute_dtype,
)

__all__ = [
    "METHODS",
    "effective_offsets",
    "rerope_scores",
    "leaky_rerope_scores",
    "self_extend_scores",
    "ReRoPE",
    "LeakyReRoPE",
    "SelfExtend",
]

#: The remapping methods this module implements.
METHODS = ("rerope", "leaky_rerope", "self_extend")


@dataclass(frozen=True)
class _Remap:
    """A method and its settings, checked: offsets below ``window`` stay exact, and the far
    ones are ``Δ' = g(m) + shift - g(n)`` (:meth:`position_map`)."""

    method: str
    window: int
    ratio: float | None = None
    group_size: int | None = None

    def __post_init__(self):
        check_choice("method", self.method, METHODS)
        object.__setattr__(self, "window", check_int("window", self.window, minimum=1))
        if self.method == "leaky_rerope":
            object.__setattr__(self, "ratio", check_float("ratio", self.ratio, minimum=1.0))
        if self.method == "self_extend":
            group_size = check_int("group_size", self.group_size, minimum=1)
            object.__setattr__(self, "group_size", group_size)

    def position_map(self) -> tuple[Callable[[Tensor], Tensor], float]:
        r"""``(g, shift)``. ReRoPE: ``g = 0``, shift ``w``; leaky: ``g(p) = p/ratio``, shift
        ``w(1 - 1/ratio)``; Self-Extend: ``g(p) = ⌊p/G⌋``, shift ``w - ⌊w/G⌋``."""
        w = self.window
        if self.method == "rerope":
            return (lambda p: torch.zeros_like(p, dtype=torch.float64)), float(w)
        if self.method == "leaky_rerope":
            return (lambda p: p.to(torch.float64) / self.ratio), w * (1 - 1 / self.ratio)
        g = self.group_size
        return (
            lambda p: torch.div(p, g, rounding_mode="floor").to(torch.float64),
            float(w - w // g),
        )


def _offsets(q_positions: Tensor, k_positions: Tensor) -> Tensor:
    return -relative_offsets(q_positions, k_positions)  # Δ = i - j, ReRoPE's convention


def effective_offsets(
    q_positions: Tensor,
    k_positions: Tensor,
    *,
    method: str,
    window: int,
    ratio: float | None = None,
    group_size: int | None = None,
) -> Tensor:
    r"""The offset ``Δ'(m, n)`` each method makes the model see, float64 ``[..., Lq, Lk]``.

    ``Δ' = Δ`` for ``|Δ| < w``; beyond the window ReRoPE gives ``±w``, leaky ReRoPE
    ``±(w + (|Δ| - w)/ratio)``, Self-Extend ``⌊m/G⌋ - ⌊n/G⌋ ± (w - ⌊w/G⌋)``. This is what the
    merged scores of :func:`rerope_scores` and friends realise; plot it to see the remap.
    Positions are integer ``[L]`` or ``[batch, L]``.
    """
    remap = _Remap(method, window, ratio, group_size)
    q_positions = check_positions("q_positions", q_positions)
    k_positions = check_positions("k_positions", k_positions)
    g, shift = remap.position_map()
    delta = _offsets(q_positions, k_positions).to(torch.float64)
    far = _offsets(g(q_positions), g(k_positions))
    return torch.where(
        delta >= window, far + shift, torch.where(delta <= -window, far - shift, delta)
    )


def _expand_kv(k: Tensor, heads: int) -> Tensor:
    if heads % k.shape[1]:
        raise ValueError(
            f"query heads ({heads}) must be a multiple of key heads ({k.shape[1]}), got k "
            f"shaped {tuple(k.shape)}"
        )
    return k.repeat_interleave(heads // k.shape[1], dim=1) if heads != k.shape[1] else k


def _merged_logits(
    q: Tensor,
    k: Tensor,
    q_positions: Tensor,
    k_positions: Tensor,
    remap: _Remap,
    *,
    base: float,
    pairing: str,
    inv_freq: Tensor | None,
    backend: Rotary,
) -> Tensor:
    """Check, then ``where(|Δ| < w, near, far)`` logits divided by √d.

    Computed in float32 (float64 for float64 inputs); the public functions cast the result
    to ``q.dtype``, the schemes keep it to form their bias without a second rounding.
    """
    q_positions, d, inv_freq = _check_rope_args(
        q, q_positions, pairing=pairing, inv_freq=inv_freq, base=base, name="q"
    )
    k_positions, d_k, _ = _check_rope_args(k, k_positions, pairing=pairing, base=base, name="k")
    if k.shape[0] != q.shape[0] or d_k != d:
        raise ValueError(
            f"k must be [batch={q.shape[0]}, kv_heads, Lk, head_dim={d}] to match q, got "
            f"{tuple(k.shape)}"
        )
    backend = _check_backend(backend)
    k = _expand_kv(k, q.shape[1])
    # bf16/fp16 inputs are rotated and multiplied in float32 (docs/architecture.md).
    q, k = q.to(compute_dtype(q)), k.to(compute_dtype(q))

    def rotated_scores(q_pos: Tensor, k_pos: Tensor) -> Tensor:
        # RoPE at (possibly fractional) positions, with the rotary core's float64 angles.
        tables = [backend.cos_sin(p, inv_freq, 1.0, dtype=q.dtype) for p in (q_pos, k_pos)]
        qr = backend.rotate_pairs(q, *tables[0], pairing=pairing)
        kr = backend.rotate_pairs(k, *tables[1], pairing=pairing)
        return qr @ kr.transpose(-1, -2)

    delta = _offsets(q_positions, k_positions)
    delta = delta[None, None] if delta.ndim == 2 else delta[:, None]  # -> [b|1, 1, Lq, Lk]
    g, shift = remap.position_map()
    gq, gk = g(q_positions), g(k_positions)
    scores = rotated_scores(q_positions, k_positions)  # near: exact offsets
    past = delta >= remap.window
    if past.any():  # keys far behind the query: Δ' = g(m) + shift - g(n)
        scores = torch.where(past, rotated_scores(gq + shift, gk), scores)
    future = delta <= -remap.window
    if future.any():  # keys far ahead (non-causal only): Δ' = g(m) - g(n) - shift
        scores = torch.where(future, rotated_scores(gq, gk + shift), scores)
    return scores / math.sqrt(d)


def rerope_scores(
    q: Tensor,
    k: Tensor,
    q_positions: Tensor,
    k_positions: Tensor,
    *,
    window: int,
    base: float = 10000.0,
    pairing: str = "half",
    inv_freq: Tensor | None = None,
    backend: Rotary = REFERENCE,
) -> Tensor:
    r"""ReRoPE logits (Su 2023): exact RoPE for ``|Δ| < window``, offset clipped to
    ``±window`` beyond.

    ``q`` ``[b, h, Lq, d]``, ``k`` ``[b, h_kv, Lk, d]`` (unrotated), positions integer
    ``[L]`` or ``[b, L]``. Returns ``q'·k'/√d`` ``[b, h, Lq, Lk]`` in ``q``'s dtype, before
    any mask.
    """
    remap = _Remap("rerope", window)
    kw = dict(base=base, pairing=pairing, inv_freq=inv_freq, backend=backend)
    return _merged_logits(q, k, q_positions, k_positions, remap, **kw).to(q.dtype)


def leaky_rerope_scores(
    q: Tensor,
    k: Tensor,
    q_positions: Tensor,
    k_positions: Tensor,
    *,
    window: int,
    ratio: float,
    base: float = 10000.0,
    pairing: str = "half",
    inv_freq: Tensor | None = None,
    backend: Rotary = REFERENCE,
) -> Tensor:
    r"""Leaky ReRoPE logits (Su 2023): beyond ``window`` offsets grow with slope
    ``1/ratio``, ``Δ' = w + (Δ - w)/ratio`` — fractional positions, which is why the angle
    table takes float positions internally.

    Shapes as :func:`rerope_scores`.
    """
    remap = _Remap("leaky_rerope", window, ratio=ratio)
    kw = dict(base=base, pairing=pairing, inv_freq=inv_freq, backend=backend)
    return _merged_logits(q, k, q_positions, k_positions, remap, **kw).to(q.dtype)


def self_extend_scores(
    q: Tensor,
    k: Tensor,
    q_positions: Tensor,
    k_positions: Tensor,
    *,
    window: int,
    group_size: int,
    base: float = 10000.0,
    pairing: str = "half",
    inv_freq: Tensor | None = None,
    backend: Rotary = REFERENCE,
) -> Tensor:
    r"""Self-Extend logits (Jin et al. 2024, arXiv:2401.01325, and its pseudocode).

    Neighbour attention (exact RoPE) for ``Δ < window``; grouped attention beyond, with key
    position ``⌊n/G⌋`` and query position ``⌊m/G⌋ + window - ⌊window/G⌋``. The largest
    offset over ``L`` tokens becomes about ``L/G + window``, so a model trained on ``L₀``
    reads up to ``G·(L₀ - window) + window`` tokens (the authors' rule for choosing ``G``).
    Shapes as :func:`rerope_scores`.
    """
    remap = _Remap("self_extend", window, group_size=group_size)
    kw = dict(base=base, pairing=pairing, inv_freq=inv_freq, backend=backend)
    return _merged_logits(q, k, q_positions, k_positions, remap, **kw).to(q.dtype)


class _RemappedRoPE(PositionScheme):
    """Shared body of the three schemes: no ``rotate``, the merged logits as a bias."""

    method = ""

    def __init__(
        self, window, *, ratio=None, group_size=None, base=10000.0, pairing="half", backend
    ):
        super().__init__()
        self.remap = _Remap(self.method, window, ratio, group_size)
        self.base = check_base(base)
        self.pairing = check_choice("pairing", pairing, PAIRINGS)
        self.backend = _check_backend(backend)

    def score_bias(self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        # attention() adds this to q·kᵀ/√d of the *unrotated* q, k (rotate is the identity),
        # so subtracting that term leaves exactly the merged logits.
        kw = dict(base=self.base, pairing=self.pairing, inv_freq=None, backend=self.backend)
        merged = _merged_logits(q, k, q_positions, k_positions, self.remap, **kw)
        # In float32 for half inputs: attention() promotes its logits to the bias's dtype,
        # so the merged logits come back with only the rounding of its own q·kᵀ.
        plain = q.to(merged.dtype) @ k.to(merged.dtype).transpose(-1, -2)
        return merged - plain / math.sqrt(q.shape[-1])

    def extra_repr(self) -> str:
        r = self.remap
        extra = f", ratio={r.ratio}" if r.ratio is not None else ""
        extra += f", group_size={r.group_size}" if r.group_size is not None else ""
        return f"window={r.window}{extra}, base={self.base}, pairing={self.pairing!r}"


class ReRoPE(_RemappedRoPE):
    """ReRoPE as a scheme; see :func:`rerope_scores`."""

    method = "rerope"

    def __init__(self, window: int, *, base=10000.0, pairing="half", backend=REFERENCE):
        super().__init__(window, base=base, pairing=pairing, backend=backend)


class LeakyReRoPE(_RemappedRoPE):
    """Leaky ReRoPE as a scheme; see :func:`leaky_rerope_scores`."""

    method = "leaky_rerope"

    def __init__(
        self, window: int, ratio: float, *, base=10000.0, pairing="half", backend=REFERENCE
    ):
        super().__init__(window, ratio=ratio, base=base, pairing=pairing, backend=backend)


class SelfExtend(_RemappedRoPE):
    """Self-Extend as a scheme (arXiv:2401.01325); see :func:`self_extend_scores`."""

    method = "self_extend"

    def __init__(
        self, window: int, group_size: int, *, base=10000.0, pairing="half", backend=REFERENCE
    ):
        super().__init__(window, group_size=group_size, base=base, pairing=pairing, backend=backend)
