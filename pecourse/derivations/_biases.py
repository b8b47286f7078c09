"""Score biases that depend on the offset only: ALiBi, T5 buckets, Shaw's clipped distance.

A bias b(i, j) added to the logit of query i and key j is *Toeplitz* when it depends on
j - i only, i.e. b(i + D, j + D) = b(i, j) for every shift D. Sympy proves it with i, j and
D symbolic, the slope symbolic, T5's bucket and embedding as undefined functions, and
Shaw's clipping written with Min/Max.
"""

from __future__ import annotations

import sympy as sp

from ._identity import Claim, Identity

__all__ = ["ToeplitzBias", "bias_function"]

_KINDS = ("alibi", "t5", "shaw", "bloom_key_index")


def bias_function(kind: str):
    """The bias b(i, j) of one scheme, as a Python function of sympy expressions.

    - ``alibi``: -m |i - j| (Press et al. 2022, arXiv:2108.12409, §3; causal: -m (i - j));
    - ``t5``: beta(bucket(j - i)), T5's ``relative_position = key - query`` fed to a bucket
      function and a learned scalar per bucket (Raffel et al. 2020, arXiv:1910.10683, §2.1);
    - ``shaw``: w(clip(j - i, k)) with clip(x, k) = max(-k, min(k, x)) (Shaw et al. 2018,
      arXiv:1803.02155, §3.2);
    - ``bloom_key_index``: m j, BLOOM's shortcut, which is *not* Toeplitz (it only matches
      ALiBi inside a softmax under a causal mask: see ``bloom_alibi_equivalence``).
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {', '.join(map(repr, _KINDS))}; got {kind!r}")
    m = sp.Symbol("m", positive=True)
    k = sp.Symbol("k", positive=True, integer=True)
    if kind == "alibi":
        return lambda i, j: -m * sp.Abs(i - j)
    if kind == "t5":
        bucket, beta = sp.Function("bucket"), sp.Function("beta")
        return lambda i, j: beta(bucket(j - i))
    if kind == "shaw":
        w = sp.Function("w")
        return lambda i, j: w(sp.Max(-k, sp.Min(k, j - i)))
    return lambda i, j: m * j


_TEXT = {
    "alibi": (
        "ALiBi's bias is Toeplitz",
        "Press et al. 2022, arXiv:2108.12409, §3 (bias -m (i - j), one slope m per head)",
        r"-m\,|(i+\Delta)-(j+\Delta)| = -m\,|i-j|",
        "ALiBi subtracts slope times distance from each logit. The distance between query "
        "and key is unchanged when both move by the same amount, so the bias is the same "
        "along every diagonal of the score matrix.",
    ),
    "t5": (
        "T5's bucketed bias is Toeplitz",
        "Raffel et al. 2020, arXiv:1910.10683, §2.1 (relative position buckets)",
        r"\beta(\mathrm{bucket}((j+\Delta)-(i+\Delta))) = \beta(\mathrm{bucket}(j-i))",
        "T5 maps the signed offset $j-i$ to one of a few buckets (exact for small offsets, "
        "logarithmic for large ones) and adds a learned scalar per bucket and head. Whatever "
        "the bucket function is, it only ever sees $j-i$.",
    ),
    "shaw": (
        "Shaw et al.'s clipped relative positions are Toeplitz",
        "Shaw et al. 2018, arXiv:1803.02155, §3.2 (a_ij = w_clip(j-i, k))",
        r"w(\mathrm{clip}((j+\Delta)-(i+\Delta), k)) = w(\mathrm{clip}(j-i, k))",
        "Shaw et al. learn one vector per offset and clip offsets beyond $\\pm k$ to the "
        "last learned one. The clipped offset is a function of $j-i$ only.",
    ),
    "bloom_key_index": (
        "BLOOM's key-index bias m j is NOT Toeplitz",
        "BLOOM, arXiv:2211.05100 (build_alibi_tensor adds slope * key index)",
        r"m\,(j+\Delta) \neq m\,j",
        "The key-index form changes by $m\\Delta$ under a shift. It still gives ALiBi's "
        "attention weights, but only because softmax ignores the row constant $m i$ under a "
        "causal mask.",
    ),
}


class ToeplitzBias(Identity):
    """b(i + D, j + D) = b(i, j): the bias depends on j - i only (see :func:`bias_function`).

    ``kind`` is ``"alibi"``, ``"t5"`` or ``"shaw"``; ``"bloom_key_index"`` (m j) is the
    broken variant whose :meth:`check` is False.
    """

    def __init__(self, kind: str = "alibi"):
        super().__init__()
        self.bias = bias_function(kind)
        self.kind = kind
        self.title, self.source, self.claim_latex, self.explanation = _TEXT[kind]
        self.key = f"{kind}_toeplitz"
        self.statement = (
            "A bias is *Toeplitz* (constant along each diagonal of the score matrix) when "
            "moving query and key by the same shift $\\Delta$ leaves it unchanged: then it "
            "depends on the offset $j - i$ only, and the model is translation-invariant."
        )

    def _build(self):
        i, j, delta, r = sp.symbols("i j Delta r", integer=True)
        b = self.bias
        shifted, plain = b(i + delta, j + delta), b(i, j)
        as_offset = b(i, i + r)
        steps = [
            ("the bias $b(i, j)$", plain),
            (
                "the bias after shifting both positions by $\\Delta$ (the shift cancels in $j-i$)",
                shifted,
            ),
            ("written with the offset $r = j - i$", as_offset),
        ]
        claims = [
            Claim("$b(i+\\Delta, j+\\Delta) = b(i, j)$", shifted, plain),
            Claim("with $j = i + r$ the bias is free of $i$", as_offset, (i,), relation="free of"),
        ]
        return claims, steps
