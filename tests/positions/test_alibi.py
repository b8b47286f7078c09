"""ALiBi (Press et al. 2022): slopes and bias, cross-checked against BLOOM and MPT."""

import pytest
import torch

from pecourse.attention import MultiHeadAttention, attention, causal_mask
from pecourse.positions.alibi import ALiBi, alibi_bias, alibi_bias_from_positions, slopes


# transformers' references are imported when a test first needs them, not at collection
# (every test worker collects every file; transformers costs seconds to import).
def build_alibi_tensor(*args, **kwargs):
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    return build_alibi_tensor(*args, **kwargs)


def build_mpt_alibi_tensor(*args, **kwargs):
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    return build_mpt_alibi_tensor(*args, **kwargs)


def _bloom_slopes(num_heads: int) -> torch.Tensor:
    # BLOOM's bias for an unpadded row is m_h · j; at key j = 1 it is the slope itself.
    alibi = build_alibi_tensor(torch.ones(1, 2, dtype=torch.long), num_heads, torch.float32)
    return alibi[:, 0, 1]


# --- slopes ------------------------------------------------------------------------------
def test_slopes_for_eight_heads_are_halvings():
    torch.testing.assert_close(
        slopes(8), torch.tensor([2.0**-k for k in range(1, 9)]), rtol=0, atol=0
    )


def test_slopes_for_powers_of_two_are_exact_geometric():
    for n in (1, 2, 4, 16, 32, 64):
        exact = torch.exp2(-8 * torch.arange(1, n + 1, dtype=torch.float64) / n)
        torch.testing.assert_close(slopes(n), exact.float(), rtol=0, atol=0)
        assert slopes(n).dtype == torch.float32


def test_slopes_for_six_heads_follow_the_papers_rule():
    # Four heads' slopes (2^-2, 2^-4, 2^-6, 2^-8), then 1st and 3rd of eight (2^-1, 2^-3).
    want = torch.tensor([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3])
    torch.testing.assert_close(slopes(6), want, rtol=0, atol=0)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 40, 48, 64, 71, 96, 128])
def test_slopes_match_bloom(n):
    # BLOOM raises a float32 ratio to integer powers, we round the exact 2^(-8k/n) once:
    # they agree to a few float32 ulps.
    torch.testing.assert_close(slopes(n), _bloom_slopes(n), rtol=3e-6, atol=0)


@pytest.mark.parametrize("n", [4, 6, 8, 12, 16, 40])
def test_slopes_match_mpt(n):
    # MPT's bias for one key at distance 1 before the last is -m_h.
    mpt = build_mpt_alibi_tensor(n, 2)  # [heads, 1, 2]: m_h · (j - (L-1))
    torch.testing.assert_close(slopes(n), -mpt[:, 0, 0], rtol=1e-6, atol=0)


# --- the bias ----------------------------------------------------------------------------
def test_causal_bias_values():
    bias = alibi_bias(3, 5, 5)
    m = slopes(3)
    for h in range(3):
        for i in range(5):
            for j in range(5):
                want = -m[h] * (i - j) if j <= i else torch.tensor(0.0)
                assert bias[h, i, j].item() == pytest.approx(want.item())
    assert bias.shape == (3, 5, 5)


def test_symmetric_bias_values():
    bias = alibi_bias(4, 6, 6, causal=False)
    idx = torch.arange(6)
    dist = (idx[:, None] - idx[None, :]).abs().float()
    torch.testing.assert_close(bias, -slopes(4)[:, None, None] * dist)
    torch.testing.assert_close(bias, bias.transpose(1, 2))


def test_bias_depends_only_on_distance():
    bias = alibi_bias(2, 10, 10, causal=False)
    for offset in range(-9, 10):
        diag = torch.diagonal(bias, offset=offset, dim1=1, dim2=2)
        torch.testing.assert_close(diag, diag[:, :1].expand_as(diag))


def test_causal_queries_are_the_last_positions():
    # Decoding with a cache: 3 new queries over 8 keys are rows 5..7 of the full bias.
    torch.testing.assert_close(alibi_bias(4, 3, 8), alibi_bias(4, 8, 8)[:, 5:])


def test_bias_from_positions_batched():
    q = torch.tensor([[3, 4], [10, 20]])
    k = torch.tensor([[0, 1, 2], [0, 5, 20]])
    bias = alibi_bias_from_positions(slopes(2), q, k, causal=False)
    assert bias.shape == (2, 2, 2, 3)
    assert bias[1, 0, 1, 1].item() == pytest.approx(-slopes(2)[0].item() * 15)


@pytest.mark.parametrize("num_heads", [4, 6, 12])
@pytest.mark.parametrize("builder", ["mpt", "bloom"])
def test_key_index_bias_gives_the_same_probabilities(num_heads, builder):
    # BLOOM and MPT add m·j (key index only); we add -m·(i - j). Per row they differ by the
    # constant m·i, which softmax ignores, so under a causal mask the attention is the same.
    length = 9
    if builder == "mpt":
        theirs = build_mpt_alibi_tensor(num_heads, length)  # [h, 1, L]
    else:
        theirs = build_alibi_tensor(
            torch.ones(1, length, dtype=torch.long), num_heads, torch.float32
        )
    ours = alibi_bias(num_heads, length, length)
    # The raw biases are *not* equal: their difference is constant along each row.
    diff = (ours - theirs).masked_fill(~causal_mask(length, length), float("nan"))
    assert not torch.allclose(ours, theirs.expand_as(ours))
    row_const = diff[..., :1].expand_as(diff)
    keep = causal_mask(length, length).expand_as(diff)
    torch.testing.assert_close(diff[keep], row_const[keep], rtol=0, atol=1e-5)

    torch.manual_seed(0)
    scores = torch.randn(num_heads, length, length)
    mask = ~causal_mask(length, length)
    p_ours = torch.softmax((scores + ours).masked_fill(mask, float("-inf")), -1)
    p_theirs = torch.softmax((scores + theirs).masked_fill(mask, float("-inf")), -1)
    torch.testing.assert_close(p_ours, p_theirs, rtol=1e-5, atol=1e-6)


# --- the scheme ----------------------------------------------------------------------------
def test_scheme_in_attention_matches_manual_softmax():
    torch.manual_seed(0)
    b, h, L, d = 2, 4, 7, 8
    q, k, v = (torch.randn(b, h, L, d) for _ in range(3))
    out = attention(q, k, v, ALiBi(h))
    scores = q @ k.transpose(-1, -2) / d**0.5 + alibi_bias(h, L, L)
    scores = scores.masked_fill(~causal_mask(L, L), float("-inf"))
    torch.testing.assert_close(out, torch.softmax(scores, -1) @ v)
    assert ALiBi(h).places == ("scores",)
    assert list(ALiBi(h).parameters()) == []


def test_scheme_honours_positions():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    scheme = ALiBi(2, causal=False)
    pos = torch.arange(4)
    # Shifting every position by the same amount changes nothing (only i - j matters) ...
    base = attention(q, k, v, scheme, q_positions=pos, k_positions=pos, causal=False)
    shifted = attention(q, k, v, scheme, q_positions=pos + 100, k_positions=pos + 100, causal=False)
    torch.testing.assert_close(base, shifted)
    # ... while spreading them out does.
    spread = attention(q, k, v, scheme, q_positions=pos * 10, k_positions=pos * 10, causal=False)
    assert not torch.allclose(base, spread)
    bias = scheme.score_bias(q, k, pos * 10, pos * 10)
    torch.testing.assert_close(
        bias, alibi_bias_from_positions(slopes(2), pos * 10, pos * 10, causal=False)
    )


# --- bad input, one case per test ----------------------------------------------------------
def test_slopes_refuse_zero_heads():
    with pytest.raises(ValueError, match="num_heads"):
        slopes(0)


def test_slopes_refuse_negative_heads():
    with pytest.raises(ValueError, match="num_heads"):
        slopes(-4)


def test_slopes_refuse_float_heads():
    with pytest.raises(TypeError, match="num_heads"):
        slopes(8.0)


def test_bias_refuses_zero_query_len():
    with pytest.raises(ValueError, match="query_len"):
        alibi_bias(4, 0, 5)


def test_causal_bias_refuses_more_queries_than_keys():
    with pytest.raises(ValueError, match="query_len"):
        alibi_bias(4, 6, 5)


def test_bias_refuses_float_positions():
    with pytest.raises(TypeError, match="q_positions"):
        alibi_bias_from_positions(slopes(2), torch.tensor([0.5]), torch.arange(3))


def test_scheme_refuses_wrong_head_count():
    q = torch.randn(1, 3, 4, 8)
    with pytest.raises(ValueError, match="num_heads=4"):
        ALiBi(4).score_bias(q, q, torch.arange(4), torch.arange(4))


def test_scheme_with_grouped_query_attention_and_module():
    torch.manual_seed(0)
    q = torch.randn(1, 4, 5, 8)
    k, v = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    out = attention(q, k, v, ALiBi(4))
    want = attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), ALiBi(4))
    torch.testing.assert_close(out, want)
    mha = MultiHeadAttention(16, 4, ALiBi(4), num_kv_heads=2)
    assert mha(torch.randn(2, 6, 16)).shape == (2, 6, 16)
