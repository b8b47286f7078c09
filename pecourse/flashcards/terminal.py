"""Card text for a terminal: Markdown through rich, LaTeX maths as Unicode through pylatexenc.

A terminal cannot typeset ``$\\theta_i = b^{-2i/d}$``, and raw LaTeX is hard to read, so each
maths span becomes Unicode text (``θ_i = b^{-2i/d}``) before rich renders the Markdown around
it. Two settings keep the text unambiguous where plain Unicode would not be: braces stay
around a sub- or superscript of several characters (``R_{n-m}``, not ``R_n-m``) and a
fraction is written ``(a)/(b)`` (pylatexenc's default, ``a/b``, turns ``\\frac{p}{1-p}`` into
``p/1-p``). The text is parsed once, by the parser the HTML uses
(:func:`pecourse.flashcards.render.new_parser`), and each maths token becomes a text token
before rich lays the tokens out, so ``x_i * y_j`` stays maths and nothing needs escaping.
"""

from __future__ import annotations

from functools import cache

from markdown_it.token import Token
from pylatexenc import latex2text
from rich.console import Console
from rich.markdown import Markdown

from .render import MATH_TOKENS, delimited, new_parser


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


@cache
def _parser():
    # rich's own parser, CommonMark with strikethrough and tables (line breaks as rich reads
    # them: a single newline is a space), plus the cards' dollar maths.
    return new_parser(breaks=False).enable(["strikethrough", "table"])


def _as_text(token: Token) -> Token:
    # With its delimiters: pylatexenc keeps the spaces of maths mode (``P^\\top P``).
    return Token("text", "", 0, content=math_to_text(delimited(token)))


def tokens(text: str) -> list[Token]:
    """The Markdown tokens of card text, every maths span turned into a text token of Unicode
    (a display span into a paragraph of its own)."""
    out: list[Token] = []
    for token in _parser().parse(text):
        if token.type in MATH_TOKENS:  # a $$...$$ block
            inline = Token("inline", "", 0, children=[_as_text(token)])
            out += [Token("paragraph_open", "p", 1), inline, Token("paragraph_close", "p", -1)]
            continue
        if token.children:
            token.children = [_as_text(t) if t.type in MATH_TOKENS else t for t in token.children]
        out.append(token)
    return out


class CardMarkdown(Markdown):
    """rich's Markdown of card text, laid out from :func:`tokens` (rich reads ``parsed``)."""

    def __init__(self, text: str, **options):
        super().__init__(text, **options)
        self.parsed = tokens(text)


def show(text: str, console: Console | None = None) -> None:
    """Print card text: styled on a terminal, plain text (no escape codes) when piped."""
    console = console or Console(highlight=False)
    rendered = CardMarkdown(text, justify="default")  # "left" pads every line
    if console.is_terminal:
        console.print(rendered)
        return
    with console.capture() as captured:  # piped: the same text, without the lists' padding
        console.print(rendered)
    console.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
