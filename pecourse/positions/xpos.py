r"""xPos: RoPE with an exponential decay (Sun et al., "A Length-Extrapolatable Transformer",
arXiv:2212.10554, 2022; ACL 2023).

RoPE's scores oscillate with distance but do not decay, and its fastest-turning pairs make
attention unstable past the training length. xPos keeps the rotation and adds, per pair
``i``, a scale

.. math::
    ζ_i = \frac{2i/d + γ}{1 + γ}, \qquad γ = 0.4,

applied as ``ζ_i^{n/B}`` to the query at position ``n`` and ``ζ_i^{-m/B}`` to the key at
position ``m`` (``B`` = ``scale_base`` = 512; ``γ`` and ``B`` are the values of the
authors' torchscale code, whose ``(2i + 0.4d)/(1.4d)`` is this ``ζ_i``). In a score the two meet as
``ζ_i^{(n-m)/B}``: a factor that depends only on the offset, equals 1 at offset 0, and
shrinks as the key falls further behind the query (``ζ_i < 1``). Fast pairs (small ``i``,
small ``ζ_i``) decay fastest — exactly the ones that hurt extrapolation.

For a key *after* the query (``m > n``) the factor grows without bound, so xPos is only
defined under a causal mask: :class:`XPos` sets ``requires_causal`` and
:func:`pecourse.attention.attention` refuses ``causal=False``.

The individual scales ``ζ^{±n/B}`` under/overflow long before their product does, so
positions are measured from a shared centre ``c`` (``ζ^{(n-c)/B}`` and ``ζ^{-(m-c)/B}``;
scores are unchanged), as torchscale and rotary-embedding-torch do; even so, a span of
positions whose scales would overflow the input dtype is refused.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .._validate import (
    check_base,
    check_choice,
    check_even,
    check_float,
    check_int,
    check_positions,
)
from ..attention import PositionScheme
from .rotary import (
    PAIRINGS,
    REFERENCE,
    Rotary,
    _check_backend,
    _check_head_dim,
    _check_rope_args,
    compute_dtype,
)

__all__ = ["xpos_zeta", "xpos_scale", "apply_xpos", "XPos"]


def xpos_zeta(head_dim: int, gamma: float = 0.4) -> Tensor:
    r"""Per-pair decay bases ``ζ_i = (2i/d + γ)/(1 + γ)`` (xPos, arXiv:2212.10554).

    Returns float64 ``[head_dim // 2]``, increasing from ``γ/(1+γ)`` towards 1.
    """
    head_dim = check_even("head_dim", head_dim)
    gamma = check_float("gamma", gamma, minimum=0.0, strict_minimum=True)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (2 * i / head_dim + gamma) / (1 + gamma)  # ζ_i = (2i/d + γ)/(1 + γ)


def xpos_scale(
    positions: Tensor,
    head_dim: int,
    *,
    gamma: float = 0.4,
    scale_base: float = 512.0,
    center: int = 0,
) -> Tensor:
    r"""The query scale ``ζ_i^{(n - c)/B}`` for every position ``n`` and pair ``i``.

    ``positions`` ``[seq]`` or ``[batch, seq]`` -> float64 ``[..., seq, head_dim // 2]``; the
    key scale is its reciprocal.
    """
    positions = check_positions("positions", positions)
    scale_base = check_float("scale_base", scale_base, minimum=0.0, strict_minimum=True)
    center = check_int("center", center)
    zeta = xpos_zeta(head_dim, gamma)
    power = (positions.to(torch.float64) - center) / scale_base  # (n - c)/B
    return zeta ** power[..., None]  # ζ^((n - c)/B)


def _midpoint(*positions: Tensor) -> int:
    present = [p for p in positions if p.numel()]
    if not present:  # nothing to rotate: any centre gives the same (empty) answer
        return 0
    low = min(int(p.min()) for p in present)
    high = max(int(p.max()) for p in present)
    return (low + high + 1) // 2  # 0..L-1 -> L // 2, rotary-embedding-torch's centre


def _check_range(name, positions, center, zeta0, scale_base, dtype):
    # The largest scale is ζ_0^{-|n - c|/B}; keep it (times |x| up to ~10^3) inside the dtype.
    if not positions.numel():
        return
    worst = max(abs(int(positions.max()) - center), abs(int(positions.min()) - center))
    exponent = -math.log(zeta0) * worst / scale_base
    limit = math.log(torch.finfo(dtype).max) - math.log(1e3)
    if exponent > limit:
        span = int(2 * limit * scale_base / -math.log(zeta0))
        raise ValueError(
            f"{name} span too many positions for xPos in {dtype}: the scale ζ^(±n/scale_base) "
            f"reaches e^{exponent:.0f} and overflows. Keep positions within a window of about "
            f"{span} (or raise scale_base, or attend blockwise as the xPos paper does)"
        )


def apply_xpos(
    q: Tensor,
    k: Tensor,
    q_positions: Tensor,
    k_positions: Tensor,
    *,
    base: float = 10000.0,
    pairing: str = "half",
    gamma: float = 0.4,
    scale_base: float = 512.0,
    center: int | None = None,
    inv_freq: Tensor | None = None,
    backend: Rotary = REFERENCE,
) -> tuple[Tensor, Tensor]:
    r"""Rotate and scale queries and keys with xPos (arXiv:2212.10554).

    ``q`` ``[b, h, Lq, d]``, ``k`` ``[b, h_kv, Lk, d]``; positions integer ``[L]`` or
    ``[b, L]``. Query pair ``i`` at position ``n`` becomes ``ζ_i^{(n-c)/B} R(nθ_i) q_i`` and
    key pair ``i`` at ``m`` becomes ``ζ_i^{-(m-c)/B} R(mθ_i) k_i``, so that

    .. math:: ⟨q', k'⟩ = \sum_i ζ_i^{(n-m)/B} ⟨R(nθ_i) q_i, R(mθ_i) k_i⟩ .

    ``center`` ``c`` defaults to the middle of all positions; it does not change any score.
    The scaled cos/sin tables are built in float64 and cast once. Returns ``(q', k')`` with
    the shapes and dtypes of ``q`` and ``k``. Checks what
    :func:`pecourse.positions.rope.apply_rope` checks, and refuses position spans whose
    scales overflow the input dtype. Causality is the caller's job (see :class:`XPos`).
    """
    q_positions, d_q, inv_freq = _check_rope_args(
        q, q_positions, pairing=pairing, inv_freq=inv_freq, base=base, name="q"
    )
    k_positions, d_k, _ = _check_rope_args(k, k_positions, pairing=pairing, base=base, name="k")
    if d_q != d_k:
        raise ValueError(f"q and k must have the same head_dim, got {d_q} and {d_k}")
    backend = _check_backend(backend)
    scale_base = check_float("scale_base", scale_base, minimum=0.0, strict_minimum=True)
    center = _midpoint(q_positions, k_positions) if center is None else check_int("center", center)
    zeta0 = float(xpos_zeta(d_q, gamma)[0])
    _check_range("q_positions", q_positions, center, zeta0, scale_base, q.dtype)
    _check_range("k_positions", k_positions, center, zeta0, scale_base, k.dtype)

    out = []
    for x, pos, sign in ((q, q_positions, 1.0), (k, k_positions, -1.0)):
        scale = xpos_scale(pos, d_q, gamma=gamma, scale_base=scale_base, center=center) ** sign
        # ζ^{±(n-c)/B}·cos, ·sin: scaled in float64 and rounded once, by the rotary core.
        cos, sin = backend.cos_sin(pos, inv_freq, scale, dtype=compute_dtype(x))
        out.append(backend.rotate_pairs(x, cos, sin, pairing=pairing))
    return out[0], out[1]


class XPos(PositionScheme):
    """xPos as a positional scheme (arXiv:2212.10554): ``rotate`` applies :func:`apply_xpos`.

    ``requires_causal`` is True: :func:`pecourse.attention.attention` refuses it with
    ``causal=False``, because a key after its query would be scaled up without bound.
    """

    requires_causal = True
    causal_reason = "its scale grows without bound for a key after the query"

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        pairing: str = "half",
        gamma: float = 0.4,
        scale_base: float = 512.0,
        backend: Rotary = REFERENCE,
    ):
        super().__init__()
        self.head_dim = check_even("head_dim", head_dim)
        self.base = check_base(base)
        self.pairing = check_choice("pairing", pairing, PAIRINGS)
        self.gamma = check_float("gamma", gamma, minimum=0.0, strict_minimum=True)
        self.scale_base = check_float("scale_base", scale_base, minimum=0.0, strict_minimum=True)
        self.backend = _check_backend(backend)

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        _check_head_dim(self, q, k)
        return apply_xpos(
            q,
            k,
            q_positions,
            k_positions,
            base=self.base,
            pairing=self.pairing,
            gamma=self.gamma,
            scale_base=self.scale_base,
            backend=self.backend,
        )

    def extra_repr(self) -> str:
        return (
            f"head_dim={self.head_dim}, base={self.base}, pairing={self.pairing!r}, "
            f"gamma={self.gamma}, scale_base={self.scale_base}"
        )
