"""Tools for the course's notebooks: execute them in place, find untagged timing cells.

``python -m pecourse.notebook_tools execute notebooks/*.ipynb`` is what ``make outputs``
runs. Each notebook runs in a fresh kernel of the current environment, in its own folder,
exactly as nbval re-runs it under ``make test``.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

#: Tag that tells nbval not to compare a cell's output (timings, widgets, progress bars).
IGNORE_OUTPUT_TAG = "nbval-ignore-output"

#: Code that measures time: its output changes on every run.
TIMING_PATTERN = re.compile(
    r"perf_counter|time\.time\(|\btimeit\b|%%?time\b|pecourse\.timing|from\s+pecourse\s+import\s+timing"
    r"|\bbenchmark\(|\bmeasure\("
)


def cell_tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def untagged_timing_cells(notebook) -> list[int]:
    """Indices of code cells that time code but lack the ``nbval-ignore-output`` tag."""
    found = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        if TIMING_PATTERN.search(cell.source) and IGNORE_OUTPUT_TAG not in cell_tags(cell):
            found.append(index)
    return found


def unexecuted_cells(notebook) -> list[int]:
    """Indices of non-empty code cells that carry no execution count or no outputs list."""
    return [
        i
        for i, cell in enumerate(notebook.cells)
        if cell.cell_type == "code"
        and cell.source.strip()
        and (cell.get("execution_count") is None or "outputs" not in cell)
    ]


def execute(path: str | Path, *, timeout: int = 600) -> None:
    """Run a notebook top to bottom in a fresh kernel and save it with its outputs."""
    from nbclient import NotebookClient

    path = Path(path)
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        # Saved widget state is what the book (make book) renders as live controls.
        store_widget_state=True,
    )
    client.execute()
    nbformat.write(notebook, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pecourse.notebook_tools")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("execute", help="execute notebooks in place")
    run.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args(argv)
    for path in args.paths:
        print(f"executing {path} ...", flush=True)
        execute(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
