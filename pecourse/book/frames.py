"""Explorers that move in the book: their figures drawn at build time, one per set of values.

An explorer (ipywidgets' ``interact``) draws with Python, so a page without a kernel cannot
redraw it. When the book is built, the chapter runs in a kernel up to each explorer's cell, and
the explorer's own function draws its figure for each set of control values the book offers;
the page then shows plain HTML controls over those values and swaps the figure as they move
(:func:`explorer_html`), with no kernel and no network.

What a reader can set (:func:`control_from_state`, read from the saved widget state):

- a slider (``IntSlider``, ``FloatSlider``, ``FloatLogSlider``): up to :data:`MAX_VALUES`
  evenly spaced values from its minimum to its maximum on its step lattice, plus the value it
  was saved with (:func:`slider_grid`); a ``SelectionSlider``: every option;
- a checkbox: off and on; a drop-down (or radio buttons, toggle buttons): every option;
- a multiple selection: the saved selection, each option alone, and all of them.

Which combinations are drawn (:func:`combinations`): every one when there are at most
:data:`FULL_GRID_MAX` (chapter 01's 13 positions, chapter 12's 128 curves); otherwise one
control at a time, the others at their saved values (chapter 08's five sliders: 61 figures, not
13^5), and in the page moving one control puts the others back at their saved values, as the
explorer's note says. Explorers with another kind of control keep their saved output and the
note that they need Python.
"""

from __future__ import annotations

import base64
import hashlib
import html
import itertools
import json
import logging
import math
import os
import posixpath
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: At most this many evenly spaced values of a slider, plus its saved value.
MAX_VALUES = 12
#: Every combination of the controls' values is drawn when there are at most this many;
#: beyond, one control at a time.
FULL_GRID_MAX = 128
#: Changes when what a frame holds changes, so that cached frames are redrawn.
FRAMES_VERSION = 2
#: Where the figures go in the site (one file per distinct figure, named by its content).
FRAMES_DIR = "_explorers"

_SLIDERS = {"IntSliderModel": int, "FloatSliderModel": float, "FloatLogSliderModel": float}
_CHOICES = {"DropdownModel", "RadioButtonsModel", "ToggleButtonsModel", "SelectModel"}


@dataclass(frozen=True)
class Control:
    """One control of an explorer, as the book offers it.

    ``values`` are what the kernel passes for it: numbers for a slider, booleans for a
    checkbox, an option's index for a choice, a tuple of indices for a multiple selection.
    ``labels`` are what the page shows for each; ``saved`` is the index of the saved value.
    ``kind`` is the HTML control: ``range``, ``checkbox`` or ``select``.
    """

    name: str
    kind: str
    values: tuple
    labels: tuple[str, ...]
    saved: int


@dataclass(frozen=True)
class Explorer:
    """The explorer a code cell makes: its controls and the combinations drawn."""

    cell: int  # index of the cell in the notebook
    controls: tuple[Control, ...]
    combos: tuple[tuple[int, ...], ...]  # each an index into every control's values
    full: bool  # every combination is drawn (else one control at a time)

    @property
    def saved(self) -> tuple[int, ...]:
        return tuple(c.saved for c in self.controls)


@dataclass(frozen=True)
class Frames:
    """An explorer drawn at each of its combinations, in order: PNG bytes, or the text it
    printed instead of a figure (chapter 14's explorer refuses beta_fast <= beta_slow) and the
    error it raised, if any."""

    explorer: Explorer
    frames: tuple[bytes | str, ...]


def slider_grid(state: dict[str, Any], kind: type = int, most: int = MAX_VALUES) -> tuple:
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


def _log_grid(state: dict[str, Any]) -> tuple[float, ...]:
    """A FloatLogSlider's grid: evenly spaced exponents (its min, max and step are exponents
    of its base), and the saved value itself."""
    base, value = float(state.get("base", 10.0)), float(state["value"])
    if value <= 0 or base <= 1:
        raise ValueError(f"state must be a log slider's (value > 0, base > 1), got {state!r}")
    saved_exponent = math.log(value) / math.log(base)
    exponents = slider_grid({**state, "value": saved_exponent}, float)
    near = min(exponents, key=lambda e: abs(e - saved_exponent))
    return tuple(value if e == near else float(base**e) for e in exponents)


def _label(value: Any, fmt: str | None) -> str:
    try:
        return format(value, fmt) if fmt else str(value)
    except (TypeError, ValueError):
        return str(value)


def control_from_state(model_name: str, state: dict[str, Any]) -> Control | None:
    """The control a saved widget model offers in the book, or ``None`` for a kind the book
    does not draw (a range slider, a text box, a button...)."""
    name = str(state.get("description", ""))
    if model_name in _SLIDERS:
        kind = _SLIDERS[model_name]
        values = (
            _log_grid(state) if model_name == "FloatLogSliderModel" else slider_grid(state, kind)
        )
        saved = kind(state["value"])
        fmt = state.get("readout_format")
        labels = tuple(_label(v, fmt) for v in values)
        return Control(name, "range", values, labels, values.index(saved))
    if model_name == "CheckboxModel":
        return Control(name, "checkbox", (False, True), ("off", "on"), int(bool(state["value"])))
    options = tuple(str(o) for o in state.get("_options_labels", ()))
    index = state.get("index")
    if not options:
        return None
    if model_name in _CHOICES or model_name == "SelectionSliderModel":
        if not isinstance(index, int):
            return None
        kind = "range" if model_name == "SelectionSliderModel" else "select"
        return Control(name, kind, tuple(range(len(options))), options, index)
    if model_name == "SelectMultipleModel" and isinstance(index, (list, tuple)):
        saved = tuple(index)
        picks = [saved, *((i,) for i in range(len(options))), tuple(range(len(options)))]
        values = tuple(dict.fromkeys(picks))  # in order, each once
        labels = tuple(", ".join(options[i] for i in v) or "none" for v in values)
        return Control(name, "select", values, labels, 0)
    return None


def combinations(
    controls: tuple[Control, ...], most: int = FULL_GRID_MAX
) -> tuple[tuple[tuple[int, ...], ...], bool]:
    """The combinations to draw (index tuples, the saved one first) and whether they are
    all of them: every combination when there are at most ``most``, else the saved values
    and each control over its values with the others at their saved values."""
    saved = tuple(c.saved for c in controls)
    total = math.prod(len(c.values) for c in controls)
    if total <= most:
        every = itertools.product(*(range(len(c.values)) for c in controls))
        return (saved, *(combo for combo in every if combo != saved)), True
    one_at_a_time = [saved]
    for i, control in enumerate(controls):
        for k in range(len(control.values)):
            if k != control.saved:
                one_at_a_time.append(saved[:i] + (k,) + saved[i + 1 :])
    return tuple(one_at_a_time), False


def make_explorer(cell: int, controls: list[Control]) -> Explorer:
    """An explorer over ``controls`` with the combinations :func:`combinations` picks."""
    combos, full = combinations(tuple(controls))
    return Explorer(cell, tuple(controls), combos, full)


# Run in the chapter's kernel just before the explorer's cell: remember the widgets it makes.
_WATCH = """
import ipywidgets as _pecourse_widgets
_pecourse_made = []
_pecourse_widgets.Widget.on_widget_constructed(_pecourse_made.append)
"""

# Run just after it: call the explorer's own function at each combination, keep its figure
# (or what it printed instead) and write them to a file (JSON).
_DRAW = """
import base64 as _b64, json as _json
import matplotlib.pyplot as _plt
from IPython.utils.capture import capture_output as _capture
from ipywidgets.widgets.widget_selection import _MultipleSelection, _Selection
_pecourse_widgets.Widget.on_widget_constructed(None)
_explorer = [w for w in _pecourse_made if isinstance(w, _pecourse_widgets.interactive)][-1]
_controls = [w for w in _explorer.kwargs_widgets if isinstance(w, _pecourse_widgets.DOMWidget)]
assert len(_controls) == {count}, f"the explorer has {{len(_controls)}} controls, saved {count}"


def _pecourse_arg(widget, value):
    if isinstance(widget, _MultipleSelection):
        return tuple(widget._options_values[i] for i in value)
    if isinstance(widget, _Selection):
        return widget._options_values[value]
    return value


_frames = []
for _combo in _json.loads({combos!r}):
    _kwargs = dict(_explorer.kwargs)
    _kwargs.update({{w._kwarg: _pecourse_arg(w, v) for w, v in zip(_controls, _combo)}})
    _error = None
    with _capture() as _seen:
        try:
            _explorer.f(**_kwargs)
        except Exception as _exc:  # what interact would show under the controls
            _error = f"{{type(_exc).__name__}}: {{_exc}}"
    _plt.close("all")
    _figures = [o.data["image/png"] for o in _seen.outputs if "image/png" in o.data]
    if _error is not None:
        _frames.append({{"text": _seen.stdout + _error, "error": _error}})
    else:
        _frames.append({{"png": _figures[0]}} if _figures else {{"text": _seen.stdout}})
with open({path!r}, "w") as _file:
    _json.dump(_frames, _file)
del _pecourse_made, _explorer, _controls, _frames
"""


def _decode(frame: dict[str, str]) -> bytes | str:
    return base64.b64decode(frame["png"]) if "png" in frame else frame["text"]


def _encode(frame: bytes | str) -> dict[str, str]:
    if isinstance(frame, bytes):
        return {"png": base64.b64encode(frame).decode()}
    return {"text": frame}


def draw(
    notebook_path: Path, explorers: list[Explorer], *, timeout: int = 600
) -> dict[int, Frames]:
    """Run the notebook in one fresh kernel up to its last explorer's cell, drawing each
    explorer at each of its combinations just after its cell runs. Where the explorer raises,
    the frame is the error as a reader of the notebook would see it under the controls, and a
    warning names the values. Raises ``RuntimeError`` when a combination draws no figure and
    prints nothing."""
    import nbformat
    from nbclient import NotebookClient

    from pecourse.notebook_tools import SlicedKernelManager

    notebook_path = Path(notebook_path)
    nb = nbformat.read(notebook_path, as_version=4)
    by_cell = {e.cell: e for e in explorers}
    if not by_cell:
        return {}
    with tempfile.TemporaryDirectory(prefix="pecourse-frames-") as tmp:
        cells, outputs = [], {}
        for index, cell in enumerate(nb.cells[: max(by_cell) + 1]):
            if cell.cell_type != "code":
                continue
            if index not in by_cell:
                cells.append(cell)
                continue
            e = by_cell[index]
            outputs[index] = Path(tmp) / f"cell-{index}.json"
            combos = [[c.values[k] for c, k in zip(e.controls, combo)] for combo in e.combos]
            draw_code = _DRAW.format(
                count=len(e.controls), combos=json.dumps(combos), path=str(outputs[index])
            )
            cells += [nbformat.v4.new_code_cell(_WATCH), cell, nbformat.v4.new_code_cell(draw_code)]
        client = NotebookClient(
            nbformat.v4.new_notebook(cells=cells),
            timeout=timeout,
            kernel_name="python3",
            kernel_manager_class=SlicedKernelManager,
            resources={"metadata": {"path": str(notebook_path.parent)}},
        )
        # learner data (the quiz's progress) goes to a throwaway folder, as under make outputs
        env = {**os.environ, "PECOURSE_DATA_DIR": str(Path(tmp) / "data")}
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        with client.setup_kernel(env=env):
            for index, cell in enumerate(client.nb.cells):
                client.execute_cell(cell, index)
        read = {c: json.loads(path.read_text(encoding="utf-8")) for c, path in outputs.items()}
    drawn = {cell: [_decode(f) for f in got] for cell, got in read.items()}
    for cell, got in read.items():
        for combo, frame in zip(by_cell[cell].combos, got):
            if "error" in frame:  # the chapter's own explorer fails there: say so, show it
                log.warning(
                    "%s, cell %d: the explorer raised at %s: %s",
                    notebook_path.name, cell, describe(by_cell[cell], combo), frame["error"],
                )  # fmt: skip
    out = {}
    for cell, got in drawn.items():
        e = by_cell[cell]
        blank = [combo for combo, frame in zip(e.combos, got) if frame in ("", b"")]
        if blank or len(got) != len(e.combos):
            where = ", ".join(describe(e, combo) for combo in blank)
            raise RuntimeError(
                f"{notebook_path.name}, cell {cell}: the explorer drew no figure at {where}"
            )
        out[cell] = Frames(e, tuple(got))
    return out


def describe(explorer: Explorer, combo: tuple[int, ...]) -> str:
    """A combination as a reader reads it: ``position = 20`` or ``base = 1e+04, seed = 0``."""
    return ", ".join(f"{c.name} = {c.labels[k]}" for c, k in zip(explorer.controls, combo))


def drawn(
    notebook_path: Path, explorers: list[Explorer], cache: Path | None = None
) -> dict[int, Frames]:
    """The notebook's ``explorers`` (:func:`pecourse.book.pages.find_explorers`), by cell
    index, drawn or read from ``cache`` (a folder; entries are keyed by the notebook's bytes
    and the combinations drawn, so an edited chapter is redrawn)."""
    notebook_path = Path(notebook_path)
    if not explorers:
        return {}
    plan = json.dumps([[e.cell, [c.values for c in e.controls], e.combos] for e in explorers])
    data = notebook_path.read_bytes() + f"frames {FRAMES_VERSION} {plan}".encode()
    key = hashlib.sha256(data).hexdigest()[:16]
    cached = Path(cache) / f"{notebook_path.stem}-{key}.json" if cache is not None else None
    if cached is not None and cached.exists():
        saved = json.loads(cached.read_text(encoding="utf-8"))
        return {e.cell: Frames(e, tuple(_decode(f) for f in saved[str(e.cell)])) for e in explorers}
    count = sum(len(e.combos) for e in explorers)
    log.info("drawing %s's %d explorer(s): %d figures", notebook_path.stem, len(explorers), count)
    start = time.perf_counter()
    out = draw(notebook_path, explorers)
    log.info("drew %s's explorers in %.0f s", notebook_path.stem, time.perf_counter() - start)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        for old in cached.parent.glob(f"{notebook_path.stem}-*.json"):
            old.unlink()  # an older drawing of this chapter
        record = {str(c): [_encode(f) for f in fr.frames] for c, fr in out.items()}
        cached.write_text(json.dumps(record), encoding="utf-8")
    return out


def frame_file(png: bytes) -> str:
    """The file a figure is written to in the site, under :data:`FRAMES_DIR` (named by its
    content, so a figure two combinations share is stored once)."""
    return f"{FRAMES_DIR}/{hashlib.sha256(png).hexdigest()[:20]}.png"


# Shows the figure drawn for the controls' values; with one control at a time, the control
# moved keeps its value and the others go back to their saved ones. The page's first figure
# is the saved values', so without scripts the reader sees what the notebook saved.
_SCRIPT = """(function () {
  const box = document.currentScript.parentElement;
  const data = JSON.parse(box.querySelector('script[type="application/json"]').textContent);
  const inputs = Array.from(box.querySelectorAll("[data-control]"));
  const text = box.querySelector("pre");
  let img = box.querySelector("img");  // none while the explorer has shown only text
  const read = el => el.type === "checkbox" ? (el.checked ? 1 : 0) : Number(el.value);
  const write = (el, i) => {
    if (el.type === "checkbox") el.checked = i === 1; else el.value = String(i);
  };
  function show(moved) {
    if (!data.full) inputs.forEach((el, c) => { if (el !== moved) write(el, data.saved[c]); });
    let at = inputs.map(read);
    if (!(at.join(",") in data.frames)) {  // a state the browser restored: start again
      inputs.forEach((el, c) => write(el, data.saved[c]));
      at = data.saved;
    }
    inputs.forEach((el, c) => {
      const readout = el.parentElement.querySelector("output");
      if (readout) readout.textContent = data.labels[c][at[c]];
    });
    const frame = data.frames[at.join(",")];
    const said = data.names.map((n, c) => n + " = " + data.labels[c][at[c]]).join(", ");
    const isFigure = typeof frame === "string";
    if (isFigure && !img) {
      img = document.createElement("img");
      img.style.maxWidth = "100%";
      box.insertBefore(img, text);
    }
    if (img) img.style.display = isFigure ? "" : "none";
    text.style.display = isFigure ? "none" : "";
    if (isFigure) { img.src = frame; img.alt = "the explorer's figure at " + said; }
    else text.textContent = frame.text;
  }
  inputs.forEach(el => {
    el.addEventListener(el.type === "range" ? "input" : "change", () => show(el));
  });
  show(null);
})();"""


_NAME = '<span style="display: inline-block; min-width: 9em">{}</span>'


def _control_html(c: Control, index: int) -> str:
    name = html.escape(c.name)
    attr = f'data-control="{index}" aria-label="{name}"'
    if c.kind == "checkbox":
        checked = " checked" if c.saved == 1 else ""
        return f'<label>{_NAME.format(name)} <input type="checkbox" {attr}{checked}></label>'
    if c.kind == "select":
        options = "".join(
            f'<option value="{k}"{" selected" if k == c.saved else ""}>{html.escape(label)}'
            "</option>"
            for k, label in enumerate(c.labels)
        )
        select = f'<select style="max-width: 100%" {attr}>{options}</select>'
        return f"<label>{_NAME.format(name)} {select}</label>"
    return (
        f'<label>{_NAME.format(name)} <input type="range" min="0" max="{len(c.values) - 1}" '
        f'step="1" value="{c.saved}" style="width: min(20rem, 50vw); vertical-align: middle" '
        f"{attr}> <output>{html.escape(c.labels[c.saved])}</output></label>"
    )


def explorer_html(frames: Frames, here: str = "notebooks") -> str:
    """The explorer as a page in folder ``here`` shows it: a control for each of the
    explorer's, and the figure drawn for their values (figures are files under
    :data:`FRAMES_DIR`, see :func:`frame_file`; printed text is inline)."""
    e = frames.explorer
    shown = {}
    for combo, frame in zip(e.combos, frames.frames):
        key = ",".join(map(str, combo))
        if isinstance(frame, bytes):
            shown[key] = posixpath.relpath(frame_file(frame), here)
        else:
            shown[key] = {"text": frame}
    data = {
        "full": e.full,
        "saved": list(e.saved),
        "names": [c.name for c in e.controls],
        "labels": [list(c.labels) for c in e.controls],
        "frames": shown,
    }
    first = shown[",".join(map(str, e.saved))]
    alt = html.escape(f"the explorer's figure at {describe(e, e.saved)}")
    picture = (
        f'<img style="max-width: 100%" alt="{alt}" src="{html.escape(first)}">'
        '<pre class="pecourse-frames-text" style="display: none"></pre>'
        if isinstance(first, str)
        else f'<pre class="pecourse-frames-text">{html.escape(first["text"])}</pre>'
    )
    controls = "".join(
        f'<div class="pecourse-frames-control" style="margin: 0.15rem 0">{_control_html(c, i)}'
        "</div>"
        for i, c in enumerate(e.controls)
    )
    payload = json.dumps(data).replace("</", "<\\/")
    return (
        f'<div class="pecourse-frames" data-full="{str(e.full).lower()}">{controls}{picture}'
        f'<script type="application/json">{payload}</script>'
        f"<script>{_SCRIPT}</script></div>"
    )
