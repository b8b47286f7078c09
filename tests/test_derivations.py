"""pecourse.derivations: every identity is proved by sympy; broken variants are not."""

import subprocess
import sys

import pytest

from pecourse import derivations as D
from pecourse.derivations import IDENTITIES

EXPECTED_KEYS = {
    "sinusoidal_shift",
    "sinusoidal_dot_product",
    "attention_permutation_equivariance",
    "causal_mask_breaks_equivariance",
    "rope_relative_2x2",
    "rope_relative",
    "rope_complex_form",
    "rope_pairing_permutation",
    "xpos_decay",
    "vo_rope",
    "alibi_toeplitz",
    "t5_toeplitz",
    "shaw_toeplitz",
    "softmax_shift_invariance",
    "bloom_alibi_equivalence",
    "ntk_aware_base",
    "yarn",
    "axial_rope_2d",
    "rope_base_bound",
}


def test_registry_lists_every_identity():
    assert set(IDENTITIES) == EXPECTED_KEYS
    assert IDENTITIES["yarn"] is IDENTITIES["yarn"]  # built once, cached
    with pytest.raises(KeyError, match="known identities"):
        IDENTITIES["no_such_identity"]


def test_import_is_cheap():
    code = (
        "import sys, pecourse.derivations as d; "
        "assert len(d.IDENTITIES) > 0; "
        "assert 'sympy' not in sys.modules and 'numpy' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("key", sorted(EXPECTED_KEYS))
def test_identity_is_proved(key):
    identity = IDENTITIES[key]
    assert identity.check() is True, identity.failed_claims()
    assert identity.claims and identity.steps
    assert identity.lhs is identity.claims[0].lhs


@pytest.mark.parametrize("key", sorted(EXPECTED_KEYS))
def test_identity_displays(key):
    identity = IDENTITIES[key]
    latex = identity.latex()
    assert latex.startswith("\\begin{aligned}") and latex.endswith("\\end{aligned}")
    assert latex.count("\n") >= 3
    depth = 0
    for ch in latex.replace("\\{", "").replace("\\}", ""):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0
    assert depth == 0
    assert latex.count("\\left") == latex.count("\\right")
    assert identity._repr_latex_().startswith("$$")
    markdown = identity._repr_markdown_()
    assert identity.title in markdown and "$$" in markdown
    assert len(identity.statement) > 40 and len(identity.explanation) > 40
    assert "arXiv" in identity.source or "kexue" in identity.source
    for caption, _ in identity.steps:
        assert caption.count("$") % 2 == 0, caption


# ---- broken variants: a wrong sign or exponent must not be "proved" ------------------------

BROKEN = {
    "R(m - n) instead of R(n - m), one block": lambda: D.RopeRelative(blocks=1, offset="m-n"),
    "R(m - n) instead of R(n - m), two blocks": lambda: D.RopeRelative(blocks=2, offset="m-n"),
    "M(-Delta) instead of M(Delta)": lambda: D.SinusoidalShift(shift_sign=-1),
    "sum cos(2 w Delta)": lambda: D.SinusoidalDotProduct(rhs_frequency_factor=2),
    "b s^((d-2)/d) instead of b s^(d/(d-2))": lambda: D.NtkAwareBase(
        exponent=lambda d: (d - 2) / d
    ),
    "pairings without the permutation": lambda: D.RopePairingPermutation(permutation="identity"),
    "e^{-i m theta}": lambda: D.RopeComplexForm(sign=-1),
    "xPos with zeta^+n on keys": lambda: D.XposDecay(key_exponent_sign=1),
    "VO-RoPE output rotated by R(i)": lambda: D.VoRope(output_sign=1),
    "axial RoPE with R(x1 - x2, y1 - y2)": lambda: D.AxialRope2D(offset_sign=-1),
    "YaRN temperature on the query only": lambda: D.Yarn(temperature_on="query"),
    "BLOOM key-index bias is not Toeplitz": lambda: D.ToeplitzBias("bloom_key_index"),
    "BLOOM equivalence without a causal mask": lambda: D.BloomAlibiEquivalence(causal=False),
    "softmax with a per-key constant": lambda: D.SoftmaxShiftInvariance(per_key=True),
    "causal attention is not equivariant": lambda: D.PermutationEquivariance(causal=True),
    "absolute positions break equivariance": lambda: D.PermutationEquivariance(positions=True),
    "sigma^2 instead of 2 sigma^2": lambda: D.RopeBaseBound(factor=1),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_variant_fails(name):
    assert BROKEN[name]().check() is False


def test_broken_variant_names_the_failing_claim():
    broken = D.RopeRelative(blocks=1, offset="m-n")
    failed = broken.failed_claims()
    assert failed and all("m-n" in caption for caption in failed)
    assert D.RopeRelative(blocks=1).failed_claims() == []


def test_causal_inequality_is_a_real_counterexample():
    identity = IDENTITIES["causal_mask_breaks_equivariance"]
    assert identity.relation == "!="
    difference = identity.steps[-1][1]
    assert any(entry != 0 for entry in difference)
    assert all(entry.is_Rational for entry in difference)


def test_sinusoidal_shift_matrix_has_no_t():
    identity = IDENTITIES["sinusoidal_shift"]
    t = next(s for s in identity.lhs.free_symbols if s.name == "t")
    shift_claim = identity.claims[1]
    assert shift_claim.relation == "free of" and t not in shift_claim.lhs.free_symbols


def test_is_zero_proves_and_refuses():
    import sympy as sp

    x, y = sp.symbols("x y", real=True)
    assert D.is_zero(sp.sin(x + y) - sp.sin(x) * sp.cos(y) - sp.cos(x) * sp.sin(y))
    assert D.is_zero(sp.exp(x + y) / (sp.exp(x + y) + sp.exp(y)) - 1 / (1 + sp.exp(-x)))
    assert not D.is_zero(sp.sin(x) ** 2 - sp.cos(x) ** 2)
    assert not D.is_zero(sp.Matrix([0, x - y]))
    assert not D.Claim("c", sp.Integer(1), sp.Integer(1), relation="!=", witness={x: 1}).prove()


def test_claim_refuses_unknown_relation_and_missing_witness():
    with pytest.raises(ValueError, match="relation"):
        D.Claim("x", 1, 1, relation="~")
    with pytest.raises(ValueError, match="witness"):
        D.Claim("x", 1, 2, relation="!=")


def test_constructors_refuse_bad_parameters():
    with pytest.raises(ValueError, match="offset"):
        D.RopeRelative(offset="n+m")
    with pytest.raises(ValueError, match="shift_sign"):
        D.SinusoidalShift(shift_sign=2)
    with pytest.raises(ValueError, match="kind"):
        D.ToeplitzBias("rope")
    with pytest.raises(ValueError, match="d must be"):
        D.RopePairingPermutation(d=5)


def test_pairing_permutation_matches_weight_conversion():
    # x_half = P x_interleaved: half index i <- 2i, half index i + d/2 <- 2i + 1.
    P = D.pairing_permutation(6)
    order = [list(P.row(r)).index(1) for r in range(6)]
    assert order == [0, 2, 4, 1, 3, 5]


# ---- the RoPE base bound (Men et al. 2024) --------------------------------------------------

HEAD_DIM = 64
LENGTHS = (64, 256, 1024)


@pytest.fixture(scope="module")
def bounds():
    return {n: D.rope_base_lower_bound(n, HEAD_DIM) for n in LENGTHS}


def test_base_bound_increases_with_context_length(bounds):
    values = [bounds[n] for n in LENGTHS]
    assert all(a < b for a, b in zip(values, values[1:])), values


def test_base_bound_is_the_smallest_admissible_base(bounds):
    L = 1024
    b = bounds[L]
    assert D.rope_base_condition(b, L, HEAD_DIM)
    assert not D.rope_base_condition(b * (1 - 1e-6), L, HEAD_DIM)
    decay = D.rope_long_term_decay(b * (1 - 1e-6), HEAD_DIM, L)
    assert decay[1:].min() < 0 <= D.rope_long_term_decay(b, HEAD_DIM, L)[1:].min()


def test_base_bound_scan_never_skips_an_admissible_base(bounds):
    import numpy as np

    L = 256
    b = bounds[L]
    # A fine independent scan below the bound finds no admissible base.
    for base in np.geomspace(1.0, b * (1 - 1e-7), 400):
        assert not D.rope_base_condition(float(base), L, HEAD_DIM), base


def test_admissible_bases_are_not_an_interval():
    # Above the smallest admissible base the condition can fail again (d=128, L=1k).
    b = D.rope_base_lower_bound(1024, 128)
    assert 4.2e3 < b < 4.4e3
    assert D.rope_base_condition(b, 1024, 128)
    assert not D.rope_base_condition(4.4e3, 1024, 128)
    assert D.rope_base_condition(1e5, 1024, 128)


def test_admissible_mask_agrees_with_the_condition(bounds):
    import numpy as np

    L = 64
    b = bounds[L]
    bases = np.array([1.0, b * (1 - 1e-6), b, 10 * b])
    mask = D.rope_base_admissible(bases, L, HEAD_DIM)
    assert mask.dtype == bool and mask.shape == (4,)
    assert list(mask) == [D.rope_base_condition(float(x), L, HEAD_DIM) for x in bases]
    assert not mask[0] and not mask[1] and mask[2]
    with pytest.raises(ValueError, match="bases"):
        D.rope_base_admissible([[1e4]], L, HEAD_DIM)


def test_base_bound_small_cases():
    # L = 1: cos(theta_i) > 0 for theta_i <= 1, so b = 1 already works.
    assert D.rope_base_lower_bound(1, 8) == 1.0
    with pytest.raises(ValueError, match="head_dim"):
        D.rope_base_lower_bound(4, 2)  # theta_0 = 1 always and cos(2) < 0


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"context_length": 0, "head_dim": 64}, "context_length"),
        ({"context_length": -5, "head_dim": 64}, "context_length"),
        ({"context_length": 128, "head_dim": 63}, "head_dim"),
        ({"context_length": 128, "head_dim": 0}, "head_dim"),
    ],
)
def test_base_bound_refuses_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        D.rope_base_lower_bound(**kwargs)
    if name == "context_length":
        with pytest.raises(ValueError, match=name):
            D.rope_base_condition(1e4, **kwargs)


def test_base_bound_refuses_wrong_types():
    with pytest.raises(TypeError, match="context_length"):
        D.rope_base_lower_bound(1024.0, 64)
    with pytest.raises(ValueError, match="base"):
        D.rope_base_condition(0.5, 16, 8)


def test_witness_is_sorted_by_symbol_name():
    from pecourse.derivations import IDENTITIES

    for identity in IDENTITIES.values():
        for claim in identity.claims:
            names = [str(k) for k in claim.witness]
            assert names == sorted(names), identity.key


# ---- the admissible set above b*: rope_base_failures, rope_base_min_decay, BASE_BOUND_TABLE ----


@pytest.fixture(scope="module")
def failures_256(bounds):
    b = bounds[256]
    return b, D.rope_base_failures(256, HEAD_DIM, b, 8 * b)


def test_failures_agree_with_a_dense_grid(failures_256):
    import numpy as np

    b, stretches = failures_256
    assert stretches, "d=64, L=256 fails again above b* (the admissible set is not an interval)"
    grid = np.geomspace(b * (1 + 1e-5), 8 * b * (1 - 1e-5), 1500)
    inside = np.zeros(grid.shape, dtype=bool)
    for start, end in stretches:
        assert b < start < end <= 8 * b
        inside |= (grid >= start * (1 + 1e-5)) & (grid <= end * (1 - 1e-5))
    near_an_end = np.zeros(grid.shape, dtype=bool)
    for start, end in stretches:
        near_an_end |= (np.abs(grid / start - 1) < 1e-5) | (np.abs(grid / end - 1) < 1e-5)
    ok = D.rope_base_admissible(grid, 256, HEAD_DIM)
    assert not ok[inside].any()  # every base inside a reported stretch fails
    assert ok[~inside & ~near_an_end].all()  # every other base passes: nothing was stepped over


def test_failures_are_ordered_and_disjoint(failures_256):
    _, stretches = failures_256
    ends = [x for stretch in stretches for x in stretch]
    assert ends == sorted(ends) and len(set(ends)) == len(ends)


def test_min_decay_is_the_depth_of_the_worst_dip():
    import numpy as np

    bases = np.array([10.0, 1e3, 1e4])
    depth = D.rope_base_min_decay(bases, 128, 32)
    expected = [D.rope_long_term_decay(float(b), 32, 128)[1:].min() for b in bases]
    np.testing.assert_allclose(depth, expected)
    with pytest.raises(ValueError, match="bases"):
        D.rope_base_min_decay([[1e4]], 128, 32)


def test_failures_refuse_bad_input():
    with pytest.raises(ValueError, match="high"):
        D.rope_base_failures(64, 16, 1e4, 1e3)
    with pytest.raises(ValueError, match="low"):
        D.rope_base_failures(64, 16, 0.5, 1e3)
    with pytest.raises(ValueError, match="rtol"):
        D.rope_base_failures(64, 16, 1e3, 1e4, rtol=0.0)
    with pytest.raises(ValueError, match="head_dim"):
        D.rope_base_failures(64, 15, 1e3, 1e4)


def test_base_bound_table_holds_the_definition():
    # Every row: b* admissible and just below it not; every listed stretch fails at its middle,
    # every gap between stretches (up to 8 b*) passes at its middle. Cheap: a few dozen bases.
    import math

    for length, (b_star, stretches) in D.BASE_BOUND_TABLE.items():
        assert D.rope_base_condition(b_star, length, 128), length
        assert not D.rope_base_condition(b_star * (1 - 1e-6), length, 128), length
        if stretches is None:
            continue
        edges = [b_star, *[x for stretch in stretches for x in stretch], 8 * b_star]
        for k, (lo, hi) in enumerate(zip(edges, edges[1:])):
            middle = math.sqrt(lo * hi)
            assert D.rope_base_condition(middle, length, 128) == (k % 2 == 0), (length, lo, hi)


def test_base_bound_table_1k_row_is_recomputed():
    b_star, stretches = D.BASE_BOUND_TABLE[1024]
    assert D.rope_base_lower_bound(1024, 128) == pytest.approx(b_star, rel=1e-9)
    found = D.rope_base_failures(1024, 128, b_star, 8 * b_star)
    assert len(found) == len(stretches)
    for (a, b), (c, d) in zip(found, stretches):
        assert a == pytest.approx(c, rel=1e-5) and b == pytest.approx(d, rel=1e-5)
