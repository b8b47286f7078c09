"""Committed notebooks are executed, and cells whose output changes run to run are tagged.

Strict nbval (configured in pyproject.toml) re-runs every notebook in ``notebooks/`` and
compares outputs; these tests catch what nbval alone would not.
"""

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from pecourse.notebook_tools import IGNORE_OUTPUT_TAG, unexecuted_cells, untagged_timing_cells

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no notebook"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_executed_top_to_bottom(path):
    nb = nbformat.read(path, as_version=4)
    assert unexecuted_cells(nb) == [], f"{path.name}: unexecuted code cells (run `make outputs`)"
    counts = [c.execution_count for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    assert counts == list(range(1, len(counts) + 1)), (
        f"{path.name}: execution counts {counts} are not one fresh top-to-bottom run"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_timing_cells_are_tagged(path):
    nb = nbformat.read(path, as_version=4)
    bad = untagged_timing_cells(nb)
    assert bad == [], f"{path.name}: cells {bad} time code without the {IGNORE_OUTPUT_TAG} tag"


def _notebook(*sources, tags=()):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    for cell in nb.cells:
        cell.metadata["tags"] = list(tags)
    return nb


@pytest.mark.parametrize(
    "source",
    [
        "t0 = time.perf_counter()",
        "start = time.time()",
        "%timeit f()",
        "import timeit",
        "from pecourse import timing",
    ],
)
def test_timing_detector_flags_untagged_cells(source):
    assert untagged_timing_cells(_notebook("x = 1", source)) == [1]
    assert untagged_timing_cells(_notebook(source, tags=[IGNORE_OUTPUT_TAG])) == []


def test_unexecuted_detector():
    nb = _notebook("print(1)")
    assert unexecuted_cells(nb) == [0]
    nb.cells[0].execution_count = 1
    assert unexecuted_cells(nb) == []


def _run_nbval(tmp_path, notebooks: dict) -> subprocess.CompletedProcess:
    """Strict nbval, as the suite runs it, on ``{name: notebook}`` in one session (one kernel
    start each; the pytest start-up once)."""
    for name, nb in notebooks.items():
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval",
            "--nbval-current-env",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-rA",
            "-c",
            str(tmp_path / "none.ini"),
            *(f"{name}.ipynb" for name in notebooks),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )


@pytest.mark.slow
def test_strict_nbval_fails_when_an_output_is_removed(tmp_path):
    (tmp_path / "none.ini").write_text("[pytest]\n")
    kept = _notebook("print('hello')")
    kept.cells[0].execution_count = 1
    kept.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="hello\n")]
    removed = _notebook("print('hello')")
    removed.cells[0].execution_count = 1  # the same cell, its output removed
    run = _run_nbval(tmp_path, {"kept": kept, "removed": removed})
    report = run.stdout + run.stderr
    assert "PASSED kept.ipynb::Cell 0" in report, report
    assert "FAILED removed.ipynb::Cell 0" in report, report
