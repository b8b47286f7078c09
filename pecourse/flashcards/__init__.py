"""Flashcards: the 157-card deck, FSRS-scheduled review in a widget or the terminal, exports.

In a notebook::

    from pecourse.flashcards import quiz
    quiz(8)        # the RoPE cards; quiz() reviews the whole deck

Progress is kept in SQLite under :func:`pecourse.paths.data_dir` (``PECOURSE_DATA_DIR``
overrides it). From a shell: ``pecourse cards review|stats|export|lint|reset``.

The card format (basic and cloze cards, sources, number checks) is documented in
:mod:`pecourse.flashcards.deck`; ``pecourse cards lint`` checks the deck's writing rules
(:mod:`pecourse.flashcards.lint`), and :mod:`pecourse.flashcards.checks` recomputes every
number a card states from the package.
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
