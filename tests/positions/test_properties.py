"""Property tests across schemes: relative schemes ignore a common shift; rotations are rotations.

Each relative scheme promises that attention depends on positions only through ``i - j``.
So adding the same Δ to every query and key position must leave the attention
probabilities *and* outputs unchanged, whatever the content, head count, causal mask or
(arbitrary, even non-contiguous) position ids. Rotations must keep every pair's norm and be
undone by their inverse.
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pecourse.attention import attention
from pecourse.positions.alibi import ALiBi
from pecourse.positions.distance_bias import FIRE, KerpleLog, KerplePower
from pecourse.positions.multidim import AxialRoPE, MRoPE, apply_axial_rope, apply_mrope
from pecourse.positions.relative import ShawRelative, T5RelativeBias
from pecourse.positions.rope import RoPE, apply_rope
from pecourse.positions.vo_rope import RoPER, VORoPE, rope_inverse

SETTINGS = settings(max_examples=20, deadline=None)

SCHEMES = {
    "rope": lambda h, d: RoPE(d),
    "rope_interleaved_partial": lambda h, d: RoPE(d, pairing="interleaved", rotary_dim=2),
    "alibi": lambda h, d: ALiBi(h),
    "t5": lambda h, d: T5RelativeBias(h, num_buckets=8, max_distance=16),
    "t5_decoder": lambda h, d: T5RelativeBias(
        h, num_buckets=8, max_distance=16, bidirectional=False
    ),
    "shaw": lambda h, d: ShawRelative(d, max_distance=3),
    "kerple_log": lambda h, d: KerpleLog(h),
    "kerple_power": lambda h, d: KerplePower(h),
    # FIRE is relative only while every query sits below its threshold (positions <= 5,060).
    "fire_below_threshold": lambda h, d: FIRE(h, mlp_width=8, init_threshold=1e5),
    "vo_rope": lambda h, d: VORoPE(d),
    "roper": lambda h, d: RoPER(d, pairing="interleaved"),
    "mrope": lambda h, d: MRoPE(d, [1, d // 4, d // 2 - 1 - d // 4]),
}


@st.composite
def attention_case(draw):
    b = draw(st.integers(1, 2))
    h = draw(st.integers(1, 3))
    s = draw(st.integers(1, 6))
    d = draw(st.sampled_from([8, 12]))
    seed = draw(st.integers(0, 2**16))
    causal = draw(st.booleans())
    batched = draw(st.booleans())
    rows = b if batched else 1
    ids = draw(
        st.lists(st.lists(st.integers(0, 60), min_size=s, max_size=s), min_size=rows, max_size=rows)
    )
    positions = torch.tensor(ids) if batched else torch.tensor(ids[0])
    shift = draw(st.integers(1, 5000))
    return b, h, s, d, seed, causal, positions, shift


@pytest.mark.parametrize("name", sorted(SCHEMES))
@SETTINGS
@given(case=attention_case())
def test_common_shift_changes_nothing(name, case):
    b, h, s, d, seed, causal, pos, shift = case
    torch.manual_seed(seed)  # the learned tables (T5, Shaw) are random
    scheme = SCHEMES[name](h, d)
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(b, h, s, d, generator=g, dtype=torch.float64) for _ in range(3))
    kw = dict(causal=causal, return_probs=True)
    out, probs = attention(q, k, v, scheme, q_positions=pos, k_positions=pos, **kw)
    out2, probs2 = attention(
        q, k, v, scheme, q_positions=pos + shift, k_positions=pos + shift, **kw
    )
    torch.testing.assert_close(probs2, probs, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out2, out, rtol=1e-6, atol=1e-6)


@st.composite
def rotation_case(draw):
    s = draw(st.integers(1, 6))
    d = draw(st.sampled_from([2, 4, 8, 12]))
    pairing = draw(st.sampled_from(["half", "interleaved"]))
    rotary_dim = draw(st.sampled_from([None] + list(range(2, d + 1, 2))))
    pos = torch.tensor(draw(st.lists(st.integers(0, 10**6), min_size=s, max_size=s)))
    seed = draw(st.integers(0, 2**16))
    x = torch.randn(2, 2, s, d, generator=torch.Generator().manual_seed(seed))
    return x, pos, pairing, rotary_dim


def _pair_norms(x, pairing, r):
    """Norm of every rotated pair; the unrotated tail as it is."""
    if pairing == "half":
        a, b = x[..., : r // 2], x[..., r // 2 : r]
    else:
        a, b = x[..., 0:r:2], x[..., 1:r:2]
    return torch.hypot(a, b), x[..., r:]


@SETTINGS
@given(case=rotation_case())
def test_rope_preserves_every_pair_norm(case):
    x, pos, pairing, rotary_dim = case
    r = x.shape[-1] if rotary_dim is None else rotary_dim
    y = apply_rope(x, pos, pairing=pairing, rotary_dim=rotary_dim)
    (ny, ty), (nx, tx) = _pair_norms(y, pairing, r), _pair_norms(x, pairing, r)
    torch.testing.assert_close(ny, nx, rtol=1e-5, atol=1e-6)
    assert torch.equal(ty, tx)


@SETTINGS
@given(case=rotation_case())
def test_rope_is_undone_by_its_inverse(case):
    x, pos, pairing, rotary_dim = case
    kw = dict(pairing=pairing, rotary_dim=rotary_dim)
    torch.testing.assert_close(rope_inverse(apply_rope(x, pos, **kw), pos, **kw), x)
    torch.testing.assert_close(apply_rope(rope_inverse(x, pos, **kw), pos, **kw), x)


@SETTINGS
@given(case=rotation_case(), extra=st.integers(0, 10**6))
def test_rope_rotations_compose_additively(case, extra):
    """R_n R_m = R_(m+n): the identity behind every relative property."""
    x, pos, pairing, rotary_dim = case
    x = x.double()
    kw = dict(pairing=pairing, rotary_dim=rotary_dim)
    twice = apply_rope(apply_rope(x, pos, **kw), torch.full_like(pos, extra), **kw)
    torch.testing.assert_close(twice, apply_rope(x, pos + extra, **kw))


@SETTINGS
@given(
    seed=st.integers(0, 2**16),
    n_axes=st.sampled_from([2, 3]),
    coords=st.lists(st.integers(0, 500), min_size=3, max_size=3),
)
def test_axial_and_mrope_preserve_the_norm(seed, n_axes, coords):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 2, 1, 12, generator=g, dtype=torch.float64)
    c = torch.tensor(coords[:n_axes])[:, None]
    torch.testing.assert_close(apply_axial_rope(x, c).norm(dim=-1), x.norm(dim=-1))
    p = torch.tensor(coords).view(3, 1, 1)
    torch.testing.assert_close(apply_mrope(x, p, [2, 2, 2]).norm(dim=-1), x.norm(dim=-1))


@SETTINGS
@given(
    seed=st.integers(0, 2**16),
    s=st.integers(1, 6),
    causal=st.booleans(),
    data=st.data(),
)
def test_multidim_schemes_are_relative_on_every_axis_separately(seed, s, causal, data):
    """Axial RoPE and M-RoPE depend on per-axis differences: each axis may shift on its own."""
    ids = data.draw(st.lists(st.integers(0, 40), min_size=3 * s, max_size=3 * s))
    shifts = data.draw(st.lists(st.integers(0, 3000), min_size=3, max_size=3))
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 2, s, 12, generator=g, dtype=torch.float64) for _ in range(3))
    pos = torch.tensor(ids).view(3, 1, s)
    moved = pos + torch.tensor(shifts).view(3, 1, 1)
    for scheme, p, m in (
        (MRoPE(12, [2, 2, 2]), pos, moved),
        (AxialRoPE(12, 3), pos[:, 0], moved[:, 0]),
        (AxialRoPE(12, 2, pairing="half"), pos[:2, 0], moved[:2, 0]),
    ):
        kw = dict(causal=causal, return_probs=True)
        out, probs = attention(q, k, v, scheme, q_positions=p, k_positions=p, **kw)
        out2, probs2 = attention(q, k, v, scheme, q_positions=m, k_positions=m, **kw)
        torch.testing.assert_close(probs2, probs, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(out2, out, rtol=1e-6, atol=1e-6)
