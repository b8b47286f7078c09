"""Fixtures for the exercise tests: each synthetic class is graded once per session."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from pecourse.exercises.grade import (
    IsolationUnavailable,
    Limits,
    Row,
    export_csv,
    grade_class,
    write_sqlite,
)
from pecourse.exercises.notebook import grade_id, read_notebook, write_notebook

from .attacks import attacks
from .helpers import (
    SLUGS,
    SOLUTIONS_DIR,
    SOURCES,
    TEST_LIMITS,
    answered,
    left_behind,
    make_class,
    tree_digest,
    typed,
)
from .wrong_answers import WRONG

SLUG = "09_sinusoidal_positional_encodings"
# A secret in the instructor's environment while the class is graded (atk_read_environment)
SECRET_NAME = "INSTRUCTOR_API_TOKEN"
SECRET = f"tok-{uuid.uuid4().hex}"
HOSTILE_LIMITS = Limits(cell_timeout=4.0, wall_clock=15.0, memory_mb=2048, output_cap=10_000)


@pytest.fixture(scope="session")
def class_dir(tmp_path_factory) -> Path:
    """Four learners who submit every exercise: right, untouched, and wrong in two ways; two
    who submit a few (the review's regressions: ``regressions.py``)."""
    root = tmp_path_factory.mktemp("class")
    students = {
        "ada": "full",
        "bea": "blank",
        "cyd": "wrong",
        "dan": "wrong_more",
        "eve": "regressions",
        "fay": "regressions",
    }
    return make_class(root, students, SLUGS)


@pytest.fixture(scope="session")
def class_rows(class_dir):
    """The whole synthetic class, graded once (two jobs in parallel)."""
    return grade_class(class_dir, limits=TEST_LIMITS, jobs=2, progress=False)


def source09():
    return read_notebook(SOURCES[0].parent / f"{SLUG}.ipynb")


GOOD_TABLE = next(c.source for c in source09().cells if grade_id(c) == "answer_table")

# student -> answer cells replaced (grade_id -> code); other answers keep the solution
BROKEN = {
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
    # errors that mention the working directory or an object's address: the gradebook must
    # still be the same every time
    "unstable_error": {
        "answer_table": "def sinusoidal_table(num_positions, dim, base=10000.0):\n"
        "    import os\n"
        "    raise ValueError(f'{os.getcwd()} {object()}')",
    },
    "import_error": {"answer_table": "import no_such_module_for_pecourse\n" + GOOD_TABLE},
    "deleter": {
        "answer_table": "import os, shutil\nfor name in os.listdir('.'):\n    os.remove(name)\n"
        "shutil.rmtree(os.getcwd(), ignore_errors=True)\n" + GOOD_TABLE
    },
    "chatty": {"answer_table": "print('x' * 5_000_000)\n" + GOOD_TABLE},
    # not hostile: a notebook habit that must work without a Jupyter kernel
    "plotter": {
        "answer_table": "%matplotlib inline\nimport matplotlib.pyplot as plt\n"
        "plt.plot([1, 2])\nplt.show()\ndisplay('shown')\n" + GOOD_TABLE
    },
}


@dataclass
class Hostile:
    root: Path
    rows: dict  # (student, part) -> Row
    gradebook: dict  # path -> bytes before grading
    solutions_before: str
    survivors: list
    isolation: str


def _write(root: Path, student: str, nb_or_text) -> Path:
    (root / student).mkdir()
    path = root / student / f"{SLUG}.ipynb"
    if isinstance(nb_or_text, str):
        path.write_text(nb_or_text)
    else:
        write_notebook(nb_or_text, path)
    return path


@pytest.fixture(scope="session")
def hostile(tmp_path_factory) -> Hostile:
    """One exercise, graded once for a class of honest, broken and attacking students, next
    to a gradebook from an earlier run (which no job may touch)."""
    root = tmp_path_factory.mktemp("hostile")
    book = tmp_path_factory.mktemp("gradebook")
    csv_path, db_path = book / "gradebook.csv", book / "gradebook.sqlite"
    write_sqlite([Row("zed", SLUG, "test_table", 2.0, 2.0, "", "namespaces")], db_path)
    export_csv(db_path, csv_path)
    before = {p: p.read_bytes() for p in (csv_path, db_path)}
    solutions_before = tree_digest(SOLUTIONS_DIR)

    source = source09()
    _write(root, "ada", answered(source))
    _write(root, "cyd", answered(source, WRONG[SLUG][0]))
    _write(root, "bea", typed(source, {}))  # blank: the handed-out notebook
    for student, answers in BROKEN.items():
        _write(root, student, answered(source, answers))
    gradebook = [str(csv_path), str(db_path)]
    for student, answers in attacks(str(SOLUTIONS_DIR), gradebook).items():
        _write(root, student, typed(source, answers))
    # a folder name a spreadsheet would run
    _write(root, "=atk_formula_name", typed(source, {}))
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
    # One verdict with `check`: a helper and an import in cells the student added, and an
    # answer cell pasted twice (the stub first, the answer last).
    nb = typed(
        source,
        {
            "answer_table": "def sinusoidal_table(num_positions, dim, base=10000.0):\n"
            "    return table_helper(num_positions, dim, base)"
        },
    )
    helper = GOOD_TABLE.replace("def sinusoidal_table", "def table_helper").replace("torch.", "tt.")
    from nbformat.v4 import new_code_cell

    at = next(i for i, c in enumerate(nb.cells) if grade_id(c) == "answer_table")
    nb.cells.insert(at, new_code_cell("import torch as tt\n\n" + helper))
    _write(root, "added_cell", nb)
    nb = answered(source)
    at = next(i for i, c in enumerate(nb.cells) if grade_id(c) == "answer_table")
    stub = typed(source, {}).cells[at]
    stub.id = "answer-table-copy"
    nb.cells.insert(at, stub)
    _write(root, "duplicated", nb)
    _write(root, "zz_good", answered(source))  # graded last: the batch must reach it
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv(SECRET_NAME, SECRET)
            with left_behind() as survivors:  # this grading's processes only
                rows = grade_class(
                    root,
                    exercises=[SLUG],
                    limits=HOSTILE_LIMITS,
                    jobs=2,
                    progress=False,
                    isolation="namespaces",
                    protected=[str(book)],
                )
    except IsolationUnavailable as exc:  # pragma: no cover - CI machines are root on Linux
        pytest.skip(f"the attack class needs namespaces: {exc}")
    time.sleep(1.0)  # what a surviving process would have written after the grader
    return Hostile(
        root,
        {(r.student, r.part): r for r in rows},
        before,
        solutions_before,
        survivors,
        rows[0].isolation,
    )
