"""What the book does to a notebook before Sphinx renders it, and the pages it writes itself.

Pure functions over notebook dictionaries and Markdown strings; :mod:`pecourse.book.builder`
applies them to copies in the staging folder (the committed notebooks are never changed).

- **Links.** The staging folder mirrors the repository (``notebooks/``, ``exercises/``), so a
  link between chapters or to an exercise resolves as it does on disk. A link or a code span
  naming a package file (`` `pecourse/positions/alibi.py` ``) points to that file's source
  page; a link to a chapter left out of a partial build becomes plain text.
- **Widgets.** A notebook executed by ``pecourse.notebook_tools`` carries its widgets' saved
  state, which the widget manager renders in the page. Controls joined by ``jslink`` work
  without a kernel. An explorer whose output is computed by Python (``interact``) is shown
  redrawn from figures drawn when the book was built, for a grid of its controls' values
  (:mod:`pecourse.book.frames`); one with a control the book cannot offer gets a note above it
  saying that it needs Python, and shows its saved output. A widget with no saved state is
  removed and the note says why.
  The flashcard quiz (which needs Python and a progress database) gives way to a link to the
  chapter's flashcard page.
- **Scaffolding folded.** A long code cell (a figure's plumbing) or one that writes the prose
  under it from checked numbers gets MyST-NB's ``hide-input`` tag: its code folds under a
  toggle and its output shows (:func:`collapses`).
- **Results as tables.** Measurements a cell prints as aligned text (a header, then a row per
  model, values with their intervals) are shown as HTML tables that fit the text column
  (:mod:`pecourse.book.tables`); anything it cannot read back exactly stays printed text.
- **The reader's machine, not ours.** A cell that reports the computer it runs on
  (``pecourse.info``: versions, paths, CPU) loses its saved output, which describes the machine
  the notebook was executed on; a note says how to see the reader's own.
- **Downloads.** Each chapter and exercise page links its notebook as committed
  (:func:`with_download`), which Sphinx copies into the site.
- **Exercises** are the student notebooks of ``exercises/``: the book refuses one that still
  holds a solution or hidden tests.
"""

from __future__ import annotations

import ast
import copy
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pecourse.book import tables
from pecourse.book.frames import (
    Explorer,
    Frames,
    control_from_state,
    explorer_html,
    make_explorer,
)

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
DOC_SUFFIXES = (".ipynb", ".md")

# Markers of the nbgrader source notebooks (solutions/): never published.
PRIVATE_MARKERS = ("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS")

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
_LINK = re.compile(r'(!?)\[([^\]\n]*)\]\(([^()\s]+)((?:\s+"[^"]*")?)\)')
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)([^`\n]+?)(?<!`)\1(?!`)")
# Cells whose output describes the machine that ran them (chapter 00's "Is everything installed?").
_MACHINE_REPORT = re.compile(r"\bpecourse\.info\b|\bpecourse\s+info\b")
_QUIZ = re.compile(r"\bfrom\s+pecourse\.flashcards\s+import\s+[^\n]*\bquiz\b|\bquiz\s*\(")


@dataclass
class Site:
    """What a build contains, for resolving links: docs, source pages, files to copy."""

    root: Path  # the repository the notebooks come from
    docs: set[str]  # docnames in this build: "notebooks/03_alibi", "exercises/03_alibi", ...
    source_pages: dict[str, str]  # repository path -> docname of its source page
    course_docs: set[str] = field(default_factory=set)  # every chapter/exercise docname
    copies: set[str] = field(default_factory=set)  # repository files linked as they are
    linked_sources: set[str] = field(default_factory=set)  # source pages something links to

    def resolve(self, target: str, here: str) -> str | None:
        """Where a link written in a file of folder ``here`` should point in the book.

        Returns the (possibly rewritten) target, or ``None`` when the link must become plain
        text (a course page this partial build leaves out). External links, anchors and
        paths outside the repository come back unchanged.
        """
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            return target
        path, hash_, fragment = target.partition("#")
        if not path:
            return target
        repo_path = posixpath.normpath(
            path.lstrip("/") if path.startswith("/") else posixpath.join(here, path)
        )
        if repo_path.startswith(".."):
            return target
        suffix = "#" + fragment if hash_ else ""
        if repo_path == "README.md":
            return posixpath.relpath("index.md", here) + suffix
        stem, ext = posixpath.splitext(repo_path)
        if ext in DOC_SUFFIXES and stem in self.docs:
            return posixpath.relpath(repo_path, here) + suffix
        if ext in DOC_SUFFIXES and stem in self.course_docs:
            return None
        if repo_path in self.source_pages:
            self.linked_sources.add(repo_path)
            return posixpath.relpath(self.source_pages[repo_path] + ".md", here) + suffix
        if (self.root / repo_path).is_file():
            self.copies.add(repo_path)
        return target

    def page_for_path(self, text: str) -> str | None:
        """The book page a repository path (as written in a code span) names, if any."""
        text = text.strip().lstrip("/")
        if not re.fullmatch(r"[\w./-]+", text):
            return None
        stem, ext = posixpath.splitext(text)
        if ext in DOC_SUFFIXES and stem in self.docs:
            return text
        if text in self.source_pages:
            self.linked_sources.add(text)
            return self.source_pages[text] + ".md"
        return None


def _outside_fences(text: str, edit) -> str:
    """Apply ``edit`` to the parts of Markdown that are not fenced code blocks."""
    out, last = [], 0
    for fence in _FENCE.finditer(text):
        out += [edit(text[last : fence.start()]), fence.group(0)]
        last = fence.end()
    out.append(edit(text[last:]))
    return "".join(out)


def rewrite_markdown(text: str, site: Site, here: str) -> str:
    """Point the links of a Markdown text at the book's pages (see :meth:`Site.resolve`)."""

    def edit(part: str) -> str:
        links: list[str] = []

        def link(match: re.Match) -> str:
            bang, label, target, title = match.groups()
            new = site.resolve(target, here)
            if new is None:
                replacement = label if not bang else ""
            else:
                replacement = f"{bang}[{label}]({new}{title})"
            links.append(replacement)
            return f"\x00{len(links) - 1}\x00"

        def code(match: re.Match) -> str:
            page = site.page_for_path(match.group(2))
            if page is None:
                return match.group(0)
            return f"[{match.group(0)}]({posixpath.relpath(page, here)})"

        masked = _LINK.sub(link, part)
        masked = _CODE_SPAN.sub(code, masked)
        return re.sub(r"\x00(\d+)\x00", lambda m: links[int(m.group(1))], masked)

    return _outside_fences(text, edit)


# --- widgets -------------------------------------------------------------------------------

# Models that only show things or lay them out: nothing a reader changes needs a kernel.
_PASSIVE = {
    "HTMLModel", "HTMLMathModel", "LabelModel", "ImageModel", "OutputModel", "VBoxModel",
    "HBoxModel", "BoxModel", "GridBoxModel", "AccordionModel", "TabModel", "StackModel",
    "ValidModel", "IntProgressModel", "FloatProgressModel", "LayoutModel",
}  # fmt: skip
_LINKS = {"LinkModel", "DirectionalLinkModel"}
_REF = re.compile(r"^IPY_MODEL_(\S+)$")


def saved_widget_state(notebook: dict[str, Any]) -> dict[str, Any]:
    """The widget models saved in a notebook's metadata (empty when none were saved)."""
    widgets = notebook.get("metadata", {}).get("widgets", {}) or {}
    return (widgets.get(WIDGET_STATE, {}) or {}).get("state", {}) or {}


def _references(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        match = _REF.match(value)
        if match:
            yield match.group(1)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _references(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _references(item)


def reachable_models(state: dict[str, Any], model_id: str) -> set[str]:
    """The model and every model it refers to (children, layouts, styles), transitively."""
    seen: set[str] = set()
    todo = [model_id]
    while todo:
        current = todo.pop()
        if current in seen or current not in state:
            continue
        seen.add(current)
        todo.extend(_references(state[current].get("state", {})))
    return seen


def needs_kernel(state: dict[str, Any], model_id: str) -> bool:
    """Whether a saved widget does anything useful only with Python behind it.

    A control (slider, button, dropdown, ...) changes what the reader sees without a kernel
    only through a ``jslink``/``jsdlink``: a control that no link joins, or any button, is
    wired to Python. Display models (HTML, boxes, the output area) need nothing.
    """
    if model_id not in state:
        raise KeyError(f"no saved state for widget model {model_id!r}")
    linked: set[str] = set()
    for model in state.values():
        if model.get("model_name") in _LINKS:
            linked.update(_references(model.get("state", {})))
    for mid in reachable_models(state, model_id):
        name = state[mid].get("model_name", "")
        if name in _PASSIVE or name.endswith("StyleModel") or name in _LINKS:
            continue
        if name == "ButtonModel" or mid not in linked:
            return True
    return False


def find_explorers(notebook: dict[str, Any]) -> list[Explorer]:
    """The cells whose saved output is an ``interact`` explorer whose every control the book
    can offer (:func:`pecourse.book.frames.control_from_state`): what the book draws at build
    time. The controls are read from the saved widget state, in the order the explorer shows
    them (its box's children; the last child is its output)."""
    state = saved_widget_state(notebook)
    found = []
    for index, cell in enumerate(notebook.get("cells", [])):
        if cell.get("cell_type") != "code" or "interact" not in "".join(cell.get("source", "")):
            continue
        views = _widget_views(cell)
        if len(views) != 1 or views[0] not in state:
            continue
        children = state[views[0]].get("state", {}).get("children", [])
        ids = [m.group(1) for m in map(_REF.match, children) if m and m.group(1) in state]
        if len(ids) != len(children):
            continue
        parts = [state[i] for i in ids if state[i].get("model_name") != "OutputModel"]
        controls = [control_from_state(p.get("model_name", ""), p.get("state", {})) for p in parts]
        if controls and None not in controls:
            found.append(make_explorer(index, controls))
    return found


def _widget_views(cell: dict[str, Any]) -> list[str]:
    return [
        out["data"][WIDGET_VIEW].get("model_id", "")
        for out in cell.get("outputs", [])
        if WIDGET_VIEW in out.get("data", {})
    ]


def _note(title: str, body: str, kind: str = "note") -> dict[str, Any]:
    return {
        "cell_type": "markdown",
        "metadata": {"tags": ["book-note"]},
        "source": f":::{{admonition}} {title}\n:class: {kind}\n\n{body}\n:::",
    }


NEEDS_PYTHON = (
    "The explorer below runs on Python",
    "Here its controls move, but what it draws is computed by Python: the output under the "
    "controls is the one saved with the notebook, for the starting values. Open the chapter "
    "in JupyterLab (`make lab`) to explore it.",
)
YOUR_MACHINE = (
    "Run it to see your machine",
    "What this cell prints describes the computer it runs on: versions, paths, processor. The "
    "book does not show the one the notebook was saved on; in JupyterLab (`make lab`) it shows "
    "yours.",
)
FRAMED = (
    "The explorer below was drawn when the book was built",
    "Its figure is computed by Python, so the book shows {count} figures drawn from the chapter "
    "when the book was built: {rule}. Open the chapter in JupyterLab (`make lab`, or "
    "`pecourse start FOLDER` from an installed package) for every value.",
)
FRAMED_FULL = "every combination of the values its controls offer here"
FRAMED_ONE = (
    "each control over the values it offers here, with the others at their starting values "
    "(moving one control puts the others back)"
)


def framed_note(explorer: Explorer) -> tuple[str, str]:
    """The note above a drawn explorer: how many figures, and which combinations."""
    title, body = FRAMED
    count = len(explorer.combos)
    if len(explorer.controls) == 1:
        c = explorer.controls[0]
        rule = f"one for each of {len(c.values)} values of `{c.name}`"
    else:
        rule = FRAMED_FULL if explorer.full else FRAMED_ONE
    return title, body.format(count=count, rule=rule)


NO_STATE = (
    "The explorer below needs Python",
    "The notebook was saved without this widget's state, so the book cannot show it. Open the "
    "chapter in JupyterLab (`make lab`) to use it.",
)


def prepare_notebook(
    notebook: dict[str, Any],
    site: Site,
    here: str,
    flashcards: str | None = None,
    frames: dict[int, Frames] | None = None,
) -> dict[str, Any]:
    """A copy of a chapter notebook ready for the book (links, widgets, the quiz); ``frames``
    are its explorers drawn at build time, by cell index (:func:`pecourse.book.frames.drawn`)."""
    nb = copy.deepcopy(notebook)
    state = saved_widget_state(nb)
    frames = frames or {}
    cells = []
    for index, cell in enumerate(nb.get("cells", [])):
        source = _text(cell.get("source", ""))
        cells.append(cell)
        if cell.get("cell_type") == "markdown":
            cell["source"] = rewrite_markdown(source, site, here)
            continue
        if cell.get("cell_type") != "code":
            continue
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "text/markdown" in data:
                data["text/markdown"] = rewrite_markdown(_text(data["text/markdown"]), site, here)
        cell["outputs"] = printed_tables(cell.get("outputs", []))
        if collapses(cell):
            tags = cell.setdefault("metadata", {}).setdefault("tags", [])
            tags.append(HIDE_INPUT)
        if _MACHINE_REPORT.search(source):
            cell["outputs"] = []
            cells.append(_note(*YOUR_MACHINE, "tip"))
            continue
        views = _widget_views(cell)
        if not views:
            continue
        if _QUIZ.search(source):
            cell["outputs"] = [o for o in cell["outputs"] if WIDGET_VIEW not in o.get("data", {})]
            where = (
                f"[this chapter's flashcard page]({posixpath.relpath(flashcards, here)})"
                if flashcards
                else "the book's flashcard pages"
            )
            cells.append(
                _note(
                    "Flashcards",
                    "In JupyterLab this cell opens a quiz that schedules your reviews and "
                    f"remembers them. In the book, the same cards are on {where}.",
                    "tip",
                )
            )
            continue
        # The note goes above the cell, where a reader sees it before trying the controls.
        missing = [v for v in views if v not in state]
        if missing:
            cell["outputs"] = [
                o
                for o in cell["outputs"]
                if o.get("data", {}).get(WIDGET_VIEW, {}).get("model_id") not in missing
            ]
            cells.insert(len(cells) - 1, _note(*NO_STATE, "warning"))
        elif index in frames:
            drawn = frames[index]
            cell["outputs"] = [o for o in cell["outputs"] if WIDGET_VIEW not in o.get("data", {})]
            html = explorer_html(drawn, here)
            cell["outputs"].append({"output_type": "display_data", "metadata": {},
                                    "data": {"text/html": html}})  # fmt: skip
            cells.insert(len(cells) - 1, _note(*framed_note(drawn.explorer)))
        elif any(needs_kernel(state, v) for v in views):
            cells.insert(len(cells) - 1, _note(*NEEDS_PYTHON))
    nb["cells"] = cells
    return nb


# MyST-NB's tag: the cell's code folds under a "Show code cell source" toggle, its outputs show.
HIDE_INPUT = "hide-input"
_ALREADY_SET = {HIDE_INPUT, "remove-input", "hide-cell", "remove-cell", "show-input"}
# A cell this long is scaffolding in a page (a figure's or an experiment's plumbing): its
# figure or table is what a reader of the book looks at.
LONG_CELL_LINES = 30
# A cell that writes the prose under it (IPython's Markdown) from checked numbers: the reader
# reads the prose; the f-strings and asserts that produce it fold away unless the cell is short
# (a derivation shown by name, three lines).
PROSE_CELL_LINES = 6


def collapses(cell: dict[str, Any]) -> bool:
    """Whether a code cell's input is folded in the book (tags, never deletion): a long cell,
    or one that generates the prose under it. A cell whose tags already say is left alone."""
    if cell.get("cell_type") != "code":
        return False
    if _ALREADY_SET & set(cell.get("metadata", {}).get("tags", [])):
        return False
    lines = len(_text(cell.get("source", "")).strip().splitlines())
    writes_prose = any("text/markdown" in o.get("data", {}) for o in cell.get("outputs", []))
    return lines >= LONG_CELL_LINES or (writes_prose and lines >= PROSE_CELL_LINES)


def printed_tables(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Outputs with the result tables a cell printed shown as HTML tables
    (:mod:`pecourse.book.tables`); the text around them stays printed."""
    new = []
    for out in outputs:
        if out.get("output_type") == "stream" and out.get("name") == "stdout":
            split = tables.output_as_tables(_text(out.get("text", "")))
            if split is not None:
                new += split
                continue
        new.append(out)
    return new


CHAPTER_DOWNLOAD = (
    "Download this chapter as a notebook: {link}. It runs in JupyterLab with the course's "
    "package installed (`make lab` in a clone of the course); its outputs are the ones shown "
    "here."
)
EXERCISE_DOWNLOAD = (
    "Download this exercise as a notebook: {link}. Fill it in in JupyterLab and check it with "
    "`pecourse check`, as the box below says."
)


def with_download(notebook: dict[str, Any], here: str, target: str, text: str) -> dict[str, Any]:
    """A copy of a book page's notebook with a download link to ``target`` (a path in the
    staging folder) under its title; ``text`` holds ``{link}`` where the link goes."""
    nb = copy.deepcopy(notebook)
    name = posixpath.basename(target)
    link = f"{{download}}`{name} <{posixpath.relpath(target, here)}>`"
    cell = {
        "cell_type": "markdown",
        "metadata": {"tags": ["book-download"]},
        "source": text.format(link=link),
    }
    cells = nb.get("cells", [])
    first_is_title = bool(cells) and cells[0].get("cell_type") == "markdown"
    nb["cells"] = cells[:1] + [cell] + cells[1:] if first_is_title else [cell] + cells
    return nb


def prepare_exercise(
    notebook: dict[str, Any], site: Site, here: str, name: str, chapter: str | None
) -> dict[str, Any]:
    """A copy of a student exercise notebook for the book, with a note on how to do it."""
    nb = copy.deepcopy(notebook)
    for cell in nb.get("cells", []):
        source = _text(cell.get("source", ""))
        for marker in PRIVATE_MARKERS:
            if marker in source:
                raise ValueError(
                    f"exercises/{name}.ipynb contains {marker!r}: the book publishes student "
                    "notebooks only (run `make exercises` to regenerate them from solutions/)"
                )
        if cell.get("cell_type") == "markdown":
            cell["source"] = rewrite_markdown(source, site, here)
    chapter_link = (
        f"It goes with [the chapter]({posixpath.relpath(chapter, here)}). " if chapter else ""
    )
    note = _note(
        "How to do this exercise",
        f"{chapter_link}Open `exercises/{name}.ipynb` in JupyterLab (`make lab`), fill in "
        "the cells that raise `NotImplementedError`, and run the checks below them; "
        f"`pecourse check exercises/{name}.ipynb` runs the whole notebook against the visible "
        "tests shown here; grading adds hidden tests, and `pecourse check --all` runs those "
        "too where the course's `solutions/` folder is there (self-study).",
        "tip",
    )
    cells = nb.get("cells", [])
    first_is_title = cells and cells[0].get("cell_type") == "markdown"
    nb["cells"] = cells[:1] + [note] + cells[1:] if first_is_title else [note] + cells
    return nb


def _text(source: Any) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


# --- pages the book writes -----------------------------------------------------------------


def module_summary(path: Path) -> str:
    """The first line of a Python file's docstring (or a JSON file's name), for listings."""
    if path.suffix != ".py":
        return ""
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    except SyntaxError:
        return ""
    return doc.strip().split("\n\n")[0].replace("\n", " ")


def source_page(repo_path: str) -> str:
    """The MyST page that shows one file of the package (copied beside it as ``name``)."""
    name = posixpath.basename(repo_path)
    language = {".py": "python", ".json": "json"}.get(posixpath.splitext(name)[1], "text")
    return (
        f"# `{repo_path}`\n\n```{{literalinclude}} {name}\n:language: {language}\n:linenos:\n```\n"
    )
