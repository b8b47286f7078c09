"""The quiz widget, driven headlessly: buttons clicked in Python, time from a fake clock."""

from datetime import datetime, timedelta

import fsrs
import ipywidgets as widgets
import pytest

from pecourse.flashcards import cloze, quiz
from pecourse.flashcards.deck import load_deck
from pecourse.flashcards.render import markdown_to_html
from pecourse.flashcards.store import ProgressStore

ALIBI = load_deck(3)


def _visible(widget):
    return widget.layout.display != "none"


@pytest.fixture
def q(store, clock, scheduler):
    return quiz(3, store=store, clock=clock, scheduler=scheduler)


def test_it_is_a_widget_with_math_rendering(q):
    assert isinstance(q, widgets.VBox)
    assert isinstance(q.front, widgets.HTMLMath) and isinstance(q.back, widgets.HTMLMath)
    assert set(q.rating_buttons) == {"Again", "Hard", "Good", "Easy"}


def test_starts_with_new_cards_and_counts(q):
    assert q.current.id == ALIBI[0].id
    assert "Due <b>0</b>" in q.counts.value and f"New <b>{len(ALIBI)}</b>" in q.counts.value
    assert "Learned <b>0</b>" in q.counts.value
    assert not _visible(q.back) and not _visible(q.ratings) and _visible(q.show_button)


def test_show_answer_then_good_updates_schedule_and_database(q, store, clock):
    first = q.current
    q.show_button.click()
    assert _visible(q.back) and _visible(q.ratings) and not _visible(q.show_button)
    assert q.rating_buttons["Good"].tooltip == "again in 10 min"
    q.rating_buttons["Good"].click()
    state = store.card_state(first.id)
    assert state.due == clock.now + timedelta(minutes=10)
    assert [r["rating"] for r in store.reviews(first.id)] == [int(fsrs.Rating.Good)]
    assert q.current.id == ALIBI[1].id  # the next new card
    assert "Learned <b>1</b>" in q.counts.value and "next due" in q.counts.value
    assert not _visible(q.back)


def test_cloze_card_hides_its_deletion_until_the_answer(q):
    card = q.current
    assert card.is_cloze  # the ALiBi quiz opens on a cloze card
    hidden = cloze.deletions(card.front)[0]
    assert "[…]" in q.front.value and hidden not in q.front.value
    assert "{{c1::" not in q.front.value + q.back.value
    q.show_button.click()
    assert _visible(q.back) and f"<strong>{hidden}</strong>" in q.back.value


def test_basic_card_shows_front_then_back(store, clock, scheduler):
    q = quiz(4, store=store, clock=clock, scheduler=scheduler)
    card = q.current
    assert not card.is_cloze  # chapter 04 opens on a basic card
    assert markdown_to_html(card.front) in q.front.value
    assert q.back.value == "<hr>" + markdown_to_html(card.back)


def test_due_cards_come_before_new_ones(store, clock, scheduler):
    q = quiz(3, store=store, clock=clock, scheduler=scheduler)
    q.show_button.click()
    q.rating_buttons["Again"].click()  # back in 1 minute
    q.show_button.click()
    q.rating_buttons["Easy"].click()
    clock.advance(minutes=2)
    again = quiz(3, store=store, clock=clock, scheduler=scheduler)
    assert again.current.id == ALIBI[0].id
    assert "Due <b>1</b>" in again.counts.value


def test_all_four_ratings_are_recorded(q, store):
    ids = []
    for name in ("Again", "Hard", "Good", "Easy"):
        ids.append(q.current.id)
        q.show_button.click()
        q.rating_buttons[name].click()
    assert [store.reviews(i)[0]["rating"] for i in ids] == [1, 2, 3, 4]


def test_finishing_the_queue_says_so(store, clock, scheduler):
    q = quiz(3, store=store, clock=clock, scheduler=scheduler)
    for _ in ALIBI:
        q.show_button.click()
        q.rating_buttons["Easy"].click()
    assert q.current is None
    assert "Nothing to review" in q.front.value and not _visible(q.show_button)
    # Clicks with nothing on show do nothing.
    q.rating_buttons["Good"].click()
    assert len(store.reviews()) == len(ALIBI)


def test_whole_deck_and_default_store(data_dir, clock):
    q = quiz(clock=clock)
    assert len(q.cards) == len(load_deck())
    assert q.store.path == data_dir / "flashcards.sqlite3"


def test_clock_must_be_timezone_aware(store):
    with pytest.raises(ValueError, match="timezone-aware"):
        quiz(3, store=store, clock=lambda: datetime(2026, 1, 1))


def test_failed_save_is_shown_not_lost(q, store, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("read-only file system")

    monkeypatch.setattr(store, "review", broken)
    first = q.current
    q.show_button.click()
    q.rating_buttons["Good"].click()
    assert "Not saved" in q.message.value and "read-only" in q.message.value
    assert q.current is first  # still on the same card, ready to retry


def test_two_quizzes_on_one_database(tmp_path, clock, scheduler):
    path = tmp_path / "shared.sqlite3"
    a = quiz(3, store=ProgressStore(path), clock=clock, scheduler=scheduler)
    b = quiz(8, store=ProgressStore(path), clock=clock, scheduler=scheduler)
    for w in (a, b, a):
        w.show_button.click()
        w.rating_buttons["Good"].click()
    assert len(ProgressStore(path).reviews()) == 3
