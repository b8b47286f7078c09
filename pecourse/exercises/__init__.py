"""Autograded exercises: build the student notebooks, self-check one, grade a whole class.

The single source of each exercise is ``solutions/NN_slug.ipynb``, in nbgrader's source
format (:mod:`~pecourse.exercises.notebook`: answer regions, graded test cells with
``points``, hidden tests).

* :func:`~pecourse.exercises.notebook.build_all` writes ``exercises/`` (``pecourse
  exercises build``): answers stubbed, hidden tests removed, outputs cleared.
* :func:`~pecourse.exercises.grade.grade_class` (``pecourse grade``) runs each submission's
  code sandboxed (:mod:`~pecourse.exercises.sandbox`) and its tests in a trusted judge
  (:mod:`~pecourse.exercises._runner`), into a SQLite gradebook and the CSV rebuilt from
  it. The threat model is in :mod:`~pecourse.exercises.grade`.
* :func:`~pecourse.exercises.check.check_notebook` (``pecourse check``) runs a learner's
  notebook through the same engine with the visible tests, and reports each part.
* :func:`~pecourse.exercises.nbgrader.write_course` (``pecourse exercises nbgrader``)
  writes the whole course as an nbgrader course directory.

None of this needs nbgrader; nbgrader imports ``solutions/`` unchanged (``tests/exercises``
checks that both give the same scores on all sixteen).
"""

from __future__ import annotations

__all__ = ["build_all", "build_student_notebook", "default_source_dir"]


def __getattr__(name: str):
    # Imported on first use: the grading server (``python -m pecourse.exercises._runner``)
    # imports this package, and nbformat costs it about two seconds of start-up (its
    # jsonschema builds an IRI grammar at import time) for nothing it uses.
    if name in __all__:
        from . import notebook

        return getattr(notebook, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
