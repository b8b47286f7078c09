"""The fused Triton RoPE kernel, run on the CPU by Triton's interpreter.

``TRITON_INTERPRET=1`` must be set before the kernel module is imported (Triton decides at
decoration time) and while kernels launch (Triton imports parts of itself lazily). It is set
around the import (``conftest.import_rope_triton``, which every test module uses) and,
through an autouse fixture, around each test of this module only, so other test modules in
the same process never see it. Grids are tiny: the interpreter runs every program in Python.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from pecourse.positions.rope import apply_rope, inv_freq, rope_cos_sin  # noqa: E402

from .conftest import COMPILE_BACKEND, import_rope_triton  # noqa: E402

rope_triton = import_rope_triton()
if rope_triton.backend("cpu") != "triton-interpreter":  # a real failure, never a skip
    raise AssertionError("rope_triton was imported earlier without TRITON_INTERPRET=1")


@pytest.fixture(autouse=True)
def _interpret(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def _randn(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def _tables(positions, rotary, dtype):
    math = torch.float64 if dtype == torch.float64 else torch.float32
    return rope_cos_sin(positions, inv_freq(rotary), dtype=math)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64], ids=str
)
@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_equals_reference_gqa_offset_partial(dtype, pairing):
    """4 query heads and 2 key heads, per-batch positions at an offset, rotary_dim 10 of 16."""
    q, k = _randn(2, 4, 5, 16, dtype=dtype), _randn(2, 2, 5, 16, dtype=dtype, seed=1)
    positions = torch.tensor([[3, 4, 5, 6, 7], [1000, 1001, 1002, 1003, 1004]])
    cos, sin = _tables(positions, 10, dtype)
    q_rot, k_rot = rope_triton.rope_qk(q, k, cos, sin, pairing=pairing)
    common = dict(pairing=pairing, rotary_dim=10)
    # bit for bit: the same float32 products, rounded once to nearest even
    assert torch.equal(q_rot, apply_rope(q, positions, **common))
    assert torch.equal(k_rot, apply_rope(k, positions, **common))


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_decoding_step_with_shared_positions(pairing):
    """One new token at position 37 (a cache offset), full rotary, non-contiguous q."""
    q = _randn(1, 1, 3, 8).transpose(1, 2)  # [1, 3 heads, 1 token, 8], strided
    k = _randn(1, 1, 1, 8, seed=2)
    positions = torch.tensor([37])
    cos, sin = _tables(positions, 8, torch.float32)
    q_rot, k_rot = rope_triton.rope_qk(q, k, cos, sin, pairing=pairing)
    torch.testing.assert_close(q_rot, apply_rope(q, positions, pairing=pairing), rtol=0, atol=0)
    torch.testing.assert_close(k_rot, apply_rope(k, positions, pairing=pairing), rtol=0, atol=0)


def test_apply_rope_on_the_triton_backend_matches_the_reference():
    x = _randn(2, 3, 4, 8)[:, :, :, :6]  # a last dim that is not the whole row: strided rows
    pos = torch.tensor([[5, 9, 11, 12], [0, 1, 2, 3]])
    ref = dict(pairing="interleaved", base=500.0)
    want = apply_rope(x, pos, **ref)
    assert torch.equal(apply_rope(x, pos, backend=rope_triton.TRITON_ROPE, **ref), want)
    cos, sin = rope_cos_sin(pos, inv_freq(6, 500.0))
    back = rope_triton.rotate(want, cos, sin, pairing="interleaved", inverse=True)
    torch.testing.assert_close(back, x)  # the inverse rotation undoes it


def test_gradcheck_float64():
    q = _randn(1, 2, 3, 8, dtype=torch.float64).requires_grad_()
    k = _randn(1, 1, 3, 8, dtype=torch.float64, seed=1).requires_grad_()
    cos, sin = _tables(torch.arange(2, 5), 6, torch.float64)
    fn = lambda a, b: rope_triton.rope_qk(a, b, cos, sin, pairing="interleaved")  # noqa: E731
    assert torch.autograd.gradcheck(fn, (q, k), fast_mode=True)


def test_backward_is_inverse_rotation_and_matches_reference():
    q = _randn(1, 2, 3, 8).requires_grad_()
    k = _randn(1, 1, 3, 8, seed=1).requires_grad_()
    gq, gk = _randn(1, 2, 3, 8, seed=2), _randn(1, 1, 3, 8, seed=3)
    pos = torch.tensor([4, 5, 6])
    cos, sin = _tables(pos, 8, torch.float32)
    q_rot, k_rot = rope_triton.rope_qk(q, k, cos, sin)
    torch.autograd.backward((q_rot, k_rot), (gq, gk))
    q2, k2 = q.detach().requires_grad_(), k.detach().requires_grad_()
    torch.autograd.backward((apply_rope(q2, pos), apply_rope(k2, pos)), (gq, gk))
    torch.testing.assert_close(q.grad, q2.grad)
    torch.testing.assert_close(k.grad, k2.grad)


def test_opcheck():
    q, k = _randn(1, 2, 3, 8), _randn(1, 1, 3, 8, seed=1)
    cos, sin = _tables(torch.arange(3), 8, torch.float32)
    q.requires_grad_()
    k.requires_grad_()
    torch.library.opcheck(torch.ops.pecourse.rope_qk.default, (q, k, cos, sin, False, False))
    torch.library.opcheck(torch.ops.pecourse.rope_qk.default, (q, k, cos, sin, True, True))


def test_torch_compile_traces_the_custom_op():
    q = _randn(1, 2, 3, 8).requires_grad_()
    k = _randn(1, 1, 3, 8, seed=1).requires_grad_()
    cos, sin = _tables(torch.arange(3), 8, torch.float32)

    def f(a, b):
        qa, kb = rope_triton.rope_qk(a, b, cos, sin)
        return (qa * 2).sum() + kb.square().sum()

    # fullgraph: no graph break allowed
    compiled = torch.compile(f, fullgraph=True, backend=COMPILE_BACKEND)
    out = compiled(q, k)
    out.backward()
    q2, k2 = q.detach().requires_grad_(), k.detach().requires_grad_()
    f(q2, k2).backward()
    torch.testing.assert_close(out, f(q2, k2))
    torch.testing.assert_close(q.grad, q2.grad)
    torch.testing.assert_close(k.grad, k2.grad)


BAD = [
    ({"q": _randn(2, 3, 8)}, "q must be \\[batch, heads, seq, head_dim\\]"),
    ({"q": _randn(1, 2, 3, 16)[..., ::2]}, "q must have a contiguous last dimension"),
    ({"k": _randn(1, 1, 3, 16)[..., ::2]}, "k must have a contiguous last dimension"),
    ({"cos": torch.rand(3, 4), "sin": torch.rand(3, 2)}, "cos and sin must have the same shape"),
    ({"cos": torch.rand(5, 4), "sin": torch.rand(5, 4)}, "cos/sin must hold one row per position"),
    (
        {"q": _randn(1, 2, 3, 7), "k": _randn(1, 1, 3, 7)},
        r"head_dim \(q.shape\[-1\]\) must be even",
    ),
    ({"k": _randn(1, 1, 4, 8)}, "k must be \\[batch, kv_heads, seq, head_dim\\]"),
    ({"cos": torch.rand(3, 5), "sin": torch.rand(3, 5)}, "rotary_dim"),
    ({"pairing": "neox"}, "pairing must be one of"),
]


@pytest.mark.parametrize(("change", "match"), BAD, ids=[m for _, m in BAD])
def test_bad_input_names_the_parameter(change, match):
    args = dict(q=_randn(1, 2, 3, 8), k=_randn(1, 1, 3, 8), cos=torch.rand(3, 4))
    args["sin"] = torch.rand(3, 4)
    args.update(change)
    pairing = args.pop("pairing", "half")
    with pytest.raises((ValueError, TypeError), match=match):
        rope_triton.rope_qk(args["q"], args["k"], args["cos"], args["sin"], pairing=pairing)


def test_backend_names():
    assert rope_triton.backend("cpu") == "triton-interpreter"
    assert rope_triton.backend("meta") == "torch"
