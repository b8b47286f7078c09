"""Helpers for the exercise tests: learner notebooks and synthetic classes."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import time
from pathlib import Path

from pecourse.exercises import sandbox
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


def _processes() -> dict[int, tuple[int, str, str]]:
    """``{pid: (parent, state, "uid=UID command line")}`` of every process now."""
    found = {}
    for name in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes() if name.isdigit() else b""
            cmd = Path(f"/proc/{name}/cmdline").read_bytes() if stat else b""
            uid = os.stat(f"/proc/{name}").st_uid
        except OSError:
            continue
        if stat:  # the command name may hold spaces and ")": the fields follow the last ")"
            state, parent = stat[stat.rfind(b")") + 2 :].split()[:2]
            line = cmd.replace(b"\0", b" ").decode(errors="replace").strip()
            found[int(name)] = (int(parent), state.decode(), f"uid={uid} {line}")
    return found


def descendants(root: int) -> list[int]:
    """``root``'s live descendants (zombies, dead already, are not counted)."""
    table = _processes()
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        kids = [p for p, (parent, _, _) in table.items() if parent == pid]
        found += [p for p in kids if table[p][1] != "Z"]
        todo += kids
    return found


@contextlib.contextmanager
def left_behind(wait: float = 5.0):
    """The processes a grading inside the block leaves running: this list, filled when the
    block ends. Meanwhile this process is a child subreaper, so every orphan of the grading
    (a double fork, a ``setsid``) is re-parented to it rather than to init: what the block
    left is among this process's new descendants, and nothing of another grader on the
    machine (its jobs have job uids too, its attacks the same marker) is among them.
    Processes killed at the end get ``wait`` seconds to go; orphans that died are reaped."""
    before = set(descendants(os.getpid()))
    sandbox.prctl(sandbox.PR_SET_CHILD_SUBREAPER, 1)
    left: list[str] = []
    try:
        yield left
    finally:
        end = time.monotonic() + wait
        while True:
            for pid, (parent, state, _) in _processes().items():
                if parent == os.getpid() and state == "Z" and pid not in before:
                    os.waitpid(pid, os.WNOHANG)  # an orphan of the grading that died
            now = [p for p in descendants(os.getpid()) if p not in before]
            if not now or time.monotonic() > end:
                break
            time.sleep(0.1)
        sandbox.prctl(sandbox.PR_SET_CHILD_SUBREAPER, 0)
        table = _processes()
        left += [f"{p} {table[p][2]}" for p in now if p in table]


SOLUTIONS_DIR = default_source_dir()
