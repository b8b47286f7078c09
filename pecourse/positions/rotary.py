r"""The rotary core: RoPE's angle table and its rotation. All RoPE arithmetic lives here.

Every rotary scheme in the course (RoPE and its scalings, xPos, axial RoPE, M-RoPE, ReRoPE,
VO-RoPE) does the same two steps (Su et al. 2021, arXiv:2104.09864, eq. 34):

1. :func:`cos_sin` builds the angle table: ``cos(m θ_i)`` and ``sin(m θ_i)`` for every
   position ``m`` and pair ``i``;
2. :func:`rotate_pairs` turns every pair ``(x1, x2)`` of a query, key or value by those angles:
   ``(x1 cos - x2 sin, x2 cos + x1 sin)``.

The schemes differ only in *which* positions and frequencies they feed to step 1 (and xPos
scales the table). Numerics (``docs/architecture.md``): the angle ``m·θ_i`` is formed in
float64 (bf16 cannot even hold position 257, and float32 angles at position 10^6 are off by
up to about 0.05 rad at ``d = 128``), cos/sin are taken there and rounded once; the products
are formed in float32 (float64 for float64 inputs) and the result is cast to the input dtype.

Which coordinates form a pair is a convention (:data:`PAIRINGS`): ``"half"`` pairs ``x_i``
with ``x_{i+R/2}`` (GPT-NeoX, transformers' ``rotate_half``), ``"interleaved"`` pairs
``x_{2i}`` with ``x_{2i+1}`` (the paper, GPT-J, Meta's LLaMA code).

These functions trust their callers (the public functions and scheme constructors check
arguments); shapes are in the signatures. :mod:`pecourse.kernels` builds the fast path on
the same two functions: a cache in front of :func:`cos_sin` and a C kernel with the
signature of :func:`rotate_pairs`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from jaxtyping import Float, Real
from torch import Tensor

__all__ = [
    "PAIRINGS",
    "rope_frequencies",
    "compute_dtype",
    "cos_sin",
    "rotate_pairs",
    "Rotary",
    "REFERENCE",
]

#: The two ways real code pairs up dimensions for rotation.
PAIRINGS = ("half", "interleaved")


def rope_frequencies(
    head_dim: int, base: float = 10000.0, *, dtype=torch.float64, device=None
) -> Float[Tensor, " pairs"]:
    r"""RoPE's frequencies ``θ_i = base^{-2i/d}``, ``i = 0 … d/2 - 1`` (arXiv:2104.09864, eq. 15,
    which counts ``i`` from 1). Float64 by default, so the angle table built from it is
    exact to double precision."""
    exponent = torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim
    return (base**-exponent).to(dtype)  # θ_i = b^(-2i/d)


def compute_dtype(x: Tensor) -> torch.dtype:
    """The dtype the rotation is computed in: float32, or float64 for float64 inputs."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def cos_sin(
    positions: Real[Tensor, "*batch seq"],
    inv_freq: Float[Tensor, " pairs"],
    scale: float = 1.0,
    *,
    dtype: torch.dtype = torch.float32,
) -> tuple[Float[Tensor, "*batch seq pairs"], Float[Tensor, "*batch seq pairs"]]:
    r"""The angle table: ``(scale·cos(m θ_i), scale·sin(m θ_i))`` for every position and pair.

    One column per *pair* (not duplicated as in transformers' ``torch.cat((freqs, freqs))``).
    ``positions`` may be fractional (leaky ReRoPE's ``m/k``, pixel coordinates). ``scale`` is
    YaRN's attention factor (transformers' ``attention_scaling``). The angles are formed in
    float64 and only the finished table is rounded to ``dtype``.
    """
    angles = positions.to(torch.float64)[..., None] * inv_freq.to(
        device=positions.device, dtype=torch.float64
    )  # m·θ_i, exact to double precision
    return (angles.cos() * scale).to(dtype), (angles.sin() * scale).to(dtype)


def _against(table: Tensor, x: Tensor) -> Tensor:
    """``[seq, r]`` broadcasts as is; ``[batch, seq, r]`` -> ``[batch, 1, …, seq, r]``."""
    if table.ndim == 3:
        return table.reshape(table.shape[0], *([1] * (x.ndim - 3)), *table.shape[1:])
    return table


def rotate_pairs(
    x: Float[Tensor, "*batch seq dim"],
    cos: Float[Tensor, "*tbatch seq pairs"],
    sin: Float[Tensor, "*tbatch seq pairs"],
    *,
    pairing: str = "half",
    inverse: bool = False,
) -> Float[Tensor, "*batch seq dim"]:
    r"""Rotate every pair of the first ``R = 2·pairs`` dimensions of ``x`` (arXiv:2104.09864, eq. 34).

    .. math:: (x_1, x_2) \mapsto (x_1 \cos - x_2 \sin,\; x_2 \cos + x_1 \sin)

    The table is ``[seq, pairs]`` (shared by the batch) or ``[batch, seq, pairs]`` (one row
    of positions per batch element, ``x``'s first dimension). Dimensions ``R … dim-1`` pass
    through unchanged (partial rotary: GPT-NeoX's ``rotary_pct``, Phi's
    ``partial_rotary_factor``). ``inverse=True`` rotates by ``-θ``: the transpose of an
    orthogonal map, so the same products with ``sin`` negated. Written with ``cat``/``stack``
    rather than in-place writes, so autograd, ``torch.func`` and ``torch.compile`` see plain
    tensor maths.
    """
    math = compute_dtype(x)
    cos, sin = _against(cos.to(math), x), _against(sin.to(math), x)
    if inverse:
        sin = -sin  # R(-θ) = R(θ)ᵀ
    r = 2 * cos.shape[-1]
    xr = x[..., :r].to(math)
    if pairing == "half":
        x1, x2 = xr[..., : r // 2], xr[..., r // 2 :]
        out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    else:  # interleaved: (x_{2i}, x_{2i+1})
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
    out = out.to(x.dtype)
    return torch.cat((out, x[..., r:]), dim=-1) if r < x.shape[-1] else out


@dataclass(frozen=True)
class Rotary:
    """The two steps a rotary scheme runs, as swappable functions.

    ``cos_sin`` and ``rotate_pairs`` have the signatures of :func:`cos_sin` and
    :func:`rotate_pairs`. :data:`REFERENCE` is the readable code of this module;
    :data:`pecourse.kernels.FAST_ROPE` is a table cache plus a C kernel with the same numbers.
    A scheme built with ``backend=`` one of them never needs to know which it runs.
    """

    cos_sin: Callable[..., tuple[Tensor, Tensor]]
    rotate_pairs: Callable[..., Tensor]
    name: str


#: The readable rotary core (this module): what every scheme uses unless told otherwise.
REFERENCE = Rotary(cos_sin, rotate_pairs, "reference")
