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

These functions trust their callers; shapes are in the signatures. The argument checks of
every public rotary function and scheme are the private ``_check_*`` functions at the end of
this module, written once. :mod:`pecourse.kernels` builds the fast paths on the same two
functions (:class:`Rotary`): a cache in front of :func:`cos_sin` and a C kernel, or a Triton
kernel, with the signature of :func:`rotate_pairs`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
from jaxtyping import Float, Real
from torch import Tensor

from .._validate import check_base, check_choice, check_even, check_positions, check_tensor

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
    scale: float | Tensor = 1.0,
    *,
    dtype: torch.dtype = torch.float32,
) -> tuple[Float[Tensor, "*batch seq pairs"], Float[Tensor, "*batch seq pairs"]]:
    r"""The angle table: ``(scale·cos(m θ_i), scale·sin(m θ_i))`` for every position and pair.

    One column per *pair* (not duplicated as in transformers' ``torch.cat((freqs, freqs))``).
    ``positions`` may be fractional (leaky ReRoPE's ``m/k``, pixel coordinates). ``scale`` is
    YaRN's attention factor (transformers' ``attention_scaling``), or a float64 tensor that
    broadcasts against the table (xPos's ``ζ_i^{±n/B}``, one per position and pair). The
    angles are formed and scaled in float64 and only the finished table is rounded to
    ``dtype``: the one rounding of every rotary scheme.
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

    ``rotate_qk``, where a backend has one, is ``rotate_pairs`` of queries and keys by one
    table in one call, ``rotate_qk(q, k, cos, sin, *, pairing) -> (q', k')``, with the same
    numbers as two calls: self-attention rotates both at the same positions in every layer,
    and for the small tensors of a training step the cost of a call is mostly its overhead.
    """

    cos_sin: Callable[..., tuple[Tensor, Tensor]]
    rotate_pairs: Callable[..., Tensor]
    name: str
    rotate_qk: Callable[..., tuple[Tensor, Tensor]] | None = None


#: The readable rotary core (this module): what every scheme uses unless told otherwise.
REFERENCE = Rotary(cos_sin, rotate_pairs, "reference")


# --- argument checks, shared by every public rotary function and scheme -------------------


def _check_backend(backend) -> Rotary:
    if not isinstance(backend, Rotary):
        raise TypeError(
            "backend must be a pecourse.positions.rotary.Rotary (REFERENCE, or "
            f"pecourse.kernels.FAST_ROPE), got {backend!r}"
        )
    return backend


def _check_x(name: str, x) -> int:
    """A float tensor ``[batch, heads, seq, head_dim]`` with an even ``head_dim``, returned."""
    check_tensor(name, x, floating=True)
    if x.ndim != 4:
        raise ValueError(
            f"{name} must be [batch, heads, seq, head_dim] (4 dimensions), got shape "
            f"{tuple(x.shape)}"
        )
    return check_even(f"head_dim ({name}.shape[-1])", x.shape[-1])


def _check_rotary_dim(head_dim: int, rotary_dim) -> int:
    """``rotary_dim`` (``None`` means all of ``head_dim``): even and at most ``head_dim``."""
    rotary_dim = check_even("rotary_dim", head_dim if rotary_dim is None else rotary_dim)
    if rotary_dim > head_dim:
        raise ValueError(
            f"rotary_dim must be <= head_dim ({head_dim}) (only the first rotary_dim "
            f"dimensions rotate), got {rotary_dim}"
        )
    return rotary_dim


def _check_head_dim(scheme, q: Tensor, k: Tensor) -> None:
    """A scheme built for ``head_dim`` refuses q/k of another size (no silent partial rotary)."""
    for name, t in (("q", q), ("k", k)):
        if t.ndim != 4 or t.shape[-1] != scheme.head_dim:
            raise ValueError(
                f"{type(scheme).__name__} was built for head_dim={scheme.head_dim}; {name} must be "
                f"[batch, heads, seq, {scheme.head_dim}], got {tuple(t.shape)}"
            )


def _check_positions_shape(name: str, positions: Tensor, x: Tensor, lead: str = "") -> None:
    """``[*lead, seq]`` or ``[*lead, batch|1, seq]`` matching ``x`` ``[batch, heads, seq, d]``.

    Reads shapes only (a hook may call it on an accelerator without waiting on the device).
    """
    b, s = x.shape[0], x.shape[2]
    shape = tuple(positions.shape)[1 if lead else 0 :]
    if len(shape) not in (1, 2) or shape[-1] != s or (len(shape) == 2 and shape[0] not in (1, b)):
        raise ValueError(
            f"{name} must be [{lead}seq] or [{lead}batch, seq] with one entry per token "
            f"(seq = x.shape[2] = {s}) and batch = {b} or 1, got shape {tuple(positions.shape)}"
        )


@functools.lru_cache(maxsize=32)
def _frequencies(rotary_dim: int, base: float, device: str) -> Tensor:
    return rope_frequencies(rotary_dim, base, device=device)


def _check_inv_freq(inv_freq, pairs: int, base: float, device) -> Tensor:
    """``inv_freq`` of ``pairs`` entries, or RoPE's frequencies of ``base`` when ``None``."""
    if inv_freq is None:
        return _frequencies(2 * pairs, check_base(base), str(device))
    check_tensor("inv_freq", inv_freq, ndim=1, floating=True)
    if inv_freq.shape[0] != pairs:
        raise ValueError(
            f"inv_freq must have rotary_dim // 2 = {pairs} entries (one per rotated pair), "
            f"got {inv_freq.shape[0]}"
        )
    return inv_freq


def _check_rope_args(
    x, positions, *, pairing: str, rotary_dim=None, inv_freq=None, base=10000.0, name="x"
) -> tuple[Tensor, int, Tensor]:
    """The checks of every public rotary function: returns ``(positions, rotary_dim, inv_freq)``.

    ``x`` (``q``, ``k``: ``name``) 4-D float with an even last size; a known ``pairing``;
    ``rotary_dim`` even and at most ``head_dim``; integer, non-negative positions (called
    ``positions``, or ``q_positions`` for ``q``) ``[seq]`` or ``[batch, seq]`` matching ``x``;
    ``inv_freq`` of ``rotary_dim / 2`` entries (default: RoPE's of ``base``).
    """
    head_dim = _check_x(name, x)
    check_choice("pairing", pairing, PAIRINGS)
    rotary_dim = _check_rotary_dim(head_dim, rotary_dim)
    positions_name = "positions" if name == "x" else f"{name}_positions"
    positions = check_positions(positions_name, positions)
    _check_positions_shape(positions_name, positions, x)
    return positions, rotary_dim, _check_inv_freq(inv_freq, rotary_dim // 2, base, x.device)
