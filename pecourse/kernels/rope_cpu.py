r"""RoPE on the CPU in one pass over the data.

RoPE (Su et al., 2021, arXiv:2104.09864, eq. 34) rotates each pair of dimensions
``(a, b)`` of a query or key at position ``p`` by the angle ``p * theta_j``:

.. math::
    a' = a\cos(p\theta_j) - b\sin(p\theta_j), \qquad b' = b\cos(p\theta_j) + a\sin(p\theta_j).

Written the transformers way, ``x * cos + rotate_half(x) * sin`` makes four full-size
temporaries: six passes over memory for work that needs one read and one write. A ~100-line C
kernel (``rope_cpu.c`` beside this file; no PyTorch headers, so ``gcc`` builds it in under a
second), loaded with :mod:`ctypes`, which releases the GIL so chunks of rows run on a small
thread pool, does that one pass: faster than transformers' code eager or under
``torch.compile`` (which also takes seconds to compile, again for every new dtype or rank),
close to a plain copy (``benchmarks/rope_cpu.py``, ``benchmarks/results/rope_cpu.json``).

The shared library is cached under ``platformdirs.user_cache_dir("pecourse")`` (or
``$PECOURSE_CACHE_DIR``), keyed by a hash of the source, the compiler and the CPU. Without a
C compiler, when the build fails, or with ``PECOURSE_NO_CKERNEL=1``, every call falls back to
:func:`pecourse.positions.rotary.rotate_pairs` (same numbers); :func:`backend` says which is in
use and :func:`build_error` why. :func:`rotate` has the signature of ``rotate_pairs``, so
:data:`pecourse.kernels.FAST_ROPE` can stand in for the readable core in any rotary scheme.

Numerics follow the course convention: the caller passes ``cos``/``sin`` tables (float64
angles, rounded once); the products are formed in float32 (float64 for float64 inputs) and
the result is rounded once to the input dtype. The kernel is compiled without fused
multiply-adds (``-ffp-contract=off``, no SLP vectorizer), so it matches the PyTorch reference
bit for bit in every dtype.

Autograd: RoPE is orthogonal, so the backward pass is the same kernel with ``sin`` negated
(``inverse=True``), itself differentiable. If ``cos``/``sin`` require grad, or under
``torch.compile`` (which fuses the reference itself), the reference path is used.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

import torch
import torch.autograd.forward_ad as _forward_ad
from torch import Tensor

from .._validate import check_choice, check_tensor
from ..positions.rotary import PAIRINGS, compute_dtype, rotate_pairs
from . import verify

__all__ = ["rotate", "rotate_qk", "backend", "build_error", "check_all"]

# --------------------------------------------------------------------------------------
# The C kernel (rope_cpu.c, shipped beside this file)
# --------------------------------------------------------------------------------------


def _c_source() -> str:
    return resources.files(__package__).joinpath("rope_cpu.c").read_text()


_ARGTYPES = (
    [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 11 + [ctypes.c_int] * 2 + [ctypes.c_int64] * 2
)

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_funcs: dict[torch.dtype, object] = {}
_error: str | None = None
_tried = False
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_pid = 0

# Below this many elements the thread pool costs more than it saves (a training step's queries,
# [16, 4, 64, 16] = 2^16 elements, rotate in tens of microseconds on one thread: handing half
# of them to a second thread and waiting for it costs as much, and more on a busy machine).
_PARALLEL_MIN_NUMEL = 1 << 18


def _cache_dir() -> Path:
    env = os.environ.get("PECOURSE_CACHE_DIR")
    if env:
        return Path(env) / "kernels"
    try:
        import platformdirs

        return Path(platformdirs.user_cache_dir("pecourse")) / "kernels"
    except Exception:  # platformdirs is a dependency, but never fail a rotation over it
        return Path(tempfile.gettempdir()) / "pecourse-cache" / "kernels"


def _cpu_signature() -> str:
    """What the compiled code depends on: the CPU (``-march=native``) and the compiler."""
    parts = [platform.machine(), platform.system(), sys.version.split()[0]]
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "flags")):
                    parts.append(line.strip())
                if len(parts) > 5:
                    break
    except OSError:
        parts.append(platform.processor())
    return "|".join(parts)


_FLAGS = ["-O3", "-shared", "-fPIC", "-std=gnu11", "-ffp-contract=off", "-fno-fast-math"]
# -fno-tree-slp-vectorize: GCC 12 still forms fused multiply-adds for complex-number-like
# patterns (vfmaddsub) under -ffp-contract=off; that would break bit-equality with the
# reference. The loop vectorizer still vectorizes both pairings.
_NATIVE_FLAGS = ["-march=native", "-fno-tree-slp-vectorize"]


def _compile(cc: str, src: Path, out: Path, native: bool) -> None:
    flags = _FLAGS + (_NATIVE_FLAGS if native else [])
    subprocess.run(
        [cc, *flags, str(src), "-o", str(out)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _load() -> ctypes.CDLL | None:
    """Build (once, cached on disk) and load the C kernel; ``None`` with a reason on failure."""
    global _lib, _error, _tried
    if _tried:
        return _lib
    with _lock:
        if _tried:
            return _lib
        try:
            if os.environ.get("PECOURSE_NO_CKERNEL", "") not in ("", "0"):
                raise RuntimeError("disabled by PECOURSE_NO_CKERNEL")
            cc = os.environ.get("CC", "cc")
            try:
                version = subprocess.run(
                    [cc, "--version"], capture_output=True, text=True, timeout=30
                ).stdout.splitlines()[:1]
            except (OSError, subprocess.SubprocessError) as exc:
                raise RuntimeError(f"no C compiler ({cc!r}): {exc}") from exc
            source = _c_source()
            key = hashlib.sha256(
                "\n".join(
                    [source, cc, *version, *_FLAGS, *_NATIVE_FLAGS, _cpu_signature()]
                ).encode()
            ).hexdigest()[:16]
            cache = _cache_dir()
            cache.mkdir(parents=True, exist_ok=True)
            lib_path = cache / f"rope_cpu_{key}.so"
            if not lib_path.exists():
                # Build in a private temporary file, then rename: concurrent processes (test
                # workers, notebooks) never load a half-written library.
                with tempfile.TemporaryDirectory(dir=cache) as tmp:
                    src = Path(tmp) / "rope_cpu.c"
                    src.write_text(source)
                    tmp_lib = Path(tmp) / lib_path.name
                    try:
                        _compile(cc, src, tmp_lib, native=True)
                    except subprocess.CalledProcessError:
                        _compile(cc, src, tmp_lib, native=False)  # e.g. no -march=native
                    os.replace(tmp_lib, lib_path)
            lib = ctypes.CDLL(str(lib_path))
            names = {
                torch.float32: "rope_f32",
                torch.float64: "rope_f64",
                torch.bfloat16: "rope_bf16",
            }
            if lib.has_f16():
                names[torch.float16] = "rope_f16"
            for dtype, name in names.items():
                fn = getattr(lib, name)
                fn.argtypes = _ARGTYPES
                fn.restype = None
                _funcs[dtype] = fn
            _lib = lib
        except subprocess.CalledProcessError as exc:
            _error = f"C kernel failed to compile: {exc.stderr.strip()[-2000:]}"
        except Exception as exc:  # any failure means: use the PyTorch reference
            _error = f"C kernel unavailable: {exc}"
        finally:
            _tried = True
    return _lib


def backend() -> str:
    """``"c"`` when the compiled kernel is in use, ``"torch"`` when calls fall back."""
    return "c" if _load() is not None else "torch"


def build_error() -> str | None:
    """Why the C kernel is not in use (``None`` when it is)."""
    _load()
    return _error


def _executor(n: int) -> ThreadPoolExecutor:
    global _pool, _pool_size, _pool_pid
    # A pool inherited through fork() (DataLoader workers) has no threads in the child:
    # make a new one there rather than wait forever on it.
    if _pool is None or _pool_size < n or _pool_pid != os.getpid():
        _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="pecourse-rope")
        _pool_size, _pool_pid = n, os.getpid()
    return _pool


# --------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------


def _check(x: Tensor, cos: Tensor, sin: Tensor, pairing: str) -> int:
    """Validate and return the rotary dimension ``R = 2 * cos.shape[-1]``."""
    check_tensor("x", x, floating=True)
    check_tensor("cos", cos, ndim=(2, 3), floating=True)
    check_tensor("sin", sin, ndim=(2, 3), floating=True)
    check_choice("pairing", pairing, PAIRINGS)
    if x.ndim < 2:
        raise ValueError(f"x must be [..., seq, head_dim], got shape {tuple(x.shape)}")
    if cos.shape != sin.shape:
        raise ValueError(
            f"cos and sin must have the same shape, got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    seq, dim = x.shape[-2], x.shape[-1]
    if dim % 2:
        raise ValueError(
            f"head_dim (x.shape[-1]) must be even (dimensions are rotated in pairs), got {dim}"
        )
    rotary = 2 * cos.shape[-1]
    if rotary == 0 or rotary > dim:
        raise ValueError(
            f"cos.shape[-1] must be rotary_dim // 2 with 0 < rotary_dim <= head_dim ({dim}), "
            f"got cos.shape[-1] = {cos.shape[-1]}"
        )
    if cos.shape[-2] != seq:
        raise ValueError(
            f"cos/sin must hold one row per position: cos.shape[-2] = {cos.shape[-2]} but "
            f"x has seq = {seq} (x.shape[-2])"
        )
    if cos.ndim == 3 and (x.ndim < 3 or cos.shape[0] != x.shape[0]):
        raise ValueError(
            f"cos/sin of shape {tuple(cos.shape)} are per batch element, so x must be "
            f"[batch={cos.shape[0]}, ..., seq, head_dim]; got x of shape {tuple(x.shape)}"
        )
    if cos.dtype != sin.dtype:
        raise TypeError(f"cos and sin must share a dtype, got {cos.dtype} and {sin.dtype}")
    if cos.device != x.device or sin.device != x.device:
        raise ValueError(
            f"x, cos and sin must be on one device, got {x.device}, {cos.device}, {sin.device}"
        )
    return rotary


def _shared_row(cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    """``[1, S, R/2]`` tables are one row of positions shared by the whole batch: ``[S, R/2]``."""
    if cos.ndim == 3 and cos.shape[0] == 1 and sin.ndim == 3 and sin.shape[0] == 1:
        return cos[0], sin[0]
    return cos, sin


# --------------------------------------------------------------------------------------
# The fast path
# --------------------------------------------------------------------------------------


def _can_use_kernel(x: Tensor, cos: Tensor, sin: Tensor) -> bool:
    if torch.compiler.is_compiling() or torch.jit.is_tracing():
        return False  # let the compiler / tracer see (and fuse) the reference instead
    if not (type(x) is torch.Tensor and type(cos) is torch.Tensor and type(sin) is torch.Tensor):
        return False  # subclasses (FakeTensor, DTensor, ...) take the reference
    if torch._C._are_functorch_transforms_active():
        return False  # torch.func.grad / vmap wrap tensors the kernel cannot read
    if _forward_ad._current_level >= 0:
        return False  # forward-mode AD (dual tensors): the reference carries tangents
    if x.device.type != "cpu" or x.layout != torch.strided or x.numel() == 0:
        return False
    if cos.requires_grad or sin.requires_grad:
        return False  # the kernel has no gradient for the tables
    if x.dtype not in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        return False
    return _load() is not None and x.dtype in _funcs


def _kernel(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    interleaved: bool,
    inverse: bool,
    strides: tuple[int, ...] | None = None,
) -> Tensor:
    """Run the C kernel (no autograd). ``x`` ``[..., S, D]``, tables ``[B|.., S, R/2]``.

    The result has ``x``'s shape, laid out with ``strides`` when given (the backward pass
    asks for the forward input's layout, so the views that made it cost nothing backwards),
    else as ``x`` where ``x`` is dense (a transposed view stays one), else contiguous."""
    math = compute_dtype(x)
    if cos.dtype != math:
        cos, sin = cos.to(math), sin.to(math)
    cos, sin = cos.contiguous(), sin.contiguous()
    shape = x.shape
    seq, dim = shape[-2], shape[-1]
    rotary = 2 * cos.shape[-1]
    if cos.ndim == 3:  # one row of positions per batch element
        batch, cbs = cos.shape[0], seq * (rotary // 2)
    else:  # one row shared by the batch: every batch element reads it (batch stride 0)
        batch, cbs = (shape[0] if x.ndim > 2 else 1), 0
    mid = x.numel() // (batch * seq * dim)
    try:
        xv = x.view(batch, mid, seq, dim)
    except RuntimeError:
        xv = x.reshape(batch, mid, seq, dim)
    if xv.stride(-1) != 1:
        xv = xv.contiguous()
    if xv.is_neg():
        xv = xv.resolve_neg()
    out = (
        torch.empty_like(x)
        if strides is None
        else torch.empty_strided(shape, strides, dtype=x.dtype)
    )
    try:
        ov = out.view(batch, mid, seq, dim)
    except RuntimeError:
        ov = None
    if ov is None or ov.stride(-1) != 1:
        out = torch.empty(shape, dtype=x.dtype)
        ov = out.view(batch, mid, seq, dim)
    fn = _funcs[x.dtype]
    rows = batch * mid * seq
    common = (
        xv.data_ptr(),
        out.data_ptr(),
        cos.data_ptr(),
        sin.data_ptr(),
        mid,
        seq,
        dim,
        rotary,
        *xv.stride()[:3],
        *ov.stride()[:3],
        cbs,
        int(interleaved),
        int(inverse),
    )
    threads = torch.get_num_threads()
    if threads <= 1 or x.numel() < _PARALLEL_MIN_NUMEL or rows < 2:
        fn(*common, 0, rows)
    else:
        n = min(threads, rows)
        bounds = [rows * i // n for i in range(n + 1)]
        # ctypes releases the GIL, so the chunks run in parallel.
        futures = [_executor(n).submit(fn, *common, bounds[i], bounds[i + 1]) for i in range(n)]
        for f in futures:
            f.result()
    return out


class _RotateFn(torch.autograd.Function):
    """Autograd for the kernel: the backward of a rotation is the inverse rotation.

    ``forward`` takes ``ctx`` itself (no ``setup_context``): ``Function.apply`` then skips
    binding the arguments through :mod:`inspect` on every call, a sizeable share of a small
    rotation's cost. The kernel runs only outside functorch transforms, which are what
    ``setup_context`` would be for."""

    @staticmethod
    def forward(ctx, x, cos, sin, interleaved, inverse):
        out = _kernel(x, cos, sin, interleaved, inverse)
        ctx.save_for_backward(cos, sin)
        ctx.interleaved, ctx.inverse = interleaved, inverse
        # the gradient is laid out as x was: then the views x came from cost nothing backwards
        ctx.strides = x.stride() if out.stride() == x.stride() else None
        return out

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        # d(R x)/dx applied to grad = R^T grad = rotation by -theta (eq. 34 is orthogonal).
        g = _apply(grad, cos, sin, ctx.interleaved, not ctx.inverse, ctx.strides)
        return g, None, None, None, None


class _RotateQKFn(torch.autograd.Function):
    """:class:`_RotateFn` for queries and keys rotated by one table: one node, two kernel
    calls each way."""

    @staticmethod
    def forward(ctx, q, k, cos, sin, interleaved):
        outs, ctx.strides = [], []
        for x in (q, k):
            out = _kernel(x, cos, sin, interleaved, False)
            ctx.strides.append(x.stride() if out.stride() == x.stride() else None)
            outs.append(out)
        ctx.save_for_backward(cos, sin)
        ctx.interleaved = interleaved
        return tuple(outs)

    @staticmethod
    def backward(ctx, grad_q, grad_k):
        cos, sin = ctx.saved_tensors
        grads = [
            _apply(g, cos, sin, ctx.interleaved, True, strides)
            if g is not None and wanted
            else None
            for g, wanted, strides in zip((grad_q, grad_k), ctx.needs_input_grad, ctx.strides)
        ]
        return grads[0], grads[1], None, None, None


def _probe(dtype: torch.dtype, interleaved: bool, inverse: bool):
    """The kernel and the reference on inputs that reach every branch of the C code: a
    strided view with full rotary and a shared table, written back in its own layout;
    partial rotary with per-batch tables; the head sizes the C code spells out (16, 32, 64:
    8, 16 and 32 pairs).

    Small, and without transcendental functions, on purpose: nothing here may start
    PyTorch's OpenMP thread pool (``torch.cos`` does from 128 float64 elements), which would
    make a multi-threaded child hang after ``fork()``. The kernel multiplies whatever it is
    given, so random numbers in [-1, 1] test it as well as real cosines. (The C kernel's own
    thread split runs the same code on disjoint rows.)"""
    g = torch.Generator().manual_seed(0)
    pairing = "interleaved" if interleaved else "half"
    cases = [
        (torch.randn(3, 7, 2, 6, generator=g).transpose(1, 2), (7, 3)),
        (torch.randn(2, 3, 33, 40, generator=g), (2, 33, 12)),
        *(
            (torch.randn(1, 3, 2, dim, generator=g).transpose(1, 2), (3, dim // 2))
            for dim in (16, 32, 64)
        ),
    ]
    got, want = [], []
    for x, table_shape in cases:
        x = x.to(dtype)
        c, s = (
            (2 * torch.rand(table_shape, generator=g, dtype=torch.float64) - 1).to(compute_dtype(x))
            for _ in "cs"
        )
        got.append(_kernel(x, c, s, interleaved, inverse))
        want.append(rotate_pairs(x, c, s, pairing=pairing, inverse=inverse))
    return tuple(got), tuple(want)


def _trusted(dtype: torch.dtype, interleaved: bool, inverse: bool) -> bool:
    """Whether the C kernel agreed with :func:`~pecourse.positions.rotary.rotate_pairs` here for this
    dtype, pairing and direction (:mod:`pecourse.kernels.verify`: probed once per process)."""
    return verify.trusted(
        "rope_cpu (C kernel)",
        (dtype, interleaved, inverse),
        lambda: _probe(dtype, interleaved, inverse),
        lambda: (
            f"{str(dtype).removeprefix('torch.')}, "
            f"{'interleaved' if interleaved else 'half'} pairing" + (", inverse" if inverse else "")
        ),
    )


def check_all() -> list[verify.Check]:
    """Probe every dtype, pairing and direction the built kernel offers (milliseconds), and
    return the verdicts; ``[]`` when the kernel is not in use."""
    if _load() is None:
        return []
    for dtype in _funcs:
        for interleaved in (False, True):
            for inverse in (False, True):
                _trusted(dtype, interleaved, inverse)
    return verify.status("rope_cpu (C kernel)")


def _apply(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    interleaved: bool,
    inverse: bool,
    strides: tuple[int, ...] | None = None,
) -> Tensor:
    if _can_use_kernel(x, cos, sin) and _trusted(x.dtype, interleaved, inverse):
        if torch.is_grad_enabled() and x.requires_grad:
            return _RotateFn.apply(x, cos, sin, interleaved, inverse)
        return _kernel(x, cos, sin, interleaved, inverse, strides)
    return rotate_pairs(
        x, cos, sin, pairing="interleaved" if interleaved else "half", inverse=inverse
    )


def rotate(
    x: Tensor, cos: Tensor, sin: Tensor, *, pairing: str = "half", inverse: bool = False
) -> Tensor:
    """:func:`pecourse.positions.rotary.rotate_pairs` in one pass: same arguments and numbers.

    ``x`` is ``[..., seq, head_dim]``, any float dtype, any strides; ``cos``/``sin`` are
    ``[seq, pairs]`` or ``[batch, seq, pairs]`` (a batch of 1 is shared). The result is laid
    out as ``x`` where ``x`` is dense (a transposed view stays one, so the views it came from
    cost nothing, forwards or backwards), else contiguous. Checks the tables against ``x``
    (sequence length, batch, ``rotary_dim <= head_dim``) and the pairing.
    """
    cos, sin = _shared_row(cos, sin)
    _check(x, cos, sin, pairing)
    return _apply(x, cos, sin, pairing == "interleaved", bool(inverse))


def rotate_qk(
    q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, *, pairing: str = "half"
) -> tuple[Tensor, Tensor]:
    """:func:`rotate` of queries and keys by one table, in one call: ``(rotate(q, cos, sin),
    rotate(k, cos, sin))``, the same numbers, with the checks and the autograd node shared
    (the :attr:`~pecourse.positions.rotary.Rotary.rotate_qk` of
    :data:`pecourse.kernels.FAST_ROPE`). ``q`` and ``k`` may differ in their number of heads
    (grouped-query attention) but must share dtype, sequence length and table."""
    cos, sin = _shared_row(cos, sin)
    _check(q, cos, sin, pairing)
    _check(k, cos, sin, pairing)
    interleaved = pairing == "interleaved"
    if (
        q.dtype == k.dtype
        and _can_use_kernel(q, cos, sin)
        and _can_use_kernel(k, cos, sin)
        and _trusted(q.dtype, interleaved, False)
    ):
        if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad):
            return _RotateQKFn.apply(q, k, cos, sin, interleaved)
        return _kernel(q, cos, sin, interleaved, False), _kernel(k, cos, sin, interleaved, False)
    return _apply(q, cos, sin, interleaved, False), _apply(k, cos, sin, interleaved, False)
