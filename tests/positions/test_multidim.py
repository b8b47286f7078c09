"""Axial 2D/3D RoPE and M-RoPE, against rotary-embedding-torch and transformers' Qwen2-VL."""

import functools
import types

import pytest
import torch

from pecourse.attention import attention
from pecourse.positions.multidim import (
    AxialRoPE,
    MRoPE,
    apply_axial_rope,
    apply_mrope,
    axial_inv_freq,
    grid_positions,
    mrope_axis_of,
    mrope_cos_sin,
    mrope_position_ids,
    pixel_coordinates,
    pixel_inv_freq,
)
from pecourse.positions.rope import RoPE, apply_rope, inv_freq


def _randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# --- grid helpers -------------------------------------------------------------------------


def test_grid_positions_raster_order():
    g = grid_positions(2, 3)
    assert g.dtype == torch.long and g.shape == (2, 6)
    assert g.tolist() == [[0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2]]
    # token r * width + c sits at (r, c): the order of image.flatten()
    img = torch.arange(6).view(2, 3)
    assert torch.equal(img[g[0], g[1]], torch.arange(6))


def test_grid_positions_3d():
    g = grid_positions(2, 2, 3)
    assert g.shape == (3, 12)
    assert g[:, 7].tolist() == [1, 0, 1]  # 7 = 1*6 + 0*3 + 1


def test_pixel_coordinates_span_minus_one_to_one():
    c = pixel_coordinates(3, 5)
    assert c.shape == (2, 15) and c.dtype == torch.float64
    assert c[0].unique().tolist() == [-1.0, 0.0, 1.0]
    assert c[1, :5].tolist() == [-1.0, -0.5, 0.0, 0.5, 1.0]


# --- axial RoPE ---------------------------------------------------------------------------


@pytest.mark.parametrize("sizes", [(4, 5), (2, 3, 4)])
@pytest.mark.parametrize("freqs_for", ["lang", "pixel"])
def test_axial_matches_rotary_embedding_torch(sizes, freqs_for):
    from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb

    n_axes, d_axis = len(sizes), 8
    head_dim = n_axes * d_axis
    ref = RotaryEmbedding(dim=d_axis, freqs_for=freqs_for, max_freq=10)
    freqs = ref.get_axial_freqs(*sizes)  # [*sizes, head_dim], interleaved pairs
    x = _randn(2, 3, *sizes, head_dim)
    want = apply_rotary_emb(freqs, x).reshape(2, 3, -1, head_dim)
    if freqs_for == "lang":
        coords, freq = grid_positions(*sizes), axial_inv_freq(head_dim, n_axes)
    else:
        coords, freq = pixel_coordinates(*sizes), pixel_inv_freq(d_axis, 10)
    got = apply_axial_rope(x.reshape(2, 3, -1, head_dim), coords, inv_freq=freq)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_each_chunk_is_1d_rope_of_its_axis(pairing):
    x = _randn(1, 2, 12, 16)
    coords = grid_positions(3, 4)
    got = apply_axial_rope(x, coords, pairing=pairing)
    for a in range(2):
        chunk = slice(8 * a, 8 * (a + 1))
        want = apply_rope(x[..., chunk], coords[a], pairing=pairing)
        torch.testing.assert_close(got[..., chunk], want)


def test_axial_scores_depend_on_2d_offset_only():
    q, k = _randn(1, 1, 1, 16, seed=1), _randn(1, 1, 1, 16, seed=2)

    def score(qc, kc):
        qr = apply_axial_rope(q, torch.tensor(qc)[:, None])
        kr = apply_axial_rope(k, torch.tensor(kc)[:, None])
        return (qr * kr).sum()

    torch.testing.assert_close(score([2, 3], [5, 1]), score([12, 40], [15, 38]))
    assert not torch.allclose(score([2, 3], [5, 1]), score([2, 3], [1, 5]))


def test_axial_batched_coordinates():
    x = _randn(2, 1, 6, 8)
    coords = torch.stack([grid_positions(2, 3), grid_positions(2, 3) + 4], dim=1)  # [2, b, s]
    got = apply_axial_rope(x, coords)
    torch.testing.assert_close(got[1:], apply_axial_rope(x[1:], grid_positions(2, 3) + 4))


def test_axial_scheme_with_grid_unravels_token_indices():
    q, k, v = (_randn(1, 2, 12, 16, seed=s) for s in range(3))
    for freqs_for, coords in (("lang", grid_positions(3, 4)), ("pixel", pixel_coordinates(3, 4))):
        scheme = AxialRoPE(16, 2, grid=(3, 4), freqs_for=freqs_for)
        explicit = attention(q, k, v, scheme, q_positions=coords, k_positions=coords)
        torch.testing.assert_close(attention(q, k, v, scheme), explicit)


def test_axial_scheme_3d_and_repr():
    scheme = AxialRoPE(24, 3)
    q, k, v = (_randn(1, 1, 8, 24, seed=s) for s in range(3))
    c = grid_positions(2, 2, 2)
    out = attention(q, k, v, scheme, q_positions=c, k_positions=c, causal=False)
    assert out.shape == (1, 1, 8, 24)
    assert "n_axes=3" in repr(scheme)


# --- M-RoPE -------------------------------------------------------------------------------


def _qwen2_vl(head_dim, sections, base=10000.0):
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding

    config = Qwen2VLTextConfig(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        num_key_value_heads=2,
        rope_parameters={"rope_type": "default", "rope_theta": base, "mrope_section": sections},
    )
    return Qwen2VLRotaryEmbedding(config)


def test_mrope_matches_transformers_qwen2_vl():
    from transformers.models.qwen2_vl.modeling_qwen2_vl import apply_rotary_pos_emb

    head_dim, sections = 32, [4, 6, 6]
    q, k = _randn(2, 2, 11, head_dim, seed=1), _randn(2, 2, 11, head_dim, seed=2)
    pos = torch.cat(
        [mrope_position_ids([3, (1, 2, 3), 2]), mrope_position_ids([1, (2, 2, 2), 2])], dim=1
    )
    cos, sin = _qwen2_vl(head_dim, sections)(q, pos)
    want_q, want_k = apply_rotary_pos_emb(q, k, cos, sin)
    torch.testing.assert_close(apply_mrope(q, pos, sections), want_q, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(apply_mrope(k, pos, sections), want_k, rtol=1e-5, atol=1e-5)
    # the tables themselves, one column per pair (transformers duplicates them)
    mine_cos, mine_sin = mrope_cos_sin(pos, inv_freq(head_dim), sections)
    torch.testing.assert_close(torch.cat([mine_cos, mine_cos], -1), cos, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.cat([mine_sin, mine_sin], -1), sin, rtol=1e-5, atol=1e-5)


def test_mrope_sections_pick_their_axis():
    """Only the height section moves when only the height id changes."""
    x = _randn(1, 1, 1, 16)
    base_pos = torch.tensor([5, 5, 5]).view(3, 1, 1)
    moved = base_pos.clone()
    moved[1] += 3
    a, b = apply_mrope(x, base_pos, [2, 3, 3]), apply_mrope(x, moved, [2, 3, 3])
    changed = (a - b).abs() > 1e-6  # half pairing: pair i is (i, i + 8)
    pair_changed = changed[..., :8] | changed[..., 8:]
    assert pair_changed.flatten().tolist() == [False] * 2 + [True] * 3 + [False] * 3


def test_mrope_on_text_is_rope():
    x = _randn(2, 2, 6, 16)
    pos = torch.arange(6)
    text = pos[None, None].expand(3, 1, 6)
    torch.testing.assert_close(apply_mrope(x, text, [2, 3, 3]), apply_rope(x, pos))
    q, k, v = (_randn(1, 2, 6, 16, seed=s) for s in range(3))
    torch.testing.assert_close(
        attention(q, k, v, MRoPE(16, [2, 3, 3])), attention(q, k, v, RoPE(16))
    )


def test_mrope_position_ids_text_image_text():
    ids = mrope_position_ids([2, (1, 2, 3), 2])
    assert ids.shape == (3, 1, 10) and ids.dtype == torch.long
    assert ids[:, 0].tolist() == [
        [0, 1, 2, 2, 2, 2, 2, 2, 5, 6],  # time: the image is one frame at 2
        [0, 1, 2, 2, 2, 3, 3, 3, 5, 6],  # height: rows 0, 1 offset by 2
        [0, 1, 2, 3, 4, 2, 3, 4, 5, 6],  # width: columns 0..2 offset by 2; text resumes at 4+1
    ]


def test_mrope_position_ids_video_resumes_after_the_largest_id():
    ids = mrope_position_ids([1, (4, 1, 2), 1])
    assert ids[0, 0].tolist() == [0, 1, 1, 2, 2, 3, 3, 4, 4, 5]
    assert ids[:, 0, -1].tolist() == [5, 5, 5]


def _qwen_rope_index(token_types, grids, merge):
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel

    fake = types.SimpleNamespace(
        config=types.SimpleNamespace(vision_config=types.SimpleNamespace(spatial_merge_size=merge))
    )
    fake.get_vision_position_ids = functools.partial(Qwen2VLModel.get_vision_position_ids, fake)
    tt = torch.tensor([token_types])
    pos, _ = Qwen2VLModel.get_rope_index(
        fake, torch.zeros_like(tt), tt, image_grid_thw=torch.tensor(grids)
    )
    return pos


def test_mrope_position_ids_match_qwen2_vl_get_rope_index():
    # 3 text, image 4x6 patches (2x3 tokens after 2x2 merging), 2 text, image 2x2 (1 token), 1 text
    segments = [3, (1, 4, 6), 2, (1, 2, 2), 1]
    types_ = [0] * 3 + [1] * 6 + [0] * 2 + [1] + [0]
    want = _qwen_rope_index(types_, [[1, 4, 6], [1, 2, 2]], merge=2)
    assert torch.equal(mrope_position_ids(segments, spatial_merge_size=2), want)


def _qwen3_vl(head_dim, sections, base=10000.0):
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding

    config = Qwen3VLTextConfig(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=head_dim,
        rope_parameters={"rope_type": "default", "rope_theta": base, "mrope_section": sections},
    )
    return Qwen3VLTextRotaryEmbedding(config)


def test_interleaved_mrope_matches_transformers_qwen3_vl():
    from transformers.models.qwen3_vl.modeling_qwen3_vl import apply_rotary_pos_emb

    head_dim, sections = 32, [6, 5, 5]  # the shape of Qwen3-VL's [24, 20, 20] for d = 128
    q, k = _randn(2, 2, 11, head_dim, seed=3), _randn(2, 2, 11, head_dim, seed=4)
    pos = torch.cat(
        [mrope_position_ids([3, (1, 2, 3), 2]), mrope_position_ids([1, (2, 2, 2), 2])], dim=1
    )
    cos, sin = _qwen3_vl(head_dim, sections)(q, pos)
    want_q, want_k = apply_rotary_pos_emb(q, k, cos, sin)
    got_q = apply_mrope(q, pos, sections, layout="interleaved")
    torch.testing.assert_close(got_q, want_q, rtol=1e-5, atol=1e-5)
    scheme = MRoPE(head_dim, sections, layout="interleaved")
    _, got_k = scheme.rotate(q, k, pos, pos)
    torch.testing.assert_close(got_k, want_k, rtol=1e-5, atol=1e-5)
    # and it is not the contiguous layout
    assert not torch.allclose(apply_mrope(q, pos, sections), want_q, atol=1e-3)


def test_mrope_axis_of_layouts():
    assert mrope_axis_of([2, 3, 3]).tolist() == [0, 0, 1, 1, 1, 2, 2, 2]
    assert mrope_axis_of([3, 3, 2], "interleaved").tolist() == [0, 1, 2, 0, 1, 2, 0, 1]
    inter = mrope_axis_of([24, 20, 20], "interleaved")  # Qwen3-VL, d = 128
    assert torch.bincount(inter).tolist() == [24, 20, 20]
    assert inter[:6].tolist() == [0, 1, 2, 0, 1, 2] and inter[60:].tolist() == [0, 0, 0, 0]


def test_interleaving_refuses_sections_it_cannot_honour():
    with pytest.raises(ValueError, match="cannot be interleaved"):
        mrope_axis_of([16, 24, 24], "interleaved")  # 3 * 24 > 64: height would get 21
    with pytest.raises(ValueError, match="cannot be interleaved"):
        mrope_axis_of([2, 3, 3], "interleaved")  # the pattern gives [3, 3, 2]
    with pytest.raises(ValueError, match="layout"):
        MRoPE(32, [6, 5, 5], layout="diagonal")


def _qwen_rope_index_video(token_types, video_grids, merge):
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel

    fake = types.SimpleNamespace(
        config=types.SimpleNamespace(vision_config=types.SimpleNamespace(spatial_merge_size=merge))
    )
    fake.get_vision_position_ids = functools.partial(Qwen2VLModel.get_vision_position_ids, fake)
    tt = torch.tensor([token_types])
    return Qwen2VLModel.get_rope_index(
        fake, torch.zeros_like(tt), tt, video_grid_thw=torch.tensor(video_grids)
    )


def test_grid_side_advance_matches_transformers_5_on_a_long_video():
    # 2 text, a video of 6 temporal patches x 2x2 tokens, 3 text: t = 6 > max(h, w) = 2
    segments = [2, (6, 2, 2), 3]
    types_ = [0] * 2 + [2] * 24 + [0] * 3
    want, deltas = _qwen_rope_index_video(types_, [[6, 2, 2]], merge=1)
    got = mrope_position_ids(segments, advance="grid_side")
    assert torch.equal(got, want)
    # the rule of 4.x and of the paper starts the text after the video's last frame instead
    max_id = mrope_position_ids(segments)
    assert max_id[:, 0, -3].tolist() == [8, 8, 8] and got[:, 0, -3].tolist() == [4, 4, 4]
    # rope_deltas: the id the next token gets minus its index, what decoding adds on
    assert int(deltas) == int(want.max()) + 1 - len(types_)


def test_advances_agree_for_images():
    segments = [3, (1, 4, 6), 2, (1, 2, 2), 1]
    assert torch.equal(
        mrope_position_ids(segments, spatial_merge_size=2),
        mrope_position_ids(segments, spatial_merge_size=2, advance="grid_side"),
    )
    with pytest.raises(ValueError, match="advance"):
        mrope_position_ids([1, (1, 2, 2)], advance="max")


# --- refusals -----------------------------------------------------------------------------


def test_refuses_sections_not_summing_to_half_head_dim():
    with pytest.raises(ValueError, match="mrope_section"):
        MRoPE(32, [4, 6, 5])


def test_refuses_two_sections():
    with pytest.raises(ValueError, match="mrope_section"):
        apply_mrope(_randn(1, 1, 2, 16), torch.zeros(3, 1, 2, dtype=torch.long), [4, 4])


def test_refuses_positions_not_three_by_batch_by_seq():
    with pytest.raises(ValueError, match=r"positions must be \[3, batch, seq\]"):
        apply_mrope(_randn(1, 1, 2, 16), torch.zeros(2, 1, 2, dtype=torch.long), [2, 3, 3])


def test_refuses_two_dimensional_mrope_positions():
    with pytest.raises(ValueError, match="positions"):
        apply_mrope(_randn(1, 1, 2, 16), torch.zeros(3, 2, dtype=torch.long), [2, 3, 3])


def test_refuses_mrope_positions_of_wrong_length():
    with pytest.raises(ValueError, match="seq"):
        apply_mrope(_randn(1, 1, 4, 16), torch.zeros(3, 1, 3, dtype=torch.long), [2, 3, 3])


def test_refuses_axial_head_dim_not_divisible():
    with pytest.raises(ValueError, match="n_axes"):
        AxialRoPE(20, 3)


def test_refuses_axial_chunks_of_odd_size():
    with pytest.raises(ValueError, match="head_dim"):
        apply_axial_rope(_randn(1, 1, 4, 6), grid_positions(2, 2))


def test_refuses_axial_token_indices_without_grid():
    q = _randn(1, 1, 4, 8)
    with pytest.raises(ValueError, match="q_positions"):
        attention(q, q, q, AxialRoPE(8, 2))


def test_refuses_axial_coords_of_wrong_length():
    with pytest.raises(ValueError, match="coords"):
        apply_axial_rope(_randn(1, 1, 4, 8), grid_positions(2, 3))


def test_refuses_grid_with_wrong_axis_count():
    with pytest.raises(ValueError, match="grid"):
        AxialRoPE(12, 3, grid=(2, 2))


def test_refuses_bad_segment():
    with pytest.raises(TypeError, match=r"segments\[1\]"):
        mrope_position_ids([2, (1, 2)])


def test_refuses_grid_not_divisible_by_merge_size():
    with pytest.raises(ValueError, match="spatial_merge_size"):
        mrope_position_ids([(1, 3, 4)], spatial_merge_size=2)


def test_refuses_non_positive_grid_size():
    with pytest.raises(ValueError, match=r"sizes\[1\]"):
        grid_positions(3, 0)


def test_mrope_in_multihead_attention_with_image_ids():
    from pecourse.attention import MultiHeadAttention

    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 2, MRoPE(16, [2, 3, 3]))
    ids = mrope_position_ids([2, (1, 2, 2), 1])  # [3, 1, 7]
    x = torch.randn(1, 7, 32)
    out = mha(x, ids)
    assert out.shape == (1, 7, 32)
    # text-only ids as [seq] give the same result as the explicit [3, 1, seq] form
    text = torch.arange(7)
    torch.testing.assert_close(mha(x, text), mha(x, text[None, None].expand(3, 1, 7)))
