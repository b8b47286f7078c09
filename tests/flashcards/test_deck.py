"""The deck: 157 sound cards in sixteen jupytercards-readable files, with a stable history."""

import dataclasses
import json
import re
import statistics
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest

from pecourse import course
from pecourse.flashcards import cloze, deck
from pecourse.flashcards.deck import (
    CONCEPTS,
    DECK_SIZE,
    Flashcard,
    load_deck,
    load_retired,
    validate_deck,
)
from pecourse.flashcards.lint import answer_words
from pecourse.flashcards.render import markdown_to_html, math_spans

CARDS = load_deck()
CARD_FILES = sorted(
    p
    for p in (resources.files("pecourse") / "cards").iterdir()
    if p.name.endswith(".json") and p.name != "retired.json"
)
PUBLISHED_BEFORE = (Path(__file__).parent / "data" / "ids_published_before_issue17.txt").read_text()
#: The checkout these tests belong to (the package may be installed elsewhere).
ROOT = Path(__file__).resolve().parents[2]


def test_exactly_157_cards_in_sixteen_concepts():
    assert len(CARDS) == DECK_SIZE == 157
    counts = Counter(c.concept for c in CARDS)
    assert sorted(counts) == list(range(1, 17))
    assert all(8 <= n <= 12 for n in counts.values()), counts


def test_per_concept_counts_match_the_notebooks_quiz_cells():
    # Each notebook's last cell prints "<pecourse flashcard quiz: TITLE, N cards>" and is
    # compared by nbval: the deck must keep the counts the committed outputs show.
    for c in course.CONCEPTS:
        nb = json.loads((ROOT / c.notebook).read_text())
        shown = [
            "".join(o.get("data", {}).get("text/plain", ""))
            for cell in nb["cells"]
            for o in cell.get("outputs", [])
        ]
        quiz = [s for s in shown if s.startswith("<pecourse flashcard quiz")]
        assert quiz == [f"<pecourse flashcard quiz: {c.title}, {len(load_deck(c.number))} cards>"]


def test_the_deck_follows_the_minimum_information_principle():
    words = [answer_words(c) for c in CARDS]
    assert statistics.median(w for w, c in zip(words, CARDS) if not c.is_cloze) <= 10
    assert all(w <= 20 or c.long for w, c in zip(words, CARDS))
    assert sum(c.is_cloze for c in CARDS) >= 30


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


def test_history_stays_valid_across_the_rewrite():
    before = set(PUBLISHED_BEFORE.split())
    assert len(before) == 157
    current, retired = {c.id for c in CARDS}, load_retired()
    # Every id ever published is either still a card (same fact) or retired, never both.
    assert before <= current | set(retired)
    assert not current & set(retired)
    for entry in retired.values():
        assert entry["reason"].strip()
        assert entry.get("replaced_by") is None or entry["replaced_by"] in current
    # The five cards the review found wrong are retired, not rewritten under their ids.
    for wrong in ("base-bound-4k", "t5-buckets", "irope-rationale", "perm-rnn-cnn-contrast",
                  "pe-four-term-expansion"):  # fmt: skip
        assert wrong in retired and wrong not in current


@pytest.mark.parametrize("card", CARDS, ids=lambda c: c.id)
def test_card_fields(card):
    for name in ("front", "back", "topic", "source"):
        value = getattr(card, name)
        assert isinstance(value, str)
        assert deck.balanced_dollars(value), f"unbalanced $ in {name}"
        assert "\\n" not in value.replace("\\nu", "").replace("\\neq", ""), "literal \\n"
    assert card.front.strip() and card.topic.strip() and card.source.startswith("ch. ")
    assert card.back.strip() or card.is_cloze
    assert isinstance(card.concept, int) and card.concept in CONCEPTS
    # Math survives rendering: as many $ in the HTML as in the Markdown.
    for text in (card.question(), card.answer()):
        assert markdown_to_html(text).count("$") == text.count("$")
    if card.is_cloze:
        assert cloze.problems(card.front) == []
        assert "{{" not in card.question() and "[…]" in card.question()
        for hidden in cloze.deletions(card.front):
            assert hidden not in card.question()
            assert hidden in card.answer()


def test_validation_catches_problems():
    bad = [
        Flashcard("a", 1, "x $y", "z", "t", "ch. 01"),
        Flashcard("a", 1, "x", " ", "t", "ch. 01"),
        Flashcard("Bad Id", 99, "x", "y", "t", "ch. 01"),
        Flashcard("c", 1, "no deletion here", "", "t", "ch. 01", type="cloze"),
        Flashcard("d", 1, "a {{c2::b}} {{c1::$x", "", "t", "ch. 01", type="cloze"),
        Flashcard("e", 1, "a {{c1::b}}", "y", "t", "ch. 01"),
        Flashcard("f", 1, "x", "y", "t", "ch. 01", type="reverse"),
    ]
    problems = "\n".join(validate_deck(bad))
    assert "unbalanced $ in front" in problems
    assert "empty back" in problems
    assert "duplicate id" in problems
    assert "slug" in problems and "concept must be 1-16" in problems
    assert "no {{c1::...}} deletion" in problems
    assert "only c1 deletions" in problems
    assert "cloze deletions in a basic card" in problems
    assert "type must be one of" in problems


def test_files_are_plain_json_lists_of_card_objects():
    allowed = set(deck.REQUIRED_FIELDS) | set(deck.OPTIONAL_FIELDS)
    for path in CARD_FILES:
        data = json.loads(path.read_text(encoding="utf-8"))
        assert isinstance(data, list) and data
        for raw in data:
            assert set(deck.REQUIRED_FIELDS) <= set(raw) <= allowed
    with pytest.raises(ValueError, match="unknown fields"):
        Flashcard.from_dict({**CARDS[0].to_dict(), "answer": "x"})
    with pytest.raises(ValueError, match="lacks the fields"):
        Flashcard.from_dict({"id": "x", "concept": 1, "front": "f", "back": "b"})
    assert Flashcard.from_dict(CARDS[0].to_dict()) == CARDS[0]


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


def test_cloze_rendering():
    text = r"ALiBi adds {{c1::$-m_h(i-j)$}} and {{c1::no parameters::how many?}}."
    assert cloze.question(text) == "ALiBi adds […] and [how many?]."
    assert cloze.answer(text) == "ALiBi adds **$-m_h(i-j)$** and **no parameters**."
    assert cloze.deletions(text) == ["$-m_h(i-j)$", "no parameters"]
    html = markdown_to_html(cloze.answer(text))
    assert "<strong>$-m_h(i-j)$</strong>" in html
    card = Flashcard("x", 3, text, "extra note", "t", "ch. 03", type="cloze")
    assert card.answer().endswith("\n\nextra note")
    assert card.answer_part() == "$-m_h(i-j)$ no parameters extra note"
    assert dataclasses.replace(card, back="").answer() == cloze.answer(text)


def test_format_is_documented_for_other_renderers():
    doc = deck.__doc__
    for word in ("Card format", "``type``", "{{c1::hidden text}}", "``source``", "``checks``",
                 "``quoted``", "retired.json", "question", "answer"):  # fmt: skip
        assert word in doc, word


def test_render_keeps_math_and_formats_markdown():
    html = markdown_to_html("**a** $x_i * y_j < 1$ *b*\n\n- one\n- two")
    assert "<strong>a</strong>" in html and "<em>b</em>" in html
    assert "$x_i * y_j &lt; 1$" in html
    assert "<ul>\n<li>one</li>\n<li>two</li>\n</ul>" in html
    assert markdown_to_html("$$a$$ and $b$", math_style="anki") == r"<p>\[a\] and \(b\)</p>"
    assert markdown_to_html("$$a$$\n\nb", math_style="anki") == "<p>\\[a\\]</p>\n<p>b</p>"


@pytest.mark.parametrize(
    ("text", "html", "spans"),
    [
        # a code span is code, even with dollars in it
        ("`f($x$)`", "<p><code>f($x$)</code></p>", []),
        # pandoc's rule: no space inside the dollars, so prices are not maths
        ("from $5 to $6", "<p>from $5 to $6</p>", []),
        ("$a$ and\n$b<c$", "<p>$a$ and<br>\n$b&lt;c$</p>", ["$a$", "$b<c$"]),
        ("<b>x</b> & $y$", "<p>&lt;b&gt;x&lt;/b&gt; &amp; $y$</p>", ["$y$"]),  # raw HTML is text
    ],
)
def test_what_is_maths_and_what_is_markdown(text, html, spans):
    assert markdown_to_html(text) == html
    assert math_spans(text) == spans


def test_unknown_math_style_is_refused():
    with pytest.raises(ValueError, match="math_style must be 'dollar' or 'anki'"):
        markdown_to_html("x", math_style="latex")
