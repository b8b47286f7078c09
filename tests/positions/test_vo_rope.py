"""VO-RoPE / RoPER: o_i = sum_j a_ij R_(j-i) v_j."""

import math

import pytest
import torch

from pecourse.attention import attention
from pecourse.positions.rope import apply_rope, inv_freq
from pecourse.positions.vo_rope import RoPER, VORoPE, rope_inverse, vo_rope_output, vo_rope_values


def _rotation_matrix(angles, pairing, d):
    """Dense [d, d] rotation acting on column vectors, built pair by pair (float64)."""
    m = torch.zeros(d, d, dtype=torch.float64)
    for i, a in enumerate(angles.tolist()):
        first, second = (i, i + d // 2) if pairing == "half" else (2 * i, 2 * i + 1)
        c, s = math.cos(a), math.sin(a)
        m[first, first], m[first, second] = c, -s
        m[second, first], m[second, second] = s, c
    return m


def _randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
@pytest.mark.parametrize("rotary_dim", [None, 4])
def test_inverse_undoes_rope(pairing, rotary_dim):
    x = _randn(2, 3, 5, 8)
    pos = torch.tensor([[0, 3, 9, 100, 2047], [5, 6, 7, 8, 9]])
    kw = dict(pairing=pairing, rotary_dim=rotary_dim)
    y = apply_rope(x, pos, **kw)
    torch.testing.assert_close(rope_inverse(y, pos, **kw), x, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(apply_rope(rope_inverse(x, pos, **kw), pos, **kw), x)


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_inverse_is_rotation_by_minus_the_angle(pairing):
    x = _randn(1, 1, 3, 6, dtype=torch.float64)
    pos = torch.tensor([1, 7, 40])
    freqs = inv_freq(6)
    got = rope_inverse(x, pos, pairing=pairing)
    for s, m in enumerate(pos.tolist()):
        rot = _rotation_matrix(-m * freqs, pairing, 6)
        torch.testing.assert_close(got[0, 0, s], rot @ x[0, 0, s])


def test_inverse_leaves_unrotated_dims_alone():
    x = _randn(1, 2, 4, 8)
    y = rope_inverse(x, torch.arange(4), rotary_dim=4)
    torch.testing.assert_close(y[..., 4:], x[..., 4:])


def _naive_vo_attention(q, k, v, pairing, base=10000.0):
    """o_i = sum_j a_ij R_(j-i) v_j with dense rotation matrices, causal, positions 0..L-1."""
    b, h, s, d = q.shape
    freqs = inv_freq(d, base)
    scores = (q @ k.transpose(-2, -1)).double() / math.sqrt(d)
    scores = scores.masked_fill(~torch.ones(s, s, dtype=torch.bool).tril(), float("-inf"))
    a = torch.softmax(scores, -1)
    out = torch.zeros(b, h, s, d, dtype=torch.float64)
    for i in range(s):
        for j in range(i + 1):
            rot = _rotation_matrix((j - i) * freqs, pairing, d)
            out[:, :, i] += a[:, :, i, j, None] * (v[:, :, j].double() @ rot.T)
    return out


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_scheme_rotates_values_by_relative_offset(pairing):
    q, k, v = (_randn(2, 2, 5, 6, seed=s) for s in range(3))
    got = attention(q, k, v, VORoPE(6, pairing=pairing))
    want = _naive_vo_attention(q, k, v, pairing).float()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_pure_functions_compose_to_the_scheme():
    q, k, v = (_randn(1, 2, 4, 8, seed=s) for s in range(3))
    pos = torch.arange(4)
    probs = attention(q, k, v, return_probs=True)[1]
    manual = vo_rope_output(probs @ vo_rope_values(v, pos), pos)
    torch.testing.assert_close(attention(q, k, v, VORoPE(8)), manual)


def test_query_attending_only_to_itself_gets_its_value_back():
    """a_ii = 1 means o_i = R_0 v_i = v_i, whatever position i is at."""
    q, k, v = (_randn(1, 1, 1, 8, seed=s) for s in range(3))
    pos = torch.tensor([12345])
    out = attention(q, k, v, VORoPE(8), q_positions=pos, k_positions=pos)
    torch.testing.assert_close(out, v)


@pytest.mark.parametrize("scheme", [VORoPE(8), RoPER(8)], ids=["vo_rope", "roper"])
def test_shift_invariance(scheme):
    q, k, v = (_randn(2, 2, 6, 8, seed=s) for s in range(3))
    pos = torch.arange(6)
    a = attention(q, k, v, scheme, q_positions=pos, k_positions=pos)
    b = attention(q, k, v, scheme, q_positions=pos + 301, k_positions=pos + 301)
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_roper_also_makes_the_weights_rope_weights():
    from pecourse.positions.rope import RoPE

    q, k, v = (_randn(1, 2, 5, 8, seed=s) for s in range(3))
    _, probs_vo = attention(q, k, v, RoPER(8), return_probs=True)
    _, probs_rope = attention(q, k, v, RoPE(8), return_probs=True)
    torch.testing.assert_close(probs_vo, probs_rope)
    assert RoPER(8).places == ("qk", "values")
    assert VORoPE(8).places == ("values",)


def test_fused_path_gives_the_step_by_step_output():
    """VO-RoPE never reads the probabilities, so it may hand the softmax to the fused kernel."""
    q, k, v = (_randn(2, 4, 7, 8, seed=s, dtype=torch.float64) for s in range(3))
    for scheme in (VORoPE(8), RoPER(8, pairing="interleaved")):
        assert not scheme.needs_probs
        fused = attention(q, k[:, :2], v[:, :2], scheme, fused=True)
        torch.testing.assert_close(fused, attention(q, k[:, :2], v[:, :2], scheme))


def test_grouped_query_attention_and_cache_alignment():
    q = _randn(1, 4, 2, 8, seed=1)
    k, v = _randn(1, 2, 5, 8, seed=2), _randn(1, 2, 5, 8, seed=3)
    scheme = VORoPE(8)
    got = attention(q, k, v, scheme)  # queries at positions 3, 4
    k4, v4 = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
    torch.testing.assert_close(got, attention(q, k4, v4, scheme))
    full_q = torch.cat([_randn(1, 4, 3, 8, seed=9), q], dim=2)
    torch.testing.assert_close(got, attention(full_q, k4, v4, scheme)[:, :, 3:])


def test_bf16_keeps_dtype():
    v = _randn(1, 1, 4, 8).bfloat16()
    out = rope_inverse(vo_rope_values(v, torch.arange(4)), torch.arange(4))
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), v.float(), rtol=2e-2, atol=2e-2)


# --- refusals --------------------------------------------------------------------------


def test_refuses_odd_head_dim():
    with pytest.raises(ValueError, match="head_dim"):
        VORoPE(7)


def test_refuses_rotary_dim_above_head_dim():
    with pytest.raises(ValueError, match="rotary_dim"):
        rope_inverse(_randn(1, 1, 2, 4), torch.arange(2), rotary_dim=6)


def test_refuses_unknown_pairing():
    with pytest.raises(ValueError, match="pairing"):
        VORoPE(8, pairing="adjacent")


def test_refuses_float_positions():
    with pytest.raises(TypeError, match="positions"):
        vo_rope_output(_randn(1, 1, 2, 4), torch.tensor([0.0, 1.0]))
