"""RoPE scaling: the NTK-aware base change and YaRN's ramp and temperature.

Frequencies theta_i = b^(-2i/d), i = 0 .. d/2 - 1 (RoFormer, arXiv:2104.09864, eq. 15).
Extending the context by a factor s, position interpolation (PI, Chen et al. 2023,
arXiv:2306.15595) divides every frequency by s; the NTK-aware base change (bloc97, 2023,
written up in YaRN, Peng et al. 2023, arXiv:2309.00071, §3.1) changes the base instead;
NTK-by-parts and YaRN (arXiv:2309.00071, §3.2 and §3.4) blend the two per frequency.
"""

from __future__ import annotations

import sympy as sp

from ._identity import Claim, Identity, dot, vec

__all__ = ["NtkAwareBase", "Yarn", "yarn_ramp"]


class NtkAwareBase(Identity):
    """b' = b s^(d/(d-2)) keeps theta_0 and divides theta_{d/2-1} by exactly s.

    Symbolic base b, scale s and head dimension d (YaRN, arXiv:2309.00071, §3.1, the
    NTK-aware base b' = b s^(|D|/(|D|-2))). ``exponent`` (a function of the symbol d) builds
    broken variants, e.g. ``NtkAwareBase(exponent=lambda d: (d - 2) / d)``.
    """

    key = "ntk_aware_base"
    title = "NTK-aware scaling: the new base stretches only the slow frequencies"
    source = "bloc97 (2023), as written in Peng et al. 2023 (YaRN), arXiv:2309.00071, §3.1"
    claim_latex = (
        r"b' = b\,s^{\frac{d}{d-2}}:\quad \theta'_0 = \theta_0,\qquad "
        r"\theta'_{d/2-1} = \frac{\theta_{d/2-1}}{s}"
    )
    statement = (
        "Raising the RoPE base from $b$ to $b' = b\\,s^{d/(d-2)}$ leaves the fastest "
        "frequency ($i=0$) exactly as it was and divides the slowest one ($i = d/2-1$) by "
        "exactly $s$: high frequencies are extrapolated, low ones interpolated like PI."
    )
    explanation = (
        "$\\theta'_i/\\theta_i = s^{-2i/(d-2)}$: the factor runs from $1$ at $i=0$ to $1/s$ "
        "at $i=d/2-1$ geometrically. The exponent $d/(d-2)$ is chosen precisely so that the "
        "last pair lands on $1/s$; any other exponent (e.g. $(d-2)/d$) misses."
    )

    def __init__(self, exponent=None):
        super().__init__()
        self.exponent = exponent

    def _build(self):
        b, s, d = sp.symbols("b s d", positive=True)
        i = sp.Symbol("i", nonnegative=True)
        expo = d / (d - 2) if self.exponent is None else sp.sympify(self.exponent(d))
        b_new = b * s**expo

        def theta(base, idx):
            # b, s > 0 and d > 2 (a head has at least two pairs), so powers of powers
            # combine: (x^a)^c = x^(a c). sympy cannot know d != 2, hence force=True here.
            raw = base ** (-2 * idx / d)
            return sp.powdenest(sp.expand_power_base(raw, force=True), force=True)

        last = d / 2 - 1
        ratio = sp.powsimp(theta(b_new, i) / theta(b, i))
        steps = [
            ("the new base $b'$", b_new),
            (
                "$\\theta'_i = b'^{-2i/d}$ (for $b, s > 0$, $d > 2$: $(x^a)^c = x^{ac}$)",
                theta(b_new, i),
            ),
            ("$\\theta'_i / \\theta_i$", sp.simplify(ratio)),
            ("$\\theta'_{d/2-1}$", sp.simplify(theta(b_new, last))),
        ]
        claims = [
            Claim("$\\theta'_0 = \\theta_0$", theta(b_new, 0), theta(b, 0)),
            Claim(
                "$\\theta'_{d/2-1} = \\theta_{d/2-1} / s$", theta(b_new, last), theta(b, last) / s
            ),
        ]
        return claims, steps


def yarn_ramp(r, alpha, beta):
    """YaRN's ramp gamma(r): 0 below alpha, 1 above beta, linear in between (arXiv:2309.00071, §3.2).

    ``r`` is the number of full rotations a pair makes over the original context,
    r = L / lambda = L theta / (2 pi).
    """
    return sp.Piecewise((0, r < alpha), (1, r > beta), ((r - alpha) / (beta - alpha), True))


class Yarn(Identity):
    """YaRN: the ramp between PI and no scaling, its limits, and the temperature.

    theta'(r) = (1 - gamma(r)) theta / s + gamma(r) theta (NTK-by-parts, arXiv:2309.00071,
    §3.2); PI is gamma = 0; sqrt(1/t) = 0.1 ln s + 1 multiplies both q and k, so the logits
    are multiplied by (0.1 ln s + 1)^2 = 1/t (§3.4). ``temperature_on="query"`` builds the
    broken variant that scales the query only.
    """

    key = "yarn"
    title = "YaRN: ramp, limits and attention temperature"
    source = (
        "Peng et al. 2023 (YaRN), arXiv:2309.00071, §3.2 (NTK-by-parts ramp) and §3.4 (temperature)"
    )
    claim_latex = (
        r"\theta'(r) = \bigl(1-\gamma(r)\bigr)\frac{\theta}{s} + \gamma(r)\,\theta,\quad "
        r"\gamma(r)=\begin{cases}0 & r<\alpha\\ 1 & r>\beta\\ \frac{r-\alpha}{\beta-\alpha}"
        r" & \text{otherwise}\end{cases},\quad "
        r"\langle c\,q, c\,k\rangle = \tfrac{1}{t}\langle q,k\rangle,\ c=\sqrt{1/t}=0.1\ln s+1"
    )
    statement = (
        "For each pair, $r$ counts how many full turns it makes over the original context. "
        "Pairs that turn many times ($r > \\beta$) are left alone, pairs that turn less than "
        "$\\alpha$ times are interpolated like PI (divided by $s$), and the ramp $\\gamma$ "
        "blends the two in between. YaRN also scales $q$ and $k$ by $\\sqrt{1/t}$, which "
        "divides every logit by $t$."
    )
    explanation = (
        "With $\\gamma \\equiv 0$ every frequency is divided by $s$: that is position "
        "interpolation. The ramp is continuous: its middle piece is $0$ at $r=\\alpha$ and $1$ "
        "at $r=\\beta$. The temperature factor is applied to both queries and keys (so a "
        "cached, pre-scaled RoPE table can carry it); their dot product therefore gains the "
        "*square* $(0.1\\ln s + 1)^2$. Llama-family defaults are $\\alpha=1$, $\\beta=32$."
    )

    def __init__(self, temperature_on: str = "both"):
        super().__init__()
        if temperature_on not in ("both", "query"):
            raise ValueError(
                f"temperature_on must be 'both' (correct) or 'query' (broken), got {temperature_on!r}"
            )
        self.temperature_on = temperature_on

    def _build(self):
        theta, s, alpha, gap, eps, L = sp.symbols("theta s alpha delta varepsilon L", positive=True)
        r = sp.Symbol("r", real=True)
        beta = alpha + gap  # beta > alpha
        gamma = yarn_ramp(r, alpha, beta)

        def h(g):
            return (1 - g) * theta / s + g * theta

        scaled = h(gamma)
        c = sp.Rational(1, 10) * sp.log(s) + 1
        inv_t = c**2
        q, k = vec("q", 2), vec("k", 2)
        kc = c * k if self.temperature_on == "both" else k
        steps = [
            (
                "rotations over the original context, $r = L\\theta / 2\\pi$",
                L * theta / (2 * sp.pi),
            ),
            ("the ramp $\\gamma(r)$ (with $\\beta = \\alpha + \\delta$)", gamma),
            ("the scaled frequency $\\theta'(r)$", scaled),
            ("$\\sqrt{1/t}$", c),
            ("the logit with scaled $q$ and $k$", dot(c * q, kc)),
        ]
        middle = (r - alpha) / (beta - alpha)
        claims = [
            Claim("PI is the case $\\gamma \\equiv 0$: $\\theta' = \\theta / s$", h(0), theta / s),
            Claim(
                "$r > \\beta$: $\\theta' = \\theta$ (unchanged)",
                sp.Subs(scaled, r, beta + eps),
                theta,
            ),
            Claim(
                "$r < \\alpha$: $\\theta' = \\theta / s$ (interpolated)",
                sp.Subs(scaled, r, alpha - eps),
                theta / s,
            ),
            Claim("the ramp is continuous at $\\alpha$", sp.Subs(middle, r, alpha), 0),
            Claim("the ramp is continuous at $\\beta$", sp.Subs(middle, r, beta), 1),
            Claim(
                "$\\langle \\sqrt{1/t}\\,q, \\sqrt{1/t}\\,k\\rangle = (0.1 \\ln s + 1)^2 \\langle q, k\\rangle$",
                dot(c * q, kc),
                inv_t * dot(q, k),
            ),
        ]
        return claims, steps
