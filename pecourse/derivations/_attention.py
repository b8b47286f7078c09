"""Attention without positions, and softmax's blindness to per-row constants.

Scaled dot-product attention, Vaswani et al. 2017 (arXiv:1706.03762), eq. 1:
``Attn(X) = softmax(X W_q (X W_k)^T / sqrt(d)) X W_v``. The examples are small (three tokens,
two features) with every entry symbolic, so sympy handles them in well under a second.
"""

from __future__ import annotations

import itertools

import sympy as sp

from ._identity import Claim, Identity

__all__ = [
    "attention",
    "PermutationEquivariance",
    "CausalMaskBreaksEquivariance",
    "SoftmaxShiftInvariance",
    "BloomAlibiEquivalence",
]

_TOKENS, _FEATURES = 3, 2


def attention(X, Wq, Wk, Wv, causal: bool = False):
    """Single-head attention of the rows of ``X`` (arXiv:1706.03762, eq. 1), symbolically.

    With ``causal=True`` row i only attends to rows j <= i (the -inf mask, written as a
    softmax over the allowed keys only).
    """
    Q, K, V = X * Wq, X * Wk, X * Wv
    d = X.shape[1]
    S = Q * K.T / sp.sqrt(d)
    n = X.shape[0]
    rows = []
    for i in range(n):
        keys = range(i + 1) if causal else range(n)
        weights = [sp.exp(S[i, j]) for j in keys]
        total = sp.Add(*weights)
        rows.append(
            sum((w / total * V[j, :] for w, j in zip(weights, keys)), sp.zeros(1, V.shape[1]))
        )
    return sp.Matrix.vstack(*rows)


def _score_level_steps(P, causal: bool):
    """Readable steps: row 0 of both sides written with scores s_ij and value rows v_j."""
    n = P.shape[0]
    S = sp.Matrix(n, n, lambda i, j: sp.Symbol(f"s_{i}{j}", real=True))
    v = sp.Matrix(n, 1, lambda i, j: sp.Symbol(f"v_{i}", real=True))

    def row(scores, values, i):
        keys = range(i + 1) if causal else range(n)
        total = sp.Add(*[sp.exp(scores[i, j]) for j in keys])
        return sp.Add(*[sp.exp(scores[i, j]) * values[j] for j in keys]) / total

    perm = [list(P.row(i)).index(1) for i in range(n)]
    name = "\\mathrm{Attn}_{\\mathrm{causal}}" if causal else "\\mathrm{Attn}"
    return [
        ("the scores of $PX$ are $P S P^\\top$ (rows and columns permuted)", P * S * P.T),
        (
            f"row 0 of ${name}(PX)$, with scores $s_{{ij}}$ and values $v_j$",
            row(P * S * P.T, P * v, 0),
        ),
        (f"row 0 of $P\\,{name}(X)$ = row {perm[0]} of ${name}(X)$", row(S, v, perm[0])),
    ]


def _permutation_matrix(perm):
    n = len(perm)
    P = sp.zeros(n, n)
    for i, p in enumerate(perm):
        P[i, p] = 1  # (P X)[i] = X[perm[i]]
    return P


def _inputs():
    X = sp.Matrix(_TOKENS, _FEATURES, lambda i, j: sp.Symbol(f"x_{i}{j}", real=True))
    Wq, Wk, Wv = (
        sp.Matrix(_FEATURES, _FEATURES, lambda i, j, c=c: sp.Symbol(f"{c}_{i}{j}", real=True))
        for c in ("a", "b", "c")
    )
    return X, Wq, Wk, Wv


class PermutationEquivariance(Identity):
    """Attn(P X) = P Attn(X) for every permutation P of 3 tokens (arXiv:1706.03762, eq. 1).

    Proved for all 3! permutations with symbolic inputs and weights. ``causal=True`` or
    ``positions=True`` (an absolute position vector p_i added to token i) build variants
    that are *not* equivariant, so their :meth:`check` is False.
    """

    key = "attention_permutation_equivariance"
    title = "Attention without positions is permutation-equivariant"
    source = "Vaswani et al. 2017, arXiv:1706.03762, eq. 1 (scaled dot-product attention)"
    claim_latex = (
        r"\operatorname{Attn}(PX) = P\,\operatorname{Attn}(X)\quad\text{for every permutation } P"
    )
    statement = (
        "Shuffle the tokens and attention returns the same outputs, shuffled the same way. "
        "Without a positional signal a transformer layer cannot know the order of its input; "
        "it sees a set (a bag of tokens)."
    )
    explanation = (
        "Permuting the rows of $X$ permutes the rows of $Q$, $K$ and $V$; the score matrix "
        "becomes $P S P^\\top$, the row-wise softmax commutes with that relabelling, and "
        "$P A P^\\top P V = P A V$. This is why a model needs a positional signal (or a causal "
        "mask, which breaks the symmetry: see `causal_mask_breaks_equivariance`)."
    )

    def __init__(self, causal: bool = False, positions: bool = False):
        super().__init__()
        self.causal = bool(causal)
        self.positions = bool(positions)

    def _build(self):
        X, Wq, Wk, Wv = _inputs()
        if self.positions:
            Pos = sp.Matrix(_TOKENS, _FEATURES, lambda i, j: sp.Symbol(f"p_{i}{j}", real=True))

            def attn(Z):
                return attention(Z + Pos, Wq, Wk, Wv, self.causal)
        else:

            def attn(Z):
                return attention(Z, Wq, Wk, Wv, self.causal)

        base = attn(X)
        P = _permutation_matrix((1, 2, 0))
        S = X * Wq * (X * Wk).T
        claims = [
            Claim("scores of $PX$ are $P S P^\\top$", P * X * Wq * (P * X * Wk).T, P * S * P.T)
        ]
        for perm in itertools.permutations(range(_TOKENS)):
            if perm == tuple(range(_TOKENS)):
                continue
            Pk = _permutation_matrix(perm)
            caption = f"$\\mathrm{{Attn}}(PX) = P\\,\\mathrm{{Attn}}(X)$ for the permutation {perm}"
            claims.append(Claim(caption, attn(Pk * X), Pk * base))
        steps = [("the input $X$ (3 tokens, 2 features)", X), ("a permutation $P$", P)]
        steps += _score_level_steps(P, self.causal)
        return claims, steps


class CausalMaskBreaksEquivariance(Identity):
    """With a causal mask, Attn(P X) != P Attn(X) for the swap of the first two tokens.

    The proof is a counterexample: with W_q = W_k = 0 (uniform weights), W_v = I and
    distinct token rows, the two sides differ by an exact non-zero number. Vaswani et al.
    2017, arXiv:1706.03762, §3.2.3 (masking in the decoder).
    """

    key = "causal_mask_breaks_equivariance"
    title = "A causal mask breaks permutation equivariance"
    source = "Vaswani et al. 2017, arXiv:1706.03762, §3.2.3 (decoder masking); Haviv et al. 2022, arXiv:2203.16634"
    claim_latex = (
        r"\operatorname{Attn}_{\text{causal}}(PX) \neq P\,\operatorname{Attn}_{\text{causal}}(X)"
    )
    statement = (
        "A causal mask lets token $i$ see only tokens $j \\le i$. Shuffling the input changes "
        "who can see whom, so the outputs are no longer a shuffle of the old outputs: the mask "
        "itself carries order information."
    )
    explanation = (
        "Swap the first two tokens. Originally the first output is $v_0$ (token 0 sees only "
        "itself); after the swap it is $v_1$, while the swapped old output is token 1's mix "
        "of $v_0$ and $v_1$. This is the reason NoPE decoders can still learn positions "
        "(Haviv et al. 2022): the mask breaks the symmetry that positional encodings "
        "otherwise have to break."
    )

    def _build(self):
        X, Wq, Wk, Wv = _inputs()
        P = _permutation_matrix((1, 0, 2))
        lhs = attention(P * X, Wq, Wk, Wv, causal=True)
        rhs = P * attention(X, Wq, Wk, Wv, causal=True)
        # A counterexample: uniform attention, identity values, distinct token rows.
        witness = {s: 0 for s in Wq.free_symbols | Wk.free_symbols}
        witness.update({Wv[i, j]: int(i == j) for i in range(_FEATURES) for j in range(_FEATURES)})
        witness.update(
            {X[i, j]: i * _FEATURES + j + 1 for i in range(_TOKENS) for j in range(_FEATURES)}
        )
        steps = [("the permutation $P$ (swap tokens 0 and 1)", P)]
        steps += _score_level_steps(P, causal=True)
        steps.append(
            ("the difference of the two sides at the counterexample", (lhs - rhs).subs(witness))
        )
        claims = [
            Claim(
                "$\\mathrm{Attn}_{\\mathrm{causal}}(PX) \\neq P\\,\\mathrm{Attn}_{\\mathrm{causal}}(X)$",
                lhs,
                rhs,
                relation="!=",
                witness=witness,
            )
        ]
        return claims, steps


def _softmax(xs):
    total = sp.Add(*[sp.exp(x) for x in xs])
    return sp.Matrix([sp.exp(x) / total for x in xs])


class SoftmaxShiftInvariance(Identity):
    """softmax(x + c 1) = softmax(x), for a row of 3 symbolic logits and a symbolic c.

    ``per_key=True`` builds the broken variant: a different constant c_j per key.
    Press et al. 2022 (ALiBi), arXiv:2108.12409, §3 rely on it for the causal bias.
    """

    key = "softmax_shift_invariance"
    title = "Softmax ignores a constant added to a whole row"
    source = "Softmax definition; used by Press et al. 2022 (ALiBi), arXiv:2108.12409, §3"
    claim_latex = r"\operatorname{softmax}(x + c\,\mathbf{1}) = \operatorname{softmax}(x)"
    statement = (
        "Adding the same number to every logit of a row does not change the attention "
        "weights of that row."
    )
    explanation = (
        "$e^{x_j + c} = e^c e^{x_j}$, and the common factor $e^c$ cancels between numerator "
        "and denominator. A bias that varies *across keys* does change the weights: only "
        "row-constant terms are invisible."
    )

    def __init__(self, per_key: bool = False):
        super().__init__()
        self.per_key = bool(per_key)

    def _build(self):
        xs = sp.symbols("x_0:3", real=True)
        if self.per_key:
            cs = sp.symbols("c_0:3", real=True)
        else:
            cs = (sp.Symbol("c", real=True),) * 3
        shifted = _softmax([x + c for x, c in zip(xs, cs)])
        plain = _softmax(xs)
        steps = [("softmax of the shifted row", shifted), ("softmax of the row", plain)]
        claims = [Claim("softmax(x + c) = softmax(x)", shifted, plain)]
        return claims, steps


class BloomAlibiEquivalence(Identity):
    """BLOOM's key-index bias m*j equals ALiBi's -m|i - j| inside a causal row.

    They differ by m*i, constant along the row, so the softmax is the same. Proved for the
    row i = 2 of a 3-key causal window with symbolic scores s_j and slope m, plus the general
    fact d/dj (m j - m (j - i)) = 0. ``causal=False`` builds the broken variant (row 1 of a
    3-key *bidirectional* window, where key 2 lies after the query). Press et al. 2022,
    arXiv:2108.12409, §3 and Figure 3; BigScience BLOOM (arXiv:2211.05100).
    """

    key = "bloom_alibi_equivalence"
    title = "BLOOM's ALiBi (m j) equals the distance form under a causal mask"
    source = "Press et al. 2022, arXiv:2108.12409, §3; BLOOM, arXiv:2211.05100 (build_alibi_tensor)"
    claim_latex = (
        r"\operatorname{softmax}_{j\le i}(s_j + m\,j) = "
        r"\operatorname{softmax}_{j\le i}(s_j - m\,|i-j|)"
    )
    statement = (
        "BLOOM adds $m\\cdot j$ (slope times *key index*) to the logits instead of ALiBi's "
        "$-m\\,|i-j|$. Inside a causal row ($j \\le i$) the two differ by $m\\cdot i$, which "
        "is the same for every key of the row, so the attention weights are identical."
    )
    explanation = (
        "For $j \\le i$: $m j - (-m(i-j)) = m i$, a row constant, and softmax ignores row "
        "constants. Without the causal mask the keys after the query get $+m(j-i)$ from the "
        "key-index form but $-m(j-i)$ from the distance form: the shortcut only works for "
        "decoders."
    )

    def __init__(self, causal: bool = True):
        super().__init__()
        self.causal = bool(causal)

    def _build(self):
        m = sp.Symbol("m", positive=True)
        s = sp.symbols("s_0:3", real=True)
        i_sym, j_sym = sp.symbols("i j", integer=True)
        i, keys = (2 if self.causal else 1), range(3)  # the query's row of a 3-key window
        bloom = _softmax([s[j] + m * j for j in keys])
        alibi = _softmax([s[j] - m * sp.Abs(i - j) for j in keys])
        diff = m * j_sym - (-m * (i_sym - j_sym))
        steps = [
            ("bias difference for $j \\le i$: $m j - (-m(i-j))$", sp.expand(diff)),
            (f"weights with BLOOM's bias (row i = {i})", bloom),
            ("weights with ALiBi's distance bias", alibi),
        ]
        claims = [
            Claim("$m j + m(i - j)$ does not depend on $j$", sp.diff(diff, j_sym), 0),
            Claim(f"row {i}: softmax(s + m j) = softmax(s - m|i - j|)", bloom, alibi),
        ]
        return claims, steps
