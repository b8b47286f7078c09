"""Tools for the course's notebooks: execute them in place, find untagged timing cells.

``python -m pecourse.notebook_tools execute notebooks/*.ipynb`` is what ``make outputs``
runs. Each notebook runs in a fresh kernel of the current environment, in its own folder,
exactly as nbval re-runs it under ``make test``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path
from queue import Empty

import nbformat
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.manager import AsyncKernelManager
from traitlets import Type

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


#: Longest single wait on a kernel socket, in seconds (see :class:`SlicedChannel`).
POLL_SLICE = 0.25


class SlicedChannel(AsyncZMQSocketChannel):
    """A kernel channel that waits for a message in slices of at most POLL_SLICE.

    pyzmq's asyncio poll (27.3, under nbclient 0.11 and ipykernel 7.4) can miss a socket's
    wake-up and return only when its timeout fires (``zmq/_future.py``); nbclient waits for a
    cell's reply in one poll as long as the cell's timeout, so a missed wake-up would stall a
    notebook for its whole timeout. Waiting in short slices bounds that cost by a slice.
    """

    async def get_msg(self, timeout: float | None = None) -> dict:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = POLL_SLICE if deadline is None else deadline - time.monotonic()
            if await self.socket.poll(int(1000 * max(0.0, min(POLL_SLICE, left)))):
                return await self._recv()
            if deadline is not None and time.monotonic() >= deadline:
                raise Empty


class SlicedKernelClient(AsyncKernelClient):
    shell_channel_class = Type(SlicedChannel)
    iopub_channel_class = Type(SlicedChannel)
    stdin_channel_class = Type(SlicedChannel)
    control_channel_class = Type(SlicedChannel)


class SlicedKernelManager(AsyncKernelManager):
    """nbclient's kernel manager with :class:`SlicedChannel` channels: what ``execute`` and
    the nbgrader course (``pecourse exercises nbgrader``) run notebooks with."""

    client_factory = Type(SlicedKernelClient)


def execute(path: str | Path, *, timeout: int = 600) -> None:
    """Run a notebook top to bottom in a fresh kernel and save it with its outputs."""
    from nbclient import NotebookClient

    path = Path(path)
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        kernel_manager_class=SlicedKernelManager,
        resources={"metadata": {"path": str(path.parent)}},
        # Saved widget state is what the book (make book) renders as live controls.
        store_widget_state=True,
    )
    # The kernel's OpenMP threads wait passively unless told otherwise: spinning (OpenMP's
    # default) fights every other busy process for the cores, several times slower here.
    env = {**os.environ}
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    client.execute(env=env)
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
