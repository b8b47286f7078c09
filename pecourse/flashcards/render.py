"""Card text (Markdown with ``$...$`` maths) parsed by markdown-it-py, rendered to HTML.

Cards use a little Markdown (paragraphs, ``**bold**``, ``*italic*``, ```code```, lists) and
LaTeX between ``$...$`` or ``$$...$$``. The parser is markdown-it-py's CommonMark with the
``dollarmath`` plugin of mdit-py-plugins, so a maths span is one token that no Markdown rule
looks inside (``x_i * y_j`` never turns into emphasis). A maths span is written back with
its delimiters, HTML-escaped, where MathJax (HTMLMath widgets, JupyterLab, Anki) finds it.
The terminal review (:mod:`pecourse.flashcards.terminal`) reads the same tokens.

What counts as maths is pandoc's rule, which the plugin implements: no space just inside
either ``$``, and a ``\\$`` is a dollar sign, not a delimiter. A single line break inside a
paragraph is kept as ``<br>``; raw HTML in a card is shown as text.
"""

from __future__ import annotations

import html
from functools import cache

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.dollarmath import dollarmath_plugin

MATH_STYLES = ("dollar", "anki")
# Token types the dollarmath plugin emits (labels are off: ``$$a$$ (1)`` stays text).
MATH_TOKENS = ("math_inline", "math_inline_double", "math_block")


def new_parser(**options) -> MarkdownIt:
    """A fresh CommonMark parser with dollar maths; ``options`` override markdown-it's."""
    md = MarkdownIt("commonmark", {"html": False, "breaks": True, "xhtmlOut": False, **options})
    return md.use(dollarmath_plugin, allow_labels=False, allow_space=False, double_inline=True)


@cache
def parser() -> MarkdownIt:
    """The card parser: CommonMark, raw HTML escaped, soft line breaks kept, dollar maths."""
    return new_parser()


def delimited(token: Token, math_style: str = "dollar") -> str:
    """A maths token as source text again: ``$x$``/``$$x$$``, or Anki's ``\\(x\\)``/``\\[x\\]``."""
    display = token.type != "math_inline"
    if math_style == "anki":  # Anki's MathJax wants \( \) and \[ \]
        return rf"\[{token.content}\]" if display else rf"\({token.content}\)"
    return f"$${token.content}$$" if display else f"${token.content}$"


@cache
def _renderer(math_style: str) -> MarkdownIt:
    md = new_parser()

    def math(_renderer, tokens, idx, _options, _env) -> str:
        text = html.escape(delimited(tokens[idx], math_style), quote=False)
        return f"<p>{text}</p>\n" if tokens[idx].type == "math_block" else text

    for name in MATH_TOKENS:
        md.add_render_rule(name, math)
    return md


def markdown_to_html(text: str, *, math_style: str = "dollar") -> str:
    """Render card Markdown to HTML; ``math_style`` is ``"dollar"`` (keep ``$``) or ``"anki"``."""
    if math_style not in MATH_STYLES:
        raise ValueError(f"math_style must be 'dollar' or 'anki', got {math_style!r}")
    return _renderer(math_style).render(text).strip()


def math_spans(text: str) -> list[str]:
    """Every maths span of ``text`` as written (with its ``$`` delimiters), in order."""
    spans = []
    for token in parser().parse(text):
        for t in token.children or [token]:
            if t.type in MATH_TOKENS:
                spans.append(delimited(t, "dollar"))
    return spans
