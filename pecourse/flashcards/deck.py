"""The flashcard deck: one JSON file per syllabus concept under ``pecourse/cards/``.

Card format
-----------
Each file, ``NN_slug.json`` (the notebook's name), is a JSON list of card objects:

``id`` (required)
    A stable lowercase-hyphen slug. Review progress and Anki guids are keyed by it: it never
    changes while the card's fact stays the same, and a card whose fact changes gets a new id.
    Retired ids are listed in ``pecourse/cards/retired.json`` and are never reused.
``concept`` (required)
    The syllabus number, 1-16 (the same as the file's ``NN``).
``type``
    ``"basic"`` (the default when absent) or ``"cloze"``.
``front``, ``back`` (required)
    Markdown with LaTeX between ``$...$`` or ``$$...$$``. For a basic card, the question and
    the answer. For a cloze card, ``front`` is the whole text with Anki-style deletions,
    ``{{c1::hidden text}}`` or ``{{c1::hidden text::hint}}`` (only ``c1``; it may hide several
    spans at once, and a deletion wraps whole ``$...$`` spans), and ``back`` is an optional
    extra note shown with the answer (``""`` when there is none).
``topic`` (required)
    A short label (jupytercards can filter on it).
``source`` (required)
    Where the fact is taught and where it comes from: the chapter section, then the paper,
    config or code (``"ch. 03 §2; Press et al. 2022, arXiv:2108.12409, §3"``).
``checks``
    Number and formula checks (see :mod:`pecourse.flashcards.checks`): how the package
    recomputes every number the card states.
``quoted``
    Numbers the card quotes from its source that no package function computes (a BLEU gain,
    a paper's reported percentage), written without separators (``"2048"``).
``given``
    Numbers of the question that only set up a thought experiment (a 64-token training
    window, a shift of 10,000): any value would do, so they are not facts to check. A number
    the card's claim depends on is never a given: a check reads it from the card instead
    (``from_text``, see :mod:`pecourse.flashcards.checks`).
``long``
    Why the answer may run past the lint's word limit (a derivation that is one fact).

To render a card: for a basic card show ``front``, then ``back``. For a cloze card, show
:func:`pecourse.flashcards.cloze.question` of ``front`` (each deletion as ``[…]``, or
``[hint]``), then :func:`~pecourse.flashcards.cloze.answer` of ``front`` (deletions filled in,
in bold) followed by ``back``. :meth:`Flashcard.question` and :meth:`Flashcard.answer` do
exactly that. ``pecourse cards export --json`` writes a jupytercards deck in which cloze
cards are already turned into question/answer pairs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from pecourse import course as _course

from . import cloze

# The sixteen syllabus concepts, from the course map (the single source of slugs): file
# names are ``NN_slug.json``, the same names as the notebooks.
CONCEPTS: dict[int, str] = {c.number: c.slug.split("_", 1)[1] for c in _course.CONCEPTS}
TITLES: dict[int, str] = {c.number: c.title for c in _course.CONCEPTS}

DECK_SIZE = 157
CARD_TYPES = ("basic", "cloze")
REQUIRED_FIELDS = ("id", "concept", "front", "back", "topic", "source")
OPTIONAL_FIELDS = ("type", "checks", "quoted", "given", "long")
_ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Flashcard:
    """One card of the deck (see the module docstring for the fields)."""

    id: str
    concept: int
    front: str
    back: str
    topic: str
    source: str = ""
    type: str = "basic"
    checks: tuple = field(default=(), compare=False)
    quoted: tuple = field(default=(), compare=False)
    given: tuple = field(default=(), compare=False)
    long: str | None = field(default=None, compare=False)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Flashcard:
        unknown = set(raw) - set(REQUIRED_FIELDS) - set(OPTIONAL_FIELDS)
        if unknown:
            raise ValueError(f"card {raw.get('id')!r} has unknown fields {sorted(unknown)}")
        missing = [name for name in REQUIRED_FIELDS if name not in raw]
        if missing:
            raise ValueError(f"card {raw.get('id')!r} lacks the fields {missing}")
        data = dict(raw)
        data["checks"] = tuple(data.get("checks", ()))
        data["quoted"] = tuple(data.get("quoted", ()))
        data["given"] = tuple(data.get("given", ()))
        return cls(**data)

    @property
    def is_cloze(self) -> bool:
        return self.type == "cloze"

    def question(self) -> str:
        """What the learner sees first (Markdown)."""
        return cloze.question(self.front) if self.is_cloze else self.front

    def answer(self) -> str:
        """What the learner sees after "Show answer" (Markdown)."""
        if not self.is_cloze:
            return self.back
        return cloze.answer(self.front) + (f"\n\n{self.back}" if self.back.strip() else "")

    def answer_part(self) -> str:
        """The text the learner must recall: the back, or a cloze card's deletions and note."""
        if not self.is_cloze:
            return self.back
        return " ".join(cloze.deletions(self.front) + [self.back]).strip()

    def given_part(self) -> str:
        """The text shown before the answer: the front, or a cloze card's visible text."""
        return cloze.question(self.front, blank=" ") if self.is_cloze else self.front

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "concept": self.concept}
        if self.type != "basic":
            out["type"] = self.type
        out.update(front=self.front, back=self.back, topic=self.topic, source=self.source)
        if self.checks:
            out["checks"] = list(self.checks)
        if self.quoted:
            out["quoted"] = list(self.quoted)
        if self.given:
            out["given"] = list(self.given)
        if self.long:
            out["long"] = self.long
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
    return [Flashcard.from_dict(raw) for raw in json.loads(text)]


def load_deck(concept: int | None = None) -> list[Flashcard]:
    """The whole deck (concepts in syllabus order), or one concept's cards."""
    if concept is not None:
        return load_concept(_check_concept(concept))
    return [card for number in CONCEPTS for card in load_concept(number)]


def load_retired() -> dict[str, dict[str, Any]]:
    """Retired ids (kept in learners' histories, never shown): ``{id: {"reason", "replaced_by"}}``."""
    text = (_cards_dir() / "retired.json").read_text(encoding="utf-8")
    return {entry["id"]: entry for entry in json.loads(text)}


def balanced_dollars(text: str) -> bool:
    """True when ``$`` math delimiters pair up (``\\$`` is a literal dollar)."""
    stripped = text.replace("\\$", "").replace("$$", "")
    return stripped.count("$") % 2 == 0 and text.replace("\\$", "").count("$$") % 2 == 0


def validate_deck(cards: list[Flashcard] | None = None) -> list[str]:
    """Problems with the deck's structure, one line each (an empty list means it is sound).

    The writing rules (length, enumerations, duplicates, number checks) are
    :func:`pecourse.flashcards.lint.lint_deck`.
    """
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
        if card.type not in CARD_TYPES:
            problems.append(f"{where}: type must be one of {CARD_TYPES}, got {card.type!r}")
        for name in ("front", "back", "topic", "source"):
            value = getattr(card, name)
            if not isinstance(value, str):
                problems.append(f"{where}: {name} must be a string")
            elif not value.strip() and not (name == "back" and card.is_cloze):
                problems.append(f"{where}: empty {name}")
            elif not balanced_dollars(value):
                problems.append(f"{where}: unbalanced $ in {name}")
        if card.is_cloze:
            problems += [f"{where}: {p}" for p in cloze.problems(card.front)]
        elif cloze.has_cloze(card.front) or cloze.has_cloze(card.back):
            problems.append(f"{where}: cloze deletions in a basic card (set type to 'cloze')")
    if len(cards) != DECK_SIZE and len({c.concept for c in cards}) == len(CONCEPTS):
        problems.append(f"the deck has {len(cards)} cards, expected {DECK_SIZE}")
    return problems
