"""FlexAttention with ALiBi, T5 buckets, causal and sliding-window masks, checked against the
package's math reference and against SDPA with a materialised bias (CPU, forward only).

Each test compiles a fresh FlexAttention after clearing dynamo's caches: torch 2.13's CPU
template can miscompile a second, different score_mod in one process. The package checks
every compiled configuration against eager (tests/kernels/test_verify.py), so these tests
assert that its *answer* is right on this machine, whichever path gave it.
"""

from __future__ import annotations

import logging

import pytest
import torch
import torch.nn.functional as F

from pecourse.attention import attention
from pecourse.kernels import flex
from pecourse.positions.alibi import ALiBi, alibi_bias
from pecourse.positions.relative import T5RelativeBias

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture
def compiled():
    from torch.nn.attention.flex_attention import flex_attention

    torch._dynamo.reset()
    yield torch.compile(flex_attention)
    torch._dynamo.reset()


def _qkv(lq, lk, heads=4, kv_heads=2, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, heads, lq, d, generator=g)
    k = torch.randn(2, kv_heads, lk, d, generator=g)
    v = torch.randn(2, kv_heads, lk, d, generator=g)
    return q, k, v


@pytest.mark.slow  # 15 s with a warm inductor cache (7 s in the fixture), 28 s cold
def test_alibi_equals_math_reference_and_sdpa(compiled):
    """Causal, grouped-query (4 query heads, 2 key heads), no L x L tensor on the flex side.

    Length 40 is one torch 2.13's compiled CPU kernel got wrong on an AVX2 machine: the
    package's answer must be right whatever this machine's kernel does."""
    q, k, v = _qkv(40, 40)
    out = flex.flex_attention_alibi(q, k, v, causal=True, compiled=compiled)
    ref = attention(q, k, v, ALiBi(4, causal=True), causal=True)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    mask = flex.materialised_alibi_mask(4, 40, 40, causal=True)
    kk, vv = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask))
    # the materialised mask is the package's ALiBi bias plus -inf above the diagonal
    keep = torch.ones(40, 40, dtype=torch.bool).tril()
    assert torch.equal(mask[:, keep], alibi_bias(4, 40, 40)[:, keep])


@pytest.mark.slow
@pytest.mark.parametrize(("lq", "lk", "causal"), [(16, 80, True), (48, 48, False)])
def test_alibi_offset_and_bidirectional(compiled, lq, lk, causal):
    q, k, v = _qkv(lq, lk)
    out = flex.flex_attention_alibi(q, k, v, causal=causal, compiled=compiled)
    ref = attention(q, k, v, ALiBi(4, causal=causal), causal=causal)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_sliding_window_equals_sdpa(compiled):
    q, k, v = _qkv(40, 40, kv_heads=4)
    out = flex.flex_attention_alibi(q, k, v, causal=True, window=7, compiled=compiled)
    mask = flex.materialised_alibi_mask(4, 40, 40, causal=True, window=7)
    assert torch.isinf(mask[0, 20, :13]).all() and torch.isfinite(mask[0, 20, 14:21]).all()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_t5_equals_math_reference(compiled, causal=False, lq=48, lk=48):
    # (The causal form with a query offset reads the same kernel code through another table;
    # test_t5_relative_table_matches_t5_bias checks that table, offsets included, exactly.)
    q, k, v = _qkv(lq, lk)
    scheme = T5RelativeBias(4, num_buckets=16, max_distance=20, bidirectional=not causal)
    with torch.no_grad():
        scheme.table.weight.normal_(generator=torch.Generator().manual_seed(1))
    table = scheme.table.weight.detach()
    out = flex.flex_attention_t5(q, k, v, table, causal=causal, max_distance=20, compiled=compiled)
    ref = attention(q, k, v, scheme, causal=causal)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_t5_relative_table_matches_t5_bias():
    from pecourse.positions.relative import t5_bias

    table = torch.randn(32, 3)
    for lq, lk, offset, bidir in [(5, 9, 4, False), (7, 7, 0, True)]:
        rel = flex.t5_relative_table(table, lq, lk, q_offset=offset, bidirectional=bidir)
        assert rel.shape == (3, lq + lk - 1)
        i = torch.arange(lq)[:, None]
        j = torch.arange(lk)[None, :]
        gathered = rel[:, j - i + lq - 1]  # what the score_mod reads
        expected = t5_bias(table, torch.arange(lq) + offset, torch.arange(lk), bidirectional=bidir)
        assert torch.equal(gathered, expected)


def test_eager_flex_equals_reference_without_compile():
    # (torch warns once per process that eager FlexAttention is slow; the filter above hides it)
    q, k, v = _qkv(32, 32)
    out = flex.flex_attention_alibi(q, k, v, causal=True, compiled=False)
    torch.testing.assert_close(out, attention(q, k, v, ALiBi(4), causal=True))


def test_memory_report_linear_vs_quadratic():
    small = flex.memory_report(8, 1024)
    big = flex.memory_report(8, 2048)
    assert big["materialised_bias_bytes"] == 4 * small["materialised_bias_bytes"]
    assert big["materialised_bias_bytes"] == 8 * 2048 * 2048 * 4
    assert big["flex_alibi_bytes"] == 32  # eight float32 slopes, whatever the length
    assert big["flex_t5_bytes"] < 2.1 * small["flex_t5_bytes"]  # linear
    assert 0 < big["flex_block_mask_bytes"] < big["materialised_bias_bytes"] / 1000
    assert flex.memory_report(8, 2048, causal=False)["flex_block_mask_bytes"] == 0


def test_refusals():
    q, k, v = _qkv(8, 8)
    with pytest.raises(ValueError, match="window"):
        flex.flex_attention_alibi(q, k, v, causal=False, window=4)
    with pytest.raises(ValueError, match="k and v must have the same shape"):
        flex.flex_attention_alibi(q, k, v[:, :1])
    with pytest.raises(ValueError, match="table must be"):
        flex.flex_attention_t5(q, k, v, torch.randn(32, 3))
    with pytest.raises(ValueError, match="window must be >= 1"):
        flex.sliding_window_mask_mod(0)
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        flex.flex_attention_alibi(torch.randn(2, 3, 8, 16), k, v)


def test_the_common_configurations_are_the_ones_promised_each_logged(monkeypatch, caplog):
    calls = []

    def record(kind):
        return lambda q, k, v, *rest, **options: calls.append((kind, q, k, options))

    monkeypatch.setattr(flex, "flex_attention_alibi", record("alibi"))
    monkeypatch.setattr(flex, "flex_attention_t5", record("t5"))
    with caplog.at_level(logging.INFO, logger="pecourse.kernels.flex"):
        flex.check_common_configurations()
    alibi = [(q.shape[2], o.get("window")) for kind, q, _, o in calls if kind == "alibi"]
    assert {length % 16 == 0 for length, _ in alibi} == {True, False}  # both sides of 16
    assert any(window for _, window in alibi) and any(kind == "t5" for kind, *_ in calls)
    assert any(q.shape[1] > k.shape[1] for _, q, k, _ in calls)  # grouped heads
    progress = [r.getMessage() for r in caplog.records]
    assert len(progress) == len(calls)  # one line before each compile, counting them
    assert all(f"{i} of {len(calls)}" in line for i, line in enumerate(progress, start=1))
