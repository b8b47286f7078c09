"""Autograded exercises: build the student notebooks, self-check one, grade a whole class.

The single source of each exercise is ``solutions/NN_slug.ipynb`` (nbgrader's source
format): answer regions between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` in cells
whose ``metadata.nbgrader`` marks them ``solution``, graded test cells marked ``grade`` with
``points``, and hidden tests between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS``.

* :func:`~pecourse.exercises.notebook.build_all` writes ``exercises/`` (``pecourse
  exercises build``): answers replaced by ``raise NotImplementedError()``, hidden tests
  removed, outputs cleared.
* :func:`~pecourse.exercises.check.check_notebook` runs a learner's notebook in a Jupyter
  kernel and reports each part (``pecourse check``).
* :func:`~pecourse.exercises.grade.grade_class` grades ``SUBMISSIONS/<student>/<NN_slug>.ipynb``
  (``pecourse grade``): each submission is rebuilt from the source's locked and test cells
  plus the student's answer cells, run in its own process under time and memory limits, and
  scored per test cell into a CSV and a SQLite gradebook.

None of this needs nbgrader; an instructor who uses nbgrader can import ``solutions/``
unchanged (``tests/exercises`` checks that both give the same scores).
"""

from __future__ import annotations

from .notebook import build_all, build_student_notebook, default_source_dir

__all__ = ["build_all", "build_student_notebook", "default_source_dir"]
