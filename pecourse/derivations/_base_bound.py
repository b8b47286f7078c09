"""The RoPE base bounds the context length (Men et al. 2024, arXiv:2405.14591).

Men et al. ask that, at every relative distance m inside the context, a query attends more
to a key *similar* to it (k* = q + noise) than to an unrelated random key k. Their
Theorem 1 (§4) turns this into a condition on the base b alone:

    E[q^T R_m k*] - E[q^T R_m k] = 2 sigma^2 * B_{m,theta},
    B_{m,theta} = sum_{i=0}^{d/2-1} cos(m theta_i),  theta_i = b^(-2i/d),

and the desired property holds up to length L when B_{m,theta} >= 0 for all m <= L.

:class:`RopeBaseBound` proves the expectation step symbolically (a small head, d = 4, with
per-dimension means mu and a common variance sigma^2). :func:`rope_base_lower_bound` computes
the smallest base admitting a context length, numerically.

The smallest base, precisely
---------------------------
``rope_base_lower_bound(L, d)`` is

    b*(L, d) = min { b >= 1 : B_{m,theta(b)} >= 0 for every integer m with 1 <= m <= L }.

The set of admissible bases is *not* an interval: above b* there are bases that fail again.
:func:`rope_base_failures` finds every failing stretch of bases in a range with the same
kind of certified walk (below), and :data:`BASE_BOUND_TABLE` records, for d = 128, b* and
where the last failure above it ends, both computed by this module (a test recomputes the
cheap rows and checks every row against the definition):

    L       b*          last failing base (searched up to 8 b*)    ratio
    1,024   4.293e3     6.018e3                                    1.40
    2,048   1.159e4     2.276e4                                    1.96
    4,096   2.695e4     5.879e4                                    2.18
    8,192   8.376e4     3.943e5                                    4.71

The failures above b* are shallow: sampling five bases inside every stretch, the deepest dip
found is min_m B_m = -7.7 (4k, at 1.33 b*), against B_0 = d/2 = 64. So "a base comfortably
above b*" is safe only in that soft sense: for d = 128 a base must exceed b* by a factor of
about 1.4 (1k) to 4.7 (8k) before no distance m <= L fails.

The walk in u = ln b
--------------------
Both searches rest on one bound: |dB_m/du| <= m * S(u), S(u) = sum_i x_i theta_i
(x_i = 2i/d), and S decreases as u grows. So at a failing base with B_m < 0 the next
-B_m / (m S) in u fail too, and at an admissible base every B_m stays >= 0 for the next
min_m B_m / (m S). :func:`rope_base_lower_bound` walks up from b = 1 through failing
stretches and stops at the first admissible base; :func:`rope_base_failures` walks through
both kinds. Each step is certified, so the ends of every stretch are exact up to a relative
``rtol`` (default 1e-9 and 1e-6): only a window narrower than ``rtol`` could be stepped
over. The returned b* is admissible (checked for all m <= L). Run time of
``rope_base_lower_bound``: about a second up to 8k, ~15 s at 32k and ~2 min at 64k on one
CPU core; :func:`rope_base_failures` over [b*, 8 b*] takes seconds at 1k and minutes at 8k.

Comparison with the paper
-------------------------
Men et al. summarise their per-length bounds with the fit b ~ 0.0424 L^1.628 (Figure 1).
That fit is the only figure from the paper this module relies on; the paper's per-length
values were not re-checked against the PDF. Because of the gaps above b*, a scan over a
coarse grid of bases can return any base between b* and the last failing one (a 5% grid
that starts at 1,000 returns 1.46e4 at 2k, against b* = 1.16e4, and 2.90e4 at 4k), so a
quoted "bound" depends on its definition and on the resolution of the search. Say which
you use.
"""

from __future__ import annotations

import math

import sympy as sp

from ._identity import Claim, Identity, _check_blocks, block_diag, rot2

__all__ = [
    "RopeBaseBound",
    "rope_long_term_decay",
    "rope_base_condition",
    "rope_base_admissible",
    "rope_base_lower_bound",
    "rope_base_table",
    "rope_base_min_decay",
    "rope_base_failures",
    "BASE_BOUND_TABLE",
    "DEFAULT_CONTEXT_LENGTHS",
]

DEFAULT_CONTEXT_LENGTHS = (1024, 2048, 4096, 8192, 16384, 32768)
_MAX_BASE = 1e30  # beyond this no practical model lives; refuse rather than loop
_CHUNK = 1 << 16  # rows of m per block when evaluating all distances (memory bound)


# ----------------------------------------------------------------------------------------
# Symbolic step: the expectation identity of Theorem 1
# ----------------------------------------------------------------------------------------


def _expectation(poly, moments):
    """E[poly] for independent random symbols: ``moments[x]`` maps a power p to E[x^p]."""
    poly = sp.expand(poly)
    total = sp.Integer(0)
    for term in sp.Add.make_args(poly):
        coeff, factors = sp.Integer(1), []
        for factor in sp.Mul.make_args(term):
            base, power = factor.as_base_exp()
            if base in moments:
                factors.append(moments[base](int(power)))
            else:
                coeff *= factor
        total += coeff * sp.Mul(*factors)
    return sp.expand(total)


class RopeBaseBound(Identity):
    """E[q^T R_m k*] - E[q^T R_m k] = 2 sigma^2 sum_i cos(m theta_i) (arXiv:2405.14591, Thm. 1).

    q and k are independent with the same per-dimension means mu_a and variance sigma^2,
    k* = q + eps with zero-mean noise eps. Proved symbolically for d = 2 * ``blocks``
    (default 4) with symbolic m and theta_i. ``factor=1`` builds the broken variant
    (sigma^2 instead of 2 sigma^2).
    """

    key = "rope_base_bound"
    title = "The RoPE base bounds the context length: the expectation step"
    source = (
        "Men et al. 2024, 'Base of RoPE Bounds Context Length', arXiv:2405.14591, §4, Theorem 1"
    )
    claim_latex = (
        r"\mathbb{E}[q^\top R_m k^*] - \mathbb{E}[q^\top R_m k] = 2\sigma^2 \sum_{i=0}^{d/2-1}"
        r"\cos(m\theta_i) = 2\sigma^2 B_{m,\theta}"
    )
    statement = (
        "A key similar to the query ($k^* = q + \\varepsilon$) should receive more attention "
        "than a random key at every distance $m$ in the context. In expectation the "
        "advantage is $2\\sigma^2 B_{m,\\theta}$, so the model can prefer similar tokens at "
        "distance $m$ only if $B_{m,\\theta} = \\sum_i \\cos(m\\theta_i) \\ge 0$. Since "
        "$\\theta_i = b^{-2i/d}$, this bounds the base $b$ from below for a given context "
        "length: see `rope_base_lower_bound`."
    )
    explanation = (
        "Expand $q^\\top R_m k$ as $\\sum_{a,b} (R_m)_{ab} q_a k_b$ and take expectations: "
        "for independent $q, k$ only the means survive, $\\mu^\\top R_m \\mu$; for $k^* = q + "
        "\\varepsilon$ the diagonal terms also pick up the variance, "
        "$\\sigma^2\\,\\mathrm{tr}\\,R_m + \\mu^\\top R_m\\mu$. The difference is "
        "$\\sigma^2\\,\\mathrm{tr}\\,R_m = 2\\sigma^2\\sum_i\\cos(m\\theta_i)$ — the means cancel."
    )

    def __init__(self, blocks: int = 2, factor: int = 2):
        super().__init__()
        self.blocks = _check_blocks(blocks)
        self.factor = factor

    def _build(self):
        n = 2 * self.blocks
        m = sp.Symbol("m", real=True)
        sigma = sp.Symbol("sigma", positive=True)
        thetas = sp.symbols(f"theta_0:{self.blocks}", positive=True)
        mu = sp.symbols(f"mu_0:{n}", real=True)
        q = sp.symbols(f"q_0:{n}", real=True)
        k = sp.symbols(f"k_0:{n}", real=True)
        eps = sp.symbols(f"epsilon_0:{n}", real=True)
        R = block_diag(*[rot2(m * th) for th in thetas])

        def gaussian_moments(mean):
            # E[x] = mean, E[x^2] = sigma^2 + mean^2 (only powers 1 and 2 occur).
            return lambda p: {1: mean, 2: sigma**2 + mean**2}[p]

        moments = {}
        for a in range(n):
            moments[q[a]] = gaussian_moments(mu[a])
            moments[k[a]] = gaussian_moments(mu[a])
            moments[eps[a]] = lambda p: {1: sp.Integer(0), 2: sp.Symbol("tau") ** 2}[p]
        qv, kv = sp.Matrix(q), sp.Matrix(k)
        k_star = qv + sp.Matrix(eps)
        similar = _expectation((qv.T * R * k_star)[0, 0], moments)
        random = _expectation((qv.T * R * kv)[0, 0], moments)
        B = sum(sp.cos(m * th) for th in thetas)
        steps = [
            ("the rotation $R_m$", R),
            ("$\\mathbb{E}[q^\\top R_m k]$, independent $q, k$", random),
            ("$\\mathbb{E}[q^\\top R_m k^*]$, $k^* = q + \\varepsilon$", similar),
            ("their difference", sp.simplify(similar - random)),
        ]
        claims = [
            Claim(
                "difference $= \\sigma^2\\,\\mathrm{tr}\\,R_m$",
                similar - random,
                sigma**2 * R.trace(),
            ),
            Claim(
                f"difference $= {self.factor}\\sigma^2 B_{{m,\\theta}}$",
                similar - random,
                self.factor * sigma**2 * B,
            ),
        ]
        return claims, steps


# ----------------------------------------------------------------------------------------
# Numerics: B_{m,theta}, the condition, and the smallest admissible base
# ----------------------------------------------------------------------------------------


def _validate(context_length, head_dim):
    from pecourse._validate import check_even, check_int

    context_length = check_int("context_length", context_length, minimum=1)
    head_dim = check_even("head_dim", head_dim)
    return context_length, head_dim


def _thetas(base, head_dim):
    import numpy as np

    # theta_i = b^(-2i/d), i = 0 .. d/2 - 1 (RoFormer, arXiv:2104.09864, eq. 15), float64.
    return float(base) ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)


def _decay(thetas, distances):
    import numpy as np

    # B_{m,theta} = sum_i cos(m theta_i) (arXiv:2405.14591, Theorem 1), in blocks of m.
    out = np.empty(len(distances), dtype=np.float64)
    for start in range(0, len(distances), _CHUNK):
        block = distances[start : start + _CHUNK]
        out[start : start + _CHUNK] = np.cos(np.outer(block, thetas)).sum(axis=1)
    return out


def rope_long_term_decay(base: float, head_dim: int, max_distance: int):
    """B_{m,theta} = sum_i cos(m theta_i) for m = 0 .. max_distance (arXiv:2405.14591, Thm. 1).

    Returns a float64 numpy array of shape ``[max_distance + 1]``. Refuses a base below 1,
    an odd head_dim and a negative max_distance.
    """
    import numpy as np

    from pecourse._validate import check_even, check_float, check_int

    base = check_float("base", base, minimum=1.0)
    head_dim = check_even("head_dim", head_dim)
    max_distance = check_int("max_distance", max_distance, minimum=0)
    return _decay(_thetas(base, head_dim), np.arange(max_distance + 1, dtype=np.float64))


def rope_base_condition(base: float, context_length: int, head_dim: int) -> bool:
    """True when B_{m,theta} >= 0 for every integer 1 <= m <= context_length (arXiv:2405.14591).

    Refuses a base below 1, context_length < 1 and an odd head_dim.
    """
    import numpy as np

    from pecourse._validate import check_float

    base = check_float("base", base, minimum=1.0)
    context_length, head_dim = _validate(context_length, head_dim)
    distances = np.arange(1, context_length + 1, dtype=np.float64)
    return bool((_decay(_thetas(base, head_dim), distances) >= 0).all())


def rope_base_admissible(bases, context_length: int, head_dim: int):
    """For each base, whether B_{m,theta} >= 0 for all 1 <= m <= context_length (arXiv:2405.14591).

    ``bases`` is a 1-D sequence of floats (e.g. ``numpy.geomspace(1e3, 1e5, 400)`` for a plot
    of the admissible set, which is not an interval); returns a numpy bool array of the same
    length (:func:`rope_base_min_decay` >= 0). Refuses bases below 1, context_length < 1 and
    an odd head_dim.
    """
    return rope_base_min_decay(bases, context_length, head_dim) >= 0


def rope_base_lower_bound(context_length: int, head_dim: int, *, rtol: float = 1e-9) -> float:
    """The smallest base b >= 1 with B_{m,theta} >= 0 for all 1 <= m <= context_length.

    Men et al. 2024 (arXiv:2405.14591), Theorem 1 and the base/context-length table. The
    definition and the search are described in the module docstring: the admissible set is
    not an interval, and this returns its minimum (to a relative ``rtol``), found by a walk
    that provably skips only failing bases. ``head_dim`` is the attention head dimension d
    (even); the result is a float. Raises ``ValueError`` for context_length < 1, an odd
    head_dim, or when no base up to 1e30 admits the length (e.g. head_dim = 2, where
    theta_0 = 1 always and cos(2) < 0).
    """
    import numpy as np

    from pecourse._validate import check_float

    context_length, head_dim = _validate(context_length, head_dim)
    rtol = check_float("rtol", rtol, minimum=0.0, strict_minimum=True)
    x = np.arange(0, head_dim, 2, dtype=np.float64) / head_dim  # theta_i = b^(-x_i)
    distances = np.arange(1, context_length + 1, dtype=np.float64)
    watch = np.empty(0, dtype=np.float64)  # distances that failed recently: try them first
    u = 0.0  # u = ln b
    while True:
        base = math.exp(u)
        if base > _MAX_BASE:
            raise ValueError(
                f"no RoPE base up to {_MAX_BASE:.0e} admits context_length={context_length} "
                f"with head_dim={head_dim}; use a larger head_dim"
            )
        thetas = _thetas(base, head_dim)
        slope = float((x * thetas).sum())  # |dB_m/du| <= m * slope for every larger base
        failing = None
        if watch.size:
            values = _decay(thetas, watch)
            if (values < 0).any():
                failing = (watch[values < 0], values[values < 0])
        if failing is None:
            values = _decay(thetas, distances)
            bad = values < 0
            if not bad.any():
                return base
            m_bad, b_bad = distances[bad], values[bad]
            order = np.argsort(b_bad / m_bad)[:256]  # most negative per unit of distance
            watch = m_bad[order]
            failing = (m_bad, b_bad)
        m_bad, b_bad = failing
        # B_m stays negative while u moves by less than -B_m / (m * slope): skip that stretch.
        step = float((-b_bad / (m_bad * slope)).max()) if slope > 0 else math.inf
        u += max(step, rtol)


def rope_base_min_decay(bases, context_length: int, head_dim: int):
    """min over 1 <= m <= context_length of B_{m,theta} = sum_i cos(m theta_i), for each base.

    The depth of the worst dip of Men et al.'s discrimination curve (arXiv:2405.14591,
    Theorem 1): a base is admissible exactly when this is >= 0. ``bases`` is a 1-D sequence
    of floats; returns a float64 numpy array of the same length. Refuses bases below 1,
    context_length < 1 and an odd head_dim.
    """
    import numpy as np

    from pecourse._validate import check_float

    context_length, head_dim = _validate(context_length, head_dim)
    bases = np.asarray(bases, dtype=np.float64)
    if bases.ndim != 1:
        raise ValueError(f"bases must be a 1-D sequence, got shape {bases.shape}")
    distances = np.arange(1, context_length + 1, dtype=np.float64)
    out = np.empty(bases.shape, dtype=np.float64)
    for n, base in enumerate(bases):
        base = check_float("bases", float(base), minimum=1.0)
        out[n] = _decay(_thetas(base, head_dim), distances).min()
    return out


def rope_base_failures(
    context_length: int, head_dim: int, low: float, high: float, *, rtol: float = 1e-6
) -> list[tuple[float, float]]:
    """Every stretch of failing bases in [low, high]: ``[(start, end), ...]``, in order.

    A base fails when B_{m,theta} < 0 for some 1 <= m <= context_length (arXiv:2405.14591).
    The walk in u = ln b (module docstring) certifies each step, so each ``start`` is the
    first failing base after an admissible stretch and each ``end`` the first admissible
    base after a failing one, exact up to the relative ``rtol``; a window narrower than
    ``rtol`` could be stepped over. A stretch still failing at ``high`` ends at ``high``.
    Refuses low < 1, high <= low, context_length < 1, an odd head_dim and rtol <= 0.
    """
    import numpy as np

    from pecourse._validate import check_float

    context_length, head_dim = _validate(context_length, head_dim)
    low = check_float("low", low, minimum=1.0)
    high = check_float("high", high, minimum=1.0)
    if not high > low:
        raise ValueError(f"high must be greater than low, got low={low} and high={high}")
    rtol = check_float("rtol", rtol, minimum=0.0, strict_minimum=True)
    x = np.arange(0, head_dim, 2, dtype=np.float64) / head_dim  # theta_i = b^(-x_i)
    distances = np.arange(1, context_length + 1, dtype=np.float64)
    u, u_high = math.log(low), math.log(high)
    stretches, start = [], None
    while u < u_high:
        thetas = _thetas(math.exp(u), head_dim)
        slope = float((x * thetas).sum())  # |dB_m/du| <= m * slope from here on
        values = _decay(thetas, distances)
        bad = values < 0
        if bad.any():
            if start is None:
                start = math.exp(u)
            # every failing m stays negative for -B_m / (m * slope): take the longest
            step = float((-values[bad] / distances[bad]).max()) / slope if slope > 0 else math.inf
        else:
            if start is not None:
                stretches.append((start, math.exp(u)))
                start = None
            # every B_m stays >= 0 for B_m / (m * slope): take the shortest
            step = float((values / distances).min()) / slope if slope > 0 else math.inf
        u += max(step, rtol)
    if start is not None:
        stretches.append((start, high))
    return stretches


#: Computed by this module for head_dim 128: context length -> (b*, failing stretches), where
#: b* = ``rope_base_lower_bound(L, 128)`` and the stretches are
#: ``rope_base_failures(L, 128, b*, 8 * b*)`` (ends to 6 significant digits; ``None``: not
#: searched, minutes of CPU). tests/test_derivations.py recomputes the 1k row and checks every
#: row against the definition.
BASE_BOUND_TABLE = {
    1024: (
        4293.43757267451,
        (
            (4330.33, 5602.18),
            (5644.35, 6018.28),
        ),
    ),
    2048: (
        11587.244312149976,
        (
            (11649.4, 12418.2),
            (12452.4, 13561.6),
            (13615.8, 13761.1),
            (13811.9, 14470.0),
            (14774.5, 15300.3),
            (16197.8, 16579.4),
            (16815.1, 17250.5),
            (22047.8, 22764.3),
        ),
    ),
    4096: (
        26952.33925033133,
        (
            (26973.1, 28628.7),
            (29079.9, 30127.2),
            (30199.7, 39206.1),
            (39307.2, 40289.4),
            (40324.1, 43146.4),
            (43341.4, 44546.7),
            (44963.0, 45820.8),
            (46851.4, 47064.8),
            (52703.3, 53433.9),
            (54390.4, 54618.1),
            (54643.2, 55159.8),
            (55429.7, 55831.8),
            (56716.5, 57095.8),
            (57133.5, 57533.9),
            (58221.8, 58789.5),
        ),
    ),
    8192: (
        83763.84107725027,
        (
            (84469.7, 89412.0),
            (89460.6, 90231.0),
            (90371.5, 90772.5),
            (91250.1, 93294.2),
            (93895.3, 96422.0),
            (97476.4, 98804.9),
            (99679.8, 100293.0),
            (100766.0, 101826.0),
            (102324.0, 102781.0),
            (103555.0, 111863.0),
            (111900.0, 122112.0),
            (122848.0, 123692.0),
            (124069.0, 135374.0),
            (135662.0, 139646.0),
            (140117.0, 140352.0),
            (143935.0, 144777.0),
            (145215.0, 145602.0),
            (145776.0, 148871.0),
            (151440.0, 153230.0),
            (153836.0, 154166.0),
            (154182.0, 154392.0),
            (156686.0, 158309.0),
            (158573.0, 158911.0),
            (162190.0, 162471.0),
            (163843.0, 165061.0),
            (165379.0, 167425.0),
            (168668.0, 169891.0),
            (170171.0, 170817.0),
            (171550.0, 172081.0),
            (173053.0, 173217.0),
            (176954.0, 178196.0),
            (178493.0, 179561.0),
            (290764.0, 292591.0),
            (392686.0, 394328.0),
        ),
    ),
    16384: (231643.6470158871, None),
    32768: (629978.2629624101, None),
}


def rope_base_table(context_lengths=DEFAULT_CONTEXT_LENGTHS, head_dim: int = 128) -> dict:
    """{context_length: rope_base_lower_bound(context_length, head_dim)} for each length.

    The defaults reproduce the comparison in the module docstring (d = 128, 1k .. 32k);
    the 16k and 32k entries take tens of seconds each on one CPU core.
    """
    return {int(n): rope_base_lower_bound(n, head_dim) for n in context_lengths}
