"""Exports of the deck: an Anki package (genanki) and one jupytercards JSON file.

The Anki note model and decks have fixed ids and every note's guid is derived from the
card's slug, so importing a newer export into Anki updates the notes already there instead
of adding duplicates (and keeps the learner's Anki review history).
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
ANKI_PARENT_DECK = "pecourse: Positional Encoding"


def anki_deck_id(concept: int) -> int:
    """A stable deck id per concept, derived from its slug."""
    digest = hashlib.sha256(f"pecourse-deck-{CONCEPTS[concept]}".encode()).digest()
    return 1 << 30 | int.from_bytes(digest[:4], "big") >> 2


def anki_guid(card: Flashcard) -> str:
    """The note guid: a function of the card's slug only."""
    return genanki.guid_for("pecourse", card.id)


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
    css=".card { font-family: sans-serif; font-size: 18px; text-align: left; }\n"
    ".topic { color: #888; font-size: 13px; }",
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
        deck.add_note(
            genanki.Note(
                model=ANKI_MODEL,
                fields=[
                    markdown_to_html(card.front, math_style="anki"),
                    markdown_to_html(card.back, math_style="anki"),
                    card.topic,
                    card.id,
                ],
                guid=anki_guid(card),
                tags=[f"pecourse::{card.concept:02d}_{CONCEPTS[card.concept]}"],
            )
        )
    genanki.Package(list(decks.values())).write_to_file(str(path))
    return path


def export_json(path: str | os.PathLike, concept: int | None = None) -> Path:
    """Write the deck as one jupytercards-compatible JSON list; returns the path."""
    path = Path(path)
    cards = [card.to_dict() for card in load_deck(concept)]
    path.write_text(json.dumps(cards, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
