"""xPos: cross-referenced against rotary-embedding-torch, the score identity, refusals."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pecourse.attention import attention
from pecourse.positions.rope import apply_rope
from pecourse.positions.xpos import XPos, apply_xpos, xpos_scale, xpos_zeta


def _randn(*shape, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def test_zeta_values():
    z = xpos_zeta(8)
    expected = torch.tensor([0.4, 0.65, 0.9, 1.15], dtype=torch.float64) / 1.4
    torch.testing.assert_close(z, expected)
    assert (z < 1).all() and (z.diff() > 0).all()


def test_matches_rotary_embedding_torch_xpos():
    from rotary_embedding_torch import RotaryEmbedding

    d, s = 16, 20
    q, k = _randn(2, 3, s, d, dtype=torch.float32, seed=1), _randn(2, 3, s, d, dtype=torch.float32)
    ref = RotaryEmbedding(dim=d, use_xpos=True, xpos_scale_base=8)
    q_ref, k_ref = ref.rotate_queries_and_keys(q, k)
    pos = torch.arange(s)
    q_ours, k_ours = apply_xpos(q, k, pos, pos, pairing="interleaved", scale_base=8)
    torch.testing.assert_close(q_ours, q_ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(k_ours, k_ref, rtol=1e-5, atol=1e-5)


def test_scores_are_rope_scores_weighted_by_zeta_power_of_offset():
    d, B = 8, 4.0
    q, k = _randn(1, 1, 5, d, seed=2), _randn(1, 1, 7, d, seed=3)
    qp, kp = torch.tensor([6, 7, 8, 9, 10]), torch.arange(7) + 4
    qx, kx = apply_xpos(q, k, qp, kp, scale_base=B)
    qr, kr = apply_rope(q, qp), apply_rope(k, kp)
    zeta = xpos_zeta(d)
    offset = (qp[:, None] - kp[None, :]).double()  # n - m
    expected = torch.zeros(5, 7, dtype=torch.float64)
    for i in range(d // 2):  # pair i = dims (i, i + d/2)
        pair = qr[0, 0][:, [i, i + d // 2]] @ kr[0, 0][:, [i, i + d // 2]].T
        expected += zeta[i] ** (offset / B) * pair
    torch.testing.assert_close((qx @ kx.transpose(-1, -2))[0, 0], expected)


@settings(max_examples=15, deadline=None, derandomize=True, database=None)
@given(
    shift=st.integers(0, 2000),
    center=st.integers(-50, 50),
    pairing=st.sampled_from(["half", "interleaved"]),
    seed=st.integers(0, 10**6),
)
def test_scores_depend_only_on_offsets_and_not_on_centre(shift, center, pairing, seed):
    q, k = _randn(1, 2, 4, 8, seed=seed), _randn(1, 2, 6, 8, seed=seed + 1)
    qp, kp = torch.arange(4) + 2, torch.arange(6)

    def scores(delta, c):
        qx, kx = apply_xpos(q, k, qp + delta, kp + delta, pairing=pairing, scale_base=64, center=c)
        return qx @ kx.transpose(-1, -2)

    torch.testing.assert_close(scores(shift, center + shift), scores(0, None), rtol=1e-9, atol=1e-9)


def test_offset_zero_is_plain_rope_and_older_keys_decay():
    # q·k at equal positions is RoPE's; a key further back is multiplied by ζ^{Δ/B} < 1.
    x = torch.ones(1, 1, 1, 8, dtype=torch.float64)
    qx, kx = apply_xpos(x, x, torch.tensor([0]), torch.tensor([0]), center=0)
    assert (qx @ kx.transpose(-1, -2)).item() == pytest.approx(8.0)
    far = apply_xpos(x, x, torch.tensor([100]), torch.tensor([0]), scale_base=16, center=0)
    scale = xpos_scale(torch.tensor([100]), 8, scale_base=16)
    assert (scale < 1).all() and (far[1] == x).all()


def test_module_in_causal_attention():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 6, 8) for _ in range(3))
    xp = XPos(8, scale_base=32)
    pos = torch.arange(6)
    qx, kx = apply_xpos(q, k, pos, pos, scale_base=32)
    torch.testing.assert_close(attention(q, k, v, xp), attention(qx, kx, v))
    assert xp.requires_causal and xp.places == ("qk",)


def test_low_precision_output_keeps_dtype():
    q = torch.randn(1, 1, 4, 8, dtype=torch.bfloat16)
    qx, kx = apply_xpos(q, q, torch.arange(4) + 1000, torch.arange(4) + 1000)
    assert qx.dtype == kx.dtype == torch.bfloat16 and torch.isfinite(qx).all()


# --- refusals ---------------------------------------------------------------------------


def test_refuses_non_causal_attention():
    q = torch.randn(1, 1, 4, 8)
    with pytest.raises(ValueError, match="causal"):
        attention(q, q, q, XPos(8), causal=False)


def test_refuses_position_span_that_overflows_the_dtype():
    q = torch.randn(1, 1, 2, 8, dtype=torch.float16)
    pos = torch.tensor([0, 100_000])
    with pytest.raises(ValueError, match="q_positions"):
        apply_xpos(q, q, pos, pos)


def test_refuses_non_positive_scale_base():
    with pytest.raises(ValueError, match="scale_base"):
        XPos(8, scale_base=0)


def test_refuses_non_positive_gamma():
    with pytest.raises(ValueError, match="gamma"):
        xpos_zeta(8, gamma=-0.1)


def test_refuses_odd_head_dim():
    with pytest.raises(ValueError, match="head_dim"):
        XPos(7)


def test_refuses_mismatched_head_dims():
    with pytest.raises(ValueError, match="head_dim"):
        apply_xpos(
            torch.randn(1, 1, 2, 8), torch.randn(1, 1, 2, 4), torch.arange(2), torch.arange(2)
        )


@pytest.mark.parametrize(
    "bad, error",
    [(torch.tensor([0.5, 1.5]), TypeError), (torch.tensor([-1, 0]), ValueError)],
    ids=["float", "negative"],
)
def test_xpos_scale_refuses_bad_positions(bad, error):
    from pecourse.positions.xpos import xpos_scale

    with pytest.raises(error, match="positions"):
        xpos_scale(bad, 8)


@pytest.mark.parametrize(("lq", "lk"), [(0, 0), (0, 5)])
def test_empty_queries_are_rotated_to_empty(lq, lk):
    """As apply_rope does: an empty sequence is a valid (empty) input, not an error."""
    q, k = torch.randn(1, 2, lq, 8), torch.randn(1, 2, lk, 8)
    qr, kr = apply_xpos(q, k, torch.arange(lq), torch.arange(lk))
    assert qr.shape == q.shape and kr.shape == k.shape
    if lk:  # the keys are still scaled and rotated, around the middle of their own positions
        expected_center_kr = apply_xpos(q, k, torch.arange(lq), torch.arange(lk), center=lk // 2)[1]
        torch.testing.assert_close(kr, expected_center_kr)
