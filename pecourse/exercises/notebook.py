"""The exercise notebook format: reading the source, building student and graded notebooks.

A source notebook (``solutions/NN_slug.ipynb``) is an nbgrader source notebook. The cells
that matter are told apart by ``metadata.nbgrader`` (schema version 3):

* **answer cells** (``solution: true, grade: false``): the learner's code. The region
  between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` is the reference answer; the lines
  around it (the ``def`` line and docstring) are kept in the student version.
* **test cells** (``grade: true, solution: false, locked: true``, with ``points``): one
  graded *part* each, scored all-or-nothing. Lines between ``### BEGIN HIDDEN TESTS`` and
  ``### END HIDDEN TESTS`` are removed from the student version and restored at grading.
* everything else (markdown, locked set-up code) is taken from the source at grading time.

The student version replaces each answer region exactly as ``nbgrader generate_assignment``
does (``# YOUR CODE HERE`` / ``raise NotImplementedError()`` at the region's indentation), so
the two tools hand out the same notebook.
"""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..course import CONCEPTS, NotACheckoutError, checkout

__all__ = ["BEGIN_SOLUTION", "END_SOLUTION", "BEGIN_HIDDEN", "END_HIDDEN", "Part"]
__all__ += ["GradedNotebook", "default_source_dir", "default_exercise_dir", "source_notebooks"]
__all__ += ["read_notebook", "write_notebook", "is_answer_cell", "is_test_cell", "parts"]
__all__ += ["strip_solutions", "strip_hidden_tests", "build_student_notebook", "build_all"]
__all__ += ["stale_exercises", "assemble_graded", "answer_names"]

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
BEGIN_HIDDEN = "### BEGIN HIDDEN TESTS"
END_HIDDEN = "### END HIDDEN TESTS"
CODE_STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")

SLUGS = tuple(c.slug for c in CONCEPTS)


def default_source_dir() -> Path:
    """``solutions/`` of the checkout the command runs in (:func:`pecourse.course.checkout`)."""
    return checkout() / "solutions"


def default_exercise_dir() -> Path:
    """``exercises/`` of the checkout the command runs in."""
    return checkout() / "exercises"


def source_notebooks(source_dir: Path | None = None) -> list[Path]:
    """The exercise sources, sorted by syllabus number (``NN_slug.ipynb``): those of
    ``source_dir``, by default of the checkout's ``solutions/`` (none outside a checkout: a
    learner's ``pecourse check`` then reads the notebook's own tests)."""
    if source_dir is None:
        try:
            source_dir = default_source_dir()
        except NotACheckoutError:
            return []
    source_dir = Path(source_dir)
    return sorted(p for p in source_dir.glob("[0-9][0-9]_*.ipynb") if p.is_file())


def read_notebook(path: str | Path) -> nbformat.NotebookNode:
    return nbformat.read(str(path), as_version=4)


def write_notebook(nb: nbformat.NotebookNode, path: str | Path) -> None:
    Path(path).write_text(notebook_text(nb), encoding="utf-8")


def notebook_text(nb: nbformat.NotebookNode) -> str:
    """The notebook as JSON text, formatted as Jupyter writes it (stable for diffs)."""
    return nbformat.writes(nb) + "\n"


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def is_answer_cell(cell) -> bool:
    """An autograded answer cell: the learner's code, matched by ``grade_id``."""
    m = _meta(cell)
    return cell.get("cell_type") == "code" and bool(m.get("solution")) and not m.get("grade")


def is_test_cell(cell) -> bool:
    """A graded test cell: one part of the exercise, worth ``points``."""
    m = _meta(cell)
    return cell.get("cell_type") == "code" and bool(m.get("grade")) and not m.get("solution")


def grade_id(cell) -> str | None:
    return _meta(cell).get("grade_id")


@dataclass(frozen=True)
class Part:
    """One graded test cell."""

    grade_id: str
    points: float


def parts(nb) -> list[Part]:
    """The graded parts of a source notebook, in notebook order."""
    return [
        Part(grade_id(c), float(_meta(c).get("points", 0))) for c in nb.cells if is_test_cell(c)
    ]


def _region_lines(source: str, begin: str, end: str, stub: tuple[str, ...] | None) -> str:
    """Drop the lines from ``begin`` to ``end`` (inclusive); put ``stub`` in their place."""
    out: list[str] = []
    inside = False
    for line in source.split("\n"):
        if begin in line:
            if inside:
                raise ValueError(f"nested {begin!r} in:\n{source}")
            inside = True
            if stub is not None:
                indent = re.match(r"\s*", line).group(0)
                out.extend(indent + s for s in stub)
            continue
        if end in line:
            if not inside:
                raise ValueError(f"{end!r} without {begin!r} in:\n{source}")
            inside = False
            continue
        if not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{begin!r} without {end!r} in:\n{source}")
    return "\n".join(out)


def strip_solutions(source: str) -> str:
    """Replace each answer region by nbgrader's code stub, at the region's indentation."""
    return _region_lines(source, BEGIN_SOLUTION, END_SOLUTION, CODE_STUB)


def strip_hidden_tests(source: str) -> str:
    """Remove the hidden-test regions of a test cell (markers included)."""
    return _region_lines(source, BEGIN_HIDDEN, END_HIDDEN, None).rstrip("\n")


def _validate_source(nb, name: str) -> None:
    seen: set[str] = set()
    for cell in nb.cells:
        m = _meta(cell)
        if not m and (BEGIN_SOLUTION in cell.source or BEGIN_HIDDEN in cell.source):
            raise ValueError(
                f"{name}: a cell with solution/hidden markers has no nbgrader metadata"
            )
        if not m:
            continue
        gid = m.get("grade_id")
        if not gid:
            raise ValueError(f"{name}: an nbgrader cell has no grade_id")
        if gid in seen:
            raise ValueError(f"{name}: grade_id {gid!r} is used twice")
        seen.add(gid)
        if is_test_cell(cell) and not float(m.get("points", 0)) > 0:
            raise ValueError(f"{name}: test cell {gid!r} has no points")


def build_student_notebook(source_nb) -> nbformat.NotebookNode:
    """The notebook handed to learners: answers stubbed, hidden tests removed, no outputs."""
    nb = copy.deepcopy(source_nb)
    _validate_source(nb, "source")
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            if is_answer_cell(cell):
                cell.source = strip_solutions(cell.source)
            elif is_test_cell(cell):
                cell.source = strip_hidden_tests(cell.source)
        elif BEGIN_SOLUTION in cell.source:  # a written answer: nbgrader's text stub
            cell.source = _region_lines(
                cell.source, BEGIN_SOLUTION, END_SOLUTION, ("YOUR ANSWER HERE",)
            )
    return nb


def build_all(source_dir: Path | None = None, out_dir: Path | None = None) -> list[Path]:
    """Write ``exercises/NN_slug.ipynb`` for every source; return the paths written."""
    out_dir = Path(out_dir) if out_dir is not None else default_exercise_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for src in source_notebooks(source_dir):
        if _differs(src, out_dir / src.name):
            (out_dir / src.name).write_text(_student_text(src), encoding="utf-8")
        written.append(out_dir / src.name)
    return written


def _student_text(src: Path) -> str:
    return notebook_text(build_student_notebook(read_notebook(src)))


def _differs(src: Path, target: Path) -> bool:
    return not target.exists() or target.read_text(encoding="utf-8") != _student_text(src)


def stale_exercises(source_dir: Path | None = None, out_dir: Path | None = None) -> list[str]:
    """Names of exercise notebooks that are missing, extra or differ from their source."""
    out_dir = Path(out_dir) if out_dir is not None else default_exercise_dir()
    sources = source_notebooks(source_dir)
    stale = [src.name for src in sources if _differs(src, out_dir / src.name)]
    names = {s.name for s in sources}
    stale += sorted(p.name for p in out_dir.glob("[0-9][0-9]_*.ipynb") if p.name not in names)
    return stale


# --------------------------------------------------------------------------- grading


@dataclass
class GradedNotebook:
    """The code to run for one submission, and what is known before running it.

    ``cells`` are ``(source, grade_id or None, kind)`` in order, ``kind`` being ``"setup"``
    (locked code from the source), ``"answer"`` (the student's answer cell), ``"added"`` (a
    code cell the student added: run where it stands, as nbgrader and ``check`` run it) or
    ``"test"`` (a part, from the source, hidden tests included); ``notes`` maps a part's
    grade_id to remarks about the submission (a test cell the student edited or deleted,
    an answer cell missing or duplicated) that go into the gradebook's ``reason`` column;
    ``answer_names`` are the names the source's answer cells define (functions, values);
    ``owner`` maps each part to the answer cell it tests (the last one above it).
    """

    cells: list[tuple[str, str | None, str]]
    parts: list[Part]
    notes: dict[str, list[str]] = field(default_factory=dict)
    answer_names: list[str] = field(default_factory=list)
    owner: dict[str, str | None] = field(default_factory=dict)


def _text(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def assemble_graded(source_nb, submission_nb) -> GradedNotebook:
    """Rebuild the notebook to grade: the source's cells with the student's code in.

    Every locked and test cell comes from the source, hidden tests included, so a student
    cannot weaken, edit or delete a test to pass. Answer cells are matched by
    ``grade_id``; if one appears more than once the last copy is graded (and a note says
    so). Code cells the student added (no ``grade_id`` of the source) run where they
    stand: after the source cell they follow in the student's notebook. A missing answer
    cell is replaced by one that raises, and noted against every part.
    """
    source_ids = {grade_id(c) for c in source_nb.cells if grade_id(c)}
    answer_ids = {grade_id(c) for c in source_nb.cells if is_answer_cell(c)}
    answers: dict[str, str] = {}
    copies: dict[str, int] = {}
    submitted: dict[str, str] = {}
    added: dict[str | None, list[str]] = {}
    anchor: str | None = None
    for cell in submission_nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        gid = grade_id(cell)
        src = _text(cell)
        if gid in answer_ids and is_answer_cell(cell):
            answers[gid] = src  # the last copy wins
            copies[gid] = copies.get(gid, 0) + 1
            anchor = gid
        elif gid in source_ids:
            submitted.setdefault(gid, src)
            anchor = gid
        elif src.strip():
            added.setdefault(anchor, []).append(src)

    cells: list[tuple[str, str | None, str]] = [(src, None, "added") for src in added.get(None, [])]
    notes: dict[str, list[str]] = {}
    missing_answers: list[str] = []
    graded_parts = parts(source_nb)
    owner: dict[str, str | None] = {}
    current: str | None = None
    for cell in source_nb.cells:
        if cell.cell_type != "code":
            continue
        gid = grade_id(cell)
        if is_answer_cell(cell):
            current = gid
            if gid in answers:
                cells.append((answers[gid], gid, "answer"))
            else:
                missing_answers.append(gid)
                missing = f"answer cell {gid} is missing from the submission"
                cells.append((f"raise NotImplementedError({missing!r})", gid, "answer"))
        elif is_test_cell(cell):
            owner[gid] = current
            original = strip_hidden_tests(cell.source)
            if gid not in submitted:
                notes.setdefault(gid, []).append(
                    "test cell deleted by the student; restored from the source"
                )
            elif submitted[gid].strip() not in (original.strip(), cell.source.strip()):
                notes.setdefault(gid, []).append(
                    "test cell edited by the student; graded with the original"
                )
            cells.append((cell.source, gid, "test"))
        else:
            cells.append((cell.source, gid, "setup"))
        cells.extend((src, None, "added") for src in added.get(gid, []))
    for gid, n in copies.items():
        if n > 1:
            for part, ans in owner.items():
                if ans == gid:
                    notes.setdefault(part, []).append(
                        f"answer cell {gid} appears {n} times; the last copy was graded"
                    )
    if missing_answers:
        note = "answer cell(s) missing from the submission: " + ", ".join(missing_answers)
        for p in graded_parts:
            notes.setdefault(p.grade_id, []).append(note)
    names = answer_names([c.source for c in source_nb.cells if is_answer_cell(c)])
    return GradedNotebook(cells, graded_parts, notes, names, owner)


def answer_names(sources: list[str]) -> list[str]:
    """Top-level names the answer cells of the source define (functions, classes, values)."""
    names: list[str] = []
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            targets = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                targets = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                nodes = node.targets if isinstance(node, ast.Assign) else [node.target]
                targets = [t.id for t in nodes if isinstance(t, ast.Name)]
            names += [t for t in targets if t not in names]
    return names
