"""Numbers and formulas as a card writes them, read back into values.

Two jobs, both for the deck's number checks (``checks.py``) and ``pecourse cards lint``:

- :func:`written_value` reads a number exactly as it stands in a card (``54{,}400``,
  ``2.70\\times 10^{4}``, ``1.139``, ``2^{-3.5}``, ``\\tfrac{1}{256}``, ``12.0\\%``) and
  returns its value with the tolerance its digits promise: half a unit in the last written
  digit, so ``1.139`` accepts 1.1385-1.1395 and nothing else.
- :func:`formula_to_sympy` reads the right-hand side of a card's LaTeX formula (a small,
  documented subset: fractions, powers, roots, ``\\ln``, floors, ceilings, implicit products)
  into a sympy expression, so a test can evaluate *the formula as printed* against the package.
- :func:`number_tokens` finds the numbers a card's text states, leaving out identifiers
  (``GPT-2``, ``bf16``, ``Llama 3.1``), citations (years, §, eq., chapter numbers) and indices.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

import sympy as sp
from sympy.parsing.sympy_parser import (
    convert_xor,
    implicit_multiplication_application,
    parse_expr,
    standard_transformations,
)

_THOUSANDS = re.compile(r"(?<=\d)(?:\\,|\{,\}|,|\u202f|\u2009)(?=\d{3}(?!\d))")
_DECIMAL = re.compile(r"^[+\-\u2212]?\d+(?:\.\d+)?$")


def normalise_digits(text: str) -> str:
    """Drop thousands separators (``54{,}400``, ``54\\,400``, ``54,400`` -> ``54400``)."""
    previous = None
    while previous != text:
        previous, text = text, _THOUSANDS.sub("", text)
    return text.replace("\u2212", "-")


def _unit_of_last_digit(digits: str) -> Decimal:
    exponent = Decimal(digits.lstrip("+-")).as_tuple().exponent
    return Decimal(1).scaleb(exponent)


def written_value(text: str, *, sig: int | None = None) -> tuple[float, float]:
    """``(value, absolute tolerance)`` of a number as written on a card.

    ``sig`` overrides the precision for integers whose trailing zeros are not significant
    (``54{,}400`` written for 54,410 needs ``sig=3``). Exact forms (powers, fractions) get a
    tolerance of 1e-12 relative.
    """
    raw = text
    s = normalise_digits(text).strip().strip("$").strip()
    s = re.sub(r"^(?:\\approx|≈|~|\\sim)\s*", "", s)
    percent = s.endswith("\\%") or s.endswith("%")
    s = s.removesuffix("\\%").removesuffix("%").strip()
    s = s.replace("{", "").replace("}", "") if re.fullmatch(r"[\d.\s{}+\-]*", s) else s
    m = re.fullmatch(r"([+\-]?\d+(?:\.\d+)?)\s*(?:\\times|×)\s*10\^\{?([+\-]?\d+)\}?", s)
    if m:
        mantissa, exponent = m.group(1), int(m.group(2))
        unit = float(_unit_of_last_digit(mantissa)) * 10.0**exponent
        return float(mantissa) * 10.0**exponent, unit / 2
    m = re.fullmatch(r"([+\-]?\d+(?:\.\d+)?)\^\{?([+\-]?\d+(?:\.\d+)?)\}?", s)
    if m:  # an exact power such as 2^{-3.5}
        value = float(m.group(1)) ** float(m.group(2))
        return value, abs(value) * 1e-12
    m = re.fullmatch(r"\\[dt]?frac\{?(\d+)\}?\{?(\d+)\}?|(\d+)/(\d+)", s)
    if m:
        num, den = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        value = int(num) / int(den)
        return value, abs(value) * 1e-12
    if not _DECIMAL.match(s):
        raise ValueError(f"cannot read {raw!r} as a written number")
    value = float(s)
    if sig is not None:
        if value == 0:
            raise ValueError(f"sig given for a zero in {raw!r}")
        unit = 10.0 ** (math.floor(math.log10(abs(value))) - sig + 1)
    else:
        unit = float(_unit_of_last_digit(s))
    scale = 0.01 if percent else 1.0
    return value * scale, unit / 2 * scale


# -- formulas --------------------------------------------------------------------------

_FUNCS = {r"\ln": "log", r"\log": "log", r"\exp": "exp", r"\cos": "cos", r"\sin": "sin",
          r"\min": "Min", r"\max": "Max"}  # fmt: skip
_TRANSFORMS = standard_transformations + (implicit_multiplication_application, convert_xor)


def _group(s: str, start: int) -> tuple[str, int]:
    """The brace group that opens at ``s[start]`` (or one character): ``(content, end)``."""
    if s[start] != "{":
        return s[start], start + 1
    depth = 0
    for i in range(start, len(s)):
        depth += {"{": 1, "}": -1}.get(s[i], 0)
        if depth == 0:
            return s[start + 1 : i], i + 1
    raise ValueError(f"unbalanced braces in {s!r}")


def _latex_to_python(s: str) -> str:
    s = s.strip().strip("$")
    s = re.sub(r"\\left|\\right|\\!|\\;|\\quad|\\displaystyle", "", s)
    s = s.replace(r"\,", " ").replace("~", " ")
    s = re.sub(r"\\[bB]ig[lr]?", "", s)
    s = re.sub(r"\\Delta\s*([A-Za-z])(?![A-Za-z])", r" Delta_\1 ", s)
    out, i = [], 0
    while i < len(s):
        if s.startswith((r"\frac", r"\tfrac", r"\dfrac"), i):
            i = s.index("{", i)
            num, i = _group(s, i)
            den, i = _group(s, i)
            out.append(f"(({_latex_to_python(num)})/({_latex_to_python(den)}))")
        elif s.startswith(r"\sqrt", i):
            body, i = _group(s, i + 5)
            out.append(f"sqrt({_latex_to_python(body)})")
        elif s.startswith(r"\lfloor", i) or s.startswith(r"\lceil", i):
            floor = s.startswith(r"\lfloor", i)
            close = r"\rfloor" if floor else r"\rceil"
            i += 7 if floor else 6
            depth, j = 1, i
            while depth:
                if s.startswith(r"\lfloor", j) or s.startswith(r"\lceil", j):
                    depth += 1
                if s.startswith(close, j):
                    depth -= 1
                j += 1
            inner = s[i : j - 1]
            out.append(f"{'floor' if floor else 'ceiling'}({_latex_to_python(inner)})")
            i = j - 1 + len(close)
        elif s[i] == "^":
            body, i = _group(s, i + 1)
            out.append(f"**({_latex_to_python(body)})")
        elif s[i] == "_":
            body, i = _group(s, i + 1)
            out.append("_" + re.sub(r"\W", "", body))
        elif s[i] == "\\":
            name = re.match(r"\\[A-Za-z]+", s[i:]).group(0)
            i += len(name)
            if name in _FUNCS:
                out.append(" " + _FUNCS[name])
            elif name in (r"\cdot", r"\times"):
                out.append("*")
            elif name == r"\pi":
                out.append(" pi ")
            else:  # a Greek letter or similar: a symbol named after it
                out.append(" " + name[1:])
        elif s[i] in "{}":
            out.append("(" if s[i] == "{" else ")")
            i += 1
        elif s[i] == "'":
            out.append("_prime")
            i += 1
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def formula_to_sympy(latex: str) -> sp.Expr:
    """The right-hand side of ``lhs = rhs`` (or the whole text) as a sympy expression.

    Subscripted names become single symbols (``\\theta_i`` -> ``theta_i``), and ``'`` becomes
    ``_prime`` (``b'`` -> ``b_prime``). Products may be implicit (``b\\,s^{d}``).
    """
    rhs = latex.split("=")[-1]
    local = {"pi": sp.pi, "log": sp.log, "floor": sp.floor, "ceiling": sp.ceiling}
    return parse_expr(_latex_to_python(rhs), local_dict=local, transformations=_TRANSFORMS)


# -- numbers in text -------------------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.])[+\-]?\d+(?:\.\d+)?(?![\w])")
# A magnitude written with a suffix: 32K tokens, a 2k-token window, a 1.3B-parameter model.
_MAGNITUDE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)([kKMB])(?![\w])")
# A number right after one of these is part of a name or a citation, not a stated value.
_CITATION = re.compile(
    r"(?:chapters?|ch\.|§|eq\.|eqs\.|Table|Tables|Figure|Fig\.|Theorem|Llama|LLaMA|Llama-|"
    r"Phi-|GPT-|Qwen|Mistral|version|PR|issue|#|arXiv:|Command|row|section|sections|part)\s*$"
)


def number_tokens(text: str) -> list[str]:
    """Numbers stated in ``text``, thousands separators removed, in order of appearance.

    Left out: digits glued to letters (``bf16``, ``GPT-2``, ``2D``), subscripts and
    superscripts of single symbols (``x_{2i+1}``), years 1990-2029, citations (``§3.4``,
    ``chapter 14``, ``Table 3``), model versions (``Llama 3.1``) and the small integers 0-2,
    which cards use structurally. A magnitude with a suffix (``32K``, ``2k-token``, ``1.3B``)
    is a stated value, kept as written in lower case (``32k``, ``1.3b``), unless it ends a
    hyphenated name (``Llama-2-7B``, ``GPT-NeoX-20B``); a year glued to a name
    (``WMT'14``) is left out.
    """
    s = normalise_digits(text)
    s = re.sub(r"_\{[^{}]*\}|_\w", " ", s)  # subscripts: indices, not values
    s = re.sub(r"`[^`]*`", lambda m: m.group(0) if re.search(r"=\s*\d", m.group(0)) else " ", s)
    out = []  # (position, token)
    for m in _NUMBER.finditer(s):
        token = m.group(0).lstrip("+")
        before = s[max(0, m.start() - 12) : m.start()]
        if re.search(r"[A-Za-z]-$|[A-Za-z]'$", before) or _CITATION.search(before):
            continue
        if "." not in token and 1990 <= abs(int(token)) <= 2029 and not before.endswith("^"):
            continue
        if token.lstrip("-") in ("0", "1", "2"):
            continue
        out.append((m.start(), token.lstrip("-")))
    for m in _MAGNITUDE.finditer(s):
        before = s[max(0, m.start() - 12) : m.start()]
        in_math = s[: m.start()].count("$") % 2 == 1  # $2k+1$ is a product, not 2,000
        if in_math or before.endswith("-") or _CITATION.search(before):
            continue
        out.append((m.start(), magnitude_token(m.group(0))))
    return [token for _, token in sorted(out)]


def magnitude_token(text: str) -> str:
    """How :func:`number_tokens` writes a magnitude (``32K`` -> ``32k``): also how a card's
    ``quoted`` and ``given`` entries are compared with it."""
    return normalise_digits(text).strip().lower()


_WORD_VALUES = {"half": 0.5, "a third": 1 / 3, "a quarter": 0.25, "two": 2, "three": 3,
                "four": 4, "five": 5, "second": 2, "third": 3, "fourth": 4, "fifth": 5}  # fmt: skip
_LAST_NUMBER = re.compile(r"\d[\d,{}]*(?:\.\d+)?(?:\\%|%)?")


def number_in(text: str) -> float:
    """The value of the last number in a phrase of a card (``"factor 8"`` -> 8, ``"original
    8,192"`` -> 8192, ``"90\\%"`` -> 0.9, ``"half the attention"`` -> 0.5): how a check reads
    a number it depends on from the card itself (``from_text``)."""
    found = _LAST_NUMBER.findall(normalise_digits(text))
    if found:
        return written_value(found[-1].rstrip(",{"))[0]
    words = [w for w in _WORD_VALUES if re.search(rf"\b{w}\b", text, re.I)]
    if not words:
        raise ValueError(f"no number in {text!r}")
    return _WORD_VALUES[max(words, key=len)]


def tokens_of_written(text: str) -> set[str]:
    """The number tokens inside one check's written text (what the check covers)."""
    s = normalise_digits(text)
    return {m.group(0).lstrip("+-") for m in _NUMBER.finditer(s)} | set(number_tokens(text))
