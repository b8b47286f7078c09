"""The flashcard quiz: an ipywidgets widget that reviews cards on an FSRS schedule.

``quiz(8)`` in a notebook shows the RoPE cards: due cards first (most overdue first), then
new ones in deck order. "Show answer" reveals the back (for a cloze card, the text with its
deletions filled in and marked); Again / Hard / Good / Easy rate the
card, which is written to the progress database at once (so closing the notebook loses
nothing) and the next card appears. The header counts due, new and learned cards and says
when the next one is due.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import fsrs
import ipywidgets as widgets

from .deck import TITLES, Flashcard, load_deck
from .render import markdown_to_html
from .store import ProgressStore, check_utc, make_scheduler, utc_now

RATINGS = (fsrs.Rating.Again, fsrs.Rating.Hard, fsrs.Rating.Good, fsrs.Rating.Easy)
_STYLES = {"Again": "danger", "Hard": "warning", "Good": "success", "Easy": "info"}


def _when(due: datetime, now: datetime) -> str:
    """A short, human interval such as '10 min', '3 h' or '4 d'."""
    seconds = max(0.0, (due - now).total_seconds())
    if seconds < 3600:
        return f"{max(1, round(seconds / 60))} min"
    if seconds < 86400:
        return f"{round(seconds / 3600)} h"
    return f"{round(seconds / 86400)} d"


class Quiz(widgets.VBox):
    """The quiz widget (see :func:`quiz`). Its parts are attributes, for tests and styling:
    ``show_button``, ``rating_buttons`` (a dict by name), ``front``, ``back``, ``counts``.
    """

    def __init__(
        self,
        concept: int | None = None,
        *,
        store: ProgressStore | None = None,
        clock: Callable[[], datetime] | None = None,
        scheduler: fsrs.Scheduler | None = None,
    ):
        self.concept = concept
        self.cards: dict[str, Flashcard] = {c.id: c for c in load_deck(concept)}
        self.store = store if store is not None else ProgressStore()
        self.clock = clock or utc_now
        self.scheduler = scheduler or make_scheduler()
        self.current: Flashcard | None = None
        self.last_error: str | None = None

        title = TITLES[concept] if concept is not None else "the whole deck"
        self.title = widgets.HTML(f"<b>Flashcards: {title}</b>")
        self.counts = widgets.HTML()
        self.front = widgets.HTMLMath()
        self.back = widgets.HTMLMath(layout=widgets.Layout(display="none"))
        self.show_button = widgets.Button(description="Show answer", button_style="primary")
        self.show_button.on_click(lambda _b: self.show_answer())
        self.rating_buttons: dict[str, widgets.Button] = {}
        for rating in RATINGS:
            button = widgets.Button(description=rating.name, button_style=_STYLES[rating.name])
            button.on_click(lambda _b, r=rating: self.rate(r))
            self.rating_buttons[rating.name] = button
        self.ratings = widgets.HBox(
            list(self.rating_buttons.values()), layout=widgets.Layout(display="none")
        )
        self.message = widgets.HTML()
        super().__init__(
            [
                self.title,
                self.counts,
                self.front,
                self.back,
                self.show_button,
                self.ratings,
                self.message,
            ],
            layout=widgets.Layout(border="1px solid #ccc", padding="8px", max_width="760px"),
        )
        self.next_card()

    def __repr__(self) -> str:
        # Stable text/plain for notebooks under nbval (no counts, times or widget ids).
        title = TITLES[self.concept] if self.concept is not None else "the whole deck"
        return f"<pecourse flashcard quiz: {title}, {len(self.cards)} cards>"

    # -- state ---------------------------------------------------------------------------
    def now(self) -> datetime:
        return check_utc(self.clock(), "clock()")

    def refresh_counts(self) -> None:
        now = self.now()
        stats = self.store.stats(self.cards, now)
        due_text = ""
        if stats.next_due is not None:
            due_text = (
                f" · next due {stats.next_due:%Y-%m-%d %H:%M} UTC (in {_when(stats.next_due, now)})"
            )
        self.counts.value = (
            f"Due <b>{stats.due}</b> · New <b>{stats.new}</b> · "
            f"Learned <b>{stats.learned}</b> of {stats.total}{due_text}"
        )
        self.stats = stats

    def next_card(self) -> Flashcard | None:
        """Show the first card of the queue (or a 'done' message); returns it."""
        queue = self.store.queue(self.cards, self.now())
        self.refresh_counts()
        self.back.layout.display = "none"
        self.ratings.layout.display = "none"
        if not queue:
            self.current = None
            self.front.value = "<p><b>Nothing to review right now.</b></p>"
            self.back.value = ""
            self.show_button.layout.display = "none"
            return None
        self.current = self.cards[queue[0]]
        card = self.current
        self.front.value = (
            f"<div style='color:#777;font-size:smaller'>{card.topic} · "
            f"concept {card.concept:02d}</div>" + markdown_to_html(card.question())
        )
        self.back.value = "<hr>" + markdown_to_html(card.answer())
        self.show_button.layout.display = None
        return card

    def show_answer(self) -> None:
        if self.current is None:
            return
        self.back.layout.display = None
        self.show_button.layout.display = "none"
        self.ratings.layout.display = None
        self._preview_intervals()

    def _preview_intervals(self) -> None:
        """Tooltips saying when each rating would bring the card back."""
        now = self.now()
        state = self.store.card_state(self.current.id) or fsrs.Card(card_id=0, due=now)
        settings = self.scheduler.to_dict()
        settings["enable_fuzzing"] = False
        preview = fsrs.Scheduler.from_dict(settings)
        for rating in RATINGS:
            try:
                card, _ = preview.review_card(state, rating, review_datetime=now)
                self.rating_buttons[rating.name].tooltip = f"again in {_when(card.due, now)}"
            except Exception:  # a preview is a nicety; never block a review on it
                self.rating_buttons[rating.name].tooltip = ""

    def rate(self, rating) -> fsrs.Card | None:
        """Record a rating for the card on show, then move to the next card."""
        if self.current is None:
            return None
        card_id = self.current.id
        try:
            state = self.store.review(card_id, rating, now=self.now(), scheduler=self.scheduler)
        except Exception as exc:  # show it in the widget; the database is unchanged
            self.last_error = f"{type(exc).__name__}: {exc}"
            self.message.value = f"<span style='color:#b00'>Not saved: {self.last_error}</span>"
            return None
        self.message.value = (
            f"<span style='color:#555'>Saved: next review of this card "
            f"{state.due:%Y-%m-%d %H:%M} UTC.</span>"
        )
        self.next_card()
        return state


def quiz(
    concept: int | None = None,
    *,
    store: ProgressStore | None = None,
    clock: Callable[[], datetime] | None = None,
    scheduler: fsrs.Scheduler | None = None,
) -> Quiz:
    """A review widget for one syllabus concept (1-16) or, with ``concept=None``, the whole deck.

    ``store`` defaults to the learner's database under ``pecourse.paths.data_dir()``;
    ``clock`` (a callable returning a timezone-aware UTC datetime) defaults to the real
    time; ``scheduler`` defaults to FSRS with its published default parameters.
    """
    return Quiz(concept, store=store, clock=clock, scheduler=scheduler)
