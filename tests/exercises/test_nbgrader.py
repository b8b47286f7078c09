"""The whole course in nbgrader: ``pecourse exercises nbgrader`` writes the course, nbgrader
hands out our exercises/ notebooks and gives every part the score ``pecourse grade`` gives."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pecourse.cli import main as pecourse_main
from pecourse.exercises.grade import find_submissions
from pecourse.exercises.notebook import default_exercise_dir

from .helpers import SLUGS

STUDENT = "cyd"  # wrong in every exercise, right in most parts: both outcomes everywhere


def _env():
    # nbgrader runs helpers such as ``alembic`` from PATH: use this environment's
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path}


def run_pipeline(course):
    """``generate_assignment`` then ``autograde`` on every assignment (one kernel, and one
    import of torch, per notebook: most of the time). One pipeline: under ``make test`` the
    other core runs the other worker, so two pipelines side by side gained nothing and paid
    nbgrader's start-up twice."""
    for args in (["generate_assignment", "*", "--force"], ["autograde", "*"]):
        run = subprocess.run(
            [sys.executable, "-m", "nbgrader", *args],
            cwd=course,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=900,
        )
        assert run.returncode == 0, run.stdout[-3000:]


def code_sources(path):
    nb = json.loads(path.read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


@pytest.mark.slow
def test_nbgrader_grades_all_sixteen_assignments_as_we_do(tmp_path, class_dir, class_rows):
    """Slow: nbgrader starts one kernel (and imports torch) per notebook, sixteen in all."""
    pytest.importorskip("nbgrader")  # here, not at collection: importing it takes a second
    from nbgrader.api import Gradebook

    course = tmp_path / "course"
    assert pecourse_main(["exercises", "nbgrader", str(course)]) == 0
    assert sorted(p.name for p in (course / "source").iterdir()) == SLUGS
    for slug in SLUGS:
        target = course / "submitted" / STUDENT / slug
        target.mkdir(parents=True)
        shutil.copy(class_dir / STUDENT / f"{slug}.ipynb", target)
    # nbgrader's submitted/ is a folder `pecourse grade` reads as it is
    found = {slug: find_submissions(course / "submitted", slug)[STUDENT] for slug in SLUGS}
    assert all(path is not None for path in found.values())

    run_pipeline(course)

    theirs = {}
    for slug in SLUGS:  # nbgrader's release is our exercises/ notebook, cell for cell
        released = course / "release" / slug / f"{slug}.ipynb"
        assert code_sources(released) == code_sources(default_exercise_dir() / f"{slug}.ipynb")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for slug in SLUGS:
            sub = gb.find_submission_notebook(slug, slug, STUDENT)
            for grade in sub.grades:
                theirs[(slug, grade.name)] = (grade.score, grade.max_score)
    ours = {
        (r.exercise, r.part): (r.points, r.max_points) for r in class_rows if r.student == STUDENT
    }
    assert theirs == ours
    assert len(ours) >= 48
    # not trivially uniform: both full and zero scores occur
    assert {v[0] for v in ours.values()} >= {0.0, 2.0}
