"""Every number a card states is recomputed: from the formula here, and from the package.

A card with a number carries ``check = {"fn", "args", "value", ...}`` (optionally
``rel_tol``, ``greater_than`` and ``also``: more argument sets with their values).
``FORMULAS`` recompute each from first principles in this file; ``PACKAGE`` asks the
course's own modules, so a card, the formula and the package can never drift apart.
"""

import importlib
import math

import numpy as np
import pytest

from pecourse.flashcards.deck import load_deck

CHECKED = [c for c in load_deck() if c.check]
DEFAULT_REL_TOL = 1e-4


def _alibi_slopes(n_heads):
    def power_of_two(n):
        start = 2 ** (-8 / n)
        return [start ** (k + 1) for k in range(n)]

    if math.log2(n_heads).is_integer():
        return power_of_two(n_heads)
    closest = 2 ** math.floor(math.log2(n_heads))
    return power_of_two(closest) + power_of_two(2 * closest)[0::2][: n_heads - closest]


def _t5_bucket(relative_position, bidirectional, num_buckets, max_distance):
    # Raffel et al. 2020, as in mesh-tensorflow / transformers' T5Attention.
    bucket = 0
    if bidirectional:
        num_buckets //= 2
        bucket += num_buckets if relative_position > 0 else 0
        n = abs(relative_position)
    else:
        n = max(-relative_position, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return bucket + n
    large = max_exact + int(
        math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    )
    return bucket + min(large, num_buckets - 1)


def _rope_wavelength(base, head_dim, which):
    i = {"fastest": 0, "slowest": head_dim // 2 - 1}[which]
    return 2 * math.pi / base ** (-2 * i / head_dim)


def _base_lower_bound(context_length, head_dim):
    """Men et al. 2024: the smallest base with sum_i cos(m θ_i) >= 0 for all m <= L (grid scan)."""
    m = np.arange(context_length + 1, dtype=np.float64)[:, None]
    exponent = np.arange(0, head_dim, 2, dtype=np.float64) / head_dim
    base = 1000.0
    while base < 1e12:
        if np.cos(m * base**-exponent).sum(axis=1).min() >= 0:
            return base
        base *= 1.05
    raise AssertionError("no base found")


def _ntk_frequency_ratios(base, factor, head_dim):
    # θ'_i / θ_i = s^{-2i/(d-2)}: 1 for the fastest pair, 1/s for the slowest.
    return [factor ** (-2 * i / (head_dim - 2)) for i in (0, head_dim // 2 - 1)]


FORMULAS = {
    "ntk_frequency_ratios": _ntk_frequency_ratios,
    "sinusoidal_norm": lambda dim: math.sqrt(dim / 2),
    "alibi_slopes": _alibi_slopes,
    "ntk_base": lambda base, factor, head_dim: base * factor ** (head_dim / (head_dim - 2)),
    "yarn_mscale": lambda factor: 0.1 * math.log(factor) + 1,
    "rope_wavelength": _rope_wavelength,
    "t5_bucket": _t5_bucket,
    "rope_base_lower_bound": _base_lower_bound,
    "expr": lambda expr: eval(expr, {"__builtins__": {}, "math": math}),
}


def _module(name):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        pytest.skip(f"{name} is not in the package yet")


def _pkg_alibi(n_heads):
    return _module("pecourse.positions.alibi").slopes(n_heads).tolist()


def _pkg_ntk_base(base, factor, head_dim):
    inv_freq, attention_factor = _module("pecourse.positions.rope_scaling").SCALINGS["ntk"](
        head_dim, base, factor=factor
    )
    assert attention_factor == 1.0
    # θ_1 = b'^{-2/d}, so b' = θ_1^{-d/2}
    return float(inv_freq[1]) ** (-head_dim / 2)


def _pkg_yarn_mscale(factor):
    scaling = _module("pecourse.positions.rope_scaling")
    _inv, attention_factor = scaling.SCALINGS["yarn"](
        128, 10000.0, factor=factor, original_max_position=4096
    )
    assert attention_factor == pytest.approx(scaling.yarn_mscale(factor))
    return attention_factor


def _pkg_wavelength(base, head_dim, which):
    inv_freq = _module("pecourse.positions.rope").inv_freq(head_dim, base)
    return 2 * math.pi / float(inv_freq[0 if which == "fastest" else -1])


def _pkg_t5_bucket(relative_position, **kwargs):
    import torch

    relative = _module("pecourse.positions.relative")
    return int(relative.t5_bucket(torch.tensor([relative_position]), **kwargs)[0])


def _pkg_base_bound(context_length, head_dim):
    derivations = _module("pecourse.derivations")
    if not hasattr(derivations, "rope_base_lower_bound"):
        pytest.skip("pecourse.derivations.rope_base_lower_bound is not written yet")
    return float(derivations.rope_base_lower_bound(context_length, head_dim))


def _pkg_ntk_ratios(base, factor, head_dim):
    scaling = _module("pecourse.positions.rope_scaling")
    scaled, _ = scaling.SCALINGS["ntk"](head_dim, base, factor=factor)
    plain, _ = scaling.SCALINGS["default"](head_dim, base)
    ratio = (scaled / plain).tolist()
    return [ratio[0], ratio[-1]]


def _pkg_sinusoidal_norm(dim):
    table = _module("pecourse.positions.absolute").sinusoidal_table(4096, dim, dtype=_float64())
    norms = table.norm(dim=-1)
    assert float(norms.max() - norms.min()) < 1e-9  # the same at every position
    return float(norms[0])


def _float64():
    import torch

    return torch.float64


PACKAGE = {
    "ntk_frequency_ratios": _pkg_ntk_ratios,
    "sinusoidal_norm": _pkg_sinusoidal_norm,
    "alibi_slopes": _pkg_alibi,
    "ntk_base": _pkg_ntk_base,
    "yarn_mscale": _pkg_yarn_mscale,
    "rope_wavelength": _pkg_wavelength,
    "t5_bucket": _pkg_t5_bucket,
    "rope_base_lower_bound": _pkg_base_bound,
}


def _cases(check):
    """(fn, args, stated value, tolerances) for the main check and each ``also`` entry."""
    yield check["fn"], check["args"], check["value"], check
    for extra in check.get("also", []):
        yield extra.get("fn", check["fn"]), extra["args"], extra["value"], extra


def _assert_matches(got, check, stated):
    rel = check.get("rel_tol", DEFAULT_REL_TOL)
    if "greater_than" in check:
        assert got > check["greater_than"]
    if isinstance(stated, (list, tuple)):
        assert len(got) == len(stated)
        for g, s in zip(got, stated):
            assert g == pytest.approx(s, rel=rel)
    elif isinstance(stated, bool):
        assert got is stated or got == stated
    else:
        assert got == pytest.approx(stated, rel=rel)


def test_numeric_cards_exist_for_every_package_fact():
    fns = {c.check["fn"] for c in CHECKED}
    assert set(PACKAGE) <= fns
    assert all(fn in FORMULAS for c in CHECKED for fn, *_ in _cases(c.check))


@pytest.mark.parametrize("card", CHECKED, ids=lambda c: c.id)
def test_card_number_matches_formula(card):
    for fn, args, stated, tol in _cases(card.check):
        _assert_matches(FORMULAS[fn](**args), tol, stated)


@pytest.mark.parametrize(
    "card", [c for c in CHECKED if c.check["fn"] in PACKAGE], ids=lambda c: c.id
)
def test_card_number_matches_package(card):
    for fn, args, stated, tol in _cases(card.check):
        if fn in PACKAGE:
            _assert_matches(PACKAGE[fn](**args), tol, stated)


def test_stated_numbers_appear_in_the_card_text():
    # Guards against a check whose value no longer matches the prose.
    text = {c.id: c.front + c.back for c in CHECKED}
    assert "40\\,890" in text["ntk-base-s4"]
    assert "1.139" in text["yarn-temperature-s4"] and "1.347" in text["yarn-temperature-s32"]
    assert "54\\,400" in text["rope-slowest-wavelength-10k"]
    assert "2.56" in text["base-slowest-500k"]
    assert "15" in text["t5-bucket-100"] and "31" in text["t5-bucket-100"]
    assert "2^{-3.5}" in text["alibi-slopes-12-heads"]
