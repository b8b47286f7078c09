"""Broken, hostile and attacking submissions, graded in one class (fixture ``hostile``).

Each attack in ``attacks.py`` must leave its author with no more than a blank notebook
gets, every honest student with the grades they get in a class without attackers, no
process behind, and ``solutions/`` and the gradebook untouched.
"""

from __future__ import annotations

import csv
import re
import uuid
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell

import pecourse
from pecourse.exercises.grade import Limits, grade_class, write_csv
from pecourse.exercises.notebook import grade_id, notebook_text, write_notebook

from .attacks import WRONG_REST, attacks, raw_memory_scan
from .conftest import BROKEN, SECRET, SECRET_NAME, SLUG, source09
from .helpers import SOLUTIONS_DIR, answered, tree_digest, typed

PARTS = ["test_table", "test_shift", "test_wavelengths"]
ATTACKERS = sorted(attacks("", []))


def check(rows, student, passed, reason_for_failed):
    for part in PARTS:
        row = rows[(student, part)]
        if part in passed:
            assert row.points == row.max_points, (part, row.reason)
        else:
            assert row.points == 0, (part, row.reason)
            assert reason_for_failed in row.reason, (part, row.reason)


def total(rows, student):
    return sum(rows[(student, p)].points for p in PARTS)


# ----------------------------------------------------------------------------- attacks


def test_the_class_ran_in_namespaces(hostile):
    assert hostile.isolation == "namespaces"


@pytest.mark.parametrize("student", ATTACKERS + ["=atk_formula_name"])
def test_attacker_scores_no_more_than_a_blank_notebook(hostile, student):
    assert total(hostile.rows, "bea") == 0
    assert total(hostile.rows, student) <= total(hostile.rows, "bea"), {
        p: hostile.rows[(student, p)].reason for p in PARTS
    }


def test_honest_students_get_the_grades_they_get_without_attackers(hostile, class_rows):
    alone = {(r.student, r.part): r for r in class_rows if r.exercise == SLUG}
    for student in ("ada", "cyd"):
        for part in PARTS:
            assert hostile.rows[(student, part)] == alone[(student, part)]
    check(hostile.rows, "zz_good", PARTS, "")  # graded last: the batch went on


def test_no_process_outlives_its_job(hostile):
    assert hostile.survivors == []


def test_solutions_and_gradebook_are_untouched(hostile):
    assert tree_digest(SOLUTIONS_DIR) == hostile.solutions_before
    for path, data in hostile.gradebook.items():
        assert path.read_bytes() == data, path


def test_hidden_tests_and_answers_never_reach_the_student(hostile):
    reasons = " ".join(r.reason for r in hostile.rows.values())
    assert "LEAK" not in reasons and "BEGIN HIDDEN" not in reasons
    # the solutions file does not exist in the sandbox; the package is not importable
    assert "No such file or directory" in hostile.rows[("atk_read_solutions", "test_table")].reason
    assert "ModuleNotFoundError" in hostile.rows[("atk_patch_pecourse", "test_table")].reason or (
        "policy" in hostile.rows[("atk_patch_pecourse", "test_table")].reason
    )


def test_the_graders_environment_never_reaches_the_student(hostile):
    # The attack read its process's initial environment (/proc/self/environ: what the
    # server was started with, copied by fork) and os.environ; the grader held a token.
    reason = hostile.rows[("atk_read_environment", "test_table")].reason
    assert "ENVIRONMENT read, PATH seen: True" in reason, reason
    assert SECRET_NAME not in reason, reason
    assert SECRET not in " ".join(r.reason for r in hostile.rows.values())


def test_reference_implementation_is_refused_by_default(hostile):
    reason = hostile.rows[("atk_reference", "test_table")].reason
    assert reason.startswith(
        "policy: the answer uses the course package's reference implementation"
    )
    assert "pecourse.positions" in reason


def test_formula_fields_are_escaped_in_the_csv(hostile, tmp_path):
    rows = sorted(hostile.rows.values(), key=lambda r: (r.student, r.part))
    assert any("=HYPERLINK" in r.reason for r in rows)
    write_csv(rows, tmp_path / "book.csv")
    with open(tmp_path / "book.csv", newline="") as f:
        cells = [c for line in csv.reader(f) for c in line]
    assert "'=atk_formula_name" in cells
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@")]


# ----------------------------------------------------------------------------- broken


def test_infinite_loop_times_out(hostile):
    check(hostile.rows, "loop", {"test_shift", "test_wavelengths"}, "timed out")


def test_loop_that_swallows_the_timeout_is_stopped(hostile):
    # the first part ran before the loop and keeps its points
    check(hostile.rows, "stubborn_loop", {"test_table"}, "ignored the interrupt")


def test_huge_allocation_hits_the_memory_limit(hostile):
    check(hostile.rows, "memory_hog", {"test_shift", "test_wavelengths"}, "out of memory")


def test_sys_exit_is_an_error_not_an_exit(hostile):
    check(hostile.rows, "sys_exit", {"test_shift", "test_wavelengths"}, "SystemExit")


def test_os_exit_costs_the_remaining_parts(hostile):
    check(hostile.rows, "hard_exit", {"test_table"}, "exit code 3")


def test_reasons_are_stable(hostile):
    reason = hostile.rows[("unstable_error", "test_table")].reason
    assert (
        reason == "sinusoidal_table(int, int) raised ValueError: <work> <object object at 0x…>"
    ), reason


def test_raising_at_import(hostile):
    check(hostile.rows, "import_error", {"test_shift", "test_wavelengths"}, "NameError")
    reason = hostile.rows[("import_error", "test_table")].reason
    assert "answer cell answer_table failed earlier: ModuleNotFoundError" in reason


def test_deleting_files_in_the_working_directory(hostile):
    check(hostile.rows, "deleter", PARTS, "")


def test_printing_megabytes_is_capped(hostile):
    check(hostile.rows, "chatty", PARTS, "")
    assert "output capped" in hostile.rows[("chatty", "test_table")].reason


def test_magics_plots_and_display_work(hostile):
    check(hostile.rows, "plotter", PARTS, "")


@pytest.mark.parametrize("student", ["not_json", "not_a_notebook"])
def test_invalid_notebook(hostile, student):
    check(hostile.rows, student, set(), "not a valid notebook")


def test_deleted_test_cell_is_restored(hostile):
    check(hostile.rows, "deleted_test", PARTS, "")
    assert "deleted" in hostile.rows[("deleted_test", "test_shift")].reason


def test_edited_test_cell_is_graded_with_the_original(hostile):
    check(hostile.rows, "edited_test", {"test_shift", "test_wavelengths"}, "edited")


def test_missing_answer_cell(hostile):
    check(hostile.rows, "missing_answer", {"test_table", "test_shift"}, "missing")


def test_added_cells_run_where_they_stand(hostile):
    check(hostile.rows, "added_cell", {"test_table"}, "NotImplementedError")


def test_duplicated_answer_cell_grades_the_last_copy(hostile):
    check(hostile.rows, "duplicated", PARTS, "")
    assert (
        "appears 2 times; the last copy was graded"
        in hostile.rows[("duplicated", "test_table")].reason
    )


def test_every_broken_student_was_graded(hostile):
    assert {s for s, _ in hostile.rows} >= set(BROKEN)


# ----------------------------------------------------------------------------- raw memory


def _hidden_test_lines(source) -> list[str]:
    """The eight longest lines of 09's hidden tests that only the judge holds: in neither the
    released notebook nor the course package's code (whose constants the student's process
    may hold)."""
    lines = []
    for cell in source.cells:
        text = cell.source
        while "### BEGIN HIDDEN TESTS" in text:
            start = text.index("### BEGIN HIDDEN TESTS")
            end = text.index("### END HIDDEN TESTS", start)
            lines += [line.strip() for line in text[start:end].splitlines()[1:]]
            text = text[end + 1 :]
    package = Path(pecourse.__file__).parent
    code = "".join(p.read_text(encoding="utf-8") for p in package.rglob("*.py"))
    student = typed(source, {})
    released = notebook_text(student) + "".join(c.source for c in student.cells)
    secret = [line for line in dict.fromkeys(lines) if line not in code and line not in released]
    return sorted(secret, key=len, reverse=True)[:8]  # each costs a pass over ~250 MB


@pytest.mark.slow  # own server and class, a scan of ~230 MB: 8 s quiet, 14-21 s loaded
def test_raw_memory_holds_no_hidden_test_and_no_earlier_notebook(tmp_path):
    """A notebook that reads its own process's raw memory (freed memory included) finds
    its own notebook and nothing else: no line of the hidden tests the judge runs on it, no
    trace of the notebook graded before it by the same server (the student's process is
    forked from a server that never read a job; issue 13)."""
    source = source09()
    token = uuid.uuid4().hex  # built here: in no file, so only a notebook can hold it
    markers = {"planted": f"PLANTED_{token}", "own": f"OWN_{token}"}
    hidden = _hidden_test_lines(source)
    assert len(hidden) == 8 and min(map(len, hidden)) >= 30, hidden
    markers.update({f"hidden{i}": line for i, line in enumerate(hidden)})
    good = next(c.source for c in source.cells if grade_id(c) == "answer_table")
    earlier = answered(source, {"answer_table": f"# {markers['planted']}\n" + good})
    for i in range(40):  # a long notebook of notes: many cells for the allocator to keep
        earlier.cells.append(new_code_cell(f"# {markers['planted']} {i}\n" + "#" * 700))
    scanner = typed(
        source,
        {"answer_table": f"# {markers['own']}\n" + raw_memory_scan(markers), **WRONG_REST},
    )
    root = tmp_path / "class"
    for student, nb in (("aaa_earlier", earlier), ("zzz_scanner", scanner)):
        (root / student).mkdir(parents=True)
        write_notebook(nb, root / student / f"{SLUG}.ipynb")
    limits = Limits(cell_timeout=60.0, wall_clock=120.0, memory_mb=2048, output_cap=10_000)
    rows = grade_class(
        root, exercises=[SLUG], limits=limits, jobs=1, progress=False, isolation="namespaces"
    )
    rows = {(r.student, r.part): r for r in rows}
    assert all(
        rows[("aaa_earlier", p)].points == rows[("aaa_earlier", p)].max_points for p in PARTS
    )
    reason = rows[("zzz_scanner", "test_table")].reason
    found = re.search(r"SCANNED (\d+) MB FOUND \[(.*?)\]", reason)
    assert found, reason
    assert int(found.group(1)) >= 50, reason  # it read the process's memory, torch and all
    assert found.group(2) == "'own'", reason  # ... where it found its own notebook only
