"""The base class of every derivation: claims that sympy proves, and steps worth seeing.

An :class:`Identity` holds one or more :class:`Claim` objects (``lhs = rhs``, ``lhs != rhs``,
``lhs <= rhs`` or "``lhs`` is free of these symbols") and a list of ``(caption, expression)``
steps that a notebook displays. :meth:`Identity.check` returns ``True`` only when sympy
*proves* every claim for symbolic positions and frequencies:

- ``=``: the difference simplifies to exactly zero (entry by entry for matrices);
- ``!=``: a witness substitution turns the difference into an exact, non-zero number — a
  counterexample, which is a proof that the two sides are not the same function;
- ``<=``: sympy's assumption system decides that ``lhs - rhs`` is non-positive;
- ``free of``: the expression contains none of the given symbols.

No claim is ever "checked" by sampling floating-point numbers.

The sympy objects are built lazily, on first access, so that importing
:mod:`pecourse.derivations` stays cheap.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import sympy as sp

__all__ = [
    "Claim",
    "Identity",
    "is_zero",
    "rot2",
    "block_diag",
    "vec",
    "dot",
    "caption_latex",
]

_RELATIONS = ("=", "!=", "<=", "free of")


@dataclass(frozen=True)
class Claim:
    """One statement that sympy must prove.

    ``relation`` is one of ``"="``, ``"!="``, ``"<="`` or ``"free of"``. For ``"!="``,
    ``witness`` is a substitution (symbol -> exact value) under which ``lhs - rhs`` becomes
    an exact non-zero number. For ``"free of"``, ``rhs`` is a tuple of symbols that ``lhs``
    must not contain.
    """

    caption: str
    lhs: object
    rhs: object
    relation: str = "="
    witness: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.relation not in _RELATIONS:
            accepted = ", ".join(repr(r) for r in _RELATIONS)
            raise ValueError(f"relation must be one of {accepted}; got {self.relation!r}")
        if self.relation == "!=" and not self.witness:
            raise ValueError("relation '!=' needs a witness substitution (a counterexample)")
        # Symbols sorted by name, so a printed counterexample reads the same in every run
        # (the substitution is built from sets, whose order changes between processes).
        object.__setattr__(
            self, "witness", dict(sorted(self.witness.items(), key=lambda kv: str(kv[0])))
        )

    def prove(self) -> bool:
        """True only when sympy proves the claim (see the module docstring)."""
        # Unevaluated Subs/Limit/Derivative objects (kept for display) are evaluated here.
        lhs, rhs = _doit(self.lhs), _doit(self.rhs)
        if self.relation == "=":
            return is_equal(lhs, rhs)
        if self.relation == "!=":
            return _witness_differs(lhs, rhs, self.witness)
        if self.relation == "<=":
            diff = sp.sympify(lhs - rhs)
            return diff.is_nonpositive is True or sp.simplify(diff).is_nonpositive is True
        symbols = set(rhs)
        return not (_free_symbols(lhs) & symbols)

    def latex(self) -> str:
        """``lhs <relation> rhs`` in LaTeX."""
        lhs = sp.latex(self.lhs)
        if self.relation == "free of":
            names = ", ".join(sp.latex(s) for s in self.rhs)
            return rf"{lhs} \quad \text{{contains none of }} {names}"
        op = {"=": "=", "!=": r"\neq", "<=": r"\leq"}[self.relation]
        return f"{lhs} {op} {sp.latex(self.rhs)}"


# ----------------------------------------------------------------------------------------
# Proving helpers
# ----------------------------------------------------------------------------------------


def _doit(expr):
    if isinstance(expr, (tuple, list)):
        return expr
    expr = expr if isinstance(expr, sp.MatrixBase) else sp.sympify(expr)
    return expr.doit()


def _entries(expr):
    if isinstance(expr, sp.MatrixBase):
        return list(expr)
    return [sp.sympify(expr)]


def _free_symbols(expr):
    out = set()
    for e in _entries(expr):
        out |= e.free_symbols
    return out


def _scalar_is_zero(e) -> bool:
    """Try cheap rewrites first, then ``simplify``; True only for an exact zero."""
    e = sp.sympify(e)
    if e == 0:
        return True
    # If the expression is clearly non-zero at one exact point (evaluated to 60 digits), it
    # is not identically zero and there is nothing to prove. This can only ever make
    # ``check`` answer False sooner, never True.
    if _clearly_nonzero(e):
        return False
    # Expand products and trigonometric functions of sums: cos(w (t + D)) -> ...
    e = sp.expand(e, trig=True)
    if e == 0:
        return True
    # Rational functions of exponentials (softmax): put over one denominator, cancel.
    e = sp.cancel(sp.together(sp.expand(e, power_exp=True)))
    if e == 0:
        return True
    e = sp.simplify(e)
    return e == 0


def _clearly_nonzero(e) -> bool:
    symbols = sorted(e.free_symbols, key=lambda s: s.name)
    # Small distinct positive rationals respect positive/real/integer-free assumptions.
    point = {s: sp.Rational(2 * k + 3, 7 + k) for k, s in enumerate(symbols)}
    if any(s.is_integer for s in symbols):
        point = {s: (k + 2 if s.is_integer else v) for k, (s, v) in enumerate(point.items())}
    try:
        value = sp.N(e.subs(point), 60)
    except (TypeError, ValueError, ZeroDivisionError):  # pragma: no cover - defensive
        return False
    if not value.is_number or value.has(sp.nan, sp.zoo, sp.oo, -sp.oo):
        return False
    return abs(complex(value)) > 1e-30


def is_zero(expr) -> bool:
    """True when every entry of ``expr`` simplifies to exactly zero."""
    return all(_scalar_is_zero(e) for e in _entries(expr))


def is_equal(lhs, rhs) -> bool:
    """True when ``lhs`` and ``rhs`` are the same expression (or matrix) after simplification."""
    if isinstance(lhs, sp.MatrixBase) or isinstance(rhs, sp.MatrixBase):
        lhs, rhs = sp.Matrix(lhs), sp.Matrix(rhs)
        if lhs.shape != rhs.shape:
            return False
        return is_zero(lhs - rhs)
    lhs, rhs = sp.sympify(lhs), sp.sympify(rhs)
    if lhs == rhs:  # e.g. both are oo, where the difference would be nan
        return True
    if lhs.has(sp.oo, -sp.oo, sp.zoo, sp.nan) or rhs.has(sp.oo, -sp.oo, sp.zoo, sp.nan):
        return False
    return is_zero(lhs - rhs)


def _witness_differs(lhs, rhs, witness) -> bool:
    """True when the witness makes ``lhs - rhs`` an exact non-zero number (a counterexample)."""
    if isinstance(lhs, sp.MatrixBase) or isinstance(rhs, sp.MatrixBase):
        diff = sp.Matrix(lhs) - sp.Matrix(rhs)
    else:
        diff = sp.sympify(lhs) - sp.sympify(rhs)
    values = [sp.simplify(e.subs(witness)) for e in _entries(diff)]
    if any(not v.is_number or v.has(sp.Float) for v in values):
        return False  # the witness must pin every symbol to an exact value
    return any(v.is_zero is False for v in values)


# ----------------------------------------------------------------------------------------
# Building blocks shared by the identity modules
# ----------------------------------------------------------------------------------------


def rot2(angle):
    """The 2x2 rotation by ``angle``: [[cos, -sin], [sin, cos]] (RoFormer, arXiv:2104.09864, eq. 13)."""
    return sp.Matrix([[sp.cos(angle), -sp.sin(angle)], [sp.sin(angle), sp.cos(angle)]])


def block_diag(*blocks):
    """Block-diagonal matrix of sympy blocks."""
    return sp.Matrix(sp.diag(*blocks))


def vec(name: str, n: int, **assumptions):
    """A column vector of ``n`` real symbols ``name_0 .. name_{n-1}``."""
    assumptions.setdefault("real", True)
    return sp.Matrix(sp.symbols(f"{name}_0:{n}", **assumptions))


def dot(a, b):
    """The inner product of two column vectors as a scalar expression."""
    return (sp.Matrix(a).T * sp.Matrix(b))[0, 0]


def caption_latex(caption: str) -> str:
    """A caption as LaTeX: text outside ``$...$`` goes in ``\\text{}``, math inside stays."""
    parts = caption.split("$")
    if len(parts) % 2 == 0:  # unbalanced dollars: treat the whole caption as text
        parts = [caption.replace("$", "")]
    out = []
    for i, part in enumerate(parts):
        if not part:
            continue
        out.append(part if i % 2 else rf"\text{{{_escape_text(part)}}}")
    return " ".join(out)


_SMALL = 120  # claims with more expression nodes than this show their caption only


def _is_small(expr, limit: int = _SMALL) -> bool:
    """True when ``expr`` has at most ``limit`` nodes (stops counting early)."""
    if isinstance(expr, (tuple, list)):
        return True
    count = 0
    for e in _entries(expr):
        for _ in sp.preorder_traversal(e):
            count += 1
            if count > limit:
                return False
    return True


# LaTeX's special characters as \text{...} reads them.
_TEXT_ESCAPES = str.maketrans(
    {"\\": r"\textbackslash{}", "^": r"\^{}", "~": r"\~{}", **{c: "\\" + c for c in "{}_%&#$"}}
)


def _escape_text(s: str) -> str:
    """Escape a caption for ``\\text{...}``."""
    return s.translate(_TEXT_ESCAPES)


def _check_blocks(blocks) -> int:
    """The number of 2x2 blocks (pairs) an identity is proved for: at least 1."""
    if blocks < 1:
        raise ValueError(f"blocks must be >= 1, got {blocks}")
    return blocks


def _check_sign(name: str, value) -> int:
    """A sign knob (the broken variant flips it): 1 or -1."""
    if value not in (1, -1):
        raise ValueError(f"{name} must be 1 or -1, got {value!r}")
    return value


# ----------------------------------------------------------------------------------------
# The base class
# ----------------------------------------------------------------------------------------


class Identity:
    """A claim of the course, proved by sympy in front of the learner.

    Subclasses set the class attributes ``title``, ``source`` (paper, arXiv id, equation),
    ``claim_latex`` (the statement as a formula), ``statement`` and ``explanation``
    (Markdown paragraphs), and implement :meth:`_build`, which returns
    ``(claims, steps)``: a list of :class:`Claim` and a list of ``(caption, expression)``.

    Constructor parameters of a subclass are the knobs that build a *broken variant*
    (a wrong sign, a wrong exponent) whose :meth:`check` must come out ``False``.
    """

    key: str = ""
    title: str = ""
    source: str = ""
    claim_latex: str = ""
    statement: str = ""
    explanation: str = ""

    def __init__(self):
        self._built = None
        self._checked = None

    # -- subclasses implement -------------------------------------------------------------
    def _build(self):  # pragma: no cover - abstract
        """Return ``(claims, steps)``; every identity subclass defines it."""
        raise TypeError(f"{type(self).__name__} does not define _build(), so it proves nothing")

    def _params(self) -> dict:
        """Constructor parameters that differ from their defaults (shown in ``repr``): a
        subclass keeps each parameter as the attribute of the same name."""
        parameters = inspect.signature(type(self).__init__).parameters
        return {
            name: getattr(self, name)
            for name, p in parameters.items()
            if name != "self" and getattr(self, name) != p.default
        }

    # -- lazily built symbolic objects ---------------------------------------------------
    def _ensure(self):
        if self._built is None:
            claims, steps = self._build()
            self._built = (list(claims), list(steps))
        return self._built

    @property
    def claims(self) -> list[Claim]:
        """Every statement :meth:`check` proves; the first is the main one."""
        return self._ensure()[0]

    @property
    def steps(self) -> list[tuple[str, object]]:
        """``(caption, sympy expression)`` pairs worth showing, in reading order."""
        return self._ensure()[1]

    @property
    def lhs(self):
        """Left-hand side of the main claim."""
        return self.claims[0].lhs

    @property
    def rhs(self):
        """Right-hand side of the main claim."""
        return self.claims[0].rhs

    @property
    def relation(self) -> str:
        """Relation of the main claim: ``=``, ``!=``, ``<=`` or ``free of``."""
        return self.claims[0].relation

    # -- proof ---------------------------------------------------------------------------
    def _results(self) -> list[bool]:
        if self._checked is None:
            self._checked = [c.prove() for c in self.claims]
        return self._checked

    def check(self) -> bool:
        """True only when sympy proves every claim; cached after the first call."""
        return all(self._results())

    def failed_claims(self) -> list[str]:
        """Captions of the claims sympy could not prove (empty when :meth:`check` holds)."""
        return [c.caption for c, ok in zip(self.claims, self._results()) if not ok]

    # -- display -------------------------------------------------------------------------
    def latex(self) -> str:
        """A multi-line LaTeX ``aligned`` block: title, statement formula, claims, steps."""
        lines = [rf"&\textbf{{{_escape_text(self.title)}}}"]
        if self.claim_latex:
            lines.append(r"&\text{Claim:}\quad " + self.claim_latex)
        for caption, expr in self.steps:
            lines.append("&" + caption_latex(caption))
            lines.append(r"&\qquad " + sp.latex(expr))
        lines.append(r"&\textbf{What sympy proves:}")
        for claim in self.claims:
            lines.append(r"&\bullet\ " + caption_latex(claim.caption))
            if _is_small(claim.lhs) and _is_small(claim.rhs):
                lines.append(r"&\qquad " + claim.latex())
        body = r" \\" + "\n"
        return "\\begin{aligned}\n" + body.join(lines) + "\n\\end{aligned}"

    def _repr_latex_(self) -> str:
        return "$$" + self.latex() + "$$"

    def _repr_markdown_(self) -> str:
        parts = [f"**{self.title}**"]
        if self.statement:
            parts.append(self.statement)
        parts.append("$$\n" + self.latex() + "\n$$")
        if self.explanation:
            parts.append(self.explanation)
        if self.source:
            parts.append(f"*Source:* {self.source}")
        parts.append("Run `.check()` to have sympy prove it.")
        return "\n\n".join(parts)

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({params})  # {self.title}"
