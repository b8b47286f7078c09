"""``attention(..., fused=True)`` is the same maths as the step-by-step path."""

import pytest
import torch

from pecourse.attention import MultiHeadAttention, NoPE, attention
from pecourse.positions.alibi import ALiBi
from pecourse.positions.relative import ShawRelative, T5RelativeBias
from pecourse.positions.rope import RoPE

SCHEMES = {
    "nope": lambda: NoPE(),
    "rope": lambda: RoPE(8),
    "alibi": lambda: ALiBi(4),
    "t5": lambda: T5RelativeBias(4, num_buckets=8, max_distance=16),
}


def _qkv(lq=6, lk=6, heads=4, kv_heads=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, heads, lq, 8, generator=g)
    k = torch.randn(2, kv_heads, lk, 8, generator=g)
    v = torch.randn(2, kv_heads, lk, 8, generator=g)
    return q, k, v


@pytest.mark.parametrize("name", SCHEMES)
@pytest.mark.parametrize("causal", [True, False])
def test_fused_equals_step_by_step(name, causal):
    scheme = SCHEMES[name]()
    q, k, v = _qkv()
    with torch.no_grad():
        plain = attention(q, k, v, scheme, causal=causal)
        fused = attention(q, k, v, scheme, causal=causal, fused=True)
    torch.testing.assert_close(fused, plain, atol=1e-5, rtol=1e-5)


def test_fused_with_cache_alignment_gqa_and_padding():
    q, k, v = _qkv(lq=2, lk=7, heads=4, kv_heads=2)
    padding = torch.ones(2, 7, dtype=torch.bool)
    padding[1, :3] = False  # left padding in the second sequence
    scheme = ALiBi(4)
    plain = attention(q, k, v, scheme, padding_mask=padding)
    fused = attention(q, k, v, scheme, padding_mask=padding, fused=True)
    torch.testing.assert_close(fused, plain, atol=1e-5, rtol=1e-5)


def test_fully_masked_query_gives_zeros_not_nans():
    q, k, v = _qkv(lq=3, lk=3)
    padding = torch.zeros(2, 3, dtype=torch.bool)
    padding[0] = True
    out = attention(q, k, v, padding_mask=padding, causal=False, fused=True)
    assert not out.isnan().any()
    assert (out[1] == 0).all()


def test_schemes_that_need_the_probabilities_ignore_fused():
    # Shaw's value term reads the probabilities: fused=True must not change its answer.
    scheme = ShawRelative(8, max_distance=3)
    q, k, v = _qkv()
    with torch.no_grad():
        plain = attention(q, k, v, scheme)
        fused = attention(q, k, v, scheme, fused=True)
    torch.testing.assert_close(fused, plain)


def test_module_flag_switches_paths():
    torch.manual_seed(0)
    layer = MultiHeadAttention(32, 4, RoPE(8))
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        plain = layer(x)
        layer.fused = True
        fused = layer(x)
    torch.testing.assert_close(fused, plain, atol=1e-5, rtol=1e-5)
