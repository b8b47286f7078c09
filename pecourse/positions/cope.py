r"""CoPE: contextual position encoding (Golovneva et al., 2024, arXiv:2405.18719).

Every other scheme in the course counts *tokens*. CoPE lets the model decide what to count:
each query ``i`` opens a gate on every key it can see,

.. math::
    g_{ij} = \sigma(q_i^\top k_j) \qquad (\text{the gate}),

and the position of key ``j`` *relative to query i* is the number of open gates between them,

.. math::
    p_{ij} = \sum_{t=j}^{i} g_{it} \qquad (\text{the contextual position}).

If every gate is 1 this is the ordinary relative distance ``i - j + 1``; if gates open only on,
say, sentence-final tokens, ``p_ij`` counts sentences. Positions are fractional, so the
position embedding is interpolated between the two neighbouring integer rows of a learned table,

.. math::
    e[p] = (p - \lfloor p \rfloor)\, e[\lceil p \rceil]
         + (1 - p + \lfloor p \rfloor)\, e[\lfloor p \rfloor] \qquad (\text{the interpolation}),

and the attention logit gains ``q_i^\top e[p_ij]``: ``a_ij = softmax_j(q_i^\top (k_j + e[p_ij]))``.
Positions are clamped to a maximum ``p_max`` (the table has ``p_max + 1`` rows; every
position past ``p_max`` shares the last row, as in the paper's code), and ``p_max`` can be
small: what is counted (sentences, paragraphs) rarely needs large numbers.

The paper's efficient form, which :func:`cope_bias` follows: ``q_i^\top e[p]`` is linear in
``e``, so first compute ``q_i^\top e[n]`` for the ``p_max + 1`` *integer* positions (one small
matrix product), then gather and interpolate those *logits* — never materialise a vector
``e[p_ij]`` for every pair.

This module, like the paper's decoder experiments, is for causal attention only: ``p_ij``
sums the gates of the keys *between* ``j`` and ``i``, which presumes ``j <= i``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .._validate import check_float, check_int, check_tensor
from ..attention import PositionScheme, causal_mask

__all__ = ["cope_gates", "cope_positions", "cope_bias", "CoPE"]


def _check_qk(q: Tensor, k: Tensor) -> None:
    check_tensor("q", q, ndim=4, floating=True)
    check_tensor("k", k, ndim=4, floating=True)
    if q.shape[0] != k.shape[0] or q.shape[1] != k.shape[1] or q.shape[3] != k.shape[3]:
        raise ValueError(
            f"k must be [batch={q.shape[0]}, heads={q.shape[1]}, Lk, head_dim={q.shape[3]}] "
            f"to match q, got {tuple(k.shape)} (repeat grouped key heads before calling)"
        )
    if q.shape[2] > k.shape[2]:
        raise ValueError(
            f"CoPE is causal: q has {q.shape[2]} positions but k only {k.shape[2]}; queries "
            "align with the last Lq keys, so Lq must be <= Lk"
        )


def _work_dtype(q: Tensor) -> torch.dtype:
    """float32 for half-precision inputs (sums over many keys), float64 kept as float64."""
    return torch.float64 if q.dtype == torch.float64 else torch.float32


def cope_gates(q: Tensor, k: Tensor, *, scale: float | None = None) -> Tensor:
    r"""Gates ``g_ij = σ(scale · q_i·k_j)`` under a causal mask (CoPE's gate, arXiv:2405.18719).

    ``q`` ``[batch, heads, Lq, d]``, ``k`` ``[batch, heads, Lk, d]`` with ``Lq <= Lk``; queries
    align with the *last* ``Lq`` keys (query ``i`` sits at key position ``Lk - Lq + i``), as in
    :func:`pecourse.attention.causal_mask`. Returns ``[batch, heads, Lq, Lk]`` in float32
    (float64 for float64 inputs) with zeros wherever key ``j`` lies after query ``i``.

    ``scale`` defaults to ``1/sqrt(d)``: the paper's reference code takes the sigmoid of the
    *scaled* attention logits; ``scale=1.0`` gives the paper's written gate literally.
    """
    _check_qk(q, k)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    scale = check_float("scale", scale, minimum=0.0, strict_minimum=True)
    # Gates are summed over up to Lk keys: at least float32 even for bf16 inputs, and
    # float64 stays float64 (so the bias is exact enough for gradcheck).
    work = _work_dtype(q)
    logits = (q.to(work) @ k.to(work).transpose(-2, -1)) * scale
    visible = causal_mask(q.shape[2], k.shape[2], device=q.device)
    # A key after the query opens no gate: the sum for p_ij runs over keys up to i only.
    return torch.sigmoid(logits) * visible


def cope_positions(gates: Tensor, max_position: int) -> Tensor:
    r"""Contextual positions ``p_ij = min(Σ_{t=j..i} g_it, p_max)`` (CoPE, arXiv:2405.18719).

    ``gates`` ``[..., Lq, Lk]`` (zero after each query, as :func:`cope_gates` returns them)
    -> float positions of the same shape in ``[0, max_position]``. Because gates after the
    query are zero, the sum from ``j`` to ``i`` is a *reverse* cumulative sum along the key
    axis. With every visible gate equal to 1, ``p_ij = i - j + 1``.
    """
    check_tensor("gates", gates, floating=True)
    if gates.ndim < 2:
        raise ValueError(f"gates must be at least [Lq, Lk], got shape {tuple(gates.shape)}")
    max_position = check_int("max_position", max_position, minimum=1)
    # Σ_{t=j}^{Lk-1} g_it = Σ_{t=j}^{i} g_it, since g_it = 0 for t > i.
    positions = gates.flip(-1).cumsum(-1).flip(-1)
    return positions.clamp(max=float(max_position))


def cope_bias(
    q: Tensor,
    k: Tensor,
    embeddings: Tensor,
    *,
    scale: float | None = None,
) -> Tensor:
    r"""CoPE's additive logit ``q_i·e[p_ij]`` (arXiv:2405.18719: gate, position sum, interpolation).

    ``q`` ``[batch, heads, Lq, d]``, ``k`` ``[batch, heads, Lk, d]`` (``Lq <= Lk``, queries at
    the end of the keys), ``embeddings`` ``[p_max + 1, d]`` shared by every head (as in the
    paper) or ``[heads, p_max + 1, d]`` one table per head. Returns ``[batch, heads, Lq, Lk]``
    in ``q``'s dtype; entries for keys after the query are 0 (the causal mask removes them).

    Efficient form: ``z[n] = q_i·e[n]`` for integer ``n`` (one ``[Lq, d] x [d, p_max+1]``
    product), then ``z[p] = (p-⌊p⌋) z[⌈p⌉] + (1-p+⌊p⌋) z[⌊p⌋]`` — equal to ``q_i·e[p]`` by
    linearity of the interpolation. ``scale`` is passed to :func:`cope_gates`.
    """
    _check_qk(q, k)
    check_tensor("embeddings", embeddings, ndim=(2, 3), floating=True)
    b, h, lq, d = q.shape
    if embeddings.shape[-1] != d:
        raise ValueError(
            f"embeddings must end in head_dim={d} to match q, got shape {tuple(embeddings.shape)}"
        )
    if embeddings.ndim == 3 and embeddings.shape[0] != h:
        raise ValueError(
            f"per-head embeddings must be [heads={h}, p_max + 1, {d}], got "
            f"{tuple(embeddings.shape)}"
        )
    rows = embeddings.shape[-2]
    if rows < 2:
        raise ValueError(
            f"embeddings must have at least 2 rows (max_position >= 1), got {rows}; "
            "fractional positions interpolate between two integer rows"
        )
    gates = cope_gates(q, k, scale=scale)
    positions = cope_positions(gates, rows - 1)

    # z[b, h, i, n] = q_i · e[n]: the logit for every *integer* position, [b, h, Lq, p_max+1].
    work = _work_dtype(q)
    table = embeddings.to(work)
    table = table[None, None] if table.ndim == 2 else table[None]
    logits_int = q.to(work) @ table.transpose(-2, -1)

    floor = positions.floor()
    weight = positions - floor  # p - ⌊p⌋, in [0, 1)
    lo = floor.long()
    hi = positions.ceil().long()
    z_lo = logits_int.gather(-1, lo)
    z_hi = logits_int.gather(-1, hi)
    # The interpolation, applied to the logits: z[p] = (p-⌊p⌋) z[⌈p⌉] + (1-p+⌊p⌋) z[⌊p⌋].
    bias = weight * z_hi + (1.0 - weight) * z_lo
    visible = causal_mask(lq, k.shape[2], device=q.device)
    return (bias * visible).to(q.dtype)


class CoPE(PositionScheme):
    r"""Contextual position encoding as a score bias (arXiv:2405.18719).

    ``max_position`` is ``p_max`` (the table has ``p_max + 1`` rows of size ``head_dim``);
    ``num_heads`` gives each head its own table (default: one table shared by all heads, as
    in the paper). The table starts at zero, as in the paper's code, so an untrained CoPE
    layer is NoPE. ``gate_scale`` multiplies ``q·k`` inside the gate sigmoid (default
    ``1/sqrt(head_dim)``, see :func:`cope_gates`).

    CoPE ignores the integer position ids: its positions come from the content. It requires
    ``causal=True`` (``requires_causal``). Padding needs no special care under a causal mask:
    a left-padded key only changes ``p_ij`` for keys ``j`` before it, which are padding too.
    :meth:`score_bias` returns ``[batch, heads, Lq, Lk]`` in ``q``'s dtype (see
    :func:`cope_bias`).
    """

    requires_causal = True
    causal_reason = "a key's position counts the gated keys from it up to the query"

    def __init__(
        self,
        head_dim: int,
        max_position: int,
        *,
        num_heads: int | None = None,
        gate_scale: float | None = None,
    ):
        super().__init__()
        self.head_dim = check_int("head_dim", head_dim, minimum=1)
        self.max_position = check_int("max_position", max_position, minimum=1)
        self.num_heads = None if num_heads is None else check_int("num_heads", num_heads, minimum=1)
        self.gate_scale = (
            None
            if gate_scale is None
            else check_float("gate_scale", gate_scale, minimum=0.0, strict_minimum=True)
        )
        shape = (self.max_position + 1, self.head_dim)
        if self.num_heads is not None:
            shape = (self.num_heads, *shape)
        self.embeddings = nn.Parameter(torch.zeros(shape))

    def score_bias(self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        return cope_bias(q, k, self.embeddings, scale=self.gate_scale)

    def extra_repr(self) -> str:
        heads = "shared" if self.num_heads is None else f"num_heads={self.num_heads}"
        return (
            f"places={self.places}, head_dim={self.head_dim}, "
            f"max_position={self.max_position}, {heads}"
        )
