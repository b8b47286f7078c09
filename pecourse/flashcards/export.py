"""Exports of the deck: an Anki package (genanki) and one jupytercards JSON file.

The Anki note models and decks have fixed ids and every note's guid is derived from the
card's slug, so importing a newer export into Anki updates the notes already there instead
of adding duplicates (and keeps the learner's Anki review history). Basic cards use the
"pecourse flashcard" model (Front, Back, Topic, Id); cloze cards use the "pecourse cloze"
model, an Anki cloze note type (Text, Extra, Topic, Id) whose ``{{c1::...}}`` deletions are
the card's own. A card that changed from basic to cloze keeps its guid; Anki's importer asks
before it moves such a note to the other note type.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import genanki

from .deck import CONCEPTS, TITLES, Flashcard, load_deck
from .render import markdown_to_html

# Fixed ids (Anki wants 31-bit-ish positive integers); never change them.
ANKI_MODEL_ID = 1_607_392_319
ANKI_CLOZE_MODEL_ID = 1_607_392_320
ANKI_PARENT_DECK = "pecourse: Positional Encoding"


def anki_deck_id(concept: int) -> int:
    """A stable deck id per concept, derived from its slug."""
    digest = hashlib.sha256(f"pecourse-deck-{CONCEPTS[concept]}".encode()).digest()
    return 1 << 30 | int.from_bytes(digest[:4], "big") >> 2


def anki_guid(card: Flashcard) -> str:
    """The note guid: a function of the card's slug only."""
    return genanki.guid_for("pecourse", card.id)


_CSS = (
    ".card { font-family: sans-serif; font-size: 18px; text-align: left; }\n"
    ".topic, .source { color: #888; font-size: 13px; }"
)

ANKI_MODEL = genanki.Model(
    ANKI_MODEL_ID,
    "pecourse flashcard",
    fields=[{"name": "Front"}, {"name": "Back"}, {"name": "Topic"}, {"name": "Id"}],
    templates=[
        {
            "name": "Card 1",
            "qfmt": "<div class='topic'>{{Topic}}</div>{{Front}}",
            "afmt": "{{FrontSide}}<hr id='answer'>{{Back}}",
        }
    ],
    css=_CSS,
)

ANKI_CLOZE_MODEL = genanki.Model(
    ANKI_CLOZE_MODEL_ID,
    "pecourse cloze",
    fields=[{"name": "Text"}, {"name": "Extra"}, {"name": "Topic"}, {"name": "Id"}],
    templates=[
        {
            "name": "Cloze",
            "qfmt": "<div class='topic'>{{Topic}}</div>{{cloze:Text}}",
            "afmt": "<div class='topic'>{{Topic}}</div>{{cloze:Text}}<br>{{Extra}}",
        }
    ],
    css=_CSS + "\n.cloze { font-weight: bold; color: #1a5fb4; }",
    model_type=genanki.Model.CLOZE,
)


def _source_html(card: Flashcard) -> str:
    """The card's source (chapter section, paper) under its answer; empty without one."""
    if not card.source.strip():
        return ""
    html = markdown_to_html(f"Source: {card.source}", math_style="anki")
    return f"<div class='source'>{html}</div>"


def anki_note(card: Flashcard) -> genanki.Note:
    """The Anki note of one card: a cloze note for a cloze card, a basic note otherwise. The
    source goes under the answer (Back, or a cloze note's Extra), not in a field of its own:
    a new field would change the note types, and importing into a collection that holds the
    old ones would then no longer simply update its notes."""
    back = markdown_to_html(card.back, math_style="anki") if card.back.strip() else ""
    front = markdown_to_html(card.front, math_style="anki")
    return genanki.Note(
        model=ANKI_CLOZE_MODEL if card.is_cloze else ANKI_MODEL,
        fields=[front, back + _source_html(card), card.topic, card.id],
        guid=anki_guid(card),
        tags=[f"pecourse::{card.concept:02d}_{CONCEPTS[card.concept]}"],
    )


def export_anki(path: str | os.PathLike, concept: int | None = None) -> Path:
    """Write an ``.apkg`` with one sub-deck per concept; returns the path."""
    path = Path(path)
    decks = {}
    for card in load_deck(concept):
        deck = decks.get(card.concept)
        if deck is None:
            name = f"{ANKI_PARENT_DECK}::{card.concept:02d} {TITLES[card.concept]}"
            deck = decks[card.concept] = genanki.Deck(anki_deck_id(card.concept), name)
        deck.add_note(anki_note(card))
    genanki.Package(list(decks.values())).write_to_file(str(path))
    return path


def jupytercards_card(card: Flashcard) -> dict:
    """One card as jupytercards shows it: a cloze card becomes a question/answer pair. The
    source travels as its own key (jupytercards reads the keys it knows)."""
    return {"id": card.id, "front": card.question(), "back": card.answer(), "topic": card.topic,
            "source": card.source}  # fmt: skip


def export_json(path: str | os.PathLike, concept: int | None = None) -> Path:
    """Write the deck as one jupytercards-compatible JSON list; returns the path.

    Each entry has ``front``, ``back``, ``topic``, ``id`` and ``source``; cloze cards are rendered as
    question (deletions blanked) and answer (deletions filled in), since jupytercards has no
    cloze cards of its own.
    """
    path = Path(path)
    cards = [jupytercards_card(card) for card in load_deck(concept)]
    path.write_text(json.dumps(cards, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
