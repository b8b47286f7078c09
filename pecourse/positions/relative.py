r"""Relative positions on the scores: Shaw et al.'s clipped distances and T5's buckets.

Place: **the scores** (and, for Shaw's value term, **values and outputs**; see
:mod:`pecourse.attention`). Both families make attention depend on the offset ``j - i``
between key and query instead of on where either one sits.

* **Shaw, Uszkoreit and Vaswani 2018** (arXiv:1803.02155). Every clipped offset
  ``r = clip(j - i, -k, k)`` owns two learned vectors ``w^K_r`` and ``w^V_r`` of the head
  width. The key vector enters the score (eq. 4, written as the sum of eq. 5),

  .. math:: e_{ij} = \frac{q_i^\top k_j + q_i^\top a^K_{ij}}{\sqrt{d}}, \qquad
            a^K_{ij} = w^K_{\mathrm{clip}(j-i,\,k)},

  and the value vector enters the output (eq. 3),
  :math:`z_i = \sum_j \alpha_{ij}\,(v_j + a^V_{ij})`. (Equation numbers follow the arXiv
  text, where the softmax is unnumbered.) Beyond distance ``k`` all offsets share one
  vector: in the paper's Table 2, BLEU barely moves once ``k ≥ 2``.
* **T5** (Raffel et al. 2020, arXiv:1910.10683, section 2.1). One learned *scalar* per head
  per bucket, added to the logits (T5 itself shares the table across all layers). Offsets
  are bucketed: the first half of the buckets are exact (0, 1, 2, ...), the rest are
  logarithmically wider up to ``max_distance``, beyond which everything shares the last
  bucket (T5: 32 buckets, ``max_distance`` 128). Bidirectional (encoder) attention spends
  half of the buckets on keys after the query; causal (decoder) attention spends all of
  them on keys before it. :func:`t5_bucket` matches transformers'
  ``T5Attention._relative_position_bucket`` exactly, with the same sign convention:
  ``relative_position = key_position - query_position``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .._validate import check_int, check_positions, check_tensor
from ..attention import PositionScheme, relative_offsets

__all__ = [
    "clipped_relative_ids",
    "shaw_relative_ids",
    "shaw_key_term",
    "shaw_value_term",
    "ShawRelative",
    "ShawKeysOnly",
    "t5_bucket",
    "t5_bias",
    "T5RelativeBias",
]


# --------------------------------------------------------------------------------------
# Shaw et al. 2018
# --------------------------------------------------------------------------------------
def clipped_relative_ids(q_positions: Tensor, k_positions: Tensor, max_distance: int) -> Tensor:
    r"""Row indices ``clip(j - i, -k, k) + k`` into a ``[2k+1, d]`` table of offsets.

    Shaw et al. 2018 (arXiv:1803.02155), the clipping of section 3.2:
    ``clip(x, k) = max(-k, min(k, x))``, shifted by ``k`` so offsets ``-k..k`` become rows
    ``0..2k``. ``i`` and ``j`` are query and key *positions*. Shapes: positions ``[L]`` or
    ``[batch, L]``; returns ``[Lq, Lk]`` (or ``[batch, Lq, Lk]``), int64.
    """
    max_distance = check_int("max_distance", max_distance, minimum=1)
    q_positions = check_positions("q_positions", q_positions)
    k_positions = check_positions("k_positions", k_positions)
    return _clipped_ids(q_positions, k_positions, max_distance)


def _clipped_ids(q_positions: Tensor, k_positions: Tensor, max_distance: int) -> Tensor:
    offset = relative_offsets(q_positions, k_positions)  # j - i
    return offset.clamp(-max_distance, max_distance) + max_distance  # clip(j-i, k) + k


def shaw_relative_ids(query_len: int, key_len: int, max_distance: int) -> Tensor:
    r"""``[query_len, key_len]`` int64 ids ``clip(j - i, -k, k) + k`` for positions from 0.

    Shaw et al. 2018 (arXiv:1803.02155), section 3.2. The result is a Toeplitz matrix: it
    depends on ``j - i`` only, constant along every diagonal.
    """
    query_len = check_int("query_len", query_len, minimum=1)
    key_len = check_int("key_len", key_len, minimum=1)
    return clipped_relative_ids(torch.arange(query_len), torch.arange(key_len), max_distance)


def _check_table_ids(name: str, table: Tensor, ids: Tensor) -> None:
    check_tensor(name, table, ndim=2, floating=True)
    if table.shape[0] % 2 == 0:
        raise ValueError(f"{name} must have 2k+1 rows (offsets -k..k), got {table.shape[0]} rows")
    check_tensor("ids", ids, ndim=(2, 3), floating=False)
    if ids.numel() and ids.device.type == "cpu" and (ids.min() < 0 or ids.max() >= len(table)):
        raise ValueError(
            f"ids must lie in 0..{table.shape[0] - 1} (rows of {name}), got "
            f"{int(ids.min())}..{int(ids.max())}"
        )


def _expand_ids(ids: Tensor, b: int, h: int, lq: int, lk: int) -> Tensor:
    if ids.shape[-2:] != (lq, lk) or (ids.ndim == 3 and ids.shape[0] not in (1, b)):
        raise ValueError(
            f"ids must be [Lq={lq}, Lk={lk}] or [batch={b}, Lq, Lk], got {tuple(ids.shape)}"
        )
    ids = ids[None, None] if ids.ndim == 2 else ids[:, None]
    return ids.expand(b, h, lq, lk)


def shaw_key_term(q: Tensor, table_k: Tensor, ids: Tensor) -> Tensor:
    r"""Shaw's key term ``q_i · a^K_{ij} / √d``: ``[batch, heads, Lq, Lk]``.

    Shaw et al. 2018 (arXiv:1803.02155), the second summand of eq. 5 (eq. 4 split in two):
    ``e_ij = (q_i·k_j + q_i·a^K_ij) / √d`` with ``a^K_ij = table_k[ids[i, j]]``. In the
    spirit of the paper's efficient implementation (section 3.3), never an ``[Lq, Lk, d]``
    tensor: ``q @ table_kᵀ`` once per query (``[.., Lq, 2k+1]``), then each score picks
    its offset's column.

    Shapes: ``q`` ``[batch, heads, Lq, d]``; ``table_k`` ``[2k+1, d]`` shared by the heads
    (as section 3.3 allows; the paper's base model learned one per head); ``ids``
    ``[Lq, Lk]`` or ``[batch, Lq, Lk]`` from :func:`clipped_relative_ids`. Returns
    ``[batch, heads, Lq, Lk]`` in ``q``'s dtype. The ``1/√d`` is included, because
    :func:`pecourse.attention.attention` adds a score bias unscaled.
    """
    check_tensor("q", q, ndim=4, floating=True)
    _check_table_ids("table_k", table_k, ids)
    b, h, lq, d = q.shape
    if table_k.shape[1] != d:
        raise ValueError(f"table_k must be [2k+1, head_dim={d}], got {tuple(table_k.shape)}")
    per_offset = q @ table_k.to(q.dtype).T / math.sqrt(d)  # q_i·w^K_r / √d, [b, h, Lq, 2k+1]
    return per_offset.gather(-1, _expand_ids(ids, b, h, lq, ids.shape[-1]))


def shaw_value_term(probs: Tensor, table_v: Tensor, ids: Tensor) -> Tensor:
    r"""Shaw's value term ``Σ_j α_ij a^V_{ij}``: ``[batch, heads, Lq, d]``.

    Shaw et al. 2018 (arXiv:1803.02155), eq. 3: ``z_i = Σ_j α_ij (v_j + a^V_ij)``; this is
    the second sum, to be added to the ordinary output ``Σ_j α_ij v_j``. Since
    ``a^V_ij = table_v[ids[i, j]]`` takes only ``2k+1`` values, first add up each query's
    probability per offset (``[.., Lq, 2k+1]``), then take one small matrix product.

    Shapes: ``probs`` ``[batch, heads, Lq, Lk]``; ``table_v`` ``[2k+1, d]``; ``ids``
    ``[Lq, Lk]`` or ``[batch, Lq, Lk]``; returns ``[batch, heads, Lq, d]`` with ``d`` read
    from ``table_v`` (the caller checks it matches the values).
    """
    check_tensor("probs", probs, ndim=4, floating=True)
    _check_table_ids("table_v", table_v, ids)
    b, h, lq, lk = probs.shape
    idx = _expand_ids(ids, b, h, lq, lk)
    # w_{i,r} = Σ_{j : clip(j-i) = r} α_ij — the probability mass at each clipped offset.
    mass = probs.new_zeros(b, h, lq, table_v.shape[0]).scatter_add_(-1, idx, probs)
    return mass @ table_v.to(probs.dtype)  # Σ_r w_{i,r} w^V_r


class ShawRelative(PositionScheme):
    r"""Shaw et al.'s relative position representations (arXiv:1803.02155) as a scheme.

    Learned tables ``w^K`` and ``w^V``, each ``[2k+1, head_dim]`` and shared by all heads
    and positions. :meth:`score_bias` adds the key term (:func:`shaw_key_term`, eq. 4/5,
    already divided by ``√d``); :meth:`transform_output` adds the value term
    (:func:`shaw_value_term`, eq. 3) using the attention probabilities (so ``needs_probs``).
    :class:`ShawKeysOnly` keeps the key term alone. Offsets are taken from the query and key
    positions it is given.
    """

    needs_probs = True  # the value term averages w^V with the attention weights

    def __init__(self, head_dim: int, max_distance: int):
        super().__init__()
        self.head_dim = check_int("head_dim", head_dim, minimum=1)
        self.max_distance = check_int("max_distance", max_distance, minimum=1)
        rows = 2 * self.max_distance + 1
        self.table_k = nn.Parameter(torch.randn(rows, self.head_dim) * 0.02)
        if self.needs_probs:  # only where the value term is used
            self.table_v = nn.Parameter(torch.randn(rows, self.head_dim) * 0.02)

    def _ids(self, q_positions: Tensor, k_positions: Tensor, device) -> Tensor:
        return _clipped_ids(q_positions, k_positions, self.max_distance).to(device)

    def score_bias(self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        if q.shape[-1] != self.head_dim:
            raise ValueError(
                f"q has head_dim {q.shape[-1]} but this ShawRelative has head_dim={self.head_dim}"
            )
        return shaw_key_term(q, self.table_k, self._ids(q_positions, k_positions, q.device))

    def transform_output(
        self, out: Tensor, probs: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> Tensor:
        ids = self._ids(q_positions, k_positions, out.device)
        return out + shaw_value_term(probs, self.table_v, ids)  # Σ α_ij v_j + Σ α_ij a^V_ij

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, max_distance={self.max_distance}, places={self.places}"


class ShawKeysOnly(ShawRelative):
    r"""Shaw et al. with the key term only: the scores place, no value table.

    In the paper's ablation (Table 3) the key term alone scored as well as both: 25.8 BLEU
    on EN-DE dev.
    """

    needs_probs = False
    transform_output = PositionScheme.transform_output  # no value term: NoPE's output hook


# --------------------------------------------------------------------------------------
# T5 buckets
# --------------------------------------------------------------------------------------
def _check_buckets(num_buckets, max_distance, bidirectional: bool) -> tuple[int, int, int]:
    """Validate and return (num_buckets, max_distance, exact buckets per direction)."""
    if bidirectional:
        num_buckets = check_int("num_buckets", num_buckets, minimum=4)
        if num_buckets % 2:
            raise ValueError(
                f"num_buckets must be even when bidirectional=True (half for each "
                f"direction), got {num_buckets}"
            )
        per_side = num_buckets // 2
    else:
        num_buckets = check_int("num_buckets", num_buckets, minimum=2)
        per_side = num_buckets
    max_exact = per_side // 2
    max_distance = check_int("max_distance", max_distance, minimum=1)
    if max_distance <= max_exact:
        raise ValueError(
            f"max_distance must be > {max_exact} (the exact buckets already cover distances "
            f"0..{max_exact - 1} with num_buckets={num_buckets}), got {max_distance}"
        )
    return num_buckets, max_distance, max_exact


def t5_bucket(
    relative_position: Tensor,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> Tensor:
    r"""T5's relative-position bucket for each ``relative_position = key_pos - query_pos``.

    Raffel et al. 2020 (arXiv:1910.10683), section 2.1; identical to transformers'
    ``T5Attention._relative_position_bucket``. With ``n`` buckets per direction
    (``num_buckets/2`` if ``bidirectional``, else ``num_buckets``) and ``n_e = n // 2``:

    .. math::
        \mathrm{bucket}(d) = \begin{cases} d & d < n_e \\
        \min\!\Big(n-1,\; n_e + \big\lfloor \frac{\log(d/n_e)}{\log(\mathrm{max\_distance}/n_e)}
        (n - n_e) \big\rfloor\Big) & d \ge n_e \end{cases}

    where ``d`` is the distance: ``|rel|`` when bidirectional (keys after the query,
    ``rel > 0``, use buckets ``n..2n-1``), ``max(-rel, 0)`` when causal (keys after the
    query all fall in bucket 0; the mask removes them).

    ``relative_position`` is an integer tensor of any shape; returns int64 of the same
    shape, values in ``[0, num_buckets)``.
    """
    check_tensor("relative_position", relative_position, floating=False)
    num_buckets, max_distance, max_exact = _check_buckets(num_buckets, max_distance, bidirectional)
    rel = relative_position.long()
    if bidirectional:
        per_side = num_buckets // 2
        base = (rel > 0).long() * per_side  # keys after the query: the upper half
        distance = rel.abs()
    else:
        per_side = num_buckets
        base = torch.zeros_like(rel)
        distance = (-rel).clamp(min=0)  # causal: only keys before the query count
    # Log-spaced buckets for d >= n_e: n_e + floor(log(d/n_e) / log(max_distance/n_e) · (n - n_e)).
    # (Clamping d to n_e avoids log(0) in lanes the where() below discards anyway; it does
    # not change a single kept value. Float32, as T5 does, so bucket edges agree exactly.)
    d = distance.clamp(min=max_exact).float()
    log_part = (
        torch.log(d / max_exact) / math.log(max_distance / max_exact) * (per_side - max_exact)
    )
    far = (max_exact + log_part.long()).clamp(max=per_side - 1)  # everything past max_distance
    return base + torch.where(distance < max_exact, distance, far)


def t5_bias(
    table: Tensor,
    q_positions: Tensor,
    k_positions: Tensor,
    *,
    bidirectional: bool = True,
    max_distance: int = 128,
) -> Tensor:
    r"""T5's relative attention bias: ``table[bucket(j - i), h]`` as ``[heads, Lq, Lk]``.

    Raffel et al. 2020 (arXiv:1910.10683), section 2.1: one learned scalar per bucket and
    head. ``table`` is ``[num_buckets, heads]`` (``num_buckets`` is read from it); positions
    are ``[L]`` or ``[batch, L]``; returns ``[heads, Lq, Lk]``, or ``[batch, heads, Lq, Lk]``
    for batched positions.
    """
    check_tensor("table", table, ndim=2, floating=True)
    q_positions = check_positions("q_positions", q_positions)
    k_positions = check_positions("k_positions", k_positions)
    return _t5_bias(table, q_positions, k_positions, bidirectional, max_distance)


def _t5_bias(table, q_positions, k_positions, bidirectional, max_distance) -> Tensor:
    """:func:`t5_bias` without the position checks (the scheme's hook)."""
    rel = relative_offsets(q_positions, k_positions)  # j - i
    buckets = t5_bucket(
        rel.to(table.device),
        bidirectional=bidirectional,
        num_buckets=table.shape[0],
        max_distance=max_distance,
    )
    values = table[buckets]  # [..., Lq, Lk, heads]
    return values.movedim(-1, -3)  # [..., heads, Lq, Lk]


class T5RelativeBias(PositionScheme):
    r"""T5's bucketed relative bias as a scheme (Raffel et al. 2020, arXiv:1910.10683).

    A learned ``[num_buckets, num_heads]`` table (an ``nn.Embedding``); :meth:`score_bias`
    returns :func:`t5_bias` for the positions it is given. ``bidirectional=True`` is the
    encoder's form, ``False`` the decoder's. (T5 itself has no ``1/√d`` on ``q·k``; our
    attention keeps it, and the learned bias is added unscaled either way. T5 shares one
    table across all layers; here each scheme instance owns its table.) :meth:`score_bias`
    returns ``[heads, Lq, Lk]`` or ``[batch, heads, Lq, Lk]`` in ``q``'s dtype.
    """

    def __init__(
        self,
        num_heads: int,
        *,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = True,
    ):
        super().__init__()
        self.num_heads = check_int("num_heads", num_heads, minimum=1)
        self.bidirectional = bool(bidirectional)
        self.num_buckets, self.max_distance, _ = _check_buckets(
            num_buckets, max_distance, self.bidirectional
        )
        self.table = nn.Embedding(self.num_buckets, self.num_heads)
        nn.init.normal_(self.table.weight, std=0.02)

    def score_bias(self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        if q.shape[1] != self.num_heads:
            raise ValueError(
                f"q has {q.shape[1]} heads but this T5RelativeBias has num_heads={self.num_heads}"
            )
        pos = (q_positions.to(q.device), k_positions.to(q.device))
        bias = _t5_bias(self.table.weight, *pos, self.bidirectional, self.max_distance)
        return bias.to(q.dtype)

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, num_buckets={self.num_buckets}, "
            f"max_distance={self.max_distance}, bidirectional={self.bidirectional}, "
            f"places={self.places}"
        )
