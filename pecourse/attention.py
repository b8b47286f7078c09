r"""Attention, and the four places where position can enter it.

Scaled dot-product attention for one head is

.. math::
    o_i = \sum_j \operatorname{softmax}_j\!\Big(\frac{q_i^\top k_j}{\sqrt{d}} + b_{ij}\Big)\, v_j .

On its own it has no idea where token ``j`` sits: permute the tokens and the outputs are
permuted the same way. Every positional scheme in this course injects position at one or
more of four places, and :class:`PositionScheme` has one hook for each:

1. **the input** — :meth:`PositionScheme.embed` adds a vector to the token embedding
   (learned absolute, sinusoidal);
2. **queries and keys** — :meth:`PositionScheme.rotate` transforms ``q`` and ``k`` before the
   dot product (RoPE and its scalings, xPos, multidimensional RoPE; xPos also scales);
3. **the scores** — :meth:`PositionScheme.score_bias` returns ``b_ij`` added to the logits
   (ALiBi, T5 buckets, Shaw's key term, CoPE);
4. **values and outputs** — :meth:`PositionScheme.transform_values` and
   :meth:`PositionScheme.transform_output` (VO-RoPE, Shaw's value term).

The base class implements all four as "do nothing", which *is* NoPE; a scheme's ``places``
are read off the hooks it overrides (:data:`HOOKS`). :func:`attention` calls the hooks in
the order a forward pass meets the places; a model takes one scheme per layer (a *plan*),
so iRoPE is a plan (RoPE, RoPE, RoPE, NoPE), not a new architecture. The design, and how
to add a scheme, is in ``docs/architecture.md``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ._validate import check_int, check_tensor

__all__ = [
    "PLACES",
    "HOOKS",
    "PositionScheme",
    "NoPE",
    "attention",
    "causal_mask",
    "relative_offsets",
    "MultiHeadAttention",
]

#: The four places position enters attention, in the order a forward pass meets them.
PLACES = ("input", "qk", "scores", "values")

#: The hooks of each place. A scheme uses a place exactly when it overrides one of them.
HOOKS = {
    "input": ("embed",),
    "qk": ("rotate",),
    "scores": ("score_bias",),
    "values": ("transform_values", "transform_output"),
}


class _OverriddenPlaces:
    """``places``, read off the hooks a scheme class overrides (see :data:`HOOKS`).

    A wrapper (a scheme holding another as ``inner``, e.g. a sliding window around RoPE)
    overrides hooks to pass them through: for an instance, a passed-through hook counts only
    where the inner scheme acts, or where the wrapper adds something itself
    (``wrapper_places``)."""

    def __get__(self, scheme, cls) -> tuple[str, ...]:
        places = tuple(
            place
            for place, hooks in HOOKS.items()
            if any(getattr(cls, h) is not getattr(PositionScheme, h) for h in hooks)
        )
        inner = None if scheme is None else scheme._modules.get("inner")
        if isinstance(inner, PositionScheme):
            places = tuple(p for p in places if p in inner.places or p in cls.wrapper_places)
        return places


class PositionScheme(nn.Module):
    """Base class for positional schemes: every hook is the identity (that is NoPE).

    Subclasses override the hooks of the places they use; :attr:`places` is read off the
    overridden hooks (:data:`HOOKS`), never declared. Positions are integer tensors shaped
    ``[seq]`` (shared by the batch) or ``[batch, seq]`` (multidimensional schemes take
    coordinates, see theirs).
    """

    #: True for schemes whose maths only holds under a causal mask (xPos, CoPE), and why: the
    #: error a call with ``causal=False`` gets gives the scheme's own reason.
    requires_causal: bool = False
    causal_reason: str = ""
    #: True for schemes whose output hook reads the attention probabilities (Shaw's value
    #: term): attention() then cannot hand the softmax to a fused kernel.
    needs_probs: bool = False
    #: Input schemes only: the model multiplies the token embedding by √d_model before
    #: ``embed`` (Vaswani et al. 2017, section 3.4, with the sinusoidal table).
    scale_embeddings: bool = False

    #: The places this scheme uses, in :data:`PLACES` order (on the class and its instances).
    places = _OverriddenPlaces()
    #: Wrappers only: the places the wrapper acts at itself, whatever its inner scheme does.
    wrapper_places: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "places" in vars(cls):  # a hand-written list can disagree with the hooks
            raise TypeError(
                f"{cls.__name__} sets places by hand; they are read off the hooks it overrides "
                "(pecourse.attention.HOOKS): remove the line (a wrapper names the places it adds "
                "itself in wrapper_places)"
            )

    # 1. the input ---------------------------------------------------------------------
    def embed(self, hidden: Tensor, positions: Tensor) -> Tensor:
        """``hidden`` ``[batch, seq, d_model]`` -> the same shape with position added."""
        return hidden

    # 2. queries and keys ----------------------------------------------------------------
    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        """``q`` ``[b, h, Lq, d]`` and ``k`` ``[b, h_kv, Lk, d]`` (before the grouped-query
        repeat) -> transformed ``q, k`` of the same shapes."""
        return q, k

    # 3. the scores ------------------------------------------------------------------------
    def score_bias(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> Tensor | None:
        """A bias broadcastable to ``[b, h, Lq, Lk]`` added to ``q·k/√d``, or ``None``.

        ``q`` and ``k`` are the transformed ones, ``k`` already repeated to ``h`` heads."""
        return None

    # 4. values and outputs --------------------------------------------------------------
    def transform_values(self, v: Tensor, k_positions: Tensor) -> Tensor:
        """``v`` ``[b, h_kv, Lk, d]`` -> values as the attention averages them."""
        return v

    def transform_output(
        self, out: Tensor, probs: Tensor | None, q_positions: Tensor, k_positions: Tensor
    ) -> Tensor:
        """``out`` ``[b, h, Lq, d]`` -> the head's output. ``probs`` ``[b, h, Lq, Lk]`` are the
        attention weights when :attr:`needs_probs` is set (``None`` on the fused path)."""
        return out

    def extra_repr(self) -> str:
        return f"places={self.places}"


class NoPE(PositionScheme):
    """No positional encoding (Kazemnejad et al., 2023, arXiv:2305.19466).

    Uses none of the four places. Under a causal mask the model can still infer order
    (a token sees only its prefix), which is why decoder-only NoPE models work at all.
    """


def causal_mask(query_len: int, key_len: int, *, device=None) -> Tensor:
    """Boolean ``[query_len, key_len]``, True where query ``i`` may see key ``j``.

    Queries are aligned to the *end* of the keys (``i`` sits at key position
    ``key_len - query_len + i``), which is what decoding with a cache needs.
    """
    query_len = check_int("query_len", query_len, minimum=1)
    key_len = check_int("key_len", key_len, minimum=1)
    if query_len > key_len:
        raise ValueError(
            f"query_len ({query_len}) must be <= key_len ({key_len}) for a causal mask"
        )
    i = torch.arange(query_len, device=device)[:, None] + (key_len - query_len)
    j = torch.arange(key_len, device=device)[None, :]
    return j <= i


def relative_offsets(q_positions: Tensor, k_positions: Tensor) -> Tensor:
    """``j - i``, key position minus query position, ``[..., Lq, Lk]`` (T5's sign convention).

    Integer positions come back as int64 (exact for any position); fractional ones keep
    their dtype. Negative for keys before the query.
    """
    if not q_positions.is_floating_point():
        q_positions, k_positions = q_positions.long(), k_positions.long()
    return k_positions[..., None, :] - q_positions[..., :, None]  # j - i


def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> None:
    """``q`` ``[batch, heads, Lq, d]``, ``k`` and ``v`` ``[batch, kv_heads, Lk, d]``, float, with
    ``heads`` a multiple of ``kv_heads`` (grouped-query attention)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t, ndim=4, floating=True)
    if k.shape != v.shape:
        raise ValueError(
            f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}"
        )
    b, h, _, d = q.shape
    if k.shape[0] != b or k.shape[3] != d:
        raise ValueError(
            f"k must be [batch={b}, kv_heads, Lk, head_dim={d}] to match q, got {tuple(k.shape)}"
        )
    if h % k.shape[1]:
        raise ValueError(f"query heads ({h}) must be a multiple of key/value heads ({k.shape[1]})")


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    scheme: PositionScheme | None = None,
    *,
    q_positions: Tensor | None = None,
    k_positions: Tensor | None = None,
    causal: bool = True,
    padding_mask: Tensor | None = None,
    return_probs: bool = False,
    fused: bool = False,
):
    r"""Attention with a positional scheme plugged in through its hooks.

    Shapes: ``q`` ``[batch, heads, Lq, d]``; ``k`` and ``v`` ``[batch, kv_heads, Lk, d]``
    where ``heads`` is a multiple of ``kv_heads`` (grouped-query attention). Positions
    default to ``0..L-1``; with ``causal=True`` queries align with the last ``Lq`` keys.
    ``padding_mask`` is boolean ``[batch, Lk]``, True for real tokens. Returns the output
    ``[batch, heads, Lq, d]`` (and the probabilities when ``return_probs``).

    ``fused=True`` runs the same hooks in the same order, but hands the softmax and the
    weighted sum to ``F.scaled_dot_product_attention`` (one fused kernel, several times
    faster at long lengths). It applies only where the probabilities are not needed: not
    with ``return_probs``, and not for a scheme that sets ``needs_probs`` (Shaw's value
    term), which takes the step-by-step path whatever ``fused`` says.
    """
    _check_qkv(q, k, v)
    (b, h, lq, d), (h_kv, lk) = q.shape, k.shape[1:3]
    scheme = scheme if scheme is not None else NoPE()
    if scheme.requires_causal and not causal:
        raise ValueError(
            f"{type(scheme).__name__} requires causal=True, got causal=False: it is only "
            f"defined for keys at or before the query ({scheme.causal_reason})"
        )
    offset = lk - lq if causal else 0
    if q_positions is None:
        q_positions = torch.arange(lq, device=q.device) + offset
    if k_positions is None:
        k_positions = torch.arange(lk, device=q.device)
    group = h // h_kv  # grouped-query attention: each key/value head serves `group` queries

    # 2. queries and keys
    q, k = scheme.rotate(q, k, q_positions, k_positions)
    k = k.repeat_interleave(group, dim=1) if group > 1 else k
    # 3. the scores
    bias = scheme.score_bias(q, k, q_positions, k_positions)
    # 4. values (then the outputs, below)
    v = scheme.transform_values(v, k_positions)
    v = v.repeat_interleave(group, dim=1) if group > 1 else v
    # Only padding can hide every key from a query (a causal query always sees itself).
    fully_masked_rows = padding_mask is not None

    if fused and not return_probs and not scheme.needs_probs:
        # A plain square causal mask is what the fused kernel's is_causal means exactly.
        plain_causal = causal and lq == lk and bias is None and padding_mask is None
        visible = None if plain_causal else _visibility(b, lq, lk, causal, padding_mask, q.device)
        out = _fused_attention(q, k, v, bias, visible, plain_causal)
        if fully_masked_rows:  # such a query gets zeros, not NaNs
            out = torch.nan_to_num(out, nan=0.0)
        return scheme.transform_output(out, None, q_positions, k_positions)

    visible = _visibility(b, lq, lk, causal, padding_mask, q.device)

    scores = (q @ k.transpose(-2, -1)) / math.sqrt(d)
    if bias is not None:
        scores = scores + bias
    if visible is not None:
        scores = scores.masked_fill(~visible, float("-inf"))
    # Softmax in at least float32 (bf16/fp16 logits lose the small differences that matter);
    # float64 stays float64, so the reference path is exact to double round-off.
    probs = torch.softmax(scores.to(torch.promote_types(scores.dtype, torch.float32)), dim=-1)
    probs = probs.to(q.dtype)
    if fully_masked_rows:  # a query whose every key is padding gets zeros, not NaNs
        probs = torch.nan_to_num(probs, nan=0.0)
    out = scheme.transform_output(probs @ v, probs, q_positions, k_positions)
    return (out, probs) if return_probs else out


def _visibility(b, lq, lk, causal, padding_mask, device) -> Tensor | None:
    """Boolean mask broadcastable to ``[b, h, Lq, Lk]``: True where a query may see a key."""
    visible = causal_mask(lq, lk, device=device) if causal else None
    if padding_mask is not None:
        check_tensor("padding_mask", padding_mask, ndim=2)
        if padding_mask.dtype != torch.bool or tuple(padding_mask.shape) != (b, lk):
            raise ValueError(
                f"padding_mask must be a bool tensor [batch={b}, Lk={lk}], got "
                f"{padding_mask.dtype} {tuple(padding_mask.shape)}"
            )
        keys = padding_mask[:, None, None, :]
        visible = keys if visible is None else visible & keys
    return visible


def _fused_attention(q, k, v, bias, visible, is_causal=False) -> Tensor:
    """softmax(q·k/√d + bias, masked) · v in one ``scaled_dot_product_attention`` call."""
    mask = visible
    if bias is not None:
        mask = bias.to(q.dtype)
        if visible is not None:
            mask = mask.masked_fill(~visible, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)


class MultiHeadAttention(nn.Module):
    """Multi-head (optionally grouped-query) self-attention over one positional scheme.

    ``x`` ``[batch, seq, d_model]`` -> ``[batch, seq, d_model]``. The scheme's input hook is
    *not* called here: adding position to the embedding happens once, at the model input.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        scheme: PositionScheme | None = None,
        *,
        num_kv_heads: int | None = None,
        bias: bool = False,
        fused: bool = False,
    ):
        super().__init__()
        #: Hand softmax and the weighted sum to PyTorch's fused kernel (see :func:`attention`).
        self.fused = bool(fused)
        d_model = check_int("d_model", d_model, minimum=1)
        num_heads = check_int("num_heads", num_heads, minimum=1)
        num_kv_heads = check_int(
            "num_kv_heads", num_heads if num_kv_heads is None else num_kv_heads, minimum=1
        )
        if d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        if num_heads % num_kv_heads:
            raise ValueError(
                f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})"
            )
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = d_model // num_heads
        self.q_proj = nn.Linear(d_model, num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(num_heads * self.head_dim, d_model, bias=bias)
        self.scheme = scheme if scheme is not None else NoPE()

    def forward(
        self,
        x: Tensor,
        positions: Tensor | None = None,
        *,
        causal: bool = True,
        padding_mask: Tensor | None = None,
        return_probs: bool = False,
    ):
        check_tensor("x", x, ndim=3, floating=True)
        b, s, _ = x.shape
        h, h_kv, d = self.num_heads, self.num_kv_heads, self.head_dim
        # Each projection its own layer (a hook on q_proj sees the queries, chapter 10), viewed
        # as [batch, heads, seq, head_dim] without a copy: the rotation and the attention
        # kernels read these strides as they are (and the rotation's result keeps them).
        q = self.q_proj(x).view(b, s, h, d).transpose(1, 2)
        k = self.k_proj(x).view(b, s, h_kv, d).transpose(1, 2)
        v = self.v_proj(x).view(b, s, h_kv, d).transpose(1, 2)
        result = attention(
            q,
            k,
            v,
            self.scheme,
            q_positions=positions,
            k_positions=positions,
            causal=causal,
            padding_mask=padding_mask,
            return_probs=return_probs,
            fused=self.fused,
        )
        out, probs = result if return_probs else (result, None)
        out = self.o_proj(out.transpose(1, 2).reshape(b, s, self.num_heads * self.head_dim))
        return (out, probs) if return_probs else out
