"""Exercise sources, generated notebooks, and grading of a synthetic class."""

from __future__ import annotations

import csv
import json
import sqlite3

import pytest

from pecourse.cli import main as pecourse_main
from pecourse.course import CONCEPTS
from pecourse.exercises.notebook import (
    BEGIN_HIDDEN,
    BEGIN_SOLUTION,
    build_student_notebook,
    default_exercise_dir,
    is_answer_cell,
    is_test_cell,
    parts,
    read_notebook,
    stale_exercises,
    strip_solutions,
)

from .helpers import SLUGS, SOURCES
from .wrong_answers import WRONG
from .wrong_answers_more import WRONG_MORE


def by_key(rows):
    return {(r.student, r.exercise, r.part): r for r in rows}


def total(rows, student, exercise):
    got = sum(r.points for r in rows if r.student == student and r.exercise == exercise)
    most = sum(r.max_points for r in rows if r.student == student and r.exercise == exercise)
    return got, most


# ----------------------------------------------------------------------------- sources


def test_every_concept_has_an_exercise():
    assert SLUGS == [c.slug for c in CONCEPTS], "one solutions/NN_slug.ipynb per syllabus concept"
    total_parts = sum(len(parts(read_notebook(p))) for p in SOURCES)
    assert total_parts >= 48


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_source_is_well_formed(path):
    nb = read_notebook(path)
    graded = parts(nb)
    assert len(graded) >= 3, f"{path.name}: at least three graded parts"
    assert all(p.points > 0 for p in graded)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if "nbgrader" in c.metadata]
    assert len(ids) == len(set(ids)), "grade_ids are unique"
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader")
        if meta is None:
            assert cell.cell_type == "markdown", "code cells carry nbgrader metadata"
            continue
        assert meta["schema_version"] == 3
        assert {"grade", "grade_id", "locked", "solution", "task"} <= set(meta)
        if is_test_cell(cell):
            assert meta["locked"] and "points" in meta
        if is_answer_cell(cell):
            assert not meta["locked"] and BEGIN_SOLUTION in cell.source
            stub = strip_solutions(cell.source)
            assert "raise NotImplementedError()" in stub
    assert any(BEGIN_HIDDEN in c.source for c in nb.cells if is_test_cell(c)), "hidden tests"


def test_exercises_are_up_to_date_with_solutions():
    assert stale_exercises() == [], "run `pecourse exercises build` and commit exercises/"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_student_notebook_hides_solutions_and_hidden_tests(path):
    text = (default_exercise_dir() / path.name).read_text()
    nb = json.loads(text)
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        assert BEGIN_SOLUTION not in source and BEGIN_HIDDEN not in source
        assert cell.get("outputs", []) == []
        if cell["cell_type"] == "code" and cell["metadata"]["nbgrader"]["solution"]:
            assert "raise NotImplementedError()" in source
            # what sits above the answer region (the def line, the docstring) is kept
            source_cell = next(
                c for c in read_notebook(path).cells if c.get("id") == cell.get("id")
            )
            head = source_cell.source.split(BEGIN_SOLUTION)[0].strip()
            assert source.strip().startswith(head)


def test_build_is_deterministic():
    src = read_notebook(SOURCES[0])
    assert build_student_notebook(src) == build_student_notebook(src)


# ----------------------------------------------------------------------------- the class


@pytest.mark.parametrize("slug", SLUGS)
def test_solution_scores_full_marks(class_rows, slug):
    failed = [
        (r.part, r.reason)
        for r in class_rows
        if r.student == "ada" and r.exercise == slug and r.points < r.max_points
    ]
    assert failed == []


@pytest.mark.parametrize("slug", SLUGS)
def test_untouched_exercise_scores_zero(class_rows, slug):
    rows = [r for r in class_rows if r.student == "bea" and r.exercise == slug]
    assert rows and all(r.points == 0 for r in rows)
    assert all(r.reason for r in rows), "every failed part says why"
    assert any("NotImplementedError" in r.reason for r in rows), [r.reason for r in rows]


@pytest.mark.parametrize("student", ["cyd", "dan"])
@pytest.mark.parametrize("slug", SLUGS)
def test_wrong_answer_gets_partial_credit(class_rows, slug, student):
    expected = (WRONG if student == "cyd" else WRONG_MORE)[slug][1]
    rows = [r for r in class_rows if r.student == student and r.exercise == slug]
    failed = {r.part for r in rows if r.points < r.max_points}
    assert failed == expected, {r.part: r.reason for r in rows}
    assert all(r.reason for r in rows if r.part in failed), "a failed part says why"
    got, most = total(class_rows, student, slug)
    assert 0 < got < most


def test_cli_grade_writes_csv_sqlite_summary_and_is_deterministic(
    class_dir, class_rows, tmp_path, capsys
):
    """``pecourse grade`` on the same class again: the same gradebook, row for row."""
    out = tmp_path / "gradebook.csv"
    code = pecourse_main(["grade", str(class_dir), "--out", str(out), "--jobs", "2", "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "4 student(s)" in printed and "passed" in printed
    assert all(slug in printed for slug in SLUGS)
    with open(out, newline="") as f:
        table = list(csv.DictReader(f))
    assert list(table[0]) == ["student", "exercise", "part", "points", "max_points", "reason"]
    assert [(r["student"], r["exercise"], r["part"]) for r in table] == [
        (r.student, r.exercise, r.part) for r in class_rows
    ]
    assert [(float(r["points"]), r["reason"]) for r in table] == [
        (r.points, r.reason) for r in class_rows
    ]
    with sqlite3.connect(tmp_path / "gradebook.sqlite") as db:
        stored = db.execute(
            "SELECT student, exercise, part, points, max_points, reason FROM grades "
            "ORDER BY student, exercise"
        ).fetchall()
    assert sorted(stored) == sorted(
        (r.student, r.exercise, r.part, r.points, r.max_points, r.reason) for r in class_rows
    )
