"""The deck: 157 sound cards in sixteen jupytercards-readable files."""

import json
import re
from collections import Counter
from importlib import resources

import pytest

from pecourse import course
from pecourse.flashcards import deck
from pecourse.flashcards.deck import CONCEPTS, DECK_SIZE, load_deck, validate_deck
from pecourse.flashcards.render import markdown_to_html

CARDS = load_deck()
CARD_FILES = sorted(
    p for p in (resources.files("pecourse") / "cards").iterdir() if p.name.endswith(".json")
)


def test_exactly_157_cards_in_sixteen_concepts():
    assert len(CARDS) == DECK_SIZE == 157
    counts = Counter(c.concept for c in CARDS)
    assert sorted(counts) == list(range(1, 17))
    assert all(8 <= n <= 12 for n in counts.values()), counts


def test_one_file_per_concept_named_like_the_notebooks():
    expected = {f"{c.slug}.json" for c in course.CONCEPTS}
    assert {p.name for p in CARD_FILES} == expected
    for number in CONCEPTS:
        assert all(c.concept == number for c in deck.load_concept(number))


def test_validate_deck_finds_no_problems():
    assert validate_deck(CARDS) == []


def test_ids_are_unique_slugs():
    ids = [c.id for c in CARDS]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", i) for i in ids)


@pytest.mark.parametrize("card", CARDS, ids=lambda c: c.id)
def test_card_fields(card):
    for name in ("front", "back", "topic"):
        value = getattr(card, name)
        assert isinstance(value, str) and value.strip(), name
        assert deck.balanced_dollars(value), f"unbalanced $ in {name}"
        assert "\\n" not in value.replace("\\nu", "").replace("\\neq", ""), "literal \\n"
    assert isinstance(card.concept, int) and card.concept in CONCEPTS
    # Math survives rendering: as many $ in the HTML as in the Markdown.
    assert markdown_to_html(card.back).count("$") == card.back.count("$")


def test_validation_catches_problems():
    bad = [
        deck.Flashcard("a", 1, "x $y", "z", "t"),
        deck.Flashcard("a", 1, "x", " ", "t"),
        deck.Flashcard("Bad Id", 99, "x", "y", "t"),
    ]
    problems = "\n".join(validate_deck(bad))
    assert "unbalanced $ in front" in problems
    assert "empty back" in problems
    assert "duplicate id" in problems
    assert "slug" in problems and "concept must be 1-16" in problems


def test_files_are_plain_json_lists_of_card_objects():
    for path in CARD_FILES:
        data = json.loads(path.read_text(encoding="utf-8"))
        assert isinstance(data, list) and data
        for raw in data:
            assert {"id", "concept", "front", "back", "topic"} <= set(raw)
            assert set(raw) <= {"id", "concept", "front", "back", "topic", "check"}


def test_jupytercards_reads_every_file():
    dynamic = pytest.importorskip("jupytercards.dynamic")
    for path in CARD_FILES:
        cards, _is_local, _url = dynamic._parse_ref(str(path))
        assert len(cards) == len(json.loads(path.read_text()))
        assert all("front" in c and "back" in c for c in cards)
        topic = cards[0]["topic"]
        assert dynamic._filter_cards(cards, topic)


def test_load_deck_refuses_bad_concepts():
    with pytest.raises(ValueError, match="1-16"):
        load_deck(17)
    with pytest.raises(TypeError, match="concept"):
        load_deck("8")


def test_render_keeps_math_and_formats_markdown():
    html = markdown_to_html("**a** $x_i * y_j < 1$ *b*\n\n- one\n- two")
    assert "<strong>a</strong>" in html and "<em>b</em>" in html
    assert "$x_i * y_j &lt; 1$" in html
    assert "<ul><li>one</li><li>two</li></ul>" in html
    assert markdown_to_html("$$a$$ and $b$", math_style="anki") == r"<p>\[a\] and \(b\)</p>"
