"""Flashcard pages: basic and cloze cards, extra fields, every committed deck."""

import json

import pytest

from pecourse import course
from pecourse.book import cards

DECKS = sorted((course.checkout() / "pecourse" / "cards").glob("[0-9][0-9]_*.json"))


def test_a_basic_card_shows_its_front_then_its_back():
    card = {"id": "a", "front": "What is $m_h$?", "back": "A **slope**.", "topic": "def"}
    front, back = cards.faces(card)
    assert (front, back) == ("What is $m_h$?", "A **slope**.")
    block = cards.card_block(card)
    assert block.startswith("(card-a)=\n::::{container} pc-card pc-card-basic\n")
    assert block.index("What is $m_h$?") < block.index(":::{container} pc-card-back")
    assert block.index("A **slope**.") > block.index(":::{container} pc-card-back")


def test_a_cloze_card_blanks_its_deletions_then_fills_them():
    card = {
        "id": "c",
        "type": "cloze",
        "front": "ALiBi adds {{c1::$-m_h(i-j)$}} to the {{c1::logits::where?}}.",
        "back": "Press et al. 2022.",
    }
    front, back = cards.faces(card)
    assert front == (
        'ALiBi adds <span class="pc-cloze-gap">[…]</span> to the '
        '<span class="pc-cloze-gap">[where?]</span>.'
    )
    assert back.startswith(
        'ALiBi adds <span class="pc-cloze-answer">$-m_h(i-j)$</span> to the '
        '<span class="pc-cloze-answer">logits</span>.'
    )
    assert back.endswith("\n\nPress et al. 2022.")
    assert "pc-card-cloze" in cards.card_block(card)


def test_cloze_markup_is_recognised_without_a_type_and_display_maths_is_not_wrapped():
    card = {"id": "d", "front": "The bound: {{c1::$$b > L$$}}", "back": ""}
    assert cards.is_cloze(card)
    _, back = cards.faces(card)
    assert back == "The bound: $$b > L$$"  # a span around display maths would break it


def test_notes_under_the_answer_come_from_one_table(monkeypatch):
    card = {"id": "e", "front": "Q", "back": "A", "source": "ch. 03 §2 <Press>", "origin": "x"}
    _, back = cards.faces(card)  # a field the table does not list is not shown
    assert back.endswith('<p class="pc-card-note">Source: ch. 03 §2 &lt;Press&gt;</p>')
    monkeypatch.setattr(cards, "BACK_NOTES", (("origin", "Origin"), *cards.BACK_NOTES))
    _, back = cards.faces(card)  # one line in the table shows it, in the table's order
    assert back.endswith('<p class="pc-card-note">Origin: x<br>Source: ch. 03 §2 &lt;Press&gt;</p>')


def test_maths_in_a_note_is_typeset_and_its_markdown_rendered():
    # A raw $ in the note's HTML is left as text by the book's MathJax (make book-check flagged
    # chapter 09's card whose source quotes the cosine of neighbouring rows).
    card = {"id": "f", "front": "Q", "back": "A", "source": r"ch. 09 §2, *cosine* $a<\cos 1$"}
    _, back = cards.faces(card)
    note = back.rsplit('<p class="pc-card-note">', 1)[1]
    assert note == (
        r'Source: ch. 09 §2, <em>cosine</em> <span class="math notranslate nohighlight">'
        r"\(a&lt;\cos 1\)</span></p>"
    )


def test_bad_cards_and_decks_are_refused(tmp_path):
    with pytest.raises(ValueError, match="needs an id"):
        cards.card_block({"front": "Q", "back": "A"})
    path = tmp_path / "deck.json"
    path.write_text(json.dumps({"id": "x"}))
    with pytest.raises(ValueError, match="JSON list of card objects"):
        cards.load_cards(path)


@pytest.mark.parametrize("path", DECKS, ids=lambda p: p.stem)
def test_every_committed_deck_renders_every_card(path):
    deck = cards.load_cards(path)
    page = cards.cards_page("title", deck, "../notebooks/x.ipynb")
    assert page.count("::::{container} pc-card") == len(deck)
    for card in deck:
        assert f"(card-{card['id']})=" in page
        assert "{{c" not in cards.faces(card)[0]  # no deletion shows on a front
