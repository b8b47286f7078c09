"""Flashcard pages of the book: every card of a chapter, flipped by a click, no kernel needed.

The cards are read as plain JSON (``pecourse/cards/NN_slug.json``), not through the deck's
dataclass, so a field the deck gains later never breaks the book. Each card becomes a MyST
block that Sphinx renders like the rest of the book (Markdown, ``$...$`` maths typeset by
MathJax, text in the search index); ``book/_static/pecourse-book.js`` flips it.

Two kinds of card are understood:

- a basic card: ``front`` is the question, ``back`` the answer;
- a cloze card (``"type": "cloze"``, or any card whose ``front`` holds Anki-style deletions
  ``{{c1::hidden text}}`` / ``{{c1::hidden text::hint}}``): the front shows the text with each
  deletion blanked (``[…]``, or ``[hint]``), the back shows it filled in and highlighted,
  followed by ``back`` as an extra note when there is one.

What a card shows under its answer is listed in :data:`BACK_NOTES`: supporting a new field
is one line there. A note is card Markdown too (the Anki export reads it so): it is rendered
here with the deck's parser, its maths as the spans MyST writes for ``$...$``, which the book's
MathJax typesets (a raw ``$`` in the note's HTML would be left as text).
"""

from __future__ import annotations

import html
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from pecourse.flashcards.render import MATH_TOKENS, new_parser

#: Anki's cloze syntax: {{c<n>::answer}} or {{c<n>::answer::hint}} (the first ``}}`` closes it).
CLOZE = re.compile(r"\{\{c(\d+)::(.+?)(?:::([^{}]*?))?\}\}", re.S)

#: Fields shown in small print under the answer, with their label, in this order.
BACK_NOTES: tuple[tuple[str, str], ...] = (("source", "Source"),)


def is_cloze(card: dict[str, Any]) -> bool:
    return card.get("type") == "cloze" or bool(CLOZE.search(str(card.get("front", ""))))


def cloze_question(text: str) -> str:
    """The text with each deletion replaced by a highlighted blank (``[…]`` or ``[hint]``)."""

    def blank(match: re.Match) -> str:
        hint = match.group(3)
        label = f"[{html.escape(hint.strip(), quote=False)}]" if hint else "[…]"
        return f'<span class="pc-cloze-gap">{label}</span>'

    return CLOZE.sub(blank, text)


def cloze_answer(text: str) -> str:
    """The text with each deletion filled in and highlighted."""

    def fill(match: re.Match) -> str:
        inner = match.group(2)
        if inner.lstrip().startswith("$$"):  # display maths cannot sit inside a span
            return inner
        return f'<span class="pc-cloze-answer">{inner}</span>'

    return CLOZE.sub(fill, text)


def faces(card: dict[str, Any]) -> tuple[str, str]:
    """The (front, back) Markdown of a card as the page shows it."""
    front, back = str(card.get("front", "")), str(card.get("back", "") or "")
    if is_cloze(card):
        extra = f"\n\n{back}" if back.strip() else ""
        front, back = cloze_question(front), cloze_answer(front) + extra
    notes = [
        f"{label}: {str(card[field]).strip()}"
        for field, label in BACK_NOTES
        if str(card.get(field, "") or "").strip()
    ]
    if notes:
        back += '\n\n<p class="pc-card-note">' + "<br>".join(map(_note_html, notes)) + "</p>"
    return front, back


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


# (display, inline) maths as MathJax reads it in the page
_MATH_DELIMITERS = ((r"\[", r"\]"), (r"\(", r"\)"))


@cache
def _note_renderer() -> MarkdownIt:
    md = new_parser()  # raw HTML in a note is shown as text, as on the cards' faces

    def math(_renderer, tokens, idx, _options, _env) -> str:
        opening, closing = _MATH_DELIMITERS[tokens[idx].type == "math_inline"]
        tex = _escape(tokens[idx].content)
        return f'<span class="math notranslate nohighlight">{opening}{tex}{closing}</span>'

    for name in MATH_TOKENS:
        md.add_render_rule(name, math)
    return md


def _note_html(text: str) -> str:
    """One note's Markdown as inline HTML, its maths typeset by the book's MathJax."""
    return _note_renderer().renderInline(text).strip()


def card_block(card: dict[str, Any]) -> str:
    """One card as MyST: a labelled container with its front and back."""
    front, back = faces(card)
    card_id = str(card.get("id", "")).strip()
    if not card_id:
        raise ValueError(f"a flashcard needs an id, got {card!r}")
    topic = str(card.get("topic", "") or "").strip()
    kind = "cloze" if is_cloze(card) else "basic"
    head = f'<span class="pc-card-topic">{_escape(topic)}</span>\n\n' if topic else ""
    return (
        f"(card-{card_id})=\n"
        f"::::{{container}} pc-card pc-card-{kind}\n"
        f":::{{container}} pc-card-front\n{head}{front.strip()}\n\n"
        f'<p class="pc-card-hint">Click the card (or press Enter) to see the answer.</p>\n'
        f":::\n"
        f":::{{container}} pc-card-back\n{back.strip()}\n:::\n"
        f"::::\n"
    )


def load_cards(path: Path) -> list[dict[str, Any]]:
    """The cards of one deck file, as dictionaries, in file order."""
    cards = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(cards, list) or not all(isinstance(c, dict) for c in cards):
        raise ValueError(f"{path} must hold a JSON list of card objects")
    return cards


def cards_page(title: str, cards: list[dict[str, Any]], chapter_link: str | None) -> str:
    """A chapter's flashcard page (MyST Markdown)."""
    cloze = sum(is_cloze(c) for c in cards)
    intro = (
        f"{len(cards)} cards"
        + (f", {cloze} of them cloze (fill in the blank)" if cloze else "")
        + ". Say the answer to yourself, then click the card to check it."
    )
    if chapter_link:
        intro += f" The chapter: [{title}]({chapter_link})."
    intro += (
        " In JupyterLab the chapter's last cell runs the same cards as a quiz that schedules"
        " your reviews (`pecourse cards review` does it in a terminal)."
    )
    blocks = "\n".join(card_block(c) for c in cards)
    return f"# Flashcards: {title}\n\n{intro}\n\n{blocks}"
