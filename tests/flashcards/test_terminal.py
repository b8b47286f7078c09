"""Card text in a terminal: LaTeX as readable Unicode, Markdown rendered, nothing ambiguous."""

import io

import pytest
from rich.console import Console

from pecourse.flashcards.render import MATH_TOKENS, math_spans
from pecourse.flashcards.terminal import math_to_text, show, tokens


@pytest.mark.parametrize(
    ("latex", "text"),
    [
        (r"$\theta_i \le i$", "θ_i ≤ i"),
        (r"$R_m^\top R_n = R_{n-m}$", "R_m^⊤ R_n = R_{n-m}"),  # braces kept: not R_n-m
        (r"$\ln\frac{p}{1-p}$", "ln(p)/(1-p)"),  # not p/1-p
        (r"$\sqrt d$", "√(d)"),
        (r"$\mathrm{softmax}(QK^\top)$", "softmax(QK^⊤)"),
        (r"$$2.7\times 10^4$$", "2.7× 10^4"),
    ],
)
def test_maths_becomes_unicode_text(latex, text):
    assert math_to_text(latex) == text


def _shown(text: str, width: int = 200) -> str:
    out = io.StringIO()
    show(text, Console(file=out, width=width, highlight=False))  # not a terminal: plain text
    return out.getvalue()


def test_markdown_is_rendered_and_maths_is_not_read_as_markdown():
    out = _shown("**Bold**, *slanted* and `code`: $x_i * y_j$ and $[a](b)$.\n\n- one\n- two")
    assert out.splitlines()[0] == "Bold, slanted and code: x_i * y_j and [a](b)."
    assert [line.strip() for line in out.splitlines()[2:]] == ["• one", "• two"]
    assert "\x1b[" not in out and all(line == line.rstrip() for line in out.splitlines())


def _types(toks) -> set[str]:
    return {t.type for tok in toks for t in [tok, *(tok.children or [])]}


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a $x$ b $$y^2$$ c $z_{10}$", "a x b y^2 c z_{10}"),
        ("above\n\n$$\\theta_i$$\n\nbelow", "above θ_i below"),  # a display block
    ],
)
def test_every_span_is_replaced(text, shown):
    assert math_spans(text) and not _types(tokens(text)) & set(MATH_TOKENS)
    assert " ".join(_shown(text).split()) == shown
