"""Flashcards: the 157-card deck, FSRS-scheduled review in a widget or the terminal, exports.

In a notebook::

    from pecourse.flashcards import quiz
    quiz(8)        # the RoPE cards; quiz() reviews the whole deck

Progress is kept in SQLite under :func:`pecourse.paths.data_dir` (``PECOURSE_DATA_DIR``
overrides it). From a shell: ``pecourse cards review|stats|export|lint|reset``.

Card format, for anything that renders the deck (in full in :mod:`pecourse.flashcards.deck`):
``pecourse/cards/NN_slug.json`` holds a JSON list of cards ``{"id", "concept", "type",
"front", "back", "topic", "source", "checks", "quoted", "given", "long"}``. ``type`` is ``"basic"``
(the default) or ``"cloze"``. A basic card shows ``front`` (Markdown, LaTeX in ``$...$``),
then ``back``. A cloze card's ``front`` holds Anki-style deletions, ``{{c1::text}}`` or
``{{c1::text::hint}}``: show it with each deletion as ``[…]`` (or ``[hint]``), then with the
deletions filled in, followed by ``back`` (an optional note). :meth:`Flashcard.question` and
:meth:`Flashcard.answer` return exactly those two Markdown strings.

``pecourse cards lint`` checks the deck's writing rules (:mod:`pecourse.flashcards.lint`),
and :mod:`pecourse.flashcards.checks` recomputes every number a card states from the package.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "quiz": "widget",
    "Quiz": "widget",
    "CONCEPTS": "deck",
    "TITLES": "deck",
    "DECK_SIZE": "deck",
    "Flashcard": "deck",
    "load_deck": "deck",
    "validate_deck": "deck",
    "concept_file": "deck",
    "load_retired": "deck",
    "lint_deck": "lint",
    "deck_stats": "lint",
    "run_checks": "checks",
    "ProgressStore": "store",
    "CorruptDatabaseWarning": "store",
    "Stats": "store",
    "make_scheduler": "store",
    "export_anki": "export",
    "export_json": "export",
    "markdown_to_html": "render",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    # Lazy, so ``pecourse cards stats`` does not import ipywidgets.
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return __all__
