"""The flashcard deck: one JSON file per syllabus concept under ``pecourse/cards/``.

Each file is a plain JSON list of card objects, so jupytercards reads it directly
(``display_flashcards("pecourse/cards/08_rope.json")``). A card has

- ``id``: a stable slug (progress and Anki guids are keyed by it; never rename one),
- ``concept``: the syllabus number (1-16),
- ``front``, ``back``: Markdown with LaTeX between ``$...$`` (or ``$$...$$``),
- ``topic``: a short label (jupytercards can filter on it),
- optionally ``check``: ``{"fn": name, "args": {...}, "value": number}`` for a card that
  states a number the package can recompute (the tests recompute every one).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from pecourse import course as _course

# The sixteen syllabus concepts, from the course map (the single source of slugs): file
# names are ``NN_slug.json``, the same names as the notebooks.
CONCEPTS: dict[int, str] = {c.number: c.slug.split("_", 1)[1] for c in _course.CONCEPTS}
TITLES: dict[int, str] = {c.number: c.title for c in _course.CONCEPTS}

DECK_SIZE = 157
REQUIRED_FIELDS = ("id", "concept", "front", "back", "topic")
_ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Flashcard:
    """One card of the deck (see the module docstring for the fields)."""

    id: str
    concept: int
    front: str
    back: str
    topic: str
    check: dict[str, Any] | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "concept": self.concept,
            "front": self.front,
            "back": self.back,
            "topic": self.topic,
        }
        if self.check is not None:
            out["check"] = self.check
        return out


def concept_file(concept: int) -> str:
    """``NN_slug.json`` for a syllabus number."""
    _check_concept(concept)
    return f"{concept:02d}_{CONCEPTS[concept]}.json"


def _check_concept(concept: Any) -> int:
    if isinstance(concept, bool) or not isinstance(concept, int):
        raise TypeError(
            f"concept must be an int syllabus number 1-16, got {concept!r} "
            f"({type(concept).__name__})"
        )
    if concept not in CONCEPTS:
        raise ValueError(f"concept must be a syllabus number 1-16, got {concept}")
    return concept


def _cards_dir():
    return resources.files("pecourse") / "cards"


def load_concept(concept: int) -> list[Flashcard]:
    """The cards of one concept, in file order."""
    text = (_cards_dir() / concept_file(concept)).read_text(encoding="utf-8")
    return [Flashcard(**raw) for raw in json.loads(text)]


def load_deck(concept: int | None = None) -> list[Flashcard]:
    """The whole deck (concepts in syllabus order), or one concept's cards."""
    if concept is not None:
        return load_concept(_check_concept(concept))
    return [card for number in CONCEPTS for card in load_concept(number)]


def balanced_dollars(text: str) -> bool:
    """True when ``$`` math delimiters pair up (``\\$`` is a literal dollar)."""
    stripped = text.replace("\\$", "").replace("$$", "")
    return stripped.count("$") % 2 == 0 and text.replace("\\$", "").count("$$") % 2 == 0


def validate_deck(cards: list[Flashcard] | None = None) -> list[str]:
    """Problems with the deck, one line each (an empty list means it is sound)."""
    cards = load_deck() if cards is None else cards
    problems: list[str] = []
    seen: set[str] = set()
    for card in cards:
        where = f"card {card.id!r} (concept {card.concept})"
        if not _ID_RE.match(card.id):
            problems.append(f"{where}: id must be a lowercase-hyphen slug")
        if card.id in seen:
            problems.append(f"{where}: duplicate id")
        seen.add(card.id)
        if card.concept not in CONCEPTS:
            problems.append(f"{where}: concept must be 1-16")
        for name in ("front", "back", "topic"):
            value = getattr(card, name)
            if not isinstance(value, str) or not value.strip():
                problems.append(f"{where}: empty {name}")
            elif not balanced_dollars(value):
                problems.append(f"{where}: unbalanced $ in {name}")
    if len(cards) != DECK_SIZE and len({c.concept for c in cards}) == len(CONCEPTS):
        problems.append(f"the deck has {len(cards)} cards, expected {DECK_SIZE}")
    return problems


def card_by_id(card_id: str) -> Flashcard:
    for card in load_deck():
        if card.id == card_id:
            return card
    raise KeyError(f"no flashcard with id {card_id!r}")
