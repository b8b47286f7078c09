"""Fused RoPE in Triton: queries and keys rotated in one launch, forward and backward.

RoPE (arXiv:2104.09864, eq. 34) is memory-bound — two loads, a handful of flops, two stores
per pair — so all a kernel can win is memory traffic: read ``q`` and ``k`` once, write them
once, and read the small ``cos``/``sin`` tables from cache. One launch covers both tensors (one
program per batch element, block of positions and group of four heads, so each program loads
its table tile once for four heads); grouped-query attention costs nothing extra. Both
pairings, partial rotary, shared or per-batch tables, float32 arithmetic for 16-bit inputs
(float64 for float64); the backward pass is the same kernel with ``sin`` negated.

It is the custom op ``torch.ops.pecourse.rope_qk`` with a fake implementation and an
autograd formula, so ``torch.compile`` traces through it without a graph break.
:data:`TRITON_ROPE` is the rotary core's table with this kernel's rotation, a backend for every
rotary scheme (``apply_rope(x, positions, backend=TRITON_ROPE)``). Where it runs
(:func:`backend`):

- CUDA tensors with Triton installed: the Triton kernel;
- CPU tensors when ``TRITON_INTERPRET=1`` was set *before this module was imported*: the same
  kernel in Triton's interpreter (slow; how the tests check it without a GPU);
- anything else: :func:`pecourse.kernels.rope_cpu.rotate`.
"""

from __future__ import annotations

import os

import torch
from torch import Tensor

from ..positions.rotary import Rotary, _check_x, cos_sin, rotate_pairs
from . import rope_cpu, verify

__all__ = ["rope_qk", "rotate", "TRITON_ROPE", "backend", "HAS_TRITON", "INTERPRET"]

#: True when ``TRITON_INTERPRET=1`` was set when this module was imported.
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

try:  # Triton is optional: without it every call takes the PyTorch path.
    import triton
    import triton.language as tl

    HAS_TRITON = True
except Exception:  # ImportError, or a broken install
    HAS_TRITON = False


def backend(device: str | torch.device = "cuda") -> str:
    """``"triton"``, ``"triton-interpreter"`` or ``"torch"``: what a tensor on ``device`` gets."""
    device = torch.device(device)
    if HAS_TRITON and device.type == "cuda" and not INTERPRET:
        return "triton"
    if HAS_TRITON and device.type == "cpu" and INTERPRET:
        return "triton-interpreter"
    return "torch"


if HAS_TRITON:

    @triton.jit
    def _bf16_rtne(y):
        """float32 -> bfloat16 rounding to nearest even, on the bits.

        Triton's interpreter casts float32 -> bfloat16 by truncation (a GPU rounds to
        nearest even), so under the interpreter we round by hand: add 0x7FFF plus the lowest
        kept bit, then drop the low 16 bits. (Inputs here are finite.)
        """
        u = y.to(tl.uint32, bitcast=True)
        u = u + 0x7FFF + ((u >> 16) & 1)
        return (u >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)

    @triton.jit
    def _rotate_tile(
        x_ptr,
        o_ptr,
        c,
        s,
        offs_s,
        mask_s,
        stride_s,
        out_stride_s,
        D: tl.constexpr,
        R: tl.constexpr,
        HALF_PAD: tl.constexpr,
        PASS_PAD: tl.constexpr,
        INTERLEAVED: tl.constexpr,
        MANUAL_BF16: tl.constexpr,
    ):
        """Rotate one [BLOCK_S, R] tile of one head; copy its dims R..D-1."""
        j = tl.arange(0, HALF_PAD)
        mask = mask_s[:, None] & (j < R // 2)[None, :]
        if INTERLEAVED:  # pair j = (2j, 2j + 1)
            i1 = 2 * j
            i2 = 2 * j + 1
        else:  # pair j = (j, j + R/2)
            i1 = j
            i2 = j + R // 2
        rows_in = x_ptr + offs_s[:, None] * stride_s
        rows_out = o_ptr + offs_s[:, None] * out_stride_s
        a = tl.load(rows_in + i1[None, :], mask=mask, other=0.0).to(c.dtype)
        b = tl.load(rows_in + i2[None, :], mask=mask, other=0.0).to(c.dtype)
        # (a, b) -> (a cos - b sin, b cos + a sin): arXiv:2104.09864, eq. 34.
        r1 = a * c - b * s
        r2 = b * c + a * s
        if MANUAL_BF16:
            r1 = _bf16_rtne(r1)
            r2 = _bf16_rtne(r2)
        tl.store(rows_out + i1[None, :], r1.to(o_ptr.dtype.element_ty), mask=mask)
        tl.store(rows_out + i2[None, :], r2.to(o_ptr.dtype.element_ty), mask=mask)
        if PASS_PAD > 0:  # partial rotary: the remaining dims carry no position
            p = R + tl.arange(0, PASS_PAD)
            pmask = mask_s[:, None] & (p < D)[None, :]
            rest = tl.load(rows_in + p[None, :], mask=pmask, other=0.0)
            tl.store(rows_out + p[None, :], rest, mask=pmask)

    @triton.jit
    def _rope_qk_kernel(
        q_ptr,
        k_ptr,
        qo_ptr,
        ko_ptr,
        cos_ptr,
        sin_ptr,
        S,
        HQ,
        HK,
        sq_b,
        sq_h,
        sq_s,
        sk_b,
        sk_h,
        sk_s,
        cos_b,
        D: tl.constexpr,
        R: tl.constexpr,
        HALF_PAD: tl.constexpr,
        PASS_PAD: tl.constexpr,
        BLOCK_S: tl.constexpr,
        INTERLEAVED: tl.constexpr,
        INVERSE: tl.constexpr,
        MANUAL_BF16: tl.constexpr,
        HEADS_PER_PROGRAM: tl.constexpr,
    ):
        pid_b = tl.program_id(0).to(tl.int64)  # int64 offsets: tensors may exceed 2^31
        pid_s = tl.program_id(1)
        offs_s = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
        mask_s = offs_s < S
        j = tl.arange(0, HALF_PAD)
        cmask = mask_s[:, None] & (j < R // 2)[None, :]
        table = pid_b * cos_b + offs_s[:, None] * (R // 2) + j[None, :]
        c = tl.load(cos_ptr + table, mask=cmask, other=0.0)
        s = tl.load(sin_ptr + table, mask=cmask, other=0.0)
        if INVERSE:  # the backward pass: rotation by -theta
            s = -s
        # Several heads per program: the cos/sin tile is loaded once and reused.
        head0 = tl.program_id(2).to(tl.int64) * HEADS_PER_PROGRAM
        for i in tl.static_range(HEADS_PER_PROGRAM):
            head = head0 + i  # 0..HQ-1: query heads; HQ..HQ+HK-1: key heads
            if head < HQ:
                x = q_ptr + pid_b * sq_b + head * sq_h
                o = qo_ptr + (pid_b * HQ + head) * S * D
                stride_s = sq_s
            else:
                x = k_ptr + pid_b * sk_b + (head - HQ) * sk_h
                o = ko_ptr + (pid_b * HK + head - HQ) * S * D
                stride_s = sk_s
            if head < HQ + HK:
                _rotate_tile(
                    x,
                    o,
                    c,
                    s,
                    offs_s,
                    mask_s,
                    stride_s,
                    D,
                    D,
                    R,
                    HALF_PAD,
                    PASS_PAD,
                    INTERLEAVED,
                    MANUAL_BF16,
                )


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _launch(
    q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, interleaved: bool, inverse: bool
) -> tuple[Tensor, Tensor]:
    b, hq, seq, dim = q.shape
    hk = k.shape[1]
    rotary = 2 * cos.shape[-1]
    q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    k_out = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    if q.numel() == 0 and k.numel() == 0:
        return q_out, k_out
    math = torch.float64 if q.dtype == torch.float64 else torch.float32
    cos = cos.to(math).contiguous()
    sin = sin.to(math).contiguous()
    half_pad = _next_pow2(rotary // 2)
    pass_pad = _next_pow2(dim - rotary) if dim > rotary else 0
    # ~4K elements of each head per program: enough work per program, enough programs.
    block_s = max(1, min(_next_pow2(seq), 4096 // (2 * half_pad + pass_pad)))
    if INTERPRET:
        block_s = min(block_s, 16)  # the interpreter is slow per element, not per program
    heads_per_program = 4
    grid = (b, triton.cdiv(seq, block_s), triton.cdiv(hq + hk, heads_per_program))
    _rope_qk_kernel[grid](
        q,
        k,
        q_out,
        k_out,
        cos,
        sin,
        seq,
        hq,
        hk,
        q.stride(0),
        q.stride(1),
        q.stride(2),
        k.stride(0),
        k.stride(1),
        k.stride(2),
        seq * (rotary // 2) if cos.ndim == 3 else 0,
        D=dim,
        R=rotary,
        HALF_PAD=half_pad,
        PASS_PAD=pass_pad,
        BLOCK_S=block_s,
        INTERLEAVED=interleaved,
        INVERSE=inverse,
        MANUAL_BF16=INTERPRET and q.dtype == torch.bfloat16,
        HEADS_PER_PROGRAM=heads_per_program,
        num_warps=4,
    )
    return q_out, k_out


def _fallback(
    q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, interleaved: bool, inverse: bool
) -> tuple[Tensor, Tensor]:
    pairing = "interleaved" if interleaved else "half"
    q_out = rope_cpu.rotate(q, cos, sin, pairing=pairing, inverse=inverse).contiguous()
    k_out = rope_cpu.rotate(k, cos, sin, pairing=pairing, inverse=inverse).contiguous()
    return q_out, k_out


def _trusted(q: Tensor, k: Tensor, cos: Tensor, interleaved: bool, inverse: bool) -> bool:
    """Whether the Triton kernel agreed with the PyTorch reference on this device for the
    things it is specialised on (dtype, head_dim, rotary_dim, pairing, direction, shared or
    per-batch tables): a small probe with grouped heads and a ragged last block, once per
    process (:mod:`pecourse.kernels.verify`)."""
    dim, half, per_batch = q.shape[-1], cos.shape[-1], cos.ndim == 3
    key = (q.device.type, q.dtype, dim, half, interleaved, inverse, per_batch)

    def probe():
        g = torch.Generator().manual_seed(0)
        qp = torch.randn(2, 4, 19, dim, generator=g).to(q.device, q.dtype)
        kp = torch.randn(2, 2, 19, dim, generator=g).to(q.device, q.dtype)
        angles = torch.rand((2, 19, half)[not per_batch :], generator=g, dtype=torch.float64)
        math = torch.float64 if q.dtype == torch.float64 else torch.float32
        c, s = ((f(angles * 6.3)).to(q.device, math) for f in (torch.cos, torch.sin))
        pairing = "interleaved" if interleaved else "half"
        ref = tuple(rotate_pairs(t, c, s, pairing=pairing, inverse=inverse) for t in (qp, kp))
        return _launch(qp, kp, c, s, interleaved, inverse), ref

    return verify.trusted(
        "rope_triton",
        key,
        probe,
        lambda: (
            f"{q.device.type}, {str(q.dtype).removeprefix('torch.')}, head_dim {dim}, "
            f"rotary_dim {2 * half}, {'interleaved' if interleaved else 'half'} pairing"
            f"{', inverse' if inverse else ''}{', per-batch tables' if per_batch else ''}"
        ),
    )


@torch.library.custom_op("pecourse::rope_qk", mutates_args=())
def _rope_qk_op(
    q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, interleaved: bool, inverse: bool
) -> tuple[Tensor, Tensor]:
    if backend(q.device) != "torch" and _trusted(q, k, cos, interleaved, inverse):
        return _launch(q, k, cos, sin, interleaved, inverse)
    return _fallback(q, k, cos, sin, interleaved, inverse)


@_rope_qk_op.register_fake
def _(q, k, cos, sin, interleaved, inverse):
    # Outputs are always new contiguous tensors of the inputs' shapes and dtypes.
    return q.new_empty(q.shape), k.new_empty(k.shape)


def _setup_context(ctx, inputs, output):
    _, _, cos, sin, interleaved, inverse = inputs
    ctx.save_for_backward(cos, sin)
    ctx.interleaved, ctx.inverse = interleaved, inverse


def _backward(ctx, grad_q, grad_k):
    cos, sin = ctx.saved_tensors
    # RoPE is orthogonal: the vector-Jacobian product is the rotation by -theta, which is
    # the same op with `inverse` flipped (and so itself differentiable: double backward).
    grad_q, grad_k = _rope_qk_op(
        grad_q.contiguous(), grad_k.contiguous(), cos, sin, ctx.interleaved, not ctx.inverse
    )
    return grad_q, grad_k, None, None, None, None


_rope_qk_op.register_autograd(_backward, setup_context=_setup_context)


def _check(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, pairing: str) -> None:
    for name, t in (("q", q), ("k", k)):
        _check_x(name, t)
        if t.stride(-1) != 1:
            raise ValueError(
                f"{name} must have a contiguous last dimension (stride 1), got stride "
                f"{t.stride(-1)} for shape {tuple(t.shape)}; pass {name}.contiguous()"
            )
    if k.dtype != q.dtype or k.device != q.device:
        raise TypeError(
            f"q and k must share dtype and device, got {q.dtype}/{q.device} and "
            f"{k.dtype}/{k.device}"
        )
    if (k.shape[0], k.shape[2], k.shape[3]) != (q.shape[0], q.shape[2], q.shape[3]):
        raise ValueError(
            "k must be [batch, kv_heads, seq, head_dim] with q's batch, seq and head_dim "
            f"(rotated at the same positions); got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    rope_cpu._check(q, cos, sin, pairing)  # the tables against q, and the pairing


def rope_qk(
    q: Tensor,
    k: Tensor,
    cos: Tensor,
    sin: Tensor,
    *,
    pairing: str = "half",
    inverse: bool = False,
) -> tuple[Tensor, Tensor]:
    r"""Rotate queries and keys by RoPE in one fused launch (arXiv:2104.09864, eq. 34).

    ``q`` ``[batch, heads, seq, head_dim]`` and ``k`` ``[batch, kv_heads, seq, head_dim]``
    (any strides with a contiguous last dim; ``heads`` and ``kv_heads`` may differ), both
    float32/bfloat16/float16/float64. ``cos``/``sin`` ``[seq, rotary_dim // 2]`` or
    ``[batch, seq, rotary_dim // 2]``, from :func:`pecourse.positions.rope.rope_cos_sin`
    (built from any position ids: an offset while decoding is just other rows). ``pairing``
    ``"half"`` or ``"interleaved"``; ``inverse=True`` rotates by ``-theta``.

    Returns new contiguous ``(q_rotated, k_rotated)``, differentiable in ``q`` and ``k``.
    """
    cos, sin = rope_cpu._shared_row(cos, sin)
    _check(q, k, cos, sin, pairing)
    return _rope_qk_op(q, k, cos, sin, pairing == "interleaved", bool(inverse))


def rotate(
    x: Tensor, cos: Tensor, sin: Tensor, *, pairing: str = "half", inverse: bool = False
) -> Tensor:
    """:func:`pecourse.positions.rotary.rotate_pairs` on the fused kernel, for one tensor
    ``[batch, heads, seq, head_dim]`` (the launch's key heads left empty)."""
    _check_x("x", x)
    x = x if x.stride(-1) == 1 else x.contiguous()
    return rope_qk(x, x[:, :0], cos, sin, pairing=pairing, inverse=inverse)[0]


#: The rotary core's tables and this module's rotation: a backend for any rotary scheme.
TRITON_ROPE = Rotary(cos_sin, rotate, "triton")
