"""A learner's self-check: run an exercise notebook in a kernel and report each part.

``pecourse check exercises/08_rope.ipynb`` executes the notebook as it is (with nbclient, in
the ``python3`` kernel of the current environment, errors allowed so every part runs) and
prints each graded test cell as passed or failed, with the hint: the assertion message the
test gives. Only the visible tests run here; grading adds hidden ones.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .notebook import grade_id, is_answer_cell, is_test_cell

__all__ = ["PartResult", "check_notebook", "format_report", "main_check"]


@dataclass(frozen=True)
class PartResult:
    part: str
    points: float
    passed: bool
    hint: str


def _error_of(cell) -> str | None:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            name, value = out.get("ename", "Error"), str(out.get("evalue", "")).strip()
            if name == "NotImplementedError" and not value:
                return "NotImplementedError: the answer is not written yet"
            return f"{name}: {value}" if value else name
    return None


def check_notebook(path: str | Path, *, timeout: float = 60.0) -> list[PartResult]:
    """Execute ``path`` and return one :class:`PartResult` per graded test cell."""
    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(str(path), as_version=4)
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=timeout,
        allow_errors=True,
        interrupt_on_timeout=True,
        resources={"metadata": {"path": str(path.resolve().parent)}},
    )
    # The kernel's own stderr (start-up warnings about its transport) is not the learner's.
    client.execute(stderr=subprocess.DEVNULL)
    results = []
    broken: list[str] = []  # answer cells that raised something other than the stub
    for cell in nb.cells:
        if is_answer_cell(cell):
            error = _error_of(cell)
            if error and not error.startswith("NotImplementedError"):
                broken.append(f"answer cell {grade_id(cell)} failed earlier: {error}")
        elif is_test_cell(cell):
            error = _error_of(cell)
            points = float(cell.metadata["nbgrader"].get("points", 0))
            hint = "; ".join([error, *broken]) if error else ""
            results.append(PartResult(grade_id(cell), points, error is None, hint))
    return results


def format_report(path: str | Path, results: list[PartResult]) -> str:
    lines = [f"{Path(path).name}"]
    for r in results:
        mark = "PASS" if r.passed else "FAIL"
        lines.append(f"  [{mark}] {r.part} ({r.points:g} point{'s' if r.points != 1 else ''})")
        if not r.passed:
            lines.append(f"         {r.hint}")
    got = sum(r.points for r in results if r.passed)
    total = sum(r.points for r in results)
    passed = sum(r.passed for r in results)
    lines.append(
        f"{passed}/{len(results)} parts passed, {got:g}/{total:g} points "
        "(visible tests only; grading also runs hidden tests)"
    )
    return "\n".join(lines)


def main_check(args) -> int:
    status = 0
    for nb_path in args.notebooks:
        if not Path(nb_path).is_file():
            print(f"pecourse check: no such notebook: {nb_path}", file=sys.stderr)
            status = 2
            continue
        results = check_notebook(nb_path, timeout=args.timeout)
        print(format_report(nb_path, results))
        if status == 0 and not all(r.passed for r in results):
            status = 1
    return status
