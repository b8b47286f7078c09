r"""Absolute positions added to the input: a learned table and the sinusoidal table.

Place: **the input** (see :mod:`pecourse.attention`). Both schemes give position ``t`` a
vector ``p(t)`` of the model's width and add it to the token embedding once, before the
first layer; attention itself never sees a position again.

* **Learned** (GPT-2, BERT): ``p(t)`` is row ``t`` of a trained ``[max_positions, d_model]``
  table. It has a hard ceiling: row ``max_positions`` does not exist, so a longer input is
  refused, never wrapped round.
* **Sinusoidal** (Vaswani et al. 2017, arXiv:1706.03762, section 3.5): a fixed table,

  .. math::
      PE_{t, 2i} = \sin(t\,\omega_i), \qquad PE_{t, 2i+1} = \cos(t\,\omega_i), \qquad
      \omega_i = \mathrm{base}^{-2i/d},

  so the columns come in (sin, cos) pairs, one pair per frequency, the fastest first.
  Because each pair is a point on a circle, shifting every position by ``Δ`` is a rotation
  of each pair by ``Δ ω_i``: ``p(t + Δ) = M(Δ) p(t)`` with ``M(Δ)`` block-diagonal and
  independent of ``t`` (:func:`sinusoidal_shift_matrix`). This is the property the paper
  hoped would let the model attend by relative position.

Angles are computed in float64 and the result cast at the end: in float32 the angles
``t·ω_i`` of the fast pairs at ``t = 10^6`` are already off by a few hundredths of a radian
(only ``ω_0 = 1`` is exact; measured against float64, 0.02–0.07 rad for ``d`` = 64–512).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .._validate import check_base, check_float, check_int, check_positions, check_tensor
from ..attention import PositionScheme
from .rotary import cos_sin

__all__ = [
    "sinusoidal_frequencies",
    "sinusoidal_encoding",
    "sinusoidal_table",
    "sinusoidal_shift_matrix",
    "LearnedAbsolute",
    "Sinusoidal",
]


def _check_dim(name: str, value) -> int:
    value = check_int(name, value, minimum=2)
    if value % 2:
        raise ValueError(
            f"{name} must be even (one sine and one cosine column per frequency), got {value}"
        )
    return value


def sinusoidal_frequencies(dim: int, base: float = 10000.0) -> Tensor:
    r"""The ``dim // 2`` angular frequencies ``ω_i = base^{-2i/dim}`` (float64).

    Vaswani et al. 2017 (arXiv:1706.03762), section 3.5: the wavelengths ``2π/ω_i`` form a
    geometric progression from ``2π`` up to (the paper rounds) ``2π·base``; the slowest is
    exactly ``2π·base^{(dim-2)/dim}``. Returns float64 ``[dim // 2]``.
    """
    dim = _check_dim("dim", dim)
    base = check_base(base)
    two_i = torch.arange(0, dim, 2, dtype=torch.float64)  # 2i = 0, 2, ..., d-2
    return base ** (-two_i / dim)  # ω_i = base^(-2i/d)


def sinusoidal_encoding(
    positions: Tensor, dim: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32
) -> Tensor:
    r"""Sinusoidal vectors ``p(t)`` for integer ``positions`` ``[...]`` -> ``[..., dim]``.

    Vaswani et al. 2017 (arXiv:1706.03762), section 3.5, in the paper's interleaved layout:
    column ``2i`` holds ``sin(t ω_i)`` and column ``2i+1`` holds ``cos(t ω_i)``. Positions may
    have any shape up to 7-D; they must be non-negative integers. Angles are taken in float64
    and the result cast to ``dtype``.
    """
    check_positions("positions", positions, ndim=tuple(range(0, 8)))
    # cos(t·ω_i), sin(t·ω_i): the same angle table RoPE rotates by, formed in float64 and
    # rounded once to dtype by the rotary core.
    cos, sin = cos_sin(positions, sinusoidal_frequencies(dim, base), dtype=dtype)
    # Stack (sin, cos) on a new last axis and flatten it: [s0, c0, s1, c1, ...].
    return torch.stack((sin, cos), dim=-1).flatten(-2)


def sinusoidal_table(
    num_positions: int, dim: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32
) -> Tensor:
    r"""The sinusoidal table for positions ``0..num_positions-1``: ``[num_positions, dim]``.

    Vaswani et al. 2017 (arXiv:1706.03762), section 3.5:
    ``PE[t, 2i] = sin(t / base^{2i/d})`` and ``PE[t, 2i+1] = cos(t / base^{2i/d})`` (even
    columns sine, odd columns cosine). Computes for any length: nothing is learned, so
    nothing runs out.
    """
    num_positions = check_int("num_positions", num_positions, minimum=1)
    return sinusoidal_encoding(torch.arange(num_positions), dim, base, dtype=dtype)


def sinusoidal_shift_matrix(
    delta, dim: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32
) -> Tensor:
    r"""``M(Δ)`` ``[dim, dim]`` with ``p(t + Δ) = M(Δ) p(t)`` for every ``t``.

    The linear map the paper alludes to (Vaswani et al. 2017, arXiv:1706.03762, section
    3.5: "PE_{pos+k} can be represented as a linear function of PE_{pos}"). For each
    frequency the pair ``(sin tω, cos tω)`` is rotated by ``Δω``:

    .. math::
        \begin{pmatrix}\sin (t+Δ)ω \\ \cos (t+Δ)ω\end{pmatrix} =
        \begin{pmatrix}\cos Δω & \sin Δω \\ -\sin Δω & \cos Δω\end{pmatrix}
        \begin{pmatrix}\sin tω \\ \cos tω\end{pmatrix},

    so ``M(Δ)`` is block-diagonal with one such 2×2 block per frequency, and does not
    depend on ``t``. ``Δ`` may be any real number (negative shifts too).
    """
    delta = check_float("delta", delta)
    omega = sinusoidal_frequencies(dim, base)
    c, s = cos_sin(
        torch.tensor(delta, dtype=torch.float64), omega, dtype=torch.float64
    )  # cos Δω_i, sin Δω_i
    m = torch.zeros(dim, dim, dtype=torch.float64)
    even = torch.arange(0, dim, 2)
    m[even, even] = c  # sin' = cos(Δω)·sin + sin(Δω)·cos
    m[even, even + 1] = s
    m[even + 1, even] = -s  # cos' = -sin(Δω)·sin + cos(Δω)·cos
    m[even + 1, even + 1] = c
    return m.to(dtype)


def _check_hidden_positions(hidden: Tensor, positions: Tensor, d_model: int) -> None:
    check_tensor("hidden", hidden, ndim=3, floating=True)
    if hidden.shape[-1] != d_model:
        raise ValueError(
            f"hidden must be [batch, seq, d_model={d_model}], got shape {tuple(hidden.shape)}"
        )
    if positions.shape[-1] != hidden.shape[1] or (
        positions.ndim == 2 and positions.shape[0] not in (1, hidden.shape[0])
    ):
        raise ValueError(
            f"positions must be [seq={hidden.shape[1]}] or [batch={hidden.shape[0]}, "
            f"seq={hidden.shape[1]}] to match hidden, got shape {tuple(positions.shape)}"
        )


class LearnedAbsolute(PositionScheme):
    r"""A learned table of absolute position vectors added to the input (GPT-2, BERT).

    ``h_t ← h_t + P[t]`` with ``P`` an ``[max_positions, d_model]`` ``nn.Embedding``,
    initialised ``N(0, 0.02²)`` as transformers initialises GPT-2 (``initializer_range``;
    OpenAI's original GPT-2 code drew its position table with std 0.01). Position ``t`` gets
    exactly one trained row, so the table has a hard ceiling: positions ``≥ max_positions``
    raise a ``ValueError`` naming ``max_positions`` (a learned table cannot represent them,
    and silently clipping or wrapping would hand the model a wrong position).

    :meth:`embed` takes ``hidden`` ``[batch, seq, d_model]`` and positions ``[seq]`` or
    ``[batch, seq]`` and returns ``hidden``'s shape and dtype.
    """

    def __init__(self, max_positions: int, d_model: int):
        super().__init__()
        self.max_positions = check_int("max_positions", max_positions, minimum=1)
        self.d_model = check_int("d_model", d_model, minimum=1)
        self.table = nn.Embedding(self.max_positions, self.d_model)
        nn.init.normal_(self.table.weight, std=0.02)

    def embed(self, hidden: Tensor, positions: Tensor) -> Tensor:
        """``hidden`` ``[batch, seq, d_model]`` + rows ``P[positions]`` (``[seq]`` or ``[batch, seq]``)."""
        positions = check_positions("positions", positions, limit=self.max_positions)
        _check_hidden_positions(hidden, positions, self.d_model)
        rows = self.table(positions.to(self.table.weight.device))  # P[t]
        return hidden + rows.to(device=hidden.device, dtype=hidden.dtype)  # h_t + P[t]

    def extra_repr(self) -> str:
        return f"max_positions={self.max_positions}, d_model={self.d_model}, places={self.places}"


class Sinusoidal(PositionScheme):
    r"""The fixed sinusoidal encoding added to the input (Vaswani et al. 2017, arXiv:1706.03762).

    ``h_t ← h_t + PE(t)`` with ``PE`` from :func:`sinusoidal_encoding` (interleaved sin/cos).
    Nothing is learned and any length is computed on the fly. (The original model also
    multiplies the token embedding by ``√d_model`` before the sum, section 3.4; that belongs
    to the embedding layer, which reads :attr:`scale_embeddings`.) :meth:`embed` takes ``hidden``
    ``[batch, seq, d_model]`` and positions ``[seq]`` or ``[batch, seq]`` and returns
    ``hidden``'s shape and dtype.
    """

    scale_embeddings = True  # section 3.4: the model multiplies token embeddings by √d_model

    def __init__(self, d_model: int, base: float = 10000.0):
        super().__init__()
        self.d_model = _check_dim("d_model", d_model)
        self.base = check_base(base)

    def embed(self, hidden: Tensor, positions: Tensor) -> Tensor:
        """``hidden`` ``[batch, seq, d_model]`` + ``PE(positions)`` (``[seq]`` or ``[batch, seq]``)."""
        positions = check_positions("positions", positions)
        _check_hidden_positions(hidden, positions, self.d_model)
        pe = sinusoidal_encoding(positions, self.d_model, self.base, dtype=torch.float32)
        return hidden + pe.to(device=hidden.device, dtype=hidden.dtype)  # h_t + PE(t)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, base={self.base}, places={self.places}"
