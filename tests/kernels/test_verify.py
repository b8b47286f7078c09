"""Compiled paths are checked against their reference on this machine: a wrong kernel is
caught on first use, announced once, and replaced by the reference for its configuration.

Each test injects a deliberately wrong kernel (no compiler needed) and checks both halves:
the warning, and a result equal to the reference.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from pecourse.attention import attention
from pecourse.kernels import flex, rope_cpu, verify
from pecourse.kernels.verify import CompiledPathWarning
from pecourse.positions.alibi import ALiBi
from pecourse.positions.rotary import cos_sin, rotate_pairs


@pytest.fixture(autouse=True)
def fresh_verdicts():
    verify.forget()
    yield
    verify.forget()


def _qkv(length, heads=4, kv_heads=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(2, heads, length, 16, generator=g),
        torch.randn(2, kv_heads, length, 16, generator=g),
        torch.randn(2, kv_heads, length, 16, generator=g),
    )


def _eager(q, k, v, **kwargs):
    from torch.nn.attention.flex_attention import flex_attention

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return flex_attention(q, k, v, **kwargs)


def test_wrong_flex_kernel_is_caught_named_once_and_replaced():
    calls = []

    def wrong(q, k, v, **kwargs):  # a "compiled" FlexAttention that corrupts one row
        calls.append(q.shape)
        out = _eager(q, k, v, **kwargs).clone()
        out[1, 3, 4] = float("nan")
        return out

    q, k, v = _qkv(40)
    with pytest.warns(CompiledPathWarning) as caught:
        out = flex.flex_attention_alibi(q, k, v, causal=True, compiled=wrong)
    [w] = caught
    message = str(w.message)
    assert "flex_attention" in message and "alibi_score_mod" in message
    assert "[2, 4, 48, 16]" in message  # the configuration, at the padded length it runs at
    assert "NaN" in message and "reference" in message
    torch.testing.assert_close(out, attention(q, k, v, ALiBi(4), causal=True))
    assert len(calls) == 1  # the probe; the answer came from eager

    with warnings.catch_warnings():
        warnings.simplefilter("error", CompiledPathWarning)  # announced once, not per call
        again = flex.flex_attention_alibi(q, k, v, causal=True, compiled=wrong)
    torch.testing.assert_close(again, out)
    assert len(calls) == 1
    [check] = verify.status("flex_attention")
    assert not check.trusted and check.max_abs_error == float("inf")


def test_a_right_kernel_is_trusted_and_used():
    calls = []

    def right(q, k, v, **kwargs):
        calls.append(1)
        return _eager(q, k, v, **kwargs)

    q, k, v = _qkv(32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompiledPathWarning)
        for _ in range(2):
            out = flex.flex_attention_alibi(q, k, v, causal=True, compiled=right)
    torch.testing.assert_close(out, attention(q, k, v, ALiBi(4), causal=True))
    assert len(calls) == 3  # one probe, then every call answered by the trusted kernel
    assert verify.status("flex_attention")[0].trusted


def test_a_kernel_that_raises_falls_back():
    def broken(q, k, v, **kwargs):
        raise RuntimeError("C++ compile error")

    q, k, v = _qkv(16)
    with pytest.warns(CompiledPathWarning, match="raised RuntimeError: C\\+\\+ compile error"):
        out = flex.flex_attention_alibi(q, k, v, causal=True, compiled=broken)
    torch.testing.assert_close(out, attention(q, k, v, ALiBi(4), causal=True))


def test_each_configuration_is_probed_separately():
    """A verdict for one length or mask does not vouch for another."""
    seen = []

    def spy(q, k, v, **kwargs):
        seen.append((q.shape[2], kwargs["block_mask"].mask_mod.__qualname__))
        return _eager(q, k, v, **kwargs)

    for length, window in [(16, None), (32, None), (16, 5), (16, None)]:
        flex.flex_attention_alibi(*_qkv(length), causal=True, window=window, compiled=spy)
    configs = [c.config for c in verify.status("flex_attention")]
    assert len(configs) == 3
    assert any("sliding_window_mask_mod(q_offset=0, window=5)" in c for c in configs)


def test_cpu_lengths_are_padded_to_a_multiple_of_16():
    """The miscompiled class (multiples of 8 that are not of 16) never reaches the kernel."""
    shapes = []

    def spy(q, k, v, **kwargs):
        shapes.append((q.shape[2], k.shape[2]))
        return _eager(q, k, v, **kwargs)

    for lq, lk, causal in [(40, 40, True), (8, 24, True), (33, 33, False)]:
        q, k, v = _qkv(lk)
        q = q[:, :, lk - lq :]
        out = flex.flex_attention_alibi(q, k, v, causal=causal, compiled=spy)
        torch.testing.assert_close(out, attention(q, k, v, ALiBi(4, causal=causal), causal=causal))
    assert all(a % 16 == 0 and b % 16 == 0 for a, b in shapes)
    assert flex.padded_length(40) == 48 and flex.padded_length(48) == 48


def test_a_mask_for_other_lengths_is_refused():
    q, k, v = _qkv(40)
    with pytest.raises(ValueError, match=r"mask was built for lengths \(40, 40\).*\(48, 48\)"):
        flex.flex_attention_alibi(q, k, v, mask=flex.block_mask(flex.causal_mask_mod(), 40, 40))
    reused = flex.mask_for(40, 40)
    out = flex.flex_attention_alibi(q, k, v, mask=reused, compiled=False)
    torch.testing.assert_close(out, attention(q, k, v, ALiBi(4), causal=True))


@pytest.fixture
def wrong_c_kernel(monkeypatch, c_kernel):
    real = rope_cpu._kernel

    def wrong(x, cos, sin, interleaved, inverse):
        out = real(x, cos, sin, interleaved, inverse)
        out.view(-1)[-1] += 1.0  # one wrong element
        return out

    monkeypatch.setattr(rope_cpu, "_kernel", wrong)


def test_wrong_c_kernel_is_caught_and_replaced(wrong_c_kernel):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 5, 8, generator=g)
    cos, sin = cos_sin(torch.arange(5), torch.rand(4, dtype=torch.float64))
    with pytest.warns(CompiledPathWarning, match=r"rope_cpu \(C kernel\) for float32, half"):
        out = rope_cpu.rotate(x, cos, sin)
    assert torch.equal(out, rotate_pairs(x, cos, sin))
    # the other pairing is another configuration: probed (and caught) on its own
    with pytest.warns(CompiledPathWarning, match="interleaved"):
        rope_cpu.rotate(x, cos, sin, pairing="interleaved")
    assert [c.trusted for c in verify.status()] == [False, False]


def test_every_c_kernel_configuration_agrees_here(c_kernel):
    """On this machine the built kernel agrees with the reference everywhere it is offered
    (if it did not, the package would still be right: the test above shows the fallback)."""
    checks = rope_cpu.check_all()
    assert len(checks) >= 12  # float32, float64, bfloat16 (+ float16) x 2 pairings x 2 directions
    assert all(c.trusted for c in checks), [c for c in checks if not c.trusted]


def test_wrong_triton_kernel_is_caught_and_replaced(monkeypatch):
    pytest.importorskip("triton")
    from .conftest import import_rope_triton

    rope_triton = import_rope_triton()

    real = rope_triton._fallback

    def wrong_launch(q, k, cos, sin, interleaved, inverse):
        q_out, k_out = real(q, k, cos, sin, interleaved, inverse)
        return q_out, -k_out  # keys rotated the wrong way round

    monkeypatch.setattr(rope_triton, "backend", lambda device="cuda": "triton")
    monkeypatch.setattr(rope_triton, "_launch", wrong_launch)
    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(1, 4, 6, 8, generator=g), torch.randn(1, 2, 6, 8, generator=g)
    cos, sin = cos_sin(torch.arange(6), torch.rand(4, dtype=torch.float64))
    with pytest.warns(CompiledPathWarning, match="rope_triton for cpu, float32, head_dim 8"):
        qr, kr = rope_triton.rope_qk(q, k, cos, sin)
    assert torch.equal(kr, rotate_pairs(k, cos, sin))
    assert torch.equal(qr, rotate_pairs(q, cos, sin))


def test_info_reports_each_verdict():
    from pecourse import info

    def wrong(q, k, v, **kwargs):
        return _eager(q, k, v, **kwargs) + 1.0

    with pytest.warns(CompiledPathWarning):
        flex.flex_attention_alibi(*_qkv(16), compiled=wrong)
    rows = dict(info.report())
    if rope_cpu.backend() == "c":
        assert "agrees with the reference here for every dtype" in rows["C RoPE kernel"]
        assert "trusted: float32, half pairing" in info.format_report(info.report())
    else:
        assert rows["C RoPE kernel"].startswith("not in use, the PyTorch reference answers")
    text = info.format_report(info.report())
    assert "FELL BACK to the reference: score_mod alibi_score_mod" in text


def test_compare_names_what_differs():
    ok, err, detail = verify._compare(torch.ones(3), torch.ones(3))
    assert ok and err == 0.0
    ok, err, detail = verify._compare(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]))
    assert not ok and err == pytest.approx(0.5) and "1 of 2 elements differ" in detail
    ok, _, detail = verify._compare(torch.ones(2, 3), torch.ones(3, 2))
    assert not ok and "shape" in detail
    # bfloat16 tolerance is looser than float32's, but not loose enough for an O(1) error
    bf = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    assert verify._compare(bf, bf + 0.0078125)[0] and not verify._compare(bf, bf + 1)[0]


def test_the_probe_runs_in_the_callers_grad_mode():
    # torch.compile guards on grad mode: a probe under no_grad compiled a second graph that
    # the caller's own call (grad enabled) could not reuse
    modes = []

    def kernel(q, k, v, **kwargs):
        modes.append(torch.is_grad_enabled())
        return _eager(q, k, v, **kwargs)

    q, k, v = _qkv(32)
    flex.flex_attention_alibi(q, k, v, causal=True, compiled=kernel)
    with torch.no_grad():
        flex.flex_attention_alibi(*_qkv(48), causal=True, compiled=kernel)
    assert modes == [True, True, False, False]  # probe and call alike, in each mode


def test_the_shared_compiled_kernel_may_recompile_past_dynamos_default_limit(monkeypatch):
    # Dynamo runs a function eagerly for good once it has compiled recompile_limit (8) shapes;
    # the process-wide FlexAttention is called with a higher limit, and the default returns
    # (under either of the names torch has given that limit).
    name, limits = flex.recompile_limit_name(), []
    config = torch._dynamo.config

    def kernel(q, k, v, **kwargs):
        limits.append(getattr(config, name))
        return _eager(q, k, v, **kwargs)

    monkeypatch.setattr(flex, "_compiled_flex", lambda: kernel)
    default = getattr(config, name)
    flex.flex_attention_alibi(*_qkv(32), causal=True)
    assert limits == [flex.RECOMPILE_LIMIT] * 2 and flex.RECOMPILE_LIMIT > default
    assert getattr(config, name) == default
