"""ReRoPE, leaky ReRoPE, Self-Extend: merged scores against a pair-by-pair brute force."""

from __future__ import annotations

import math

import pytest
import torch

from pecourse.attention import attention, causal_mask
from pecourse.positions.rope import apply_rope, inv_freq
from pecourse.positions.rope_inference import (
    LeakyReRoPE,
    ReRoPE,
    SelfExtend,
    effective_offsets,
    leaky_rerope_scores,
    rerope_scores,
    self_extend_scores,
)


def _randn(*shape, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def _brute_force(q, k, offsets, pairing="half"):
    """score(m, n) = ⟨R(Δ'θ) q_m, k_n⟩ / √d: rotate each query by the remapped offset alone
    (RoPE scores depend on the offset only), one (m, n) pair at a time, in float64."""
    b, h, lq, d = q.shape
    theta = inv_freq(d)
    out = torch.empty(b, h, lq, k.shape[2], dtype=torch.float64)
    for m in range(lq):
        for n in range(k.shape[2]):
            ang = offsets[m, n] * theta
            c, s = torch.cos(ang), torch.sin(ang)
            if pairing == "half":
                x1, x2 = q[..., m, : d // 2], q[..., m, d // 2 :]
                rq = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1)
            else:
                x1, x2 = q[..., m, 0::2], q[..., m, 1::2]
                rq = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), -1).flatten(-2)
            out[..., m, n] = (rq * k[..., n, :]).sum(-1) / math.sqrt(d)
    return out


CASES = [
    ("rerope", dict(window=4), rerope_scores),
    ("leaky_rerope", dict(window=4, ratio=3.0), leaky_rerope_scores),
    ("self_extend", dict(window=4, group_size=3), self_extend_scores),
]


def test_effective_offsets_formulas():
    p = torch.arange(12)
    d = (p[:, None] - p[None, :]).double()
    re = effective_offsets(p, p, method="rerope", window=4)
    torch.testing.assert_close(re, d.clamp(-4, 4))
    leaky = effective_offsets(p, p, method="leaky_rerope", window=4, ratio=2.0)
    expected = torch.where(d.abs() < 4, d, d.sign() * (4 + (d.abs() - 4) / 2))
    torch.testing.assert_close(leaky, expected)
    se = effective_offsets(p, p, method="self_extend", window=4, group_size=3)
    m, n = p[:, None], p[None, :]
    grouped = (m // 3 - n // 3 + 4 - 4 // 3).double()
    assert torch.equal(se[d >= 4], grouped.expand_as(d)[d >= 4])
    assert torch.equal(se[d.abs() < 4], d[d.abs() < 4])


def test_self_extend_is_continuous_at_the_window_and_compresses_far_offsets():
    w, G, L = 16, 4, 256
    p = torch.arange(L)
    se = effective_offsets(p, p, method="self_extend", window=w, group_size=G)
    d = p[:, None] - p[None, :]
    at_edge = se[d == w]
    assert at_edge.min() >= w - 1 and at_edge.max() <= w + 1  # the two regions meet
    assert se[d >= 0].max() <= (L - 1) // G + w - w // G + 1  # ≈ L/G + w, not L
    assert (se[d >= 0].max() < L / 2).item()


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
@pytest.mark.parametrize("method, kw, fn", CASES)
def test_merged_scores_equal_brute_force(method, kw, fn, pairing):
    q, k = _randn(1, 2, 12, 8, seed=1), _randn(1, 2, 12, 8, seed=2)
    p = torch.arange(12) + 3
    ours = fn(q, k, p, p, pairing=pairing, **kw)
    offsets = effective_offsets(p, p, method=method, **kw)
    torch.testing.assert_close(ours, _brute_force(q, k, offsets, pairing), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("method, kw, fn", CASES)
def test_window_covering_everything_is_plain_rope(method, kw, fn):
    q, k = _randn(2, 2, 6, 8, seed=3), _randn(2, 1, 6, 8, seed=4)  # grouped-query k
    p = torch.arange(6)
    kw = dict(kw, window=6)
    plain = apply_rope(q, p) @ apply_rope(k, p).repeat_interleave(2, 1).transpose(-1, -2)
    torch.testing.assert_close(fn(q, k, p, p, **kw), plain / math.sqrt(8))


def test_leaky_ratio_one_is_plain_rope():
    q, k = _randn(1, 1, 9, 8, seed=5), _randn(1, 1, 9, 8, seed=6)
    p = torch.arange(9)
    plain = apply_rope(q, p) @ apply_rope(k, p).transpose(-1, -2) / math.sqrt(8)
    torch.testing.assert_close(leaky_rerope_scores(q, k, p, p, window=2, ratio=1.0), plain)


def test_rerope_far_scores_equal_rope_at_offset_window():
    # every key at least w behind the query scores as if it sat exactly w behind
    q, k = _randn(1, 1, 1, 8, seed=7), _randn(1, 1, 1, 8, seed=8)
    s = [rerope_scores(q, k, torch.tensor([m]), torch.tensor([0]), window=5) for m in (5, 50, 5000)]
    torch.testing.assert_close(s[0], s[1])
    torch.testing.assert_close(s[0], s[2])


def test_batched_positions():
    q, k = _randn(2, 1, 7, 8, seed=9), _randn(2, 1, 7, 8, seed=10)
    p = torch.stack([torch.arange(7), torch.arange(7) + 20])
    both = self_extend_scores(q, k, p, p, window=3, group_size=2)
    for i in range(2):
        one = self_extend_scores(q[i : i + 1], k[i : i + 1], p[i], p[i], window=3, group_size=2)
        torch.testing.assert_close(both[i : i + 1], one)


@pytest.mark.parametrize(
    "scheme, fn, kw",
    [
        (ReRoPE(3), rerope_scores, dict(window=3)),
        (LeakyReRoPE(3, 2.0), leaky_rerope_scores, dict(window=3, ratio=2.0)),
        (SelfExtend(3, 2), self_extend_scores, dict(window=3, group_size=2)),
    ],
)
def test_schemes_in_attention_equal_softmax_of_merged_scores(scheme, fn, kw):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 10, 8) for _ in range(3))
    out, probs = attention(q, k, v, scheme, return_probs=True)
    p = torch.arange(10)
    logits = fn(q, k, p, p, **kw).masked_fill(~causal_mask(10, 10), float("-inf"))
    expected = torch.softmax(logits, dim=-1)
    torch.testing.assert_close(probs, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out, expected @ v, rtol=1e-5, atol=1e-5)
    assert scheme.places == ("scores",)  # rotate is left alone: the merged logits are a bias


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_inputs_in_attention(dtype):
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 2, 12, 8) for _ in range(3))
    scheme = SelfExtend(3, 2)
    ref = attention(q, k, v, scheme)
    low = attention(q.to(dtype), k.to(dtype), v.to(dtype), scheme)
    assert low.dtype == dtype
    torch.testing.assert_close(low.float(), ref, rtol=0.05, atol=0.05)
    p = torch.arange(12)
    s = rerope_scores(q.to(dtype), k.to(dtype), p, p, window=3)
    assert s.dtype == dtype


def test_non_causal_mirrors_the_remap():
    q, k = _randn(1, 1, 8, 8, seed=11), _randn(1, 1, 8, 8, seed=12)
    p = torch.arange(8)
    ours = rerope_scores(q, k, p, p, window=2)
    offsets = effective_offsets(p, p, method="rerope", window=2)
    assert offsets.min() == -2 and offsets.max() == 2
    torch.testing.assert_close(ours, _brute_force(q, k, offsets), rtol=1e-10, atol=1e-10)


# --- refusals -----------------------------------------------------------------------------


def test_refuses_window_below_one():
    with pytest.raises(ValueError, match="window"):
        ReRoPE(0)


def test_refuses_leaky_ratio_below_one():
    with pytest.raises(ValueError, match="ratio"):
        LeakyReRoPE(4, 0.5)


def test_refuses_group_size_below_one():
    with pytest.raises(ValueError, match="group_size"):
        SelfExtend(4, 0)


def test_refuses_unknown_method():
    with pytest.raises(ValueError, match="method"):
        effective_offsets(torch.arange(3), torch.arange(3), method="yarn", window=2)


def test_refuses_positions_of_wrong_length():
    q = torch.randn(1, 1, 4, 8)
    with pytest.raises(ValueError, match="k_positions"):
        rerope_scores(q, q, torch.arange(4), torch.arange(5), window=2)


def test_refuses_float_positions():
    q = torch.randn(1, 1, 4, 8)
    with pytest.raises(TypeError, match="q_positions"):
        rerope_scores(q, q, torch.arange(4.0), torch.arange(4), window=2)


def test_refuses_odd_head_dim():
    q = torch.randn(1, 1, 4, 7)
    with pytest.raises(ValueError, match="head_dim"):
        rerope_scores(q, q, torch.arange(4), torch.arange(4), window=2)
