r"""ALiBi: attention with linear biases (Press, Smith and Lewis 2022, arXiv:2108.12409).

Place: **the scores** (see :mod:`pecourse.attention`). No position vector is ever added;
instead each head ``h`` penalises a key linearly in its distance from the query,

.. math::
    \operatorname{softmax}\big(q_i^\top k_j / \sqrt{d} - m_h\,(i - j)\big), \qquad j \le i,

(section 3 of the paper, and its figure 3). The slopes ``m_h`` are fixed, not learned: a
geometric sequence, so some heads look far back (small slope) and some barely past the
previous few tokens (large slope). Because the penalty keeps growing with distance, a model
trained on short inputs still produces sensible, recency-weighted scores on longer ones —
the paper's "train short, test long".

Production code (BLOOM, MPT) builds the bias from the *key index alone*, ``m_h · j``, not
from ``-m_h (i - j)``. In row ``i`` the two differ by the constant ``m_h · i``, and softmax
ignores a constant added to a whole row, so under a causal mask the probabilities are the
same; :func:`alibi_bias` uses the distance form, which is what the paper writes and what
still makes sense without a causal mask (:func:`alibi_bias` with ``causal=False``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .._validate import check_int, check_positions, check_tensor
from ..attention import PositionScheme, relative_offsets

__all__ = ["slopes", "alibi_bias", "alibi_bias_from_positions", "ALiBi"]


def _geometric_exponents(n: int) -> Tensor:
    # For n a power of two the slopes are start·ratio^(k-1) with start = ratio = 2^(-8/n),
    # i.e. m_k = 2^(-8k/n), k = 1..n. We keep the exponent -8k/n (exact in float64) and
    # round once at the end. BLOOM instead raises a float32 ratio to integer powers, which
    # lands a few ulps away (and which ulps depends on how torch vectorises the pow).
    k = torch.arange(1, n + 1, dtype=torch.float64)
    return -8.0 * k / n


def slopes(num_heads: int) -> Tensor:
    r"""The ALiBi head slopes ``m_h``: a float32 tensor ``[num_heads]``, in head order.

    Press et al. 2022 (arXiv:2108.12409), section 3: for ``n`` a power of two the slopes are
    the geometric sequence starting at ``2^{-8/n}`` with that same ratio,
    ``m_k = 2^{-8k/n}`` (8 heads: 1/2, 1/4, ..., 1/256). The paper only trains power-of-two
    head counts; for the others this follows the workaround in the authors' reference code
    (``get_slopes``): take the slopes of the closest power of two below ``n``, then fill up
    with every other slope (the 1st, 3rd, 5th, ...) of the next power of two (so 6 heads get
    1/4, 1/16, 1/64, 1/256, 1/2, 1/8: not sorted). BLOOM (transformers'
    ``build_alibi_tensor``) uses the same rule. Each slope is the exact ``2^{-8k/n}`` rounded
    once to float32, which agrees with BLOOM's float32 arithmetic to a few ulps (relative
    difference below 3e-6).
    """
    num_heads = check_int("num_heads", num_heads, minimum=1)
    low = 1 << (num_heads.bit_length() - 1)  # closest power of two <= num_heads
    exponents = _geometric_exponents(low)
    if low != num_heads:
        # Every other slope of the next power of two: 2^(-8(2k-1)/(2·low)), k = 1..n-low.
        extra = _geometric_exponents(2 * low)[0::2][: num_heads - low]
        exponents = torch.cat([exponents, extra])
    return torch.exp2(exponents).to(torch.float32)  # m = 2^exponent, rounded once


def alibi_bias_from_positions(
    head_slopes: Tensor, q_positions: Tensor, k_positions: Tensor, *, causal: bool = True
) -> Tensor:
    r"""ALiBi bias for arbitrary query and key positions.

    ``b_{h,i,j} = -m_h · (i - j)`` for keys at or before the query (``causal=True``; keys
    after the query get 0, since the causal mask removes them anyway), or
    ``-m_h · |i - j|`` (``causal=False``, a symmetric form for encoders; the paper itself
    only trains causal language models), with ``i``/``j`` the query/key *positions*, not
    indices. Press et al. 2022 (arXiv:2108.12409), section 3.

    Shapes: ``head_slopes`` ``[heads]``; positions ``[L]`` or ``[batch, L]``. Returns
    ``[heads, Lq, Lk]`` when both positions are 1-D, else ``[batch, heads, Lq, Lk]``
    (float32).
    """
    head_slopes = check_tensor("head_slopes", head_slopes, ndim=1, floating=True)
    q_positions = check_positions("q_positions", q_positions)
    k_positions = check_positions("k_positions", k_positions)
    return _alibi_bias(head_slopes, q_positions, k_positions, causal)


def _alibi_bias(head_slopes: Tensor, q_positions: Tensor, k_positions: Tensor, causal: bool):
    """:func:`alibi_bias_from_positions` without the checks (the scheme's hook)."""
    # j - i, in int64 so large positions stay exact; broadcasts over a batch axis.
    # (Negating the integer distance, not the slope, keeps the diagonal at +0, not -0.)
    neg_distance = relative_offsets(q_positions, k_positions)
    if causal:
        neg_distance = neg_distance.clamp(max=0)  # -(i - j); keys after i are masked: 0
    else:
        neg_distance = -neg_distance.abs()  # -|i - j|
    m = head_slopes.to(torch.float32)[:, None, None]  # [heads, 1, 1]
    if neg_distance.ndim == 3:
        return m * neg_distance[:, None].to(torch.float32)  # [batch, heads, Lq, Lk]
    return m * neg_distance.to(torch.float32)  # [heads, Lq, Lk]


def alibi_bias(num_heads: int, query_len: int, key_len: int, *, causal: bool = True) -> Tensor:
    r"""The ALiBi bias ``[num_heads, query_len, key_len]`` (float32) for contiguous positions.

    Press et al. 2022 (arXiv:2108.12409), section 3 and figure 3. ``causal=True``:
    ``-m_h (i - j)`` for ``j ≤ i`` and 0 for ``j > i`` (the causal mask handles those).
    ``causal=False``: the symmetric ``-m_h |i - j|``. Positions follow
    :func:`pecourse.attention.attention`: keys sit at ``0..key_len-1``; with ``causal`` the
    queries are the *last* ``query_len`` positions (decoding with a cache), otherwise they
    start at 0.
    """
    num_heads = check_int("num_heads", num_heads, minimum=1)
    query_len = check_int("query_len", query_len, minimum=1)
    key_len = check_int("key_len", key_len, minimum=1)
    if causal and query_len > key_len:
        raise ValueError(
            f"query_len ({query_len}) must be <= key_len ({key_len}) with causal=True: "
            "the queries are the last query_len of the key positions"
        )
    offset = key_len - query_len if causal else 0
    q_positions = torch.arange(query_len) + offset
    k_positions = torch.arange(key_len)
    return alibi_bias_from_positions(slopes(num_heads), q_positions, k_positions, causal=causal)


class ALiBi(PositionScheme):
    r"""ALiBi as a position scheme: a fixed linear bias on the scores, one slope per head.

    Press et al. 2022 (arXiv:2108.12409). :meth:`score_bias` returns
    :func:`alibi_bias_from_positions` for the query and key positions it is given (so a
    cache offset or custom position ids are honoured). ``causal=False`` gives the symmetric
    ``-m|i-j|`` bias for bidirectional attention. No parameters are learned.
    """

    def __init__(self, num_heads: int, *, causal: bool = True):
        super().__init__()
        self.num_heads = check_int("num_heads", num_heads, minimum=1)
        self.causal = bool(causal)
        # A buffer so .to(device) moves it; not persistent, since it is a fixed function.
        self.register_buffer("slopes", slopes(self.num_heads), persistent=False)

    def score_bias(self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        if q.shape[1] != self.num_heads:
            raise ValueError(
                f"q has {q.shape[1]} heads but this ALiBi was built for num_heads={self.num_heads}"
            )
        bias = _alibi_bias(
            self.slopes, q_positions.to(q.device), k_positions.to(q.device), self.causal
        )
        return bias.to(q.dtype)

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, causal={self.causal}, places={self.places}"
