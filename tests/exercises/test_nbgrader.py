"""nbgrader, run on our sources, hands out the same notebooks and gives the same scores."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pecourse.exercises.notebook import default_exercise_dir

from .helpers import SOURCES

pytest.importorskip("nbgrader")

SLUG = "09_sinusoidal_positional_encodings"
ASSIGNMENT = "ex09"


def nbgrader(course, *args):
    proc = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        # nbgrader runs helpers such as ``alembic`` from PATH: use this environment's
        env={
            **os.environ,
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def code_sources(path):
    nb = json.loads(path.read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


@pytest.mark.slow
def test_nbgrader_autograde_agrees_with_our_grader(tmp_path, class_dir, class_rows):
    from nbgrader.api import Gradebook

    course = tmp_path / "course"
    (course / "source" / ASSIGNMENT).mkdir(parents=True)
    shutil.copy(SOURCES[0].parent / f"{SLUG}.ipynb", course / "source" / ASSIGNMENT)
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        "c.CourseDirectory.course_id = 'pecourse'\n"
        f"c.CourseDirectory.root = {str(course)!r}\n"
        "c.ExecutePreprocessor.timeout = 120\n"
    )
    students = sorted(p.name for p in class_dir.iterdir() if p.is_dir())
    nbgrader(course, "db", "assignment", "add", ASSIGNMENT)
    for student in students:
        nbgrader(course, "db", "student", "add", student)
        target = course / "submitted" / student / ASSIGNMENT
        target.mkdir(parents=True)
        shutil.copy(class_dir / student / f"{SLUG}.ipynb", target)
    nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")

    # nbgrader's release is our exercises/ notebook, cell for cell.
    released = course / "release" / ASSIGNMENT / f"{SLUG}.ipynb"
    assert code_sources(released) == code_sources(default_exercise_dir() / f"{SLUG}.ipynb")

    nbgrader(course, "autograde", ASSIGNMENT)
    theirs = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in students:
            sub = gb.find_submission_notebook(SLUG, ASSIGNMENT, student)
            for grade in sub.grades:
                theirs[(student, grade.name)] = (grade.score, grade.max_score)
    ours = {(r.student, r.part): (r.points, r.max_points) for r in class_rows if r.exercise == SLUG}
    assert theirs == ours
    # and the class is not trivially uniform: full, zero and partial scores all occur
    totals = {s: sum(v[0] for (st, _), v in ours.items() if st == s) for s in students}
    assert len(set(totals.values())) >= 3
