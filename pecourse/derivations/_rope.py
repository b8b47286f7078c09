"""Rotary embeddings: the relative property and its relatives.

RoPE rotates queries and keys (never values) by an angle proportional to their position:
Su et al. 2021, "RoFormer" (arXiv:2104.09864), §3.2 (eqs. 12-16). Every identity here
is proved for symbolic positions and symbolic frequencies.
"""

from __future__ import annotations

import sympy as sp

from ._identity import Claim, Identity, _check_blocks, _check_sign, block_diag, dot, rot2, vec

__all__ = [
    "rope_matrix",
    "RopeRelative",
    "RopeComplexForm",
    "RopePairingPermutation",
    "pairing_permutation",
    "AxialRope2D",
    "XposDecay",
    "VoRope",
]


def rope_matrix(position, thetas):
    """R(position): block-diagonal 2x2 rotations by position * theta_i (arXiv:2104.09864, eq. 15).

    Interleaved pairing: block i acts on dimensions (2i, 2i+1).
    """
    return block_diag(*[rot2(position * th) for th in thetas])


def _thetas(blocks: int):
    if blocks == 1:
        return (sp.Symbol("theta", positive=True),)
    return sp.symbols(f"theta_1:{blocks + 1}", positive=True)


class RopeRelative(Identity):
    """<R(m) q, R(n) k> = <q, R(n - m) k> (RoFormer, arXiv:2104.09864, eq. 16).

    ``blocks=1`` is one 2x2 rotation; ``blocks=2`` a block-diagonal rotation with two
    distinct symbolic frequencies. ``offset="m-n"`` builds the broken variant R(m - n).
    """

    key = "rope_relative"
    source = "Su et al. 2021 (RoFormer), arXiv:2104.09864, §3.2, eqs. 13-16"
    claim_latex = r"\langle R(m)\,q,\ R(n)\,k\rangle = \langle q,\ R(n-m)\,k\rangle"
    statement = (
        "Rotate the query by its position $m$ and the key by its position $n$: their dot "
        "product equals the unrotated query against the key rotated by $n-m$ alone. The "
        "score sees the offset, not the absolute positions."
    )
    explanation = (
        "Rotations compose by adding angles and their transpose is their inverse, so "
        "$R(m)^\\top R(n) = R(-m)R(n) = R(n-m)$, block by block. A block-diagonal matrix "
        "with different speeds $\\theta_i$ per block keeps the property, because each block "
        "obeys it on its own."
    )

    def __init__(self, blocks: int = 2, offset: str = "n-m"):
        super().__init__()
        if offset not in ("n-m", "m-n"):
            raise ValueError(f"offset must be 'n-m' (correct) or 'm-n' (broken), got {offset!r}")
        self.blocks = _check_blocks(blocks)
        self.offset = offset
        self.title = (
            "RoPE is relative: one 2x2 block"
            if blocks == 1
            else f"RoPE is relative: block-diagonal rotation ({blocks} blocks)"
        )

    def _build(self):
        m, n = sp.symbols("m n", real=True)
        thetas = _thetas(self.blocks)
        q, k = vec("q", 2 * self.blocks), vec("k", 2 * self.blocks)
        Rm, Rn = rope_matrix(m, thetas), rope_matrix(n, thetas)
        rel = n - m if self.offset == "n-m" else m - n
        lhs = dot(Rm * q, Rn * k)
        rhs = dot(q, rope_matrix(rel, thetas) * k)
        product = (Rm.T * Rn).applyfunc(sp.trigsimp)
        steps = [
            ("the rotation $R(m)$", Rm),
            ("$R(m)^\\top R(n)$, simplified", product),
            ("the score $\\langle R(m)q, R(n)k\\rangle$", lhs),
            ("the claimed right-hand side", rhs),
        ]
        claims = [
            Claim(
                "$R(m)^\\top R(n) = R(" + self.offset + ")$", Rm.T * Rn, rope_matrix(rel, thetas)
            ),
            Claim(
                "$\\langle R(m)q, R(n)k\\rangle = \\langle q, R(" + self.offset + ")k\\rangle$",
                lhs,
                rhs,
            ),
        ]
        return claims, steps


class RopeComplexForm(Identity):
    """The complex form q e^{i m theta} is the real 2x2 rotation (arXiv:2104.09864, §3.2.1, eq. 12-13).

    A pair (q_0, q_1) is the complex number q_0 + i q_1; multiplying by e^{i m theta}
    rotates it. ``sign=-1`` builds the broken variant e^{-i m theta}.
    """

    key = "rope_complex_form"
    title = "RoPE: the complex form equals the real rotation"
    source = "Su et al. 2021 (RoFormer), arXiv:2104.09864, §3.2.1 (eqs. 12-13) and §3.4.1"
    claim_latex = (
        r"(q_0 + i q_1)\,e^{i m\theta} \;\widehat{=}\; "
        r"\begin{pmatrix}\cos m\theta & -\sin m\theta\\ \sin m\theta & \cos m\theta\end{pmatrix}"
        r"\begin{pmatrix}q_0\\ q_1\end{pmatrix},\quad "
        r"\operatorname{Re}\!\left[q e^{im\theta}\,\overline{k e^{in\theta}}\right] = "
        r"\langle R(m)q, R(n)k\rangle"
    )
    statement = (
        "Reading each pair of dimensions as one complex number, RoPE is a multiplication by "
        "$e^{im\\theta}$; its real and imaginary parts are exactly the 2x2 rotation of the "
        "real form, and the real part of $q e^{im\\theta}\\,\\overline{k e^{in\\theta}}$ is the "
        "rotated dot product."
    )
    explanation = (
        "Euler's formula $e^{i\\phi} = \\cos\\phi + i\\sin\\phi$ turns the product into "
        "$(q_0\\cos\\phi - q_1\\sin\\phi) + i(q_0\\sin\\phi + q_1\\cos\\phi)$. Implementations "
        "that use `torch.polar` / `view_as_complex` (Meta's Llama code) compute the same "
        "numbers as those using cos/sin tables."
    )

    def __init__(self, sign: int = 1):
        super().__init__()
        self.sign = _check_sign("sign", sign)

    def _build(self):
        m, n = sp.symbols("m n", real=True)
        theta = sp.Symbol("theta", positive=True)
        q0, q1, k0, k1 = sp.symbols("q_0 q_1 k_0 k_1", real=True)
        zq, zk = q0 + sp.I * q1, k0 + sp.I * k1
        rotated = sp.expand_complex(zq * sp.exp(self.sign * sp.I * m * theta))
        as_pair = sp.Matrix([sp.re(rotated), sp.im(rotated)])
        real_form = rot2(m * theta) * sp.Matrix([q0, q1])
        score_complex = sp.re(
            sp.expand_complex(
                zq
                * sp.exp(self.sign * sp.I * m * theta)
                * sp.conjugate(zk * sp.exp(self.sign * sp.I * n * theta))
            )
        )
        score_real = dot(real_form, rot2(n * theta) * sp.Matrix([k0, k1]))
        steps = [
            ("the complex product, expanded", rotated),
            ("its (real, imaginary) parts", as_pair),
            ("the real form $R(m)\\,(q_0, q_1)^\\top$", real_form),
        ]
        claims = [
            Claim("(Re, Im) of $q e^{im\\theta}$ = $R(m) q$", as_pair, real_form),
            Claim(
                "$\\mathrm{Re}[q e^{im\\theta} \\overline{k e^{in\\theta}}]$ = real score",
                score_complex,
                score_real,
            ),
        ]
        return claims, steps


def pairing_permutation(d: int):
    """The d x d permutation P with x_half = P x_interleaved.

    Half index i takes interleaved index 2i and half index i + d/2 takes 2i + 1 — the row
    permutation that converts Meta (GPT-J style, interleaved) q/k weights to the NeoX /
    transformers (half) layout.
    """
    if d < 2 or d % 2:
        raise ValueError(f"d must be an even integer >= 2, got {d!r}")
    P = sp.zeros(d, d)
    for i in range(d // 2):
        P[i, 2 * i] = 1
        P[i + d // 2, 2 * i + 1] = 1
    return P


class RopePairingPermutation(Identity):
    """P R_interleaved(m) P^T = R_half(m): the two pairings are one map up to a permutation.

    ``R_half`` is built from the transformers formula ``x cos + rotate_half(x) sin`` and
    ``R_interleaved`` from the GPT-J formula on pairs (2i, 2i+1), both applied to a symbolic
    vector; their matrices are the Jacobians. ``permutation="identity"`` builds the broken
    variant that forgets the permutation. RoFormer, arXiv:2104.09864, eq. 34 (efficient form).
    """

    key = "rope_pairing_permutation"
    title = "RoPE pairings: half and interleaved differ by a fixed permutation"
    source = (
        "Su et al. 2021 (RoFormer), arXiv:2104.09864, §3.4.2 eq. 34 (interleaved); "
        "GPT-NeoX / transformers rotate_half (half)"
    )
    claim_latex = r"P\,R_{\text{interleaved}}(m)\,P^\top = R_{\text{half}}(m)"
    statement = (
        "The `interleaved` pairing rotates dimensions $(2i, 2i+1)$ together, the `half` "
        "pairing rotates $(i, i + d/2)$. Reordering the dimensions with one fixed permutation "
        "$P$ turns one rotation into the other, at every position $m$."
    )
    explanation = (
        "Both apply the same 2x2 rotations with the same frequencies; only the memory layout "
        "of the pairs differs. That is why a checkpoint trained with one pairing works with "
        "the other after permuting the rows of $W_q$ and $W_k$ once (and why forgetting to "
        "permute silently ruins a model)."
    )

    def __init__(self, d: int = 6, permutation: str = "pairing"):
        super().__init__()
        if d < 2 or d % 2:
            raise ValueError(f"d must be an even integer >= 2, got {d!r}")
        if permutation not in ("pairing", "identity"):
            raise ValueError(
                f"permutation must be 'pairing' (correct) or 'identity' (broken), got {permutation!r}"
            )
        self.d = d
        self.permutation = permutation

    def _build(self):
        d, h = self.d, self.d // 2
        m = sp.Symbol("m", real=True)
        thetas = sp.symbols(f"theta_0:{h}", positive=True)
        x = vec("x", d)
        # half (NeoX / transformers): cos/sin tables repeat the frequencies twice.
        cos = sp.Matrix([sp.cos(m * thetas[i % h]) for i in range(d)])
        sin = sp.Matrix([sp.sin(m * thetas[i % h]) for i in range(d)])
        rotate_half = sp.Matrix([-x[i + h] for i in range(h)] + [x[i] for i in range(h)])
        half = x.multiply_elementwise(cos) + rotate_half.multiply_elementwise(sin)
        # interleaved (GPT-J / Meta): pair (2i, 2i+1) rotated by m theta_i.
        inter = []
        for i in range(h):
            a, b, ang = x[2 * i], x[2 * i + 1], m * thetas[i]
            inter += [a * sp.cos(ang) - b * sp.sin(ang), a * sp.sin(ang) + b * sp.cos(ang)]
        inter = sp.Matrix(inter)
        R_half, R_inter = half.jacobian(x), inter.jacobian(x)
        P = pairing_permutation(d) if self.permutation == "pairing" else sp.eye(d)
        steps = [
            ("$R_{\\mathrm{half}}(m)$ (from x cos + rotate_half(x) sin)", R_half),
            ("$R_{\\mathrm{interleaved}}(m)$ (pairs 2i, 2i+1)", R_inter),
            ("the permutation $P$", P),
            ("$P R_{\\mathrm{interleaved}}(m) P^\\top$", P * R_inter * P.T),
        ]
        claims = [
            Claim("$P^\\top P = I$ (P is a permutation)", P.T * P, sp.eye(d)),
            Claim(
                "$P R_{\\mathrm{interleaved}} P^\\top = R_{\\mathrm{half}}$",
                P * R_inter * P.T,
                R_half,
            ),
        ]
        return claims, steps


class AxialRope2D(Identity):
    """2D axial RoPE is relative in both coordinates (Heo et al. 2024, arXiv:2403.13298, §3.2).

    Half the pairs rotate with the x coordinate, half with the y coordinate.
    ``offset_sign=-1`` builds the broken variant R(x1 - x2, y1 - y2).
    """

    key = "axial_rope_2d"
    title = "2D axial RoPE is relative in both coordinates"
    source = "Heo et al. 2024, arXiv:2403.13298, §3.2 (RoPE-Axial)"
    claim_latex = (
        r"\langle R(x_1,y_1)\,q,\ R(x_2,y_2)\,k\rangle = "
        r"\langle q,\ R(x_2-x_1,\ y_2-y_1)\,k\rangle"
    )
    statement = (
        "For image patches at $(x_1, y_1)$ and $(x_2, y_2)$, rotating one block of pairs by "
        "$x\\theta_x$ and another by $y\\theta_y$ gives a score that depends only on the "
        "displacement $(x_2-x_1,\\ y_2-y_1)$."
    )
    explanation = (
        "The rotation is block-diagonal with an x-block and a y-block; each block is a 1D "
        "RoPE in its own coordinate, so each is relative in its coordinate. The score is a "
        "sum over blocks, hence it sees the two offsets separately (axial RoPE cannot mix "
        "them, e.g. it has no notion of a diagonal direction beyond that sum)."
    )

    def __init__(self, offset_sign: int = 1):
        super().__init__()
        self.offset_sign = _check_sign("offset_sign", offset_sign)

    def _build(self):
        x1, y1, x2, y2, a, b = sp.symbols("x_1 y_1 x_2 y_2 a b", real=True)
        tx, ty = sp.symbols("theta_x theta_y", positive=True)
        q, k = vec("q", 4), vec("k", 4)

        def R(x, y):
            return block_diag(rot2(x * tx), rot2(y * ty))

        lhs = dot(R(x1, y1) * q, R(x2, y2) * k)
        s = self.offset_sign
        rhs = dot(q, R(s * (x2 - x1), s * (y2 - y1)) * k)
        shifted = lhs.subs({x2: x1 + a, y2: y1 + b})
        steps = [
            ("$R(x, y)$", R(sp.Symbol("x", real=True), sp.Symbol("y", real=True))),
            ("the score with $x_2 = x_1 + a,\\ y_2 = y_1 + b$", shifted),
        ]
        claims = [
            Claim("the score equals $\\langle q, R(\\Delta x, \\Delta y) k\\rangle$", lhs, rhs),
            Claim("it does not change with $x_1$ at fixed offsets", sp.diff(shifted, x1), 0),
            Claim("it does not change with $y_1$ at fixed offsets", sp.diff(shifted, y1), 0),
        ]
        return claims, steps


class XposDecay(Identity):
    """xPos: zeta^m on queries and zeta^-n on keys leave the factor zeta^(m-n) (arXiv:2212.10554, §3.2).

    ``key_exponent_sign=+1`` builds the broken variant (zeta^+n on keys), whose factor
    zeta^(m+n) is not relative.
    """

    key = "xpos_decay"
    title = "xPos: the decay factor is relative, and needs a causal mask"
    source = (
        "Sun et al. 2022, 'A Length-Extrapolatable Transformer', arXiv:2212.10554, §3.2 "
        "(f_q, f_k with zeta^(n/gamma) and zeta^(-n/gamma))"
    )
    claim_latex = (
        r"\langle \zeta^{m} R(m)\,q,\ \zeta^{-n} R(n)\,k\rangle = "
        r"\zeta^{\,m-n}\,\langle q,\ R(n-m)\,k\rangle"
    )
    statement = (
        "xPos multiplies the rotated query at position $m$ by $\\zeta^m$ and the rotated key "
        "at position $n$ by $\\zeta^{-n}$ (with $0<\\zeta<1$). The score keeps RoPE's relative "
        "rotation and gains the factor $\\zeta^{m-n}$, which also depends on the offset only."
    )
    explanation = (
        "With a causal mask every key is at or before its query ($m \\ge n$), so "
        "$\\zeta^{m-n} \\le 1$ and the factor decays with distance, as intended. Without "
        "the mask a key $g$ steps *after* the query gets $\\zeta^{-g} = (1+\\varepsilon)^g$ "
        "(writing $\\zeta = 1/(1+\\varepsilon)$), which grows without bound: xPos is only "
        "defined for causal (decoder) attention. (The paper also divides the exponent by a "
        "scale $\\gamma$ and uses one $\\zeta_i$ per pair; neither changes the algebra.)"
    )

    def __init__(self, key_exponent_sign: int = -1):
        super().__init__()
        self.key_exponent_sign = _check_sign("key_exponent_sign", key_exponent_sign)

    def _build(self):
        m, n = sp.symbols("m n", real=True)
        zeta = sp.Symbol("zeta", positive=True)
        theta = sp.Symbol("theta", positive=True)
        q, k = vec("q", 2), vec("k", 2)
        qx = zeta**m * rot2(m * theta) * q
        kx = zeta ** (self.key_exponent_sign * n) * rot2(n * theta) * k
        lhs = dot(qx, kx)
        rhs = zeta ** (m - n) * dot(q, rot2((n - m) * theta) * k)
        # The factor for a key before the query (gap g = m - n >= 0) and after it (n - m = g).
        eps = sp.Symbol("varepsilon", positive=True)
        g = sp.Symbol("g", nonnegative=True)
        factor = zeta ** (m - n)
        before = factor.subs({zeta: 1 / (1 + eps), m: n + g})
        after = factor.subs({zeta: 1 / (1 + eps), n: m + g})
        steps = [
            ("the xPos score", lhs),
            (
                "the factor for a key $g$ steps before the query ($\\zeta = 1/(1+\\varepsilon)$)",
                sp.powsimp(before),
            ),
            ("the factor for a key $g$ steps after the query", sp.powsimp(after)),
            (
                "as $g \\to \\infty$ for a key after the query",
                sp.Limit(sp.powsimp(after), g, sp.oo),
            ),
        ]
        claims = [
            Claim("score = $\\zeta^{m-n} \\langle q, R(n-m) k\\rangle$", lhs, rhs),
            Claim(
                "causal ($m \\ge n$): $\\log \\zeta^{m-n} \\le 0$, the factor is at most 1",
                sp.expand_log(sp.log(before), force=True),
                0,
                relation="<=",
            ),
            Claim(
                "a key after the query: the factor grows without bound",
                sp.Limit(sp.powsimp(after), g, sp.oo),
                sp.oo,
            ),
        ]
        return claims, steps


class VoRope(Identity):
    """VO-RoPE / RoPER: rotate values by key position, outputs back by the query position.

    o_i = R(i)^{-1} sum_j a_ij R(j) v_j = sum_j a_ij R(j - i) v_j, proved for two keys and
    one 2x2 block. ``output_sign=+1`` builds the broken variant R(i) (forgetting the inverse).
    Sources: J. Su, "VO-RoPE" (kexue.fm blog, 2025); the RoPER note by labml.ai (2022),
    "Rotary Positional Embeddings with Relative distances".
    """

    key = "vo_rope"
    title = "VO-RoPE: rotating values and un-rotating outputs is relative"
    source = "J. Su, 'VO-RoPE' (kexue.fm, 2025); labml.ai RoPER note (2022)"
    claim_latex = r"R(i)^{-1}\sum_j a_{ij}\,R(j)\,v_j = \sum_j a_{ij}\,R(j-i)\,v_j"
    statement = (
        "Rotate each value by its own position $j$, mix them with the attention weights "
        "$a_{ij}$, then rotate the output back by the query position $i$: every value "
        "arrives rotated by the offset $j - i$ only."
    )
    explanation = (
        "$R(i)^{-1}R(j) = R(j-i)$ and the attention mix is linear, so the inverse rotation "
        "passes through the sum. Position enters at the fourth place (values and outputs), "
        "and the weights $a_{ij}$ are untouched: they may come from any score."
    )

    def __init__(self, output_sign: int = -1):
        super().__init__()
        self.output_sign = _check_sign("output_sign", output_sign)

    def _build(self):
        i, j1, j2 = sp.symbols("i j_1 j_2", real=True)
        a1, a2 = sp.symbols("a_1 a_2", real=True)
        theta = sp.Symbol("theta", positive=True)
        v1, v2 = vec("v_1", 2), vec("v_2", 2)
        mixed = a1 * rot2(j1 * theta) * v1 + a2 * rot2(j2 * theta) * v2
        out = rot2(self.output_sign * i * theta) * mixed
        rhs = a1 * rot2((j1 - i) * theta) * v1 + a2 * rot2((j2 - i) * theta) * v2
        steps = [
            ("values rotated by their positions, mixed", mixed),
            ("the output rotated back by $R(i)^{-1} = R(-i)$", out),
            ("the claimed relative form", rhs),
        ]
        claims = [
            Claim(
                "$R(-i) R(j) = R(j - i)$",
                rot2(-i * theta) * rot2(j1 * theta),
                rot2((j1 - i) * theta),
            ),
            Claim("the output is $\\sum_j a_{ij} R(j-i) v_j$", out, rhs),
        ]
        return claims, steps
