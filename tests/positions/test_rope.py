"""RoPE: cross-referenced against transformers and rotary-embedding-torch, properties, refusals."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pecourse.attention import attention
from pecourse.positions.rope import (
    RoPE,
    apply_rope,
    apply_rope_complex,
    inv_freq,
    pairing_permutation,
    permute_qk_weight,
    rope_cos_sin,
    rope_decay_bound,
    rotation_matrix,
)

# Derandomized and without an example database: the suite is deterministic and leaves no files.
FAST = settings(max_examples=15, deadline=None, derandomize=True, database=None)


def _randn(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def _reference64(x, positions, base=10000.0, pairing="half"):
    """RoPE written out pair by pair in float64: the precision yardstick."""
    x = x.to(torch.float64)
    d = x.shape[-1]
    out = torch.empty_like(x)
    for i in range(d // 2):
        theta = base ** (-2 * i / d)
        ang = positions.to(torch.float64) * theta
        c, s = torch.cos(ang), torch.sin(ang)
        a, b = (i, i + d // 2) if pairing == "half" else (2 * i, 2 * i + 1)
        out[..., a] = x[..., a] * c - x[..., b] * s
        out[..., b] = x[..., b] * c + x[..., a] * s
    return out


# --- frequencies -----------------------------------------------------------------------


def test_inv_freq_formula_and_transformers_default():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    ours = inv_freq(64, 10000.0)
    assert ours.shape == (32,) and ours.dtype == torch.float64
    assert ours[0] == 1.0
    torch.testing.assert_close(ours[-1].item(), 10000.0 ** (-62 / 64), rtol=1e-15, atol=0)
    cfg = LlamaConfig(
        hidden_size=256,
        num_attention_heads=4,
        head_dim=64,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    theirs, factor = LlamaRotaryEmbedding.compute_default_rope_parameters(cfg)
    torch.testing.assert_close(ours.float(), theirs, rtol=1e-6, atol=0)
    assert factor == 1.0


def test_rope_cos_sin_shapes_and_factor():
    pos = torch.arange(5)
    cos, sin = rope_cos_sin(pos, inv_freq(8), attention_factor=2.0)
    assert cos.shape == sin.shape == (5, 4) and cos.dtype == torch.float32
    torch.testing.assert_close(cos**2 + sin**2, torch.full((5, 4), 4.0))
    cos_b, _ = rope_cos_sin(pos.expand(3, 5), inv_freq(8))
    assert cos_b.shape == (3, 5, 4)


# --- cross-reference -----------------------------------------------------------------


@pytest.mark.parametrize("attention_factor", [1.0, 1.3])
def test_half_pairing_matches_transformers_apply_rotary_pos_emb(attention_factor):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    b, h, s, d = 2, 3, 11, 16
    q, k = _randn(b, h, s, d, seed=1), _randn(b, 1, s, d, seed=2)
    pos = torch.stack([torch.arange(s), torch.arange(s) + 100])  # [batch, seq]
    # transformers' LlamaRotaryEmbedding.forward, written out
    freqs = pos[..., None].float() * inv_freq(d).float()
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos() * attention_factor, emb.sin() * attention_factor
    q_ref, k_ref = apply_rotary_pos_emb(q, k, cos, sin)
    q_ours = apply_rope(q, pos, attention_factor=attention_factor)
    k_ours = apply_rope(k, pos, attention_factor=attention_factor)
    torch.testing.assert_close(q_ours, q_ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(k_ours, k_ref, rtol=1e-5, atol=1e-5)


def test_interleaved_pairing_matches_rotary_embedding_torch():
    from rotary_embedding_torch import RotaryEmbedding

    d, s = 16, 13
    x = _randn(2, 3, s, d, seed=3)
    theirs = RotaryEmbedding(dim=d).rotate_queries_or_keys(x)
    ours = apply_rope(x, torch.arange(s), pairing="interleaved")
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


def test_partial_rotary_matches_rotary_embedding_torch():
    # rotary-embedding-torch with dim < head_dim rotates the leading dims, passes the rest.
    from rotary_embedding_torch import RotaryEmbedding

    x = _randn(1, 2, 9, 24, seed=4)
    theirs = RotaryEmbedding(dim=8).rotate_queries_or_keys(x)
    ours = apply_rope(x, torch.arange(9), pairing="interleaved", rotary_dim=8)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    assert torch.equal(ours[..., 8:], x[..., 8:])


def test_partial_rotary_half_matches_transformers():
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    x = _randn(1, 2, 9, 24, seed=5)
    r = 8
    freqs = torch.arange(9)[:, None].float() * inv_freq(r).float()
    emb = torch.cat((freqs, freqs), dim=-1)[None]
    # GPT-NeoX / Phi: rotate x[..., :r] with rotate_half, pass the rest through
    rot, _ = apply_rotary_pos_emb(x[..., :r], x[..., :r], emb.cos(), emb.sin())
    ref = torch.cat((rot, x[..., r:]), dim=-1)
    torch.testing.assert_close(apply_rope(x, torch.arange(9), rotary_dim=r), ref)


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_matches_float64_reference(pairing):
    x = _randn(1, 2, 7, 12, dtype=torch.float64, seed=6)
    pos = torch.tensor([0, 1, 5, 17, 1000, 65536, 1_000_000])
    ours = apply_rope(x, pos, pairing=pairing)
    assert ours.dtype == torch.float64
    torch.testing.assert_close(ours, _reference64(x, pos, pairing=pairing), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_complex_form_equals_real_form(pairing):
    x = _randn(2, 2, 10, 16, seed=7)
    pos = torch.arange(10) * 37
    kw = dict(pairing=pairing, attention_factor=1.2, base=500.0)
    torch.testing.assert_close(apply_rope_complex(x, pos, **kw), apply_rope(x, pos, **kw))
    kw["rotary_dim"] = 8
    torch.testing.assert_close(apply_rope_complex(x, pos, **kw), apply_rope(x, pos, **kw))


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_rotation_matrix_is_apply_rope_and_composes_to_the_offset(pairing):
    x = _randn(1, 1, 1, 8, dtype=torch.float64, seed=10)
    r5, r12 = rotation_matrix(5, 8, pairing=pairing), rotation_matrix(12, 8, pairing=pairing)
    torch.testing.assert_close(x @ r5.T, apply_rope(x, torch.tensor([5]), pairing=pairing))
    torch.testing.assert_close(
        r5.T @ r12, rotation_matrix(7, 8, pairing=pairing)
    )  # R_mᵀR_n = R_{n-m}
    torch.testing.assert_close(r5 @ r5.T, torch.eye(8, dtype=torch.float64))


def test_decay_bound_starts_at_its_maximum_and_decays():
    d = 128
    bound = rope_decay_bound(torch.arange(0, 4096, 64), d)
    assert bound[0].item() == pytest.approx((d // 2 + 1) / 2)  # S_j = j at Δ = 0
    assert bound[1:].max() < bound[0] and bound[-8:].mean() < bound[1:9].mean() / 2


# --- precision ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_inputs_at_long_range_as_good_as_a_cast(dtype):
    """At positions up to 2^20, RoPE on bf16/fp16 inputs is as close to the float64 answer
    as merely rounding that answer to the dtype is."""
    d = 64
    far = torch.randint(0, 2**20, (96,), generator=torch.Generator().manual_seed(8))
    pos = torch.cat([torch.arange(32), far, torch.tensor([2**20])])
    x = _randn(1, 2, pos.numel(), d, seed=8).to(dtype)
    ref = _reference64(x, pos)
    ours_err = (apply_rope(x, pos).double() - ref).abs()
    cast_err = (ref.to(dtype).double() - ref).abs()
    assert apply_rope(x, pos).dtype == dtype
    assert ours_err.max() <= 2 * cast_err.max()
    assert ours_err.mean() <= 1.25 * cast_err.mean()
    # ... and the test can fail: angles computed in float32 are far off at this range, and
    # break both bounds above (over 40 draws of positions: at least 4.0x the cast's largest
    # error and 1.43x its mean in bf16, 42x and 5.2x in fp16).
    naive_ang = pos[:, None].float() * inv_freq(d).float()
    c, s = naive_ang.cos(), naive_ang.sin()
    xf = x.float()
    x1, x2 = xf[..., : d // 2], xf[..., d // 2 :]
    naive = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1).to(dtype)
    naive_err = (naive.double() - ref).abs()
    assert naive_err.max() > 2 * cast_err.max() and naive_err.mean() > 1.25 * cast_err.mean()


# --- pairing conversion ---------------------------------------------------------------


def test_pairing_permutation_values():
    assert pairing_permutation(8).tolist() == [0, 2, 4, 6, 1, 3, 5, 7]
    assert pairing_permutation(8, to="interleaved").tolist() == [0, 4, 1, 5, 2, 6, 3, 7]


def _llama_conversion_permute(w, n_heads, dim1, dim2):
    # The row permutation of transformers' convert_llama_weights_to_hf.py, written out.
    return w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)


def test_permute_qk_weight_is_the_llama_conversion_and_preserves_scores():
    torch.manual_seed(0)
    d_model, heads, hd, s = 32, 4, 8, 12
    wq_meta, wk_meta = torch.randn(d_model, d_model), torch.randn(d_model, d_model)
    wq_hf = permute_qk_weight(wq_meta, heads)
    assert torch.equal(wq_hf, _llama_conversion_permute(wq_meta, heads, d_model, d_model))
    assert torch.equal(permute_qk_weight(wq_hf, heads, to="interleaved"), wq_meta)
    wk_hf = permute_qk_weight(wk_meta, heads)
    x = torch.randn(2, s, d_model)
    pos = torch.arange(s)

    def scores(wq, wk, pairing):
        q = (x @ wq.T).view(2, s, heads, hd).transpose(1, 2)
        k = (x @ wk.T).view(2, s, heads, hd).transpose(1, 2)
        q, k = apply_rope(q, pos, pairing=pairing), apply_rope(k, pos, pairing=pairing)
        return q @ k.transpose(-1, -2)

    torch.testing.assert_close(
        scores(wq_hf, wk_hf, "half"), scores(wq_meta, wk_meta, "interleaved"), rtol=1e-4, atol=1e-4
    )
    # a bias is permuted the same way: head h's rows h·hd + p
    bias = torch.arange(d_model).float()
    expected = (torch.arange(heads)[:, None] * hd + pairing_permutation(hd)[None]).flatten()
    assert torch.equal(permute_qk_weight(bias, heads), expected.float())


# --- properties ---------------------------------------------------------------------------

dims = st.sampled_from([2, 4, 8, 12])
pairings = st.sampled_from(["half", "interleaved"])


@FAST
@given(d=dims, pairing=pairings, seq=st.integers(1, 6), seed=st.integers(0, 10**6))
def test_rotation_preserves_norms(d, pairing, seq, seed):
    x = _randn(1, 2, seq, d, dtype=torch.float64, seed=seed)
    pos = torch.randint(0, 10**6, (seq,), generator=torch.Generator().manual_seed(seed))
    out = apply_rope(x, pos, pairing=pairing)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))


@FAST
@given(d=dims, pairing=pairings, seq=st.integers(1, 6), seed=st.integers(0, 10**6))
def test_rotating_back_undoes_rotation(d, pairing, seq, seed):
    # R(m)ᵀ = R(-m): rotating by the negated frequencies undoes the rotation.
    x = _randn(1, 2, seq, d, dtype=torch.float64, seed=seed)
    pos = torch.randint(0, 10**5, (seq,), generator=torch.Generator().manual_seed(seed))
    f = inv_freq(d)
    back = apply_rope(apply_rope(x, pos, pairing=pairing), pos, pairing=pairing, inv_freq=-f)
    torch.testing.assert_close(back, x)


@FAST
@given(
    d=dims,
    pairing=pairings,
    lq=st.integers(1, 5),
    lk=st.integers(1, 5),
    shift=st.integers(0, 10**5),
    seed=st.integers(0, 10**6),
)
def test_scores_depend_only_on_offsets(d, pairing, lq, lk, shift, seed):
    q = _randn(1, 2, lq, d, dtype=torch.float64, seed=seed)
    k = _randn(1, 2, lk, d, dtype=torch.float64, seed=seed + 1)
    g = torch.Generator().manual_seed(seed)
    qp, kp = torch.randint(0, 1000, (lq,), generator=g), torch.randint(0, 1000, (lk,), generator=g)

    def scores(delta):
        qr = apply_rope(q, qp + delta, pairing=pairing)
        kr = apply_rope(k, kp + delta, pairing=pairing)
        return qr @ kr.transpose(-1, -2)

    torch.testing.assert_close(scores(shift), scores(0), rtol=1e-9, atol=1e-9)


@FAST
@given(d=dims, seq=st.integers(1, 6), seed=st.integers(0, 10**6))
def test_permutation_maps_interleaved_onto_half(d, seq, seed):
    x = _randn(2, 1, seq, d, dtype=torch.float64, seed=seed)
    pos = torch.randint(0, 10**4, (seq,), generator=torch.Generator().manual_seed(seed))
    p = pairing_permutation(d)
    torch.testing.assert_close(
        apply_rope(x[..., p], pos, pairing="half"),
        apply_rope(x, pos, pairing="interleaved")[..., p],
    )
    back = pairing_permutation(d, to="interleaved")
    assert torch.equal(x[..., p][..., back], x)


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_gradients_are_the_transposed_rotation(pairing):
    x = _randn(1, 2, 4, 6, dtype=torch.float64, seed=9).requires_grad_()
    pos = torch.tensor([0, 3, 70, 5000])
    assert torch.autograd.gradcheck(
        lambda t: apply_rope(t, pos, pairing=pairing, rotary_dim=4), (x,)
    )


def test_rope_module_handles_different_query_and_key_positions():
    rope = RoPE(8)
    q, k = torch.randn(1, 2, 3, 8), torch.randn(1, 2, 5, 8, dtype=torch.float64)
    qp, kp = torch.arange(2, 5), torch.arange(5)
    qr, kr = rope.rotate(q, k, qp, kp)
    torch.testing.assert_close(qr, apply_rope(q, qp))
    torch.testing.assert_close(kr, apply_rope(k, kp))
    assert kr.dtype == torch.float64


# --- the module --------------------------------------------------------------------------


def test_rope_module_in_attention_equals_pure_function():
    torch.manual_seed(1)
    q, k, v = (torch.randn(2, 4, 6, 8) for _ in range(3))
    k2, v2 = k[:, :2], v[:, :2]  # grouped-query: 2 kv heads
    rope = RoPE(8, base=100.0, pairing="interleaved")
    out = attention(q, k2, v2, rope)
    pos = torch.arange(6)
    qr = apply_rope(q, pos, base=100.0, pairing="interleaved")
    kr = apply_rope(k2, pos, base=100.0, pairing="interleaved")
    torch.testing.assert_close(out, attention(qr, kr, v2))
    assert rope.places == ("qk",)
    assert "interleaved" in repr(rope)


def test_rope_module_with_scaling_uses_its_frequencies():
    from pecourse.positions.rope_scaling import yarn

    rope = RoPE(16, scaling="yarn", factor=4.0, original_max_position=64)
    f, a = yarn(16, factor=4.0, original_max_position=64)
    torch.testing.assert_close(rope.inv_freq, f)
    assert rope.attention_factor == a
    q = torch.randn(1, 1, 5, 16)
    qr, _ = rope.rotate(q, q, torch.arange(5), torch.arange(5))
    torch.testing.assert_close(qr, apply_rope(q, torch.arange(5), inv_freq=f, attention_factor=a))


def test_rope_module_frequencies_survive_a_dtype_cast():
    rope = RoPE(8).to(torch.bfloat16)
    assert rope.inv_freq.dtype == torch.float64


def test_dynamic_rope_module_grows_and_resets_across_calls():
    from pecourse.positions.rope_scaling import dynamic

    rope = RoPE(16, scaling="dynamic", factor=2.0, original_max_position=32)
    original = inv_freq(16)
    x = torch.randn(1, 1, 64, 16)

    def call(n):
        pos = torch.arange(n)
        out, _ = rope.rotate(x[:, :, :n], x[:, :, :n], pos, pos)
        return out

    torch.testing.assert_close(rope.inv_freq, original)
    call(16)
    torch.testing.assert_close(rope.inv_freq, original)
    out64 = call(64)  # past the original length: slower frequencies
    grown = rope.inv_freq.clone()
    assert (grown[1:] < original[1:]).all() and grown[0] == original[0]
    torch.testing.assert_close(
        grown, dynamic(16, factor=2.0, original_max_position=32, seq_len=64)[0]
    )
    torch.testing.assert_close(out64, apply_rope(x, torch.arange(64), inv_freq=grown))
    out16 = call(16)  # back below it: the original frequencies, not a stale cache
    torch.testing.assert_close(rope.inv_freq, original)
    torch.testing.assert_close(out16, apply_rope(x[:, :, :16], torch.arange(16)))


def test_longrope_module_switches_factor_sets():
    short, long = [1.0] * 4, [2.0, 3.0, 4.0, 5.0]
    rope = RoPE(
        8,
        scaling="longrope",
        short_factor=short,
        long_factor=long,
        original_max_position=8,
        max_position=32,
    )
    x = torch.randn(1, 1, 16, 8)
    rope.rotate(x[:, :, :4], x[:, :, :4], torch.arange(4), torch.arange(4))
    torch.testing.assert_close(rope.inv_freq, inv_freq(8))
    rope.rotate(x, x, torch.arange(16), torch.arange(16))
    torch.testing.assert_close(rope.inv_freq, inv_freq(8) / torch.tensor(long, dtype=torch.float64))


# --- refusals: one per case, each naming the parameter --------------------------------


def test_refuses_odd_head_dim():
    with pytest.raises(ValueError, match="head_dim"):
        apply_rope(torch.randn(1, 1, 3, 7), torch.arange(3))


def test_refuses_rotary_dim_larger_than_head_dim():
    with pytest.raises(ValueError, match="rotary_dim"):
        apply_rope(torch.randn(1, 1, 3, 8), torch.arange(3), rotary_dim=10)


def test_refuses_odd_rotary_dim():
    with pytest.raises(ValueError, match="rotary_dim"):
        apply_rope(torch.randn(1, 1, 3, 8), torch.arange(3), rotary_dim=5)


def test_refuses_negative_positions():
    with pytest.raises(ValueError, match="positions"):
        apply_rope(torch.randn(1, 1, 3, 8), torch.tensor([0, -1, 2]))


def test_refuses_float_positions():
    with pytest.raises(TypeError, match="positions"):
        apply_rope(torch.randn(1, 1, 3, 8), torch.tensor([0.0, 1.0, 2.0]))


def test_refuses_unknown_pairing():
    with pytest.raises(ValueError, match="pairing"):
        apply_rope(torch.randn(1, 1, 3, 8), torch.arange(3), pairing="neox")


def test_refuses_bad_x_ndim():
    with pytest.raises(ValueError, match="x"):
        apply_rope(torch.randn(3, 8), torch.arange(3))


def test_refuses_integer_x():
    with pytest.raises(TypeError, match="x"):
        apply_rope(torch.ones(1, 1, 3, 8, dtype=torch.long), torch.arange(3))


def test_refuses_positions_length_mismatch():
    with pytest.raises(ValueError, match="positions"):
        apply_rope(torch.randn(1, 1, 3, 8), torch.arange(4))


def test_refuses_positions_batch_mismatch():
    with pytest.raises(ValueError, match="positions"):
        apply_rope(torch.randn(2, 1, 3, 8), torch.arange(3).expand(3, 3))


def test_refuses_inv_freq_of_wrong_length():
    with pytest.raises(ValueError, match="inv_freq"):
        apply_rope(torch.randn(1, 1, 3, 8), torch.arange(3), inv_freq=inv_freq(16))


def test_module_refuses_a_different_head_dim():
    x = torch.randn(1, 1, 3, 16)
    with pytest.raises(ValueError, match="head_dim"):
        RoPE(8).rotate(x, x, torch.arange(3), torch.arange(3))


def test_refuses_unknown_scaling_name():
    with pytest.raises(ValueError, match="scaling"):
        RoPE(8, scaling="ntk-aware")


def test_refuses_scaling_parameters_it_does_not_take():
    with pytest.raises(TypeError, match="factor"):
        RoPE(8, scaling="default", factor=2.0)


def test_refuses_weight_rows_not_divisible_by_heads():
    with pytest.raises(ValueError, match="num_heads"):
        permute_qk_weight(torch.randn(10, 4), 4)


def test_refuses_base_not_above_one():
    with pytest.raises(ValueError, match="base"):
        inv_freq(8, base=1.0)


def test_scores_unchanged_by_module_and_float64_agree_with_math():
    # a sanity anchor for the notebooks: one pair, one frequency, angle = m·θ
    x = torch.tensor([[[[1.0, 0.0]]]], dtype=torch.float64)
    out = apply_rope(x, torch.tensor([3]), base=10000.0)
    torch.testing.assert_close(
        out[0, 0, 0], torch.tensor([math.cos(3), math.sin(3)], dtype=torch.float64)
    )
