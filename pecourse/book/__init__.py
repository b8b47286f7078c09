"""The course as an offline website: ``make book`` (``python -m pecourse.book build``).

Sphinx with MyST-NB renders the committed, executed notebooks as they are (their outputs and
saved widget state; Sphinx executes nothing), with sphinx-book-theme for the layout and Sphinx's
own full-text search, which runs in the browser from ``file://``. MathJax and the Jupyter
widget manager come from npm packages pinned in ``book/assets.json`` and are copied into the
site. :mod:`pecourse.book.check` opens the result in headless Chromium with the network
blocked.

- :mod:`pecourse.book.assets`: the pinned npm packages.
- :mod:`pecourse.book.pages`: what happens to a notebook on its way into the book.
- :mod:`pecourse.book.cards`: the flashcard pages.
- :mod:`pecourse.book.frames`: the chapters' explorers, drawn for a grid of their controls'
  values before Sphinx runs (the one part of the build that runs a chapter's code, in a
  kernel), so that they move in the page.
- :mod:`pecourse.book.builder`: staging and the Sphinx run.
"""

from pecourse.book.builder import DEFAULT_OUT, BuildResult, build, stage

__all__ = ["DEFAULT_OUT", "BuildResult", "build", "stage"]
