"""``pecourse cards lint``: the deck's writing rules as a command.

The rules follow the minimum-information principle of spaced-repetition writing (one fact
per card, short answers, no sets, no cued yes/no questions), plus what this course needs
(every card has its concept and a source; every stated number is recomputed by a check).
:func:`lint_deck` returns one line per problem; :func:`deck_stats` the numbers the command
prints after them.

- **structure**: :func:`pecourse.flashcards.deck.validate_deck` (fields, ids, cloze syntax);
- **length**: the answer (a basic card's back; a cloze card's deletions and note) has at most
  ``MAX_ANSWER_WORDS`` words, unless the card's ``long`` says why it needs up to
  ``MAX_LONG_WORDS``; a ``$...$`` span or a code span counts as one word;
- **enumerations**: no bulleted or numbered lists, no "name two", "list" fronts;
- **fronts**: no yes/no fronts (Does/Is/Can ...), no "Pitfall:" prefix that cues "no";
- **duplicates**: no two cards whose questions, or whose answers, are the same or at least
  ``NEAR_DUPLICATE`` alike (difflib's ratio) once normalised (case, punctuation, cloze
  markup and spacing inside math removed). This catches copies and light rewordings; it
  cannot tell two cards on one topic from two cards on one fact, which is the writer's job;
- **sources**: ``source`` starts with the card's own chapter, ``ch. NN``;
- **numbers**: every number the answer states (and the question does not) is covered by a
  check or listed in ``quoted``, and every quoted number is on the card;
- **history**: no card reuses a retired id.
"""

from __future__ import annotations

import difflib
import re
import statistics
from dataclasses import dataclass

from . import cloze
from .deck import Flashcard, load_deck, load_retired, validate_deck
from .numbers import normalise_digits, number_tokens, tokens_of_written

MAX_ANSWER_WORDS = 25
MAX_LONG_WORDS = 40
NEAR_DUPLICATE = 0.8
MIN_COMPARED = 6  # words: short answers (a formula, two numbers) are alike by nature

_MATH = re.compile(r"\$\$.+?\$\$|\$.+?\$|`[^`]+`", re.S)
_YES_NO = re.compile(
    r"^\s*(?:pitfall:\s*)?(?:does|do|did|is|are|was|were|can|could|should|will|would|has|have)\b",
    re.I,
)
_SET_FRONT = re.compile(
    r"\b(?:name (?:two|three|four|five|all)|list (?:the|all|two|three|four))\b", re.I
)
_LIST_LINE = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+", re.M)


def answer_words(card: Flashcard) -> int:
    """Words in the answer; a math or code span counts as one."""
    return len(_MATH.sub(" X ", card.answer_part()).split())


def _normalise(text: str) -> str:
    text = _MATH.sub(lambda m: re.sub(r"\s+", "", m.group(0)), cloze.question(text, blank=""))
    return re.sub(r"[^a-z0-9$\\^_{}]+", " ", text.lower()).strip()


def _covered_numbers(card: Flashcard) -> set[str]:
    covered: set[str] = set()
    for spec in card.checks:
        for key in ("text", "formula"):
            if key in spec:
                covered |= tokens_of_written(spec[key])
        arg_sets = spec.get("args", {})
        for args in arg_sets if isinstance(arg_sets, list) else [arg_sets]:
            for value in args.values():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    covered.add(f"{value:g}")
    return covered


def _number_problems(card: Flashcard, where: str) -> list[str]:
    given = set(number_tokens(card.given_part()))
    covered = _covered_numbers(card) | {normalise_digits(q) for q in card.quoted}
    stated = [t for t in number_tokens(card.answer_part()) if t not in given]
    problems = []
    missing = sorted({t for t in stated if t not in covered and f"{float(t):g}" not in covered})
    if missing:
        problems.append(
            f"{where}: states {', '.join(missing)} without a check that computes it "
            "(add a check, or list a number quoted from the source under 'quoted')"
        )
    text_numbers = set(number_tokens(card.front + " " + card.back))
    stale = [q for q in card.quoted if normalise_digits(q) not in text_numbers]
    if stale:
        problems.append(f"{where}: quoted numbers {stale} do not occur on the card")
    return problems


def lint_deck(cards: list[Flashcard] | None = None, retired: dict | None = None) -> list[str]:
    """Every rule of the module docstring; one line per problem (empty when the deck is clean)."""
    cards = load_deck() if cards is None else cards
    retired = load_retired() if retired is None else retired
    problems = list(validate_deck(cards))
    fronts: dict[str, str] = {}
    answers: dict[str, str] = {}
    for card in cards:
        where = f"card {card.id!r} (concept {card.concept})"
        words = answer_words(card)
        limit = MAX_LONG_WORDS if card.long else MAX_ANSWER_WORDS
        if words > limit:
            why = f"(its 'long' reason allows {MAX_LONG_WORDS})" if card.long else ""
            problems.append(f"{where}: answer has {words} words, more than {limit} {why}".rstrip())
        for name in ("front", "back"):
            if _LIST_LINE.search(getattr(card, name)):
                problems.append(f"{where}: a bulleted or numbered list in {name} (split the card)")
        if _SET_FRONT.search(card.front):
            problems.append(f"{where}: the front asks for a set ('name two', 'list ...')")
        if not card.is_cloze and _YES_NO.match(card.front):
            problems.append(f"{where}: a yes/no front (ask what, why or what breaks instead)")
        if not re.match(rf"ch\. {card.concept:02d}\b", card.source):
            problems.append(
                f"{where}: source must start with its chapter, 'ch. {card.concept:02d}'"
            )
        if card.id in retired:
            problems.append(f"{where}: reuses the retired id {card.id!r}")
        question, answer = _normalise(card.question()), _normalise(card.answer_part())
        if question in fronts:
            problems.append(f"{where}: same question as {fronts[question]!r}")
        fronts.setdefault(question, card.id)
        if answer and answer in answers:
            problems.append(f"{where}: same answer as {answers[answer]!r}")
        answers.setdefault(answer, card.id)
        problems += _number_problems(card, where)
    problems += _near_duplicates(cards)
    return problems


def _near_duplicates(cards: list[Flashcard]) -> list[str]:
    # Compare word sequences (not characters): faster, and a reworded card shares words.
    texts = [(_normalise(c.question()).split(), _normalise(c.answer_part()).split()) for c in cards]
    found = []
    for k, part in enumerate(("question", "answer")):
        for a in range(len(cards)):
            x = texts[a][k]
            if len(x) < MIN_COMPARED:
                continue
            matcher = difflib.SequenceMatcher(None, autojunk=False)
            matcher.set_seq2(x)  # the expensive side, analysed once
            for b in range(a + 1, len(cards)):
                y = texts[b][k]
                if len(y) < MIN_COMPARED or x == y:
                    continue
                matcher.set_seq1(y)
                if (
                    matcher.real_quick_ratio() >= NEAR_DUPLICATE
                    and matcher.quick_ratio() >= NEAR_DUPLICATE
                    and matcher.ratio() >= NEAR_DUPLICATE
                ):
                    found.append(
                        f"cards {cards[a].id!r} and {cards[b].id!r}: near-duplicate {part}s "
                        f"({matcher.ratio():.0%} alike once normalised)"
                    )
    return found


@dataclass(frozen=True)
class DeckStats:
    cards: int
    cloze: int
    median_answer_words: float
    max_answer_words: int
    checked: int
    long: int

    def lines(self) -> list[str]:
        return [
            f"cards: {self.cards} ({self.cloze} cloze)",
            f"answer words: median {self.median_answer_words:g}, max {self.max_answer_words}",
            f"cards with number or formula checks: {self.checked}; long answers: {self.long}",
        ]


def deck_stats(cards: list[Flashcard] | None = None) -> DeckStats:
    cards = load_deck() if cards is None else cards
    counts = [answer_words(c) for c in cards]
    return DeckStats(
        cards=len(cards),
        cloze=sum(c.is_cloze for c in cards),
        median_answer_words=statistics.median(counts),
        max_answer_words=max(counts),
        checked=sum(bool(c.checks) for c in cards),
        long=sum(bool(c.long) for c in cards),
    )
