"""A learner's self-check: run an exercise notebook exactly as grading does.

``pecourse check exercises/08_rope.ipynb`` grades the notebook with the grader's own engine
(:func:`pecourse.exercises.grade.grade_submission`): the same assembly (answer cells,
cells the learner added, in order; a duplicated answer cell graded by its last copy), the
same split between the learner's process and the judge that runs the tests, the same
policy on the course package's reference code, the same reasons. The only difference is
the test cells: the visible ones, from the handed-out notebook (built from ``solutions/``
when the course repository is there, else taken from the notebook itself). So a part that
fails here fails in grading with the same reason, and grading adds hidden tests.

``pecourse check --all`` (self-study, where the course's ``solutions/`` is present) runs the
hidden tests too: the test cells then come from ``solutions/``, exactly as grading takes them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .grade import Limits, grade_submission, grading_server
from .notebook import build_student_notebook, read_notebook, source_notebooks

__all__ = ["PartResult", "check_notebook", "check_notebooks", "format_report", "main_check"]


@dataclass(frozen=True)
class PartResult:
    part: str
    points: float
    passed: bool
    hint: str


def _visible_source(path: Path, source_dir=None, hidden: bool = False):
    """The handed-out notebook this file is an answer to: from solutions/ if it is there.

    ``hidden``: the source itself, hidden tests included (grading's tests); refused where
    solutions/ has no notebook of that name.
    """
    for src in source_notebooks(source_dir):
        if src.stem == path.stem:
            source = read_notebook(src)
            return source if hidden else build_student_notebook(source)
    if hidden:
        raise FileNotFoundError(
            f"--all runs the hidden tests, which live in the course's solutions/ folder; "
            f"no solutions/{path.stem}.ipynb here (name the notebook NN_slug.ipynb, or run "
            "from a course checkout)"
        )
    return nbformat.read(str(path), as_version=4)


def check_notebooks(
    paths,
    *,
    timeout: float = 60.0,
    allow_reference: bool = False,
    source_dir=None,
    hidden: bool = False,
) -> dict[str, list[PartResult]]:
    """Check several notebooks with one grading server: ``{path: [PartResult, ...]}``.

    ``hidden``: run the hidden tests too (needs solutions/; see :func:`_visible_source`)."""
    results = {}
    with grading_server("auto", [], own_notebooks=True) as server:
        for path in map(Path, paths):
            source = _visible_source(path, source_dir, hidden)
            n_cells = sum(1 for c in source.cells if c.cell_type == "code") + 2
            limits = Limits(cell_timeout=timeout, wall_clock=max(180.0, timeout * n_cells))
            rows = grade_submission(
                "you", path.stem, source, path, limits, server, allow_reference=allow_reference
            )
            results[str(path)] = [
                PartResult(r.part, r.max_points, r.points >= r.max_points, r.reason) for r in rows
            ]
    return results


def check_notebook(path: str | Path, **options) -> list[PartResult]:
    """Run ``path`` and return one :class:`PartResult` per graded test cell (``options``:
    those of :func:`check_notebooks`)."""
    return check_notebooks([path], **options)[str(Path(path))]


VISIBLE_ONLY = "visible tests only; `pecourse check --all` adds the hidden tests grading runs"
WITH_HIDDEN = "visible and hidden tests, as grading runs them"


def format_report(path: str | Path, results: list[PartResult], hidden: bool = False) -> str:
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
        f"({WITH_HIDDEN if hidden else VISIBLE_ONLY})"
    )
    return "\n".join(lines)


def main_check(args) -> int:
    status = 0
    paths = []
    for nb_path in args.notebooks:
        if not Path(nb_path).is_file():
            print(f"pecourse check: no such notebook: {nb_path}", file=sys.stderr)
            status = 2
        else:
            paths.append(nb_path)
    if not paths:
        return status
    hidden = getattr(args, "all", False)
    try:
        results = check_notebooks(
            paths, timeout=args.timeout, allow_reference=args.allow_reference, hidden=hidden
        )
    except FileNotFoundError as exc:
        print(f"pecourse check: {exc}", file=sys.stderr)
        return 2
    for nb_path in paths:
        part_results = results[str(Path(nb_path))]
        print(format_report(nb_path, part_results, hidden))
        if status == 0 and not all(r.passed for r in part_results):
            status = 1
    return status
