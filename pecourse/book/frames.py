"""Explorers that move in the book: their figures drawn at build time, one per control value.

An explorer (ipywidgets' ``interact``) draws with Python, so a page without a kernel cannot
redraw it. When the book is built, the chapter runs in a kernel up to the explorer's cell, and
the explorer's own function draws its figure for each value on a grid of its control
(:func:`slider_grid`); the page then shows a plain range input over those values and swaps
the figure as it moves (:func:`explorer_html`), with no kernel and no network.

What is framed: an explorer with one slider (``IntSlider`` or ``FloatSlider``) whose function
draws a figure (:func:`pecourse.book.pages.find_explorers` finds them in the saved widget state). Explorers with several controls keep their saved output and the book's note
that they need Python (a grid over several controls multiplies the frames).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: At most this many evenly spaced values of a slider, plus its saved value.
MAX_FRAMES = 12
#: Changes when what a frame holds changes, so that cached frames are redrawn.
FRAMES_VERSION = 1
#: The sliders a framed explorer may have, and the type of their values.
SLIDERS = {"IntSliderModel": int, "FloatSliderModel": float}


@dataclass(frozen=True)
class Explorer:
    """The explorer a code cell makes: its slider's argument and the values to draw."""

    cell: int  # index of the cell in the notebook
    name: str  # the slider's label (interact labels it with the argument's name)
    values: tuple  # the grid, ascending; holds ``saved``
    saved: Any  # the value the notebook was saved with


@dataclass(frozen=True)
class Frames:
    """An explorer drawn at each value of its grid: PNG bytes, in the grid's order."""

    explorer: Explorer
    pngs: tuple[bytes, ...]


def slider_grid(state: dict[str, Any], kind: type = int, most: int = MAX_FRAMES) -> tuple:
    """Up to ``most`` values evenly spaced from a slider's ``min`` to its ``max`` on its
    ``step`` lattice, and the value it was saved with (``state`` is the saved model state)."""
    low, high, step, saved = (state.get(k) for k in ("min", "max", "step", "value"))
    if None in (low, high, step, saved) or step <= 0 or high < low:
        raise ValueError(f"state must be a slider's (min <= max, step > 0), got {state!r}")
    steps = round((high - low) / step)
    picks = (
        {round(i * steps / (most - 1)) for i in range(most)} if steps >= most else range(steps + 1)
    )
    values = {low + k * step for k in picks} | {saved}
    if kind is int:
        return tuple(sorted(int(v) for v in values))
    digits = max(0, -int(f"{step:e}".split("e")[1])) + 1  # enough to tell lattice points apart
    return tuple(sorted({round(float(v), digits) for v in values}))


# Run in the chapter's kernel just before the explorer's cell: remember the widgets it makes.
_WATCH = """
import ipywidgets as _pecourse_widgets
_pecourse_made = []
_pecourse_widgets.Widget.on_widget_constructed(_pecourse_made.append)
"""

# Run just after it: call the explorer's own function at each value and keep its figure.
_DRAW = """
import base64 as _b64, json as _json
import matplotlib.pyplot as _plt
from IPython.utils.capture import capture_output as _capture
_pecourse_widgets.Widget.on_widget_constructed(None)
_explorer = [w for w in _pecourse_made if isinstance(w, _pecourse_widgets.interactive)][-1]
(_name,) = _explorer.kwargs
_pngs = []
for _value in _json.loads({values!r}):
    with _capture() as _seen:
        _explorer.f(**{{**_explorer.kwargs, _name: _value}})
    _plt.close("all")
    _figures = [o.data["image/png"] for o in _seen.outputs if "image/png" in o.data]
    _pngs.append(_figures[0] if _figures else None)
print(_json.dumps(_pngs))
"""


def draw(notebook_path: Path, explorer: Explorer, *, timeout: int = 600) -> Frames:
    """Run the notebook in a fresh kernel up to ``explorer``'s cell, then draw its figure at
    each value of its grid. Raises ``RuntimeError`` when a value draws no figure."""
    import nbformat
    from nbclient import NotebookClient

    from pecourse.notebook_tools import SlicedKernelManager

    notebook_path = Path(notebook_path)
    nb = nbformat.read(notebook_path, as_version=4)
    before = [c for c in nb.cells[: explorer.cell] if c.cell_type == "code"]
    draw_cell = nbformat.v4.new_code_cell(_DRAW.format(values=json.dumps(explorer.values)))
    watch = nbformat.v4.new_code_cell(_WATCH)
    run = nbformat.v4.new_notebook(cells=[*before, watch, nb.cells[explorer.cell], draw_cell])
    client = NotebookClient(
        run,
        timeout=timeout,
        kernel_name="python3",
        kernel_manager_class=SlicedKernelManager,
        resources={"metadata": {"path": str(notebook_path.parent)}},
    )
    # learner data (the quiz's progress) goes to a throwaway folder, as under make outputs
    with tempfile.TemporaryDirectory(prefix="pecourse-frames-") as data:
        env = {**os.environ, "PECOURSE_DATA_DIR": data}
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        with client.setup_kernel(env=env):
            for index, cell in enumerate(run.cells):
                client.execute_cell(cell, index)
    printed = "".join(o.get("text", "") for o in draw_cell.outputs if o.output_type == "stream")
    pngs = json.loads(printed.strip().splitlines()[-1])
    blank = [v for v, png in zip(explorer.values, pngs) if png is None]
    if blank or len(pngs) != len(explorer.values):
        raise RuntimeError(
            f"{notebook_path.name}, cell {explorer.cell}: the explorer drew no figure at "
            f"{explorer.name} = {blank}"
        )
    return Frames(explorer, tuple(base64.b64decode(p) for p in pngs))


def drawn(
    notebook_path: Path, explorers: list[Explorer], cache: Path | None = None
) -> dict[int, Frames]:
    """The notebook's ``explorers`` (:func:`pecourse.book.pages.find_explorers`), by cell
    index, drawn or read from ``cache`` (a folder; entries are keyed by the notebook's bytes,
    so an edited chapter is redrawn)."""
    notebook_path = Path(notebook_path)
    data = notebook_path.read_bytes()
    if not explorers:
        return {}
    key = hashlib.sha256(data + f"frames {FRAMES_VERSION}".encode()).hexdigest()[:16]
    cached = Path(cache) / f"{notebook_path.stem}-{key}.json" if cache is not None else None
    if cached is not None and cached.exists():
        saved = json.loads(cached.read_text(encoding="utf-8"))
        return {
            e.cell: Frames(e, tuple(base64.b64decode(p) for p in saved[str(e.cell)]))
            for e in explorers
        }
    out = {}
    for explorer in explorers:
        log.info("drawing %s's explorer (cell %d) at %d values of %s", notebook_path.stem,
                 explorer.cell, len(explorer.values), explorer.name)  # fmt: skip
        out[explorer.cell] = draw(notebook_path, explorer)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        record = {str(c): [base64.b64encode(p).decode() for p in f.pngs] for c, f in out.items()}
        cached.write_text(json.dumps(record), encoding="utf-8")
    return out


# Swaps the figure as the range input moves; the page's first figure is the saved value's, so
# without scripts the reader sees what the notebook saved.
_SCRIPT = """(function () {
  const box = document.currentScript.parentElement;
  const data = JSON.parse(box.querySelector('script[type="application/json"]').textContent);
  const input = box.querySelector("input"), readout = box.querySelector("output");
  const img = box.querySelector("img");
  input.addEventListener("input", function () {
    const i = Number(input.value);
    readout.textContent = data.labels[i];
    img.src = "data:image/png;base64," + data.frames[i];
    img.alt = data.alt + data.labels[i];
  });
})();"""


def explorer_html(frames: Frames) -> str:
    """The explorer as a page shows it: a range input over the grid, its value, and the figure
    drawn for that value (all frames inline, so the page works from ``file://``)."""
    e = frames.explorer
    labels = [str(v) for v in e.values]
    start = e.values.index(e.saved)
    encoded = [base64.b64encode(p).decode() for p in frames.pngs]
    alt = f"the explorer's figure at {e.name} = "
    data = json.dumps({"labels": labels, "frames": encoded, "alt": alt}).replace("</", "<\\/")
    name = html.escape(e.name)
    return (
        f'<div class="pecourse-frames" data-name="{name}">'
        f'<label>{name} <input type="range" min="0" max="{len(labels) - 1}" step="1" '
        f'value="{start}" aria-label="{name}"> <output>{html.escape(labels[start])}</output>'
        f"</label>"
        f'<img style="max-width: 100%" alt="{html.escape(alt + labels[start])}" '
        f'src="data:image/png;base64,{encoded[start]}">'
        f'<script type="application/json">{data}</script>'
        f"<script>{_SCRIPT}</script></div>"
    )
