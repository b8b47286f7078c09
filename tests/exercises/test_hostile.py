"""Broken and hostile submissions: each costs only its own parts, and the batch goes on."""

from __future__ import annotations

import json

import pytest

from pecourse.exercises.grade import Limits, grade_class
from pecourse.exercises.notebook import grade_id, read_notebook, write_notebook

from .helpers import SOURCES, answered

SLUG = "09_sinusoidal_positional_encodings"
PARTS = ["test_table", "test_shift", "test_wavelengths"]
GOOD_TABLE = next(
    c.source
    for c in read_notebook(SOURCES[0].parent / f"{SLUG}.ipynb").cells
    if grade_id(c) == "answer_table"
)

# student -> answer cells replaced (grade_id -> code)
HOSTILE = {
    "loop": {
        "answer_table": "def sinusoidal_table(num_positions, dim, base=10000.0):\n    while True:\n        pass"
    },
    "stubborn_loop": {
        "answer_shift": "import time\nwhile True:\n    try:\n        time.sleep(0.05)\n    except BaseException:\n        pass"
    },
    "memory_hog": {
        "answer_table": "def sinusoidal_table(num_positions, dim, base=10000.0):\n"
        "    return torch.ones(3 * 1024**3)  # 12 GB"
    },
    "sys_exit": {
        "answer_table": "import sys\n\ndef sinusoidal_table(num_positions, dim, base=10000.0):\n    sys.exit(1)"
    },
    "hard_exit": {"answer_shift": "import os\nos._exit(3)"},
    "parent_killer": {
        # The pause lets the SIGKILL land before the cell ends: the notebook must not be
        # able to go on grading itself once its server is gone.
        "answer_shift": "import os, signal, time\nos.kill(os.getppid(), signal.SIGKILL)\n"
        "time.sleep(2)",
    },
    # errors that mention a temporary path or an object's address: the gradebook must
    # still be the same every time
    "unstable_error": {
        "answer_table": "def sinusoidal_table(num_positions, dim, base=10000.0):\n"
        "    import os\n"
        "    raise ValueError(f'{os.getcwd()} {object()}')",
    },
    "import_error": {"answer_table": "import no_such_module_for_pecourse\n" + GOOD_TABLE},
    "deleter": {
        "answer_table": "import os, shutil\nfor name in os.listdir('.'):\n    os.remove(name)\n"
        "shutil.rmtree(os.getcwd())\n" + GOOD_TABLE
    },
    "chatty": {"answer_table": "print('x' * 5_000_000)\n" + GOOD_TABLE},
    # not hostile: a notebook habit that must work without a Jupyter kernel
    "plotter": {
        "answer_table": "%matplotlib inline\nimport matplotlib.pyplot as plt\n"
        "plt.plot([1, 2])\nplt.show()\ndisplay('shown')\n" + GOOD_TABLE
    },
}

LIMITS = Limits(cell_timeout=4.0, wall_clock=15.0, memory_mb=2048, output_cap=10_000)


def _write(root, student, nb_or_text):
    (root / student).mkdir()
    path = root / student / f"{SLUG}.ipynb"
    if isinstance(nb_or_text, str):
        path.write_text(nb_or_text)
    else:
        write_notebook(nb_or_text, path)


@pytest.fixture(scope="module")
def hostile_rows(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    source = read_notebook(SOURCES[0].parent / f"{SLUG}.ipynb")
    for student, answers in HOSTILE.items():
        _write(root, student, answered(source, answers))
    _write(root, "not_json", '{"cells": [ this is not json')
    _write(root, "not_a_notebook", json.dumps({"hello": "world"}))
    # A deleted test cell is restored; an edited (weakened) one is replaced by the original.
    nb = answered(source)
    nb.cells = [c for c in nb.cells if grade_id(c) != "test_shift"]
    _write(root, "deleted_test", nb)
    nb = answered(
        source,
        {
            "answer_table": "def sinusoidal_table(num_positions, dim, base=10000.0):\n    return None"
        },
    )
    for cell in nb.cells:
        if grade_id(cell) == "test_table":
            cell.source = "pass  # trust me"
    _write(root, "edited_test", nb)
    nb = answered(source)
    nb.cells = [c for c in nb.cells if grade_id(c) != "answer_wavelengths"]
    _write(root, "missing_answer", nb)
    _write(root, "zz_good", answered(source))  # graded last: the batch must reach it
    rows = grade_class(root, limits=LIMITS, jobs=2, progress=False)
    return {(r.student, r.part): r for r in rows}


def check(rows, student, passed, reason_for_failed):
    for part in PARTS:
        row = rows[(student, part)]
        if part in passed:
            assert row.points == row.max_points, (part, row.reason)
        else:
            assert row.points == 0, (part, row.reason)
            assert reason_for_failed in row.reason, (part, row.reason)


def test_batch_goes_on(hostile_rows):
    check(hostile_rows, "zz_good", PARTS, "")
    assert all(hostile_rows[("zz_good", p)].reason == "" for p in PARTS)


def test_infinite_loop_times_out(hostile_rows):
    check(hostile_rows, "loop", {"test_shift", "test_wavelengths"}, "timed out")


def test_loop_that_swallows_the_timeout_is_killed(hostile_rows):
    # the first part ran before the loop and keeps its points
    check(hostile_rows, "stubborn_loop", {"test_table"}, "timed out: the notebook ran past")


def test_huge_allocation_hits_the_memory_limit(hostile_rows):
    check(hostile_rows, "memory_hog", {"test_shift", "test_wavelengths"}, "out of memory")


def test_sys_exit_is_an_error_not_an_exit(hostile_rows):
    check(hostile_rows, "sys_exit", {"test_shift", "test_wavelengths"}, "SystemExit")


def test_os_exit_costs_the_remaining_parts(hostile_rows):
    check(hostile_rows, "hard_exit", {"test_table"}, "exit code 3")


def test_killing_the_grading_server(hostile_rows):
    # the server is restarted, the job retried once; the others are graded normally
    check(hostile_rows, "parent_killer", {"test_table"}, "grading server died")


def test_reasons_are_stable(hostile_rows):
    reason = hostile_rows[("unstable_error", "test_table")].reason
    assert reason == "ValueError: <tmp>/work <object object at 0x…>", reason


def test_raising_at_import(hostile_rows):
    check(hostile_rows, "import_error", {"test_shift", "test_wavelengths"}, "NameError")
    reason = hostile_rows[("import_error", "test_table")].reason
    assert "answer cell answer_table failed earlier: ModuleNotFoundError" in reason


def test_deleting_files_in_the_working_directory(hostile_rows):
    check(hostile_rows, "deleter", PARTS, "")
    assert (SOURCES[0].parent / f"{SLUG}.ipynb").exists()


def test_printing_megabytes_is_capped(hostile_rows):
    check(hostile_rows, "chatty", PARTS, "")
    assert "output capped" in hostile_rows[("chatty", "test_table")].reason


def test_magics_plots_and_display_work(hostile_rows):
    check(hostile_rows, "plotter", PARTS, "")


@pytest.mark.parametrize("student", ["not_json", "not_a_notebook"])
def test_invalid_notebook(hostile_rows, student):
    check(hostile_rows, student, set(), "not a valid notebook")


def test_deleted_test_cell_is_restored(hostile_rows):
    check(hostile_rows, "deleted_test", PARTS, "")
    assert "deleted" in hostile_rows[("deleted_test", "test_shift")].reason


def test_edited_test_cell_is_graded_with_the_original(hostile_rows):
    check(hostile_rows, "edited_test", {"test_shift", "test_wavelengths"}, "edited")


def test_missing_answer_cell(hostile_rows):
    check(hostile_rows, "missing_answer", {"test_table", "test_shift"}, "missing")
