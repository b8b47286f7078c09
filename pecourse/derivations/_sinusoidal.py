"""Sinusoidal positions: a shift is a rotation, and the dot product sees only the offset.

Vaswani et al. 2017, "Attention Is All You Need" (arXiv:1706.03762), §3.5:
``PE(t, 2i) = sin(t * w_i)``, ``PE(t, 2i+1) = cos(t * w_i)`` with ``w_i = 10000^(-2i/d)``.
The paper remarks that ``PE(t + k)`` is a linear function of ``PE(t)``; here sympy proves
it, with the frequencies left symbolic (the identity holds for any frequencies).
"""

from __future__ import annotations

import sympy as sp

from ._identity import Claim, Identity, _check_blocks, _check_sign, block_diag, dot

__all__ = ["SinusoidalShift", "SinusoidalDotProduct", "sinusoidal_vector", "shift_matrix"]


def _symbols(blocks: int):
    t, delta = sp.symbols("t Delta", real=True)
    omegas = sp.symbols(f"omega_1:{blocks + 1}", positive=True)
    return t, delta, omegas


def sinusoidal_vector(t, omegas):
    """p(t) = [sin(w_1 t), cos(w_1 t), sin(w_2 t), cos(w_2 t), ...] (arXiv:1706.03762, §3.5)."""
    entries = []
    for w in omegas:
        entries += [sp.sin(w * t), sp.cos(w * t)]
    return sp.Matrix(entries)


def shift_matrix(delta, omegas, sign: int = 1):
    """M(delta): one 2x2 block [[cos, sin], [-sin, cos]](w_i delta) per frequency.

    The block acts on the pair (sin, cos); ``sign=-1`` builds M(-delta), a broken variant.
    """
    blocks = []
    for w in omegas:
        a = sign * w * delta
        blocks.append(sp.Matrix([[sp.cos(a), sp.sin(a)], [-sp.sin(a), sp.cos(a)]]))
    return block_diag(*blocks)


class SinusoidalShift(Identity):
    """p(t + D) = M(D) p(t), M(D) block-diagonal rotations free of t (arXiv:1706.03762, §3.5).

    ``blocks`` is the number of frequency pairs (2 is enough to see the block structure);
    ``shift_sign=-1`` uses M(-D) instead, a broken variant that :meth:`check` rejects.
    """

    key = "sinusoidal_shift"
    title = "Sinusoidal positions: a shift is a rotation"
    source = "Vaswani et al. 2017, arXiv:1706.03762, §3.5 (PE(pos+k) is linear in PE(pos))"
    claim_latex = (
        r"p(t+\Delta) = M(\Delta)\,p(t),\quad M(\Delta) = \operatorname{diag}_i"
        r"\begin{pmatrix}\cos\omega_i\Delta & \sin\omega_i\Delta\\"
        r"-\sin\omega_i\Delta & \cos\omega_i\Delta\end{pmatrix}"
    )
    statement = (
        "Moving every sinusoidal position vector by the same offset $\\Delta$ is one linear "
        "map $M(\\Delta)$: a rotation of each (sin, cos) pair by the angle $\\omega_i\\Delta$. "
        "The map depends on the offset only, never on the position $t$ it is applied to."
    )
    explanation = (
        "Each pair is a point on a circle turning at speed $\\omega_i$. Advancing time by "
        "$\\Delta$ turns every point by $\\omega_i\\Delta$, wherever it started: that is the "
        "angle-addition formula, and it is why a linear layer could in principle read "
        "relative offsets out of absolute sinusoidal positions."
    )

    def __init__(self, blocks: int = 2, shift_sign: int = 1):
        super().__init__()
        self.blocks = _check_blocks(blocks)
        self.shift_sign = _check_sign("shift_sign", shift_sign)

    def _build(self):
        t, delta, omegas = _symbols(self.blocks)
        p_t = sinusoidal_vector(t, omegas)
        p_shift = sinusoidal_vector(t + delta, omegas)
        M = shift_matrix(delta, omegas, self.shift_sign)
        steps = [
            ("the position vector $p(t)$", p_t),
            ("the shifted vector $p(t+\\Delta)$", p_shift),
            ("angle addition expands it", p_shift.applyfunc(lambda e: sp.expand(e, trig=True))),
            ("the shift matrix $M(\\Delta)$ (no $t$ in it)", M),
            ("$M(\\Delta)\\,p(t)$, expanded", (M * p_t).applyfunc(sp.expand)),
        ]
        claims = [
            Claim("$p(t+\\Delta) = M(\\Delta)\\,p(t)$", p_shift, M * p_t),
            Claim("$M(\\Delta)$ does not depend on $t$", M, (t,), relation="free of"),
        ]
        return claims, steps


class SinusoidalDotProduct(Identity):
    """p(t) . p(t + D) = sum_i cos(w_i D): a function of the offset only (arXiv:1706.03762, §3.5).

    ``rhs_frequency_factor=2`` builds a broken variant that claims sum_i cos(2 w_i D);
    :meth:`check` rejects it.
    """

    key = "sinusoidal_dot_product"
    title = "Sinusoidal positions: the dot product sees only the offset"
    source = "Vaswani et al. 2017, arXiv:1706.03762, §3.5"
    claim_latex = (
        r"p(t)\cdot p(t+\Delta) = \sum_i \cos(\omega_i\Delta),\qquad "
        r"\frac{\partial}{\partial t}\,p(t)\cdot p(t+\Delta) = 0"
    )
    statement = (
        "The similarity of two sinusoidal position vectors depends only on how far apart "
        "they are: $p(t)\\cdot p(t+\\Delta) = \\sum_i \\cos(\\omega_i\\Delta)$, whatever $t$ is."
    )
    explanation = (
        "Each pair contributes $\\sin a\\sin(a+b) + \\cos a\\cos(a+b) = \\cos b$. The result "
        "is symmetric in $\\Delta$, so the dot product alone cannot tell a token before from a "
        "token after; it peaks at $\\Delta=0$ and oscillates (it does not decay monotonically)."
    )

    def __init__(self, blocks: int = 2, rhs_frequency_factor: int = 1):
        super().__init__()
        self.blocks = _check_blocks(blocks)
        self.rhs_frequency_factor = rhs_frequency_factor

    def _build(self):
        t, delta, omegas = _symbols(self.blocks)
        product = dot(sinusoidal_vector(t, omegas), sinusoidal_vector(t + delta, omegas))
        expected = sum(sp.cos(self.rhs_frequency_factor * w * delta) for w in omegas)
        derivative = sp.diff(product, t)
        steps = [
            ("the dot product $p(t)\\cdot p(t+\\Delta)$", product),
            ("after angle addition", sp.expand(product, trig=True)),
            ("with $\\sin^2 + \\cos^2 = 1$", sp.trigsimp(sp.expand(product, trig=True))),
            ("its derivative with respect to $t$", derivative),
        ]
        claims = [
            Claim("$p(t)\\cdot p(t+\\Delta) = \\sum_i \\cos(\\omega_i\\Delta)$", product, expected),
            Claim(
                "$\\frac{\\partial}{\\partial t}\\,p(t)\\cdot p(t+\\Delta) = 0$",
                derivative,
                sp.Integer(0),
            ),
        ]
        return claims, steps
