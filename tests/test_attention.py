"""pecourse.attention: the four hooks, against torch's scaled_dot_product_attention."""

import math

import pytest
import torch
import torch.nn.functional as F

from pecourse.attention import (
    PLACES,
    MultiHeadAttention,
    NoPE,
    PositionScheme,
    attention,
    causal_mask,
)


def _qkv(b=2, h=4, h_kv=None, lq=5, lk=None, d=8, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    h_kv = h if h_kv is None else h_kv
    lk = lq if lk is None else lk
    q = torch.randn(b, h, lq, d, generator=g, dtype=dtype)
    k = torch.randn(b, h_kv, lk, d, generator=g, dtype=dtype)
    v = torch.randn(b, h_kv, lk, d, generator=g, dtype=dtype)
    return q, k, v


# --- agreement with torch ------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_matches_sdpa(causal):
    q, k, v = _qkv()
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(attention(q, k, v, causal=causal), want)


def test_matches_sdpa_with_cache_alignment():
    """Lq < Lk (decoding with a cache): queries are the *last* Lq positions."""
    q, k, v = _qkv(lq=3, lk=7)
    mask = torch.ones(7, 7, dtype=torch.bool).tril()[-3:]  # bottom-right aligned
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(attention(q, k, v, causal=True), want)


@pytest.mark.parametrize("causal", [False, True])
def test_matches_sdpa_grouped_query(causal):
    q, k, v = _qkv(h=6, h_kv=2)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    torch.testing.assert_close(attention(q, k, v, causal=causal), want)
    # and the same as repeating each key/value head for its group of 3 query heads
    k3, v3 = k.repeat_interleave(3, dim=1), v.repeat_interleave(3, dim=1)
    torch.testing.assert_close(
        attention(q, k, v, causal=causal), attention(q, k3, v3, causal=causal)
    )


def test_matches_sdpa_with_padding_mask():
    q, k, v = _qkv(lq=6)
    padding = torch.tensor([[True] * 6, [False, False, True, True, True, True]])  # left pad
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=padding[:, None, None, :])
    torch.testing.assert_close(attention(q, k, v, causal=False, padding_mask=padding), want)


def test_fully_masked_query_gets_zeros_not_nan():
    q, k, v = _qkv(b=1, lq=4)
    padding = torch.tensor([[False, True, True, True]])
    out, probs = attention(q, k, v, padding_mask=padding, return_probs=True)
    # Query 0 (causal) sees only key 0, which is padding: its row is all zeros.
    assert torch.isfinite(out).all()
    assert torch.all(out[:, :, 0] == 0) and torch.all(probs[:, :, 0] == 0)
    torch.testing.assert_close(probs[:, :, 1:].sum(-1), torch.ones(1, 4, 3))


def test_probs_are_a_causal_distribution():
    q, k, v = _qkv(lq=2, lk=5)
    out, probs = attention(q, k, v, return_probs=True)
    assert probs.shape == (2, 4, 2, 5)
    torch.testing.assert_close(probs.sum(-1), torch.ones(2, 4, 2))
    assert torch.all(probs[..., 0, 4] == 0)  # query 0 sits at key position 3
    torch.testing.assert_close(out, probs @ v)


def test_low_precision_runs_softmax_in_float32():
    q, k, v = _qkv(dtype=torch.bfloat16)
    out = attention(q, k, v)
    assert out.dtype == torch.bfloat16
    want = attention(q.float(), k.float(), v.float())
    torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2)


# --- what NoPE can and cannot see --------------------------------------------------------


def test_nope_without_mask_is_permutation_equivariant():
    q, k, v = _qkv(lq=7, seed=1)
    perm = torch.randperm(7, generator=torch.Generator().manual_seed(0))
    out = attention(q, k, v, NoPE(), causal=False)
    out_perm = attention(q[:, :, perm], k[:, :, perm], v[:, :, perm], NoPE(), causal=False)
    torch.testing.assert_close(out_perm, out[:, :, perm])


def test_nope_with_causal_mask_sees_order():
    q, k, v = _qkv(lq=7, seed=1)
    perm = torch.tensor([6, 5, 4, 3, 2, 1, 0])
    out = attention(q, k, v, NoPE(), causal=True)
    out_perm = attention(q[:, :, perm], k[:, :, perm], v[:, :, perm], NoPE(), causal=True)
    assert not torch.allclose(out_perm, out[:, :, perm], atol=1e-3)


def test_nope_is_the_default_and_uses_no_place():
    q, k, v = _qkv()
    torch.testing.assert_close(attention(q, k, v, NoPE()), attention(q, k, v))
    assert NoPE().places == () and set(PLACES) == {"input", "qk", "scores", "values"}


# --- the hooks ---------------------------------------------------------------------------


class _Recorder(PositionScheme):
    """Records every hook call; applies a visible change at each place."""

    needs_probs = True

    def __init__(self):
        super().__init__()
        self.calls = []

    def rotate(self, q, k, q_positions, k_positions):
        self.calls.append(("rotate", k.shape[1], q_positions.tolist(), k_positions.tolist()))
        return q, 2 * k

    def score_bias(self, q, k, q_positions, k_positions):
        self.calls.append(("score_bias", k.shape[1]))
        return torch.full((1, 1, q.shape[2], k.shape[2]), 0.5)

    def transform_values(self, v, k_positions):
        self.calls.append(("transform_values", v.shape[1]))
        return v + 1

    def transform_output(self, out, probs, q_positions, k_positions):
        self.calls.append(("transform_output", probs.shape))
        return -out


def test_hooks_run_in_order_with_default_positions():
    q, k, v = _qkv(h=4, h_kv=2, lq=2, lk=5)
    rec = _Recorder()
    out = attention(q, k, v, rec)
    names = [c[0] for c in rec.calls]
    # In the order a forward pass meets the places (PLACES): q/k, scores, values, output.
    assert names == ["rotate", "score_bias", "transform_values", "transform_output"]
    # rotate and transform_values see the key/value heads before grouped-query repetition;
    # score_bias sees keys repeated to one per query head.
    assert rec.calls[0] == ("rotate", 2, [3, 4], [0, 1, 2, 3, 4])
    assert rec.calls[1] == ("score_bias", 4)
    assert rec.calls[2] == ("transform_values", 2)
    assert rec.calls[3] == ("transform_output", (2, 4, 2, 5))
    kk, vv = (2 * k).repeat_interleave(2, 1), (v + 1).repeat_interleave(2, 1)
    scores = q @ kk.transpose(-2, -1) / math.sqrt(8) + 0.5
    scores = scores.masked_fill(~causal_mask(2, 5), float("-inf"))
    torch.testing.assert_close(out, -(torch.softmax(scores, -1) @ vv))


def test_explicit_positions_reach_the_hooks():
    q, k, v = _qkv(lq=3)
    rec = _Recorder()
    attention(
        q, k, v, rec, q_positions=torch.tensor([5, 6, 7]), k_positions=torch.tensor([5, 6, 7])
    )
    assert rec.calls[0][2:] == ([5, 6, 7], [5, 6, 7])


def test_non_causal_default_positions_start_at_zero():
    q, k, v = _qkv(lq=2, lk=4)
    rec = _Recorder()
    attention(q, k, v, rec, causal=False)
    assert rec.calls[0][2:] == ([0, 1], [0, 1, 2, 3])


def test_multihead_attention_matches_manual_projection():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, num_kv_heads=2)
    x = torch.randn(2, 5, 16)
    q = mha.q_proj(x).view(2, 5, 4, 4).transpose(1, 2)
    k = mha.k_proj(x).view(2, 5, 2, 4).transpose(1, 2)
    v = mha.v_proj(x).view(2, 5, 2, 4).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    want = mha.o_proj(o.transpose(1, 2).reshape(2, 5, 16))
    torch.testing.assert_close(mha(x), want)
    out, probs = mha(x, return_probs=True)
    assert probs.shape == (2, 4, 5, 5)


# --- causal_mask ---------------------------------------------------------------------------


def test_causal_mask_square_is_lower_triangular():
    assert torch.equal(causal_mask(4, 4), torch.ones(4, 4, dtype=torch.bool).tril())


def test_causal_mask_aligns_queries_to_the_end():
    want = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(causal_mask(2, 4), want)
    assert torch.equal(causal_mask(1, 3), torch.ones(1, 3, dtype=torch.bool))


def test_causal_mask_refuses_more_queries_than_keys():
    with pytest.raises(ValueError, match="query_len"):
        causal_mask(5, 3)


def test_causal_mask_refuses_non_integer_length():
    with pytest.raises(TypeError, match="key_len"):
        causal_mask(2, 3.0)


# --- refusals ------------------------------------------------------------------------------


def test_refuses_head_dim_mismatch():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="head_dim"):
        attention(q, k[..., :4], v[..., :4])


def test_refuses_batch_mismatch():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="batch"):
        attention(q, k[:1], v[:1])


def test_refuses_k_v_shape_mismatch():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="k and v"):
        attention(q, k, v[:, :, :3])


def test_refuses_non_divisible_heads():
    q, k, v = _qkv(h=4, h_kv=3)
    with pytest.raises(ValueError, match="heads"):
        attention(q, k, v)


def test_refuses_three_dimensional_q():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="q must have 4"):
        attention(q[0], k, v)


def test_refuses_integer_values():
    q, k, v = _qkv()
    with pytest.raises(TypeError, match="v must be a floating"):
        attention(q, k, v.long())


def test_refuses_padding_mask_of_wrong_shape():
    q, k, v = _qkv(lq=6)
    with pytest.raises(ValueError, match="padding_mask"):
        attention(q, k, v, padding_mask=torch.ones(2, 5, dtype=torch.bool))


def test_refuses_non_bool_padding_mask():
    q, k, v = _qkv(lq=6)
    with pytest.raises(ValueError, match="padding_mask"):
        attention(q, k, v, padding_mask=torch.ones(2, 6))


def test_refuses_causal_only_scheme_without_mask():
    class CausalOnly(PositionScheme):  # stands in for xPos
        requires_causal = True

    q, k, v = _qkv()
    with pytest.raises(ValueError, match="causal=True"):
        attention(q, k, v, CausalOnly(), causal=False)
    attention(q, k, v, CausalOnly(), causal=True)  # fine with the mask


@pytest.mark.parametrize("name", ["xpos", "cope"])
def test_refuses_real_causal_only_schemes_without_mask(name):
    from pecourse.positions.cope import CoPE
    from pecourse.positions.xpos import XPos

    scheme = XPos(8) if name == "xpos" else CoPE(8, max_position=4)
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=rf"{type(scheme).__name__} requires causal=True") as err:
        attention(q, k, v, scheme, causal=False)
    # the scheme's own reason, and no other scheme's (CoPE's error once explained xPos)
    assert scheme.causal_reason and scheme.causal_reason in str(err.value)
    other = "CoPE" if name == "xpos" else "xPos"
    assert other not in str(err.value)


def test_multihead_refuses_indivisible_d_model():
    with pytest.raises(ValueError, match="num_heads"):
        MultiHeadAttention(10, 4)


def test_multihead_refuses_indivisible_kv_heads():
    with pytest.raises(ValueError, match="num_kv_heads"):
        MultiHeadAttention(16, 4, num_kv_heads=3)


def test_float64_stays_float64():
    """The softmax upcasts low precision to float32 but must not downcast float64."""
    q, k, v = _qkv(dtype=torch.float64)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out = attention(q, k, v)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-12)


def test_a_scheme_cannot_write_its_places_by_hand():
    from pecourse.attention import PositionScheme

    with pytest.raises(TypeError, match="sets places by hand"):

        class Declared(PositionScheme):  # noqa: F841 - the class statement is what fails
            places = ("scores",)

            def rotate(self, q, k, q_positions, k_positions):
                return q, k

    class Derived(PositionScheme):
        def rotate(self, q, k, q_positions, k_positions):
            return q, k

    assert Derived.places == Derived().places == ("qk",)
