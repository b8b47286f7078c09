"""Exercise sources, generated notebooks, and grading of a synthetic class."""

from __future__ import annotations

import csv
import json
import logging
import re

import pytest

from pecourse.cli import main as pecourse_main
from pecourse.course import CONCEPTS
from pecourse.exercises.grade import (
    CSV_COLUMNS,
    Row,
    export_csv,
    grade_class,
    pace,
    read_sqlite,
    scan_class,
    write_csv,
    write_sqlite,
)
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
from .regressions import REGRESSIONS
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


@pytest.mark.parametrize(
    "student,slug",
    [(student, slug) for student, by_slug in REGRESSIONS.items() for slug in by_slug],
)
def test_review_regressions(class_rows, student, slug):
    """Right answers once refused now pass; wrong answers once missed now fail."""
    expected = REGRESSIONS[student][slug][1]
    rows = [r for r in class_rows if r.student == student and r.exercise == slug]
    failed = {r.part for r in rows if r.points < r.max_points}
    assert rows and failed == expected, {r.part: r.reason for r in rows}


def test_missing_notebooks_are_zero_without_running(class_rows):
    rows = [
        r
        for r in class_rows
        if r.student == "eve" and r.exercise == "01_learned_absolute_positions"
    ]
    assert rows and all(r.points == 0 and r.reason == "no submission" for r in rows)


def test_hidden_failures_say_expected_and_got(class_rows):
    """A failing hidden assertion names the call, what was expected, what came back, a hint."""
    reason = next(
        r.reason
        for r in class_rows
        if (r.student, r.exercise, r.part)
        == ("dan", "02_why_attention_needs_positions", "test_positions")
    )
    assert reason.startswith("AssertionError: attention_with_positions(x [9, 6], d_k=2): ")
    assert "expected" in reason and "got" in reason and "hint:" in reason
    dtype = next(
        r.reason
        for r in class_rows
        if (r.student, r.exercise, r.part) == ("eve", "03_alibi", "test_slopes")
    )
    assert "expected dtype float64, got float32" in dtype


def test_cli_grade_one_notebook_updates_the_whole_gradebook(
    class_dir, class_rows, tmp_path, capsys
):
    """``pecourse grade NOTEBOOK --student NAME``: graded like a class of one, into a gradebook
    that already holds the class; the CSV is rebuilt from the SQLite file, every exercise."""
    db = tmp_path / "gradebook.sqlite"
    out = tmp_path / "gradebook.csv"
    write_sqlite(class_rows, db)
    slug = "09_sinusoidal_positional_encodings"
    notebook = class_dir / "cyd" / f"{slug}.ipynb"
    assert pecourse_main(["grade", str(notebook), "--out", str(out), "--quiet"]) == 2
    assert "--student" in capsys.readouterr().err
    code = pecourse_main(
        ["grade", str(notebook), "--student", "=cyd again", "--out", str(out), "--quiet"]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "1 student(s), 1 exercise(s)" in printed
    # the pace, from the count and the time it printed (issue 32)
    seconds, per_minute = re.search(
        r"1 notebook\(s\) graded in ([\d.]+) s: ([\d.]+) a minute", printed
    ).groups()
    # both are printed to 0.1: the pace lies between what the rounded seconds allow
    slowest, fastest = 60 / (float(seconds) + 0.05), 60 / max(float(seconds) - 0.05, 1e-9)
    assert slowest - 0.05 <= float(per_minute) <= fastest + 0.05, printed
    with open(out, newline="") as f:
        table = list(csv.DictReader(f))
    assert list(table[0]) == list(CSV_COLUMNS)
    # the whole class is still there, and the new student (a name that starts like a formula)
    mine = [r for r in table if r["student"] == "'=cyd again"]
    cyd = [r for r in class_rows if r.student == "cyd" and r.exercise == slug]
    assert [(r["part"], float(r["points"]), r["reason"]) for r in mine] == [
        (r.part, r.points, r.reason) for r in cyd
    ], "the same notebook gets the same grades, row for row"
    assert len(table) == len(class_rows) + len(cyd)
    stored = read_sqlite(db)
    assert [
        (r.student, r.exercise, r.part, r.points, r.reason)
        for r in stored
        if r.student != "=cyd again"
    ] == [(r.student, r.exercise, r.part, r.points, r.reason) for r in class_rows]


def test_gradebook_regrade_replaces_only_its_rows(tmp_path):
    db = tmp_path / "book.sqlite"
    rows = [
        Row("a", "e1", "p", 1.0, 2.0, "x", "namespaces"),
        Row("a", "e2", "p", 2.0, 2.0, "", "namespaces"),
    ]
    write_sqlite(rows, db)
    write_sqlite([Row("a", "e1", "p", 2.0, 2.0, "", "namespaces")], db)
    assert [(r.exercise, r.points) for r in read_sqlite(db)] == [("e1", 2.0), ("e2", 2.0)]
    written = export_csv(db, tmp_path / "book.csv")
    assert len(written) == 2 and (tmp_path / "book.csv").read_text().count("\n") == 3


def test_pace_counts_the_notebooks_handed_in_per_minute():
    rows = [Row(s, e, p, 1.0, 1.0, "", "") for s in "ab" for e in ("e1", "e2") for p in "pq"]
    rows[-2:] = [Row("b", "e2", p, 0.0, 1.0, "no submission", "") for p in "pq"]
    assert pace(rows, 90.0) == "3 notebook(s) graded in 90.0 s: 2.0 a minute"
    assert pace(rows[:2], 0.0) == "1 notebook(s) graded in 0.0 s: 0.0 a minute"


def test_gradebook_later_round_keeps_grades_of_students_absent_from_it(tmp_path):
    # Round 1 graded a and b on e1; round 2 received e1 from a only (b handed in e2), so
    # grade_class gives b's e1 "no submission". b's round-1 grade must survive; a's regrade
    # replaces a's; a first "no submission" is stored.
    db = tmp_path / "book.sqlite"
    write_sqlite(
        [Row("a", "e1", "p", 1.0, 2.0, "x", "namespaces"),
         Row("b", "e1", "p", 2.0, 2.0, "", "namespaces")],
        db,
    )  # fmt: skip
    write_sqlite(
        [Row("a", "e1", "p", 2.0, 2.0, "", "namespaces"),
         Row("b", "e1", "p", 0.0, 2.0, "no submission", ""),
         Row("b", "e2", "p", 0.0, 2.0, "no submission (found 'E2.ipynb')", "")],
        db,
    )  # fmt: skip
    stored = [(r.student, r.exercise, r.points, r.reason) for r in read_sqlite(db)]
    assert stored == [
        ("a", "e1", 2.0, ""),
        ("b", "e1", 2.0, ""),
        ("b", "e2", 0.0, "no submission (found 'E2.ipynb')"),
    ]


@pytest.mark.parametrize("text", ["=1+1", "+1", "-1", "@SUM(A1)", "\tx"])
def test_csv_escapes_formula_starters(tmp_path, text):
    write_csv([Row(text, "e", "p", 0.0, 1.0, text, "")], tmp_path / "b.csv")
    with open(tmp_path / "b.csv", newline="") as f:
        row = list(csv.reader(f))[1]
    assert row[0] == "'" + text and row[5] == "'" + text


def test_misnamed_notebooks_are_reported(tmp_path, capsys, caplog):
    (tmp_path / "ann").mkdir()
    (tmp_path / "ann" / "09_sinusoidal (1).ipynb").write_text("{}")
    (tmp_path / "bob").mkdir()
    found, stray = scan_class(tmp_path, SLUGS)
    assert stray == {"ann": ["09_sinusoidal (1).ipynb"]}
    assert found["09_sinusoidal_positional_encodings"] == {"ann": None, "bob": None}
    caplog.set_level(logging.INFO, logger="pecourse.exercises.grade")
    rows = grade_class(tmp_path, exercises=["09_sinusoidal_positional_encodings"], progress=True)
    reason = next(r.reason for r in rows if r.student == "ann")
    assert (
        reason
        == "no submission (found '09_sinusoidal (1).ipynb': rename it to 09_sinusoidal_positional_encodings.ipynb)"
    )
    assert "misnamed notebook(s) not graded: 09_sinusoidal (1).ipynb" in caplog.text
    assert "grading" not in capsys.readouterr().err, "no notebook to run: no progress bar"
    assert len(caplog.records) == 1, "no notebook to run: no grading server (it logs its level)"
