"""The one-pass CPU RoPE: equal to the package's reference (all dtypes, both pairings,
partial rotary, per-batch positions), gradients, the fallback, refusals."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from pecourse.kernels import rope_cpu
from pecourse.positions.rope import apply_rope, inv_freq, rope_cos_sin
from pecourse.positions.rotary import rotate_pairs

from .conftest import COMPILE_BACKEND

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def _randn(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def _tables(positions, rotary, dtype):
    math = torch.float64 if dtype == torch.float64 else torch.float32
    return rope_cos_sin(positions, inv_freq(rotary), dtype=math)


@pytest.fixture(autouse=True)
def _kernel_built(c_kernel):
    """Every test here is about the built kernel (see conftest: skipped only in the declared
    no-kernel mode, a failure anywhere else)."""


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("pairing", ["half", "interleaved"])
@pytest.mark.parametrize("rotary", [16, 10])
@pytest.mark.parametrize("batched", [False, True], ids=["shared-pos", "batch-pos"])
def test_equals_reference_bit_for_bit(dtype, pairing, rotary, batched):
    x = _randn(2, 3, 7, 16, dtype=dtype)
    positions = torch.tensor([[5, 6, 7, 8, 9, 10, 11], [900, 901, 902, 903, 904, 905, 906]])
    positions = positions if batched else positions[1]
    cos, sin = _tables(positions, rotary, dtype)
    fast = rope_cpu.rotate(x, cos, sin, pairing=pairing)
    # The package's readable implementation (the same float32 products, rounded once).
    ref = apply_rope(x, positions, pairing=pairing, rotary_dim=rotary)
    assert fast.dtype == dtype and fast.shape == x.shape
    assert torch.equal(fast, ref)
    assert torch.equal(fast, rotate_pairs(x, cos, sin, pairing=pairing))


def test_matches_transformers_apply_rotary_pos_emb():
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    x, k = _randn(2, 4, 9, 32), _randn(2, 4, 9, 32, seed=1)
    cos, sin = _tables(torch.arange(9), 32, torch.float32)
    hf_cos, hf_sin = torch.cat((cos, cos), -1)[None], torch.cat((sin, sin), -1)[None]
    hf_q, hf_k = llama.apply_rotary_pos_emb(x, k, hf_cos, hf_sin)
    torch.testing.assert_close(rope_cpu.rotate(x, cos, sin), hf_q)
    torch.testing.assert_close(rope_cpu.rotate(k, cos, sin), hf_k)


def test_any_strides_and_leading_dims():
    base = _randn(2, 7, 3, 16)  # [batch, seq, heads, dim] -> a transposed view
    x = base.transpose(1, 2)
    cos, sin = _tables(torch.arange(7), 16, torch.float32)
    ref = rotate_pairs(x, cos, sin)
    assert torch.equal(rope_cpu.rotate(x, cos, sin), ref)
    # non-contiguous last dim, 3-D and 5-D inputs all give the reference
    xs = _randn(2, 3, 7, 32)[..., ::2]
    assert torch.equal(rope_cpu.rotate(xs, cos, sin), rotate_pairs(xs, cos, sin))
    x3 = _randn(5, 7, 16)
    assert torch.equal(rope_cpu.rotate(x3, cos, sin), rotate_pairs(x3, cos, sin))
    x5 = _randn(2, 2, 3, 7, 16)
    assert torch.equal(rope_cpu.rotate(x5, cos, sin), rotate_pairs(x5, cos, sin))


def test_inverse_undoes_the_rotation():
    x = _randn(2, 3, 5, 16, dtype=torch.float64)
    cos, sin = _tables(torch.arange(100, 105), 12, torch.float64)
    for pairing in ("half", "interleaved"):
        y = rope_cpu.rotate(x, cos, sin, pairing=pairing)
        back = rope_cpu.rotate(y, cos, sin, pairing=pairing, inverse=True)
        torch.testing.assert_close(back, x, rtol=0, atol=1e-13)


def test_threads_give_the_same_result():
    x = _randn(4, 8, 128, 64)  # above the size where the thread pool is used
    cos, sin = _tables(torch.arange(128), 64, torch.float32)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = rope_cpu.rotate(x, cos, sin)
        torch.set_num_threads(2)
        two = rope_cpu.rotate(x, cos, sin)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, two)


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_gradcheck_float64(pairing):
    x = _randn(1, 2, 4, 8, dtype=torch.float64).requires_grad_()
    cos, sin = _tables(torch.arange(3, 7), 6, torch.float64)
    fn = lambda t: rope_cpu.rotate(t, cos, sin, pairing=pairing)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x,))
    assert torch.autograd.gradgradcheck(fn, (x,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_grad_is_the_inverse_rotation(dtype):
    x = _randn(2, 3, 5, 16, dtype=dtype).requires_grad_()
    g = _randn(2, 3, 5, 16, dtype=dtype, seed=3)
    cos, sin = _tables(torch.arange(5), 16, dtype)
    rope_cpu.rotate(x, cos, sin).backward(g)
    x2 = x.detach().clone().requires_grad_()
    rotate_pairs(x2, cos, sin).backward(g)
    assert torch.equal(x.grad, x2.grad)


def test_forward_mode_ad_carries_tangents():
    import torch.autograd.forward_ad as fwad

    x, t = _randn(1, 2, 3, 8), _randn(1, 2, 3, 8, seed=5)
    cos, sin = _tables(torch.arange(3), 8, torch.float32)
    with fwad.dual_level():
        y = rope_cpu.rotate(fwad.make_dual(x, t), cos, sin)
        tangent = fwad.unpack_dual(y).tangent
    assert tangent is not None  # a rotation is linear: its tangent is the rotated tangent
    torch.testing.assert_close(tangent, rope_cpu.rotate(t, cos, sin))


def test_table_gradients_use_the_reference():
    x = _randn(1, 2, 4, 8)
    cos, sin = _tables(torch.arange(4), 8, torch.float32)
    cos.requires_grad_()
    rope_cpu.rotate(x, cos, sin).sum().backward()
    assert cos.grad is not None and cos.grad.shape == cos.shape


@pytest.mark.slow  # 31 s with a fresh inductor cache (a fresh clone, CI), 1-3 s warm
def test_under_torch_compile_and_func_grad():
    x = _randn(1, 2, 4, 8)
    cos, sin = _tables(torch.arange(4), 8, torch.float32)
    compiled = torch.compile(
        lambda t: rope_cpu.rotate(t, cos, sin), fullgraph=True, backend=COMPILE_BACKEND
    )
    torch.testing.assert_close(compiled(x), rope_cpu.rotate(x, cos, sin))
    g = torch.func.grad(lambda t: rope_cpu.rotate(t, cos, sin).square().sum())(x)
    torch.testing.assert_close(g, 2 * x)  # |Rx|^2 = |x|^2: the gradient is 2x


def test_fallback_without_the_c_kernel():
    """A fresh process with the kernel disabled falls back cleanly to the reference."""
    code = (
        "import torch; from pecourse.kernels import rope_cpu as r;"
        "from pecourse.positions.rotary import rotate_pairs;"
        "x = torch.randn(1, 2, 3, 8); c, s = torch.rand(3, 4), torch.rand(3, 4);"
        "assert r.backend() == 'torch', r.backend();"
        "assert 'PECOURSE_NO_CKERNEL' in r.build_error();"
        "assert torch.equal(r.rotate(x, c, s), rotate_pairs(x, c, s)); print('ok')"
    )
    env = {"PECOURSE_NO_CKERNEL": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


def test_the_c_source_ships_as_package_data():
    """The kernel's source is a .c file beside the module, found through importlib.resources
    (so it is there in an installed wheel too), and the build cache is keyed by its text."""
    import re
    from importlib import resources
    from pathlib import Path

    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    patterns = re.search(r"\[tool\.setuptools\.package-data\]\npecourse = \[(.*)\]", pyproject)
    assert '"kernels/*.c"' in patterns.group(1), patterns.group(0)
    source = resources.files("pecourse.kernels").joinpath("rope_cpu.c").read_text()
    assert source == rope_cpu._c_source()  # what the build compiles


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"x": _randn(1, 2, 3, 7)}, "head_dim"),
        ({"cos": torch.rand(3, 4), "sin": torch.rand(3, 3)}, "cos and sin"),
        ({"cos": torch.rand(4, 4), "sin": torch.rand(4, 4)}, "seq"),
        ({"cos": torch.rand(3, 5), "sin": torch.rand(3, 5)}, "rotary_dim"),
        ({"cos": torch.rand(2, 3, 4), "sin": torch.rand(2, 3, 4)}, "batch"),
        ({"pairing": "gptj"}, "pairing"),
        ({"x": torch.ones(1, 2, 3, 8, dtype=torch.long)}, "x must be a floating"),
    ],
)
def test_refusals_name_the_parameter(kwargs, match):
    args = {"x": _randn(1, 2, 3, 8), "cos": torch.rand(3, 4), "sin": torch.rand(3, 4)}
    args.update(kwargs)
    pairing = args.pop("pairing", "half")
    with pytest.raises((ValueError, TypeError), match=match):
        rope_cpu.rotate(args["x"], args["cos"], args["sin"], pairing=pairing)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_thread_pool_survives_fork():
    """A forked child (DataLoader worker) must not wait on the parent's dead pool threads."""
    code = (
        "import os, torch; from pecourse.kernels import rope_cpu as r;"
        "torch.set_num_threads(2); x = torch.randn(4, 8, 128, 64);"
        "c, s = torch.rand(128, 32), torch.rand(128, 32); a = r.rotate(x, c, s);"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(0 if torch.equal(r.rotate(x, c, s), a) else 3)\n"
        "_, status = os.waitpid(pid, 0); print('child', os.waitstatus_to_exitcode(status))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "child 0" in out.stdout, out.stderr


def test_reference_takes_a_shared_batch_row_like_rotate():
    """``[1, S, R/2]`` tables are one row of positions for the whole batch, in the kernel
    and in the rotary core it is checked against ("same signature, same numbers")."""
    from pecourse.positions.rotary import rotate_pairs

    x = _randn(3, 2, 5, 8)
    cos, sin = _tables(torch.arange(4, 9)[None], 8, torch.float32)  # [1, 5, 4]
    want = rotate_pairs(x, cos[0], sin[0])
    assert torch.equal(rotate_pairs(x, cos, sin), want)
    assert torch.equal(rope_cpu.rotate(x, cos, sin), want)


@pytest.mark.parametrize("dim", [16, 32, 64, 12])  # 8, 16, 32 pairs are spelled out in C
@pytest.mark.parametrize("pairing", ["half", "interleaved"])
@pytest.mark.parametrize("inverse", [False, True])
def test_every_head_size_equals_the_reference(dim, pairing, inverse):
    x = _randn(3, 5, 2, dim).transpose(1, 2)  # [batch, heads, seq, dim] as a strided view
    cos, sin = _tables(torch.arange(40, 45), dim, torch.float32)
    got = rope_cpu.rotate(x, cos, sin, pairing=pairing, inverse=inverse)
    assert torch.equal(got, rotate_pairs(x, cos, sin, pairing=pairing, inverse=inverse))


def test_a_transposed_view_keeps_its_layout_forwards_and_backwards():
    """Queries viewed as [batch, heads, seq, dim] from a projection's [batch, seq, heads*dim]
    output rotate into the same layout, and their gradient comes back in it: the views cost
    no copy either way."""
    base = _randn(2, 7, 3, 16).requires_grad_()
    x = base.transpose(1, 2)
    cos, sin = _tables(torch.arange(7), 16, torch.float32)
    y = rope_cpu.rotate(x, cos, sin)
    assert y.stride() == x.stride() and torch.equal(y, rotate_pairs(x, cos, sin))
    g = _randn(2, 3, 7, 16, seed=2)
    y.backward(g)
    ref = base.detach().clone().requires_grad_()
    rotate_pairs(ref.transpose(1, 2), cos, sin).backward(g)
    assert torch.equal(base.grad, ref.grad)
    # a view that is not dense (every other dimension) comes back contiguous
    xs = _randn(2, 3, 7, 32)[..., ::2]
    assert rope_cpu.rotate(xs, cos, sin).is_contiguous()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_rotate_qk_is_two_rotations(dtype, pairing):
    """Queries and keys in one call (grouped-query: fewer key heads, partial rotary): the same
    outputs and gradients as two calls of rotate, bit for bit; a gradient for only the input
    that asks for one."""
    q = _randn(2, 7, 4, 16, dtype=dtype).transpose(1, 2).requires_grad_()
    k = _randn(2, 7, 2, 16, dtype=dtype, seed=1).transpose(1, 2).requires_grad_()
    cos, sin = _tables(torch.arange(3, 10), 12, dtype)
    gq, gk = _randn(2, 4, 7, 16, dtype=dtype, seed=2), _randn(2, 2, 7, 16, dtype=dtype, seed=3)
    qr, kr = rope_cpu.rotate_qk(q, k, cos, sin, pairing=pairing)
    torch.autograd.backward((qr, kr), (gq, gk))
    q2, k2 = (t.detach().clone().requires_grad_() for t in (q, k))
    want_q, want_k = (rope_cpu.rotate(t, cos, sin, pairing=pairing) for t in (q2, k2))
    torch.autograd.backward((want_q, want_k), (gq, gk))
    assert torch.equal(qr, want_q) and torch.equal(kr, want_k)
    assert torch.equal(q.grad, q2.grad) and torch.equal(k.grad, k2.grad)
    assert torch.equal(qr, rotate_pairs(q, cos, sin, pairing=pairing))
    frozen = k.detach()
    qr, kr = rope_cpu.rotate_qk(q, frozen, cos, sin, pairing=pairing)
    q.grad = None
    (qr.float().sum() + kr.float().sum()).backward()
    assert q.grad is not None and frozen.grad is None
    with pytest.raises(ValueError, match="seq"):
        rope_cpu.rotate_qk(q, k[:, :, :5], cos, sin)
