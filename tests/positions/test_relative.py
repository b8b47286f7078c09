"""Relative positions: Shaw et al.'s clipped offsets and T5's buckets."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pecourse.attention import attention, causal_mask
from pecourse.positions.relative import (
    ShawKeysOnly,
    ShawRelative,
    T5RelativeBias,
    clipped_relative_ids,
    shaw_key_term,
    shaw_relative_ids,
    shaw_value_term,
    t5_bias,
    t5_bucket,
)


# transformers is imported when a test first needs it, not at collection (every test worker
# collects every file; transformers costs seconds to import).
def _reference_bucket(*args, **kwargs):
    from transformers.models.t5.modeling_t5 import T5Attention

    return T5Attention._relative_position_bucket(*args, **kwargs)


CONFIGS = [(32, 128), (16, 64), (8, 20), (64, 256), (32, 40), (4, 3), (128, 1000)]


# --- T5 buckets ----------------------------------------------------------------------------
@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", CONFIGS)
def test_t5_bucket_matches_transformers(bidirectional, num_buckets, max_distance):
    rel = torch.arange(-3000, 3001)
    ours = t5_bucket(
        rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    theirs = _reference_bucket(
        rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert torch.equal(ours, theirs)
    assert ours.dtype == torch.long


@pytest.mark.parametrize("num_buckets,max_distance", [(3, 5), (5, 7), (2, 2)])
def test_t5_causal_bucket_with_odd_counts_matches_transformers(num_buckets, max_distance):
    rel = torch.arange(-500, 501)
    kw = dict(bidirectional=False, num_buckets=num_buckets, max_distance=max_distance)
    assert torch.equal(t5_bucket(rel, **kw), _reference_bucket(rel, **kw))


@settings(max_examples=60, deadline=None)
@given(
    rel=st.lists(st.integers(-(10**7), 10**7), min_size=1, max_size=50),
    bidirectional=st.booleans(),
    config=st.sampled_from(CONFIGS),
)
def test_t5_bucket_matches_transformers_far_out(rel, bidirectional, config):
    rel = torch.tensor(rel)
    kw = dict(bidirectional=bidirectional, num_buckets=config[0], max_distance=config[1])
    assert torch.equal(t5_bucket(rel, **kw), _reference_bucket(rel, **kw))


def test_t5_bucket_small_distances_are_exact():
    rel = torch.tensor([-7, -3, -1, 0, 1, 3, 7])
    # Bidirectional, 32 buckets: 16 per side, the first 8 exact; keys after the query (+) use 16..31.
    assert t5_bucket(rel).tolist() == [7, 3, 1, 0, 17, 19, 23]
    # Causal: keys after the query all land in bucket 0 (the mask removes them).
    assert t5_bucket(rel, bidirectional=False).tolist() == [7, 3, 1, 0, 0, 0, 0]


def test_t5_bucket_is_monotone_and_saturates():
    d = torch.arange(0, 5000)
    buckets = t5_bucket(-d, bidirectional=False, num_buckets=32, max_distance=128)
    assert torch.all(buckets[1:] >= buckets[:-1])
    assert torch.all(buckets[128:] == 31)  # everything past max_distance shares one bucket
    # The floor in the log formula means the last bucket starts where 16 + 16·log(d/16)/log(8)
    # reaches 31, at d = 16·8^(15/16) ≈ 113, not at max_distance = 128.
    assert (buckets == 31).nonzero()[0].item() == math.ceil(16 * 8 ** (15 / 16))
    assert set(buckets.tolist()) == set(range(32))  # every bucket is used


def test_t5_bucket_keeps_shape():
    rel = torch.arange(-6, 6).reshape(3, 4)
    assert t5_bucket(rel).shape == (3, 4)


@pytest.mark.parametrize("is_decoder", [False, True])
def test_t5_bias_matches_transformers_compute_bias(is_decoder):
    from transformers import T5Config
    from transformers.models.t5.modeling_t5 import T5Attention

    config = T5Config(
        d_model=16,
        d_kv=4,
        num_heads=4,
        relative_attention_num_buckets=16,
        relative_attention_max_distance=20,
        is_decoder=is_decoder,
    )
    torch.manual_seed(0)
    ref = T5Attention(config, has_relative_attention_bias=True, layer_idx=0)
    theirs = ref.compute_bias(30, 30)[0]  # [heads, Lq, Lk]
    ours = t5_bias(
        ref.relative_attention_bias.weight,
        torch.arange(30),
        torch.arange(30),
        bidirectional=not is_decoder,
        max_distance=20,
    )
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


def test_t5_scheme_in_attention_matches_manual_softmax():
    torch.manual_seed(0)
    b, h, L, d = 2, 4, 9, 8
    q, k, v = (torch.randn(b, h, L, d) for _ in range(3))
    scheme = T5RelativeBias(h, num_buckets=8, max_distance=16, bidirectional=False)
    out = attention(q, k, v, scheme)
    pos = torch.arange(L)
    bias = scheme.table.weight[
        t5_bucket(pos[None] - pos[:, None], bidirectional=False, num_buckets=8, max_distance=16)
    ]
    scores = q @ k.transpose(-1, -2) / math.sqrt(d) + bias.permute(2, 0, 1)
    scores = scores.masked_fill(~causal_mask(L, L), float("-inf"))
    torch.testing.assert_close(out, torch.softmax(scores, -1) @ v)
    assert scheme.places == ("scores",)


def test_t5_bias_batched_positions():
    table = torch.randn(32, 3)
    q = torch.tensor([[0, 1], [50, 51]])
    bias = t5_bias(table, q, q)
    assert bias.shape == (2, 3, 2, 2)
    torch.testing.assert_close(bias[0], bias[1])  # only j - i matters


# --- Shaw et al. ------------------------------------------------------------------------------
def test_shaw_ids_are_toeplitz_and_clipped():
    ids = shaw_relative_ids(9, 12, 3)
    assert ids.shape == (9, 12)
    for i in range(9):
        for j in range(12):
            assert ids[i, j].item() == max(-3, min(3, j - i)) + 3
    for offset in range(-8, 12):  # constant along every diagonal
        diag = torch.diagonal(ids, offset=offset)
        assert torch.all(diag == diag[0])


def test_shaw_ids_from_positions_depend_on_offset_only():
    pos = torch.arange(6)
    torch.testing.assert_close(
        clipped_relative_ids(pos, pos, 2), clipped_relative_ids(pos + 40, pos + 40, 2)
    )


def _naive_shaw(q, k, v, table_k, table_v, max_distance, causal):
    # Eqs. 3 and 4 of Shaw et al., one (b, h, i) at a time, straight from the formulas.
    b, h, L, d = q.shape
    out = torch.zeros_like(q)
    for bb in range(b):
        for hh in range(h):
            for i in range(L):
                e = torch.empty(L, dtype=q.dtype)
                for j in range(L):
                    r = max(-max_distance, min(max_distance, j - i)) + max_distance
                    e[j] = q[bb, hh, i] @ (k[bb, hh, j] + table_k[r]) / math.sqrt(d)
                    if causal and j > i:
                        e[j] = float("-inf")
                alpha = torch.softmax(e, 0)
                for j in range(L):
                    r = max(-max_distance, min(max_distance, j - i)) + max_distance
                    out[bb, hh, i] += alpha[j] * (v[bb, hh, j] + table_v[r])
    return out


def test_shaw_key_term_equals_loop():
    torch.manual_seed(0)
    q = torch.randn(2, 3, 5, 4, dtype=torch.float64)
    table = torch.randn(5, 4, dtype=torch.float64)  # k = 2
    ids = shaw_relative_ids(5, 7, 2)
    term = shaw_key_term(q, table, ids)
    assert term.shape == (2, 3, 5, 7)
    for b in range(2):
        for h in range(3):
            for i in range(5):
                for j in range(7):
                    want = q[b, h, i] @ table[ids[i, j]] / math.sqrt(4)
                    assert term[b, h, i, j].item() == pytest.approx(want.item())


def test_shaw_value_term_equals_loop():
    torch.manual_seed(0)
    probs = torch.softmax(torch.randn(2, 3, 5, 7, dtype=torch.float64), -1)
    table = torch.randn(7, 4, dtype=torch.float64)  # k = 3
    ids = shaw_relative_ids(5, 7, 3)
    term = shaw_value_term(probs, table, ids)
    want = torch.zeros(2, 3, 5, 4, dtype=torch.float64)
    for i in range(5):
        for j in range(7):
            want[:, :, i] += probs[:, :, i, j, None] * table[ids[i, j]]
    torch.testing.assert_close(term, want)


@pytest.mark.parametrize("causal", [True, False])
def test_shaw_scheme_equals_naive_attention(causal):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 6, 4, dtype=torch.float64) for _ in range(3))
    scheme = ShawRelative(head_dim=4, max_distance=2).double()
    with torch.no_grad():  # make the tables big enough to matter
        scheme.table_k.normal_()
        scheme.table_v.normal_()
    out = attention(q, k, v, scheme, causal=causal)
    want = _naive_shaw(q, k, v, scheme.table_k, scheme.table_v, 2, causal)
    torch.testing.assert_close(out, want.detach())
    assert scheme.places == ("scores", "values")


def test_shaw_without_values_uses_key_term_only():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 4, dtype=torch.float64) for _ in range(3))
    scheme = ShawKeysOnly(4, 2).double()
    zero_v = torch.zeros(5, 4, dtype=torch.float64)
    want = _naive_shaw(q, k, v, scheme.table_k.detach(), zero_v, 2, causal=True)
    torch.testing.assert_close(attention(q, k, v, scheme), want)
    torch.testing.assert_close(attention(q, k, v, scheme, fused=True), want)
    assert scheme.places == ("scores",) and not scheme.needs_probs
    assert not hasattr(scheme, "table_v")


def test_shaw_scheme_is_translation_invariant():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 4) for _ in range(3))
    scheme = ShawRelative(4, 3)
    pos = torch.arange(5)
    a = attention(q, k, v, scheme, q_positions=pos, k_positions=pos, causal=False)
    b = attention(q, k, v, scheme, q_positions=pos + 77, k_positions=pos + 77, causal=False)
    torch.testing.assert_close(a, b)


def test_shaw_tables_get_gradients():
    q, k, v = (torch.randn(1, 2, 5, 4) for _ in range(3))
    scheme = ShawRelative(4, 2)
    attention(q, k, v, scheme).sum().backward()
    assert scheme.table_k.grad is not None and scheme.table_v.grad is not None


# --- bad input, one case per test ----------------------------------------------------------
def test_t5_bucket_refuses_float_relative_positions():
    with pytest.raises(TypeError, match="relative_position"):
        t5_bucket(torch.tensor([0.0, 1.0]))


def test_t5_bucket_refuses_odd_num_buckets_when_bidirectional():
    with pytest.raises(ValueError, match="num_buckets must be even"):
        t5_bucket(torch.arange(3), num_buckets=31)


def test_t5_bucket_refuses_too_few_buckets():
    with pytest.raises(ValueError, match="num_buckets"):
        t5_bucket(torch.arange(3), bidirectional=False, num_buckets=1)


def test_t5_bucket_refuses_max_distance_inside_exact_region():
    # 32 buckets bidirectional: 16 per side, 8 exact; max_distance must exceed 8.
    with pytest.raises(ValueError, match="max_distance must be > 8"):
        t5_bucket(torch.arange(3), num_buckets=32, max_distance=8)


def test_t5_scheme_refuses_wrong_head_count():
    q = torch.randn(1, 2, 3, 4)
    with pytest.raises(ValueError, match="num_heads=4"):
        T5RelativeBias(4).score_bias(q, q, torch.arange(3), torch.arange(3))


def test_shaw_refuses_zero_max_distance():
    with pytest.raises(ValueError, match="max_distance"):
        shaw_relative_ids(3, 3, 0)


def test_shaw_refuses_negative_positions():
    with pytest.raises(ValueError, match="q_positions must be non-negative"):
        clipped_relative_ids(torch.tensor([-1, 0]), torch.arange(2), 2)


def test_shaw_key_term_refuses_even_table():
    with pytest.raises(ValueError, match="table_k must have 2k\\+1 rows"):
        shaw_key_term(torch.randn(1, 1, 3, 4), torch.randn(4, 4), shaw_relative_ids(3, 3, 1))


def test_shaw_scheme_refuses_wrong_head_dim():
    q = torch.randn(1, 2, 3, 8)
    with pytest.raises(ValueError, match="head_dim=4"):
        ShawRelative(4, 2).score_bias(q, q, torch.arange(3), torch.arange(3))
