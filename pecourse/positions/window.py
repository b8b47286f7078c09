r"""Attention spans as schemes: a sliding window or fixed chunks around any inner scheme.

The hybrids of chapter 11 give their RoPE layers a limited span and their NoPE layers the
whole context. Two kinds of span appear in released models:

* a **sliding window** of ``W`` keys: query ``i`` sees keys ``j`` with ``0 <= i - j < W``
  (Longformer, Beltagy et al. 2020, arXiv:2004.05150; Command R7B / Command A's RoPE layers,
  ``sliding_window = 4096`` in transformers' ``Cohere2``). Windows overlap, so ``L`` stacked
  windowed layers relay information up to ``L·(W - 1)`` tokens back;
* **chunks** of ``C`` tokens: query ``i`` sees keys ``j <= i`` with ``i // C == j // C``
  (Llama 4's RoPE layers, ``attention_chunk_size = 8192``). Chunks do not overlap: no
  stack of chunked layers carries anything across a chunk boundary.

A span is a score bias of ``-inf`` on the keys outside it, so it wraps any scheme as one more
:class:`~pecourse.attention.PositionScheme`: :class:`SlidingWindow` and :class:`Chunked` keep
the inner scheme's rotation and bias and add the mask. Both match transformers'
``sliding_window_overlay`` / ``chunked_overlay`` (``masking_utils``, transformers 5.24) under
the causal mask.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .._validate import check_int, check_tensor
from ..attention import PositionScheme, relative_offsets

__all__ = ["SlidingWindow", "Chunked", "outside_window", "outside_chunk"]


def _check_positions(q_positions: Tensor, k_positions: Tensor) -> None:
    check_tensor("q_positions", q_positions, ndim=(1, 2), floating=False)
    check_tensor("k_positions", k_positions, ndim=(1, 2), floating=False)


def outside_window(q_positions: Tensor, k_positions: Tensor, window: int) -> Tensor:
    """True where key ``j`` is ``window`` or more positions before query ``i``: ``[.., Lq, Lk]``."""
    window = check_int("window", window, minimum=1)
    _check_positions(q_positions, k_positions)
    return relative_offsets(q_positions, k_positions) <= -window  # j - i <= -window


def outside_chunk(q_positions: Tensor, k_positions: Tensor, chunk: int) -> Tensor:
    """True where key ``j`` lies in another chunk of ``chunk`` positions than query ``i``."""
    chunk = check_int("chunk", chunk, minimum=1)
    _check_positions(q_positions, k_positions)
    q_chunk, k_chunk = (
        torch.div(p, chunk, rounding_mode="floor") for p in (q_positions, k_positions)
    )
    return q_chunk[..., :, None] != k_chunk[..., None, :]


class _Span(PositionScheme):
    """The inner scheme's rotation and bias, plus ``-inf`` on the keys outside the span."""

    wrapper_places = ("scores",)  # the mask; the inner scheme's places pass through

    def __init__(self, inner: PositionScheme, size: int, name: str):
        super().__init__()
        if not isinstance(inner, PositionScheme):
            raise TypeError(f"inner must be a PositionScheme, got {type(inner).__name__}")
        unsupported = set(inner.places) - {"qk", "scores"}
        if unsupported:
            raise ValueError(
                f"inner scheme {type(inner).__name__} acts at {sorted(unsupported)}; a span "
                "wraps schemes that act at the queries/keys or the scores only"
            )
        self.inner = inner
        self.size = check_int(name, size, minimum=1)
        self.requires_causal = inner.requires_causal
        self.causal_reason = inner.causal_reason

    def _outside(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        raise NotImplementedError

    def rotate(self, q, k, q_positions, k_positions):
        return self.inner.rotate(q, k, q_positions, k_positions)

    def score_bias(self, q, k, q_positions, k_positions):
        outside = self._outside(q_positions.to(q.device), k_positions.to(q.device))
        if outside.ndim == 3:  # [batch, Lq, Lk] -> [batch, 1 head, Lq, Lk]
            outside = outside[:, None]
        bias = torch.zeros(outside.shape, dtype=q.dtype, device=q.device)
        bias = bias.masked_fill(outside, float("-inf"))
        inner = self.inner.score_bias(q, k, q_positions, k_positions)
        return bias if inner is None else inner + bias


class SlidingWindow(_Span):
    r"""``inner`` restricted to a causal sliding window of ``window`` keys (the query's own included).

    Query ``i`` keeps the keys with ``i - j < window`` (transformers' ``sliding_window_overlay``:
    ``kv_idx > q_idx - sliding_window``). Refuses a ``window`` < 1, an inner object that is not
    a scheme, and inner schemes acting at the input or the values.
    """

    def __init__(self, inner: PositionScheme, window: int):
        super().__init__(inner, window, "window")

    @property
    def window(self) -> int:
        return self.size

    def _outside(self, q_positions, k_positions):
        return outside_window(q_positions, k_positions, self.size)

    def extra_repr(self) -> str:
        return f"window={self.size}"


class Chunked(_Span):
    r"""``inner`` restricted to fixed chunks of ``chunk`` positions (Llama 4's RoPE layers).

    Query ``i`` keeps the keys with ``i // chunk == j // chunk`` (transformers'
    ``chunked_overlay`` without left padding). Refuses what :class:`SlidingWindow` refuses.
    """

    def __init__(self, inner: PositionScheme, chunk: int):
        super().__init__(inner, chunk, "chunk")

    @property
    def chunk(self) -> int:
        return self.size

    def _outside(self, q_positions, k_positions):
        return outside_chunk(q_positions, k_positions, self.size)

    def extra_repr(self) -> str:
        return f"chunk={self.size}"
