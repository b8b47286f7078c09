"""Helpers for the exercise tests: learner notebooks and synthetic classes."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from pecourse.exercises.grade import Limits
from pecourse.exercises.notebook import (
    build_student_notebook,
    default_exercise_dir,
    default_source_dir,
    grade_id,
    is_answer_cell,
    read_notebook,
    source_notebooks,
    write_notebook,
)

from .regressions import REGRESSIONS
from .wrong_answers import WRONG
from .wrong_answers_more import WRONG_MORE

SOURCES = source_notebooks()
SLUGS = [p.stem for p in SOURCES]
# Fast limits: every exercise runs in well under a second once torch is loaded.
TEST_LIMITS = Limits(cell_timeout=20.0, wall_clock=60.0)


def answered(source_nb, replacements: dict[str, str] | None = None):
    """A learner's notebook: the handed-out version with the answers typed in.

    ``replacements`` maps an answer cell's grade_id to the code typed instead.
    """
    answers = {grade_id(c): c.source for c in source_nb.cells if is_answer_cell(c)}
    answers.update({k: v.strip("\n") for k, v in (replacements or {}).items()})
    nb = build_student_notebook(source_nb)
    for cell in nb.cells:
        if is_answer_cell(cell):
            cell.source = answers[grade_id(cell)]
    return nb


def typed(source_nb, replacements: dict[str, str]):
    """The handed-out notebook with only ``replacements`` typed in (other answers stubbed)."""
    nb = build_student_notebook(source_nb)
    for cell in nb.cells:
        if is_answer_cell(cell) and grade_id(cell) in replacements:
            cell.source = replacements[grade_id(cell)].strip("\n")
    return nb


def make_class(root: Path, students: dict, slugs: list[str]) -> Path:
    """Write ``root/<student>/<slug>.ipynb`` for ``students = {name: kind}``."""
    for student, kind in students.items():
        (root / student).mkdir(parents=True, exist_ok=True)
        for slug in slugs:
            src = read_notebook(default_source_dir_path(slug))
            target = root / student / f"{slug}.ipynb"
            if kind == "blank":
                shutil.copy(default_exercise_dir() / f"{slug}.ipynb", target)
            elif kind == "full":
                write_notebook(answered(src), target)
            elif kind == "wrong":
                write_notebook(answered(src, WRONG[slug][0]), target)
            elif kind == "wrong_more":
                write_notebook(answered(src, WRONG_MORE[slug][0]), target)
            elif kind == "regressions":
                if slug in REGRESSIONS[student]:
                    write_notebook(answered(src, REGRESSIONS[student][slug][0]), target)
            else:
                raise ValueError(kind)
    return root


def default_source_dir_path(slug: str) -> Path:
    return next(p for p in SOURCES if p.stem == slug)


def tree_digest(folder: Path) -> str:
    """A digest of every file's path and bytes under ``folder``."""
    h = hashlib.sha256()
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def processes_matching(marker: str, uid_from: int | None = None) -> list[str]:
    """Processes whose command line contains ``marker`` (or whose uid is >= ``uid_from``)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = (
                Path(f"/proc/{pid}/cmdline")
                .read_bytes()
                .replace(b"\0", b" ")
                .decode(errors="replace")
            )
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
        if marker in cmd or (uid_from is not None and uid >= uid_from):
            found.append(f"{pid} uid={uid} {cmd.strip()}")
    return found


SOLUTIONS_DIR = default_source_dir()
