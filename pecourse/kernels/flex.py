r"""Position biases through FlexAttention: ALiBi, T5 buckets, causal and sliding-window masks.

The readable way to add a position bias (:func:`pecourse.attention.attention` with an
:class:`~pecourse.positions.alibi.ALiBi` or
:class:`~pecourse.positions.relative.T5RelativeBias` scheme) builds the bias as a tensor
``[heads, Lq, Lk]``: quadratic memory, 128 MiB of float32 for 8 heads at 2048 tokens, before
the scores themselves. Yet the bias is a *function* of ``(head, i, j)``:

- ALiBi (Press et al. 2022, arXiv:2108.12409, sec. 3): ``b = -m_h (i - j)``;
- T5 (Raffel et al. 2020, arXiv:1910.10683, sec. 2.1): ``b = table[bucket(j - i), h]``;

and masks are predicates: causal ``j <= i``, sliding window ``i - window < j <= i``.
FlexAttention (``torch.nn.attention.flex_attention``, Dong et al. 2024, arXiv:2412.05496)
takes exactly that: a ``score_mod(score, b, h, q_idx, kv_idx)`` evaluated inside the fused
kernel, and a ``BlockMask`` — for every 128 x 128 tile, is it empty, full or partial —
built from a ``mask_mod(b, h, q_idx, kv_idx)``, so empty tiles are skipped. Nothing
``Lq x Lk`` is ever stored: ALiBi needs ``heads`` slopes, T5 a ``[heads, Lq + Lk - 1]``
table of the bias at every relative distance (linear in length), and the block mask
``(L / 128)^2`` small integers (:func:`memory_report` prints both sides).

Positions follow :func:`pecourse.attention.attention`: keys sit at ``0..Lk-1``; queries at
``q_offset + 0..Lq-1`` with ``q_offset = Lk - Lq`` for causal attention (decoding with a
cache) and 0 otherwise.

FlexAttention is fused only under ``torch.compile`` (eager mode falls back to an
implementation that materialises the scores, with a warning). On a CPU it compiles to a C++
kernel (forward only: no backward on the CPU). :func:`flex_attention` compiles once per
process and reuses the compiled function; pass ``compiled=`` your own
``torch.compile(torch.nn.attention.flex_attention.flex_attention)`` to control caching
(tests compile a fresh one each).

The C++ that inductor generates depends on the CPU's instruction set, so
:func:`flex_attention` trusts a compiled kernel only after it agreed with eager FlexAttention
on a probe of the same configuration (:mod:`pecourse.kernels.verify`), and the ALiBi and T5
wrappers run the CPU kernel only at lengths that are multiples of 16 (:func:`padded_length`).
"""

from __future__ import annotations

import itertools
import logging
import math
import warnings
import weakref
from collections.abc import Callable

import torch
from torch import Tensor

from .._validate import check_int, check_tensor
from ..attention import _check_qkv, causal_mask
from . import verify

log = logging.getLogger(__name__)

__all__ = [
    "alibi_score_mod",
    "t5_score_mod",
    "causal_mask_mod",
    "sliding_window_mask_mod",
    "block_mask",
    "mask_for",
    "padded_length",
    "flex_attention",
    "flex_attention_alibi",
    "flex_attention_t5",
    "materialised_alibi_mask",
    "memory_report",
]

_COMPILED: Callable | None = None


def _compiled_flex() -> Callable:
    global _COMPILED
    if _COMPILED is None:
        from torch.nn.attention.flex_attention import flex_attention as _flex

        _COMPILED = torch.compile(_flex, dynamic=False)
    return _COMPILED


def _default_offset(q_len: int, k_len: int, causal: bool) -> int:
    return k_len - q_len if causal else 0


# --------------------------------------------------------------------------------------
# score_mods and mask_mods
# --------------------------------------------------------------------------------------


def alibi_score_mod(head_slopes: Tensor, *, q_offset: int = 0, causal: bool = True):
    r"""``score_mod`` adding ALiBi's ``-m_h (i - j)`` (arXiv:2108.12409, sec. 3).

    ``head_slopes`` ``[heads]`` (from :func:`pecourse.positions.alibi.slopes`); query ``q_idx``
    sits at position ``i = q_idx + q_offset``, key ``kv_idx`` at ``j = kv_idx``.
    ``causal=True`` uses ``-m_h (i - j)`` (keys after the query must be masked by the block
    mask); ``causal=False`` the symmetric ``-m_h |i - j|``.
    """
    check_tensor("head_slopes", head_slopes, ndim=1, floating=True)
    q_offset = check_int("q_offset", q_offset, minimum=0)
    m = head_slopes.to(torch.float32)

    if causal:

        def score_mod(score, b, h, q_idx, kv_idx):
            # b_ij = -m_h (i - j) = m_h (j - i); j > i never survives the causal mask.
            return score + m[h] * (kv_idx - (q_idx + q_offset)).to(torch.float32)

    else:

        def score_mod(score, b, h, q_idx, kv_idx):
            return score - m[h] * (kv_idx - (q_idx + q_offset)).abs().to(torch.float32)

    return score_mod


def t5_relative_table(
    table: Tensor,
    q_len: int,
    k_len: int,
    *,
    q_offset: int = 0,
    bidirectional: bool = True,
    max_distance: int = 128,
) -> Tensor:
    """The T5 bias at every relative distance: ``[heads, q_len + k_len - 1]`` float32.

    Column ``c`` holds ``table[bucket(j - i), h]`` for ``j - i = c - (q_len - 1 + q_offset)``
    (every distance that occurs for these lengths), using
    :func:`pecourse.positions.relative.t5_bucket` — so the lookup inside the kernel is a plain
    index, with the same buckets as the reference.
    """
    from ..positions.relative import t5_bucket

    check_tensor("table", table, ndim=2, floating=True)
    q_len = check_int("q_len", q_len, minimum=1)
    k_len = check_int("k_len", k_len, minimum=1)
    q_offset = check_int("q_offset", q_offset, minimum=0)
    lowest = -(q_len - 1 + q_offset)  # j - i for the last query and the first key
    rel = torch.arange(lowest, k_len - q_offset, device=table.device)
    buckets = t5_bucket(
        rel, bidirectional=bidirectional, num_buckets=table.shape[0], max_distance=max_distance
    )
    return table[buckets].T.to(torch.float32).contiguous()  # [heads, distances]


def t5_score_mod(
    table: Tensor,
    q_len: int,
    k_len: int,
    *,
    q_offset: int = 0,
    bidirectional: bool = True,
    max_distance: int = 128,
):
    r"""``score_mod`` adding T5's ``table[bucket(j - i), h]`` (arXiv:1910.10683, sec. 2.1).

    ``table`` ``[num_buckets, heads]`` (``T5RelativeBias.table.weight``). The buckets are
    looked up once per relative distance (:func:`t5_relative_table`, linear in length);
    inside the kernel the bias is one gather.
    """
    rel_bias = t5_relative_table(
        table,
        q_len,
        k_len,
        q_offset=q_offset,
        bidirectional=bidirectional,
        max_distance=max_distance,
    )
    shift = q_len - 1  # column of (kv_idx - q_idx) = (j - i) - lowest

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + rel_bias[h, kv_idx - q_idx + shift]

    return score_mod


def causal_mask_mod(q_offset: int = 0):
    """``mask_mod`` keeping key ``j`` for query ``i = q_idx + q_offset`` when ``j <= i``."""
    q_offset = check_int("q_offset", q_offset, minimum=0)

    def mask_mod(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx + q_offset

    return mask_mod


def sliding_window_mask_mod(window: int, q_offset: int = 0):
    """``mask_mod`` for causal sliding-window attention: ``i - window < j <= i``.

    Each query sees itself and the ``window - 1`` keys before it (Mistral's convention,
    ``window`` tokens in all).
    """
    window = check_int("window", window, minimum=1)
    q_offset = check_int("q_offset", q_offset, minimum=0)

    def mask_mod(b, h, q_idx, kv_idx):
        i = q_idx + q_offset
        return (kv_idx <= i) & (i - kv_idx < window)

    return mask_mod


def block_mask(mask_mod, q_len: int, k_len: int, *, device="cpu", block_size: int = 128):
    """The :class:`~torch.nn.attention.flex_attention.BlockMask` of ``mask_mod`` (shared by
    batch and heads): per ``block_size`` tile, empty / full / partial."""
    from torch.nn.attention.flex_attention import create_block_mask

    q_len = check_int("q_len", q_len, minimum=1)
    k_len = check_int("k_len", k_len, minimum=1)
    return create_block_mask(
        mask_mod, None, None, q_len, k_len, device=device, BLOCK_SIZE=block_size
    )


# --------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------


def _closure(fn) -> list[tuple[str, object]]:
    """``(name, value)`` of each filled cell ``fn`` closes over."""
    code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None) or ()
    out = []
    for var, cell in zip(code.co_freevars if code else (), cells):
        try:
            out.append((var, cell.cell_contents))
        except ValueError:  # an empty cell
            pass
    return out


def _fn_key(fn, depth: int = 0):
    """What the compiled kernel depends on in a ``score_mod``/``mask_mod``: its code and the
    scalars it closes over (tensors by shape and dtype only: they are kernel inputs)."""
    if fn is None or depth > 3:
        return None
    cells = []
    for _, val in _closure(fn):
        if isinstance(val, bool | int | float | str | type(None)):
            cells.append(val)
        elif isinstance(val, Tensor):
            cells.append(("tensor", tuple(val.shape), val.dtype, str(val.device)))
        elif callable(val):
            cells.append(_fn_key(val, depth + 1))
        else:
            cells.append(type(val).__name__)
    return getattr(fn, "__code__", type(fn)), tuple(cells)


def _fn_name(fn) -> str:
    """``alibi_score_mod(causal=True, q_offset=0)``: a closure named by its maker and scalars."""
    if fn is None:
        return "none"
    name = getattr(fn, "__qualname__", type(fn).__name__).split(".<locals>")[0]
    scalars = [f"{var}={val}" for var, val in _closure(fn) if isinstance(val, bool | int | float)]
    return f"{name}({', '.join(scalars)})"


_TOKENS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SERIAL = itertools.count()
_STRONG: list = []  # callables that cannot be weakly referenced: kept, so ids are not reused


def _token(fn) -> int:
    """A number for each compiled callable, never reused (unlike ``id``) while it lives."""
    try:
        if fn not in _TOKENS:
            _TOKENS[fn] = next(_SERIAL)
        return _TOKENS[fn]
    except TypeError:
        _STRONG.append(fn)
        return id(fn)


def _eager_flex(q, k, v, **kwargs) -> Tensor:
    from torch.nn.attention.flex_attention import flex_attention as eager

    return eager(q, k, v, **kwargs)


# Dynamo compiles one graph per shape (dynamic=False) and, past config.recompile_limit (8 in
# torch 2.13), warns and runs that function eagerly for good: a notebook that sweeps nine
# lengths would lose the fused kernel. The process-wide FlexAttention gets a higher limit,
# only while it is called.
RECOMPILE_LIMIT = 64


def recompile_limit_name() -> str:
    """The name of dynamo's limit: ``cache_size_limit`` in torch 2.6, ``recompile_limit``
    after the rename of pytorch PR 143709 (Dec 2024); 2.11 and 2.13, checked here, have the
    new name and keep the old one as an alias."""
    config = torch._dynamo.config
    return "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"


def _call_compiled(fn, q, k, v, kwargs) -> Tensor:
    if fn is not None:
        return fn(q, k, v, **kwargs)
    with torch._dynamo.config.patch(**{recompile_limit_name(): RECOMPILE_LIMIT}):
        try:
            return _compiled_flex()(q, k, v, **kwargs)
        except Exception as exc:
            # torch 2.13's CPU FlexAttention template can emit C++ that does not compile when a
            # second, different score_mod is compiled in the same process (an undeclared
            # ``cur_kvSplitSize2``). Clearing dynamo's caches and compiling afresh avoids it.
            if type(exc).__name__ not in ("InductorError", "BackendCompilerFailed"):
                raise
            global _COMPILED
            torch._dynamo.reset()
            _COMPILED = None
            return _compiled_flex()(q, k, v, **kwargs)


def flex_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    score_mod=None,
    block_mask=None,
    compiled: Callable | bool = True,
) -> Tensor:
    """FlexAttention with the course's conventions (``1/sqrt(d)`` scale, GQA allowed).

    ``q`` ``[b, h, Lq, d]``, ``k``/``v`` ``[b, h_kv, Lk, d]``. ``compiled=True`` uses one
    process-wide ``torch.compile``\\ d FlexAttention; a callable is used as given; ``False``
    calls the eager (score-materialising) implementation. Where a compiled path disagreed
    with eager on a probe of this configuration (score_mod and mask, shapes, dtype, device),
    a ``CompiledPathWarning`` says so once and eager answers (:mod:`pecourse.kernels.verify`).
    """
    _check_qkv(q, k, v)
    kwargs = dict(
        score_mod=score_mod,
        block_mask=block_mask,
        scale=1.0 / math.sqrt(q.shape[-1]),
        enable_gqa=q.shape[1] != k.shape[1],
    )
    if compiled is False:
        return _eager_flex(q, k, v, **kwargs)
    fn = None if compiled is True else compiled
    mask_key = None
    if block_mask is not None:
        mask_key = (_fn_key(block_mask.mask_mod), block_mask.BLOCK_SIZE, block_mask.shape)
    shapes = (tuple(q.shape), tuple(k.shape), tuple(v.shape), q.dtype, str(q.device))
    key = (_token(fn or _compiled_flex()), _fn_key(score_mod), mask_key, shapes)

    def probe():
        g = torch.Generator().manual_seed(0)
        qp, kp, vp = (
            torch.randn(t.shape, generator=g).to(device=t.device, dtype=t.dtype) for t in (q, k, v)
        )
        got = _call_compiled(fn, qp, kp, vp, kwargs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # eager's "not compiled" warning
            return got, _eager_flex(qp, kp, vp, **kwargs)

    def describe():
        mask = "none" if block_mask is None else _fn_name(block_mask.mask_mod)
        return (
            f"score_mod {_fn_name(score_mod)}, mask {mask}, q {list(q.shape)}, "
            f"k/v {list(k.shape)}, {q.dtype}, {q.device.type}"
        )

    if verify.trusted("flex_attention", key, probe, describe):
        return _call_compiled(fn, q, k, v, kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the fallback was announced once
        return _eager_flex(q, k, v, **kwargs)


# torch 2.13's compiled CPU FlexAttention gives wrong rows or NaN, intermittently, when a
# sequence length is a multiple of 8 but not of 16 (seen on an AVX2-only AMD EPYC at 8, 24,
# 40, 56, 72, 88 with 4 query heads and 2 or 4 key heads; 16, 32, 48, 64, 80 and odd lengths
# were right). A one-time probe cannot catch an intermittent error, so on a CPU the wrappers
# below run the kernel at lengths rounded up to a multiple of 16: the extra keys are masked
# out, the extra query rows dropped. (The probe still checks every configuration.)
_CPU_MULTIPLE = 16


def padded_length(length: int, device="cpu") -> int:
    """The length the compiled kernel runs at for ``length`` tokens on ``device``: rounded up
    to a multiple of 16 on a CPU (see the note above), unchanged elsewhere."""
    length = check_int("length", length, minimum=1)
    if torch.device(device).type != "cpu":
        return length
    return -(-length // _CPU_MULTIPLE) * _CPU_MULTIPLE


def _within_keys(k_len: int, mask_mod=None):
    """``mask_mod`` restricted to the first ``k_len`` keys (the rest is padding)."""

    def mask(b, h, q_idx, kv_idx):
        keep = kv_idx < k_len
        return keep if mask_mod is None else keep & mask_mod(b, h, q_idx, kv_idx)

    return mask


def mask_for(
    q_len: int,
    k_len: int,
    *,
    causal: bool = True,
    window: int | None = None,
    device="cpu",
):
    """The block mask :func:`flex_attention_alibi` / :func:`flex_attention_t5` build for
    these lengths (causal, sliding window, or none), at the lengths the kernel runs at
    (:func:`padded_length`); ``None`` when nothing is masked. Build it once and pass it as
    ``mask=`` to reuse it across calls of the same lengths."""
    q_len = check_int("q_len", q_len, minimum=1)
    k_len = check_int("k_len", k_len, minimum=1)
    if window is not None and not causal:
        raise ValueError("window (sliding-window attention) requires causal=True")
    offset = _default_offset(q_len, k_len, causal)
    mod = None
    if window is not None:
        mod = sliding_window_mask_mod(window, offset)
    elif causal:
        mod = causal_mask_mod(offset)
    pq, pk = padded_length(q_len, device), padded_length(k_len, device)
    if pk != k_len:
        mod = _within_keys(k_len, mod)
    return None if mod is None else block_mask(mod, pq, pk, device=device)


def _biased_attention(q, k, v, make_score_mod, causal, window, mask, compiled) -> Tensor:
    """Shared body of the wrappers: pad to the kernel's lengths, attend, drop the padding.

    ``make_score_mod(q_len, k_len, q_offset)`` builds the score_mod for the padded lengths
    (T5's table must cover every index the kernel reads, padding included)."""
    if window is not None and not causal:
        raise ValueError("window (sliding-window attention) requires causal=True")
    q_len, k_len = q.shape[2], k.shape[2]
    pq, pk = padded_length(q_len, q.device), padded_length(k_len, q.device)
    if mask is None:
        mask = mask_for(q_len, k_len, causal=causal, window=window, device=q.device)
    elif tuple(mask.seq_lengths) != (pq, pk):
        raise ValueError(
            f"mask was built for lengths {tuple(mask.seq_lengths)}, but these inputs run at "
            f"({pq}, {pk}) (q_len={q_len}, k_len={k_len}, padded to a multiple of "
            f"{_CPU_MULTIPLE} on a CPU); build it with flex.mask_for({q_len}, {k_len}, "
            f"causal={causal}, window={window})"
        )
    if (pq, pk) != (q_len, k_len):
        q = torch.nn.functional.pad(q, (0, 0, 0, pq - q_len))
        k = torch.nn.functional.pad(k, (0, 0, 0, pk - k_len))
        v = torch.nn.functional.pad(v, (0, 0, 0, pk - k_len))
    offset = _default_offset(q_len, k_len, causal)  # the real lengths fix the positions
    mod = make_score_mod(pq, pk, offset)
    out = flex_attention(q, k, v, score_mod=mod, block_mask=mask, compiled=compiled)
    return out if pq == q_len else out[:, :, :q_len].contiguous()


def flex_attention_alibi(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool = True,
    window: int | None = None,
    mask=None,
    compiled: Callable | bool = True,
) -> Tensor:
    """Attention with ALiBi, equal to ``attention(q, k, v, ALiBi(heads, causal=causal),
    causal=causal)`` without an ``Lq x Lk`` tensor.

    ``window`` adds a causal sliding window. ``mask`` reuses a :func:`mask_for` built for
    the same lengths (building one costs more than a short attention call).
    """
    from ..positions.alibi import slopes

    _check_qkv(q, k, v)
    m = slopes(q.shape[1]).to(q.device)

    def make(pq, pk, offset):
        return alibi_score_mod(m, q_offset=offset, causal=causal)

    return _biased_attention(q, k, v, make, causal, window, mask, compiled)


def flex_attention_t5(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    table: Tensor,
    *,
    causal: bool = False,
    bidirectional: bool | None = None,
    max_distance: int = 128,
    window: int | None = None,
    mask=None,
    compiled: Callable | bool = True,
) -> Tensor:
    """Attention with T5's bucketed bias (``table`` ``[num_buckets, heads]``), equal to
    ``attention(q, k, v, T5RelativeBias(...), causal=causal)`` with that table.

    ``bidirectional`` defaults to ``not causal`` (T5's encoder vs decoder). ``mask`` as in
    :func:`flex_attention_alibi`.
    """
    _check_qkv(q, k, v)
    check_tensor("table", table, ndim=2, floating=True)
    if table.shape[1] != q.shape[1]:
        raise ValueError(
            f"table must be [num_buckets, heads={q.shape[1]}], got {tuple(table.shape)}"
        )
    bidirectional = (not causal) if bidirectional is None else bool(bidirectional)

    def make(pq, pk, offset):
        return t5_score_mod(
            table, pq, pk, q_offset=offset, bidirectional=bidirectional, max_distance=max_distance
        )

    return _biased_attention(q, k, v, make, causal, window, mask, compiled)


# --------------------------------------------------------------------------------------
# The quadratic alternative, and what it costs
# --------------------------------------------------------------------------------------


def materialised_alibi_mask(
    num_heads: int,
    q_len: int,
    k_len: int,
    *,
    causal: bool = True,
    window: int | None = None,
    dtype=torch.float32,
    device="cpu",
) -> Tensor:
    """ALiBi bias plus ``-inf`` where masked, ``[heads, Lq, Lk]``: what SDPA needs as
    ``attn_mask`` to do the same as :func:`flex_attention_alibi`. Quadratic in length."""
    from ..positions.alibi import alibi_bias

    bias = alibi_bias(num_heads, q_len, k_len, causal=causal).to(device=device, dtype=dtype)
    if causal:
        keep = causal_mask(q_len, k_len, device=device)
        if window is not None:
            i = torch.arange(q_len, device=device)[:, None] + (k_len - q_len)
            j = torch.arange(k_len, device=device)[None, :]
            keep = keep & (i - j < window)
        bias = bias.masked_fill(~keep, float("-inf"))
    return bias


def _block_mask_bytes(mask) -> int:
    if mask is None:
        return 0
    return sum(t.numel() * t.element_size() for t in mask.as_tuple() if isinstance(t, Tensor))


def memory_report(
    num_heads: int,
    q_len: int,
    k_len: int | None = None,
    *,
    causal: bool = True,
    window: int | None = None,
    num_buckets: int = 32,
    dtype=torch.float32,
) -> dict:
    """Bytes of position information each way of computing biased attention needs.

    ``materialised_bias_bytes``: the ``[heads, Lq, Lk]`` bias/mask SDPA or the reference
    builds. ``flex_block_mask_bytes``: FlexAttention's block mask (0 when nothing is
    masked); ``flex_alibi_bytes``: the slopes; ``flex_t5_bytes``: the per-distance table.
    """
    num_heads = check_int("num_heads", num_heads, minimum=1)
    q_len = check_int("q_len", q_len, minimum=1)
    k_len = q_len if k_len is None else check_int("k_len", k_len, minimum=1)
    mask = mask_for(q_len, k_len, causal=causal, window=window, device="cpu")
    itemsize = torch.empty((), dtype=dtype).element_size()
    return {
        "num_heads": num_heads,
        "q_len": q_len,
        "k_len": k_len,
        "causal": causal,
        "window": window,
        "materialised_bias_bytes": num_heads * q_len * k_len * itemsize,
        "flex_block_mask_bytes": _block_mask_bytes(mask),
        "flex_alibi_bytes": num_heads * 4,
        "flex_t5_bytes": num_heads * (q_len + k_len - 1) * 4 + num_buckets * num_heads * 4,
    }


def check_common_configurations() -> list:
    """Compile and check (against eager) the configurations the course uses: causal ALiBi
    with grouped heads at a length that is a multiple of 16 and one that is not, a sliding
    window, and T5 buckets. Returns this process's FlexAttention verdicts (``pecourse info
    --check-flex``; about a minute on two cores)."""
    g = torch.Generator().manual_seed(0)

    def qkv(length, heads=4, kv_heads=2):
        shapes = [(1, heads, length, 16)] + [(1, kv_heads, length, 16)] * 2
        return [torch.randn(s, generator=g) for s in shapes]

    cases = {
        "causal ALiBi, length 40": lambda: flex_attention_alibi(*qkv(40), causal=True),
        "causal ALiBi, length 64": lambda: flex_attention_alibi(*qkv(64), causal=True),
        "ALiBi, window 7": lambda: flex_attention_alibi(*qkv(40), causal=True, window=7),
        "T5 buckets": lambda: flex_attention_t5(
            *qkv(48, 4, 4), torch.randn(32, 4, generator=g), causal=False
        ),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", verify.CompiledPathWarning)  # reported by the caller
        for i, (what, run) in enumerate(cases.items(), start=1):
            log.info("FlexAttention %d of %d: compiling and checking %s", i, len(cases), what)
            run()
    return verify.status("flex_attention")
