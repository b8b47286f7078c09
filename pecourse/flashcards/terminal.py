"""Card text for a terminal: Markdown through rich, LaTeX maths as Unicode through pylatexenc.

A terminal cannot typeset ``$\\theta_i = b^{-2i/d}$``, and raw LaTeX is hard to read, so each
maths span becomes Unicode text (``θ_i = b^{-2i/d}``) before rich renders the Markdown around
it. Two settings keep the text unambiguous where plain Unicode would not be: braces stay
around a sub- or superscript of several characters (``R_{n-m}``, not ``R_n-m``) and a
fraction is written ``(a)/(b)`` (pylatexenc's default, ``a/b``, turns ``\\frac{p}{1-p}`` into
``p/1-p``). The maths is escaped before Markdown sees it, so ``x_i * y_j`` stays maths.
"""

from __future__ import annotations

import re
from functools import cache

from pylatexenc import latex2text
from rich.console import Console
from rich.markdown import Markdown

from .render import _MATH

# CommonMark lets a backslash escape any ASCII punctuation: everything that could start
# emphasis, code, a link or a list inside a converted maths span.
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~^])")


@cache
def _converter() -> latex2text.LatexNodes2Text:
    context = latex2text.get_default_latex_context_db()
    context.add_context_category(
        "pecourse-terminal",
        macros=[latex2text.MacroTextSpec("frac", simplify_repl="(%s)/(%s)")],
        prepend=True,
    )
    return latex2text.LatexNodes2Text(
        latex_context=context, math_mode="text", keep_braced_groups=True,
        keep_braced_groups_minlen=2,
    )  # fmt: skip


def math_to_text(latex: str) -> str:
    """One maths span (with or without its ``$`` delimiters) as Unicode text."""
    return _converter().latex_to_text(latex).strip()


def to_markdown(text: str) -> str:
    """Card Markdown with every maths span replaced by its Unicode text, escaped for Markdown."""
    return _MATH.sub(lambda m: _MARKDOWN_PUNCTUATION.sub(r"\\\1", math_to_text(m.group(0))), text)


def show(text: str, console: Console | None = None) -> None:
    """Print card text: styled on a terminal, plain text (no escape codes) when piped."""
    console = console or Console(highlight=False)
    rendered = Markdown(to_markdown(text), justify="default")  # "left" pads every line
    if console.is_terminal:
        console.print(rendered)
        return
    with console.capture() as captured:  # piped: the same text, without the lists' padding
        console.print(rendered)
    console.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
