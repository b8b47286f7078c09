"""Sub-commands ``pecourse exercises build|nbgrader``, ``pecourse check`` and ``pecourse grade``."""

from __future__ import annotations

import sys
from importlib.util import find_spec
from pathlib import Path


def _build(args) -> int:
    from .notebook import build_all, stale_exercises

    if args.check:
        stale = stale_exercises(args.source, args.out)
        if stale:
            print("out of date with solutions/: " + ", ".join(stale), file=sys.stderr)
            print("run `pecourse exercises build` to regenerate them", file=sys.stderr)
            return 1
        print("exercises/ is up to date")
        return 0
    written = build_all(args.source, args.out)
    where = Path(written[0]).parent if written else args.out
    print(f"built {len(written)} exercise notebook(s) in {where}")
    return 0


def _nbgrader(args) -> int:
    from .nbgrader import (
        CHECKSUM_NOTE,
        nbgrader_command,
        next_steps,
        write_course,
    )

    written = write_course(args.course_dir, args.source)
    print(f"wrote an nbgrader course with {len(written)} assignment(s) in {args.course_dir}")
    if find_spec("nbgrader") is None:
        print(
            "nbgrader is not installed here: pip install 'pecourse[instructor]', then run this again"
        )
        return 0
    before, after = next_steps(args.course_dir, nbgrader_command())
    print("next, in a shell:")
    print("\n".join(f"  {line}" for line in before))
    print("then, with each student's notebooks in submitted/<student>/<assignment>/:")
    print("\n".join(f"  {line}" for line in after))
    print("feedback/<student>/<assignment>/ then holds each student's graded notebook as HTML.")
    print(f"note: {CHECKSUM_NOTE}")
    return 0


def _check(args) -> int:
    from .check import main_check

    return main_check(args)


def _grade(args) -> int:
    from .grade import main_grade

    return main_grade(args)


SOURCE = "source notebooks (solutions/)"


def register(subparsers) -> None:
    from .grade import Limits

    ex = subparsers.add_parser("exercises", help="build the student exercise notebooks")
    ex_sub = ex.add_subparsers(dest="exercises_command", metavar="ACTION", required=True)
    what = "write exercises/ from solutions/ (answers stubbed, hidden tests removed)"
    build = ex_sub.add_parser("build", help=what)
    build.add_argument("--source", type=Path, default=None, help=SOURCE)
    build.add_argument("--out", type=Path, default=None, help="output folder (exercises/)")
    what = "write nothing; exit 1 if exercises/ is out of date"
    build.add_argument("--check", action="store_true", help=what)
    build.set_defaults(func=_build)
    what = "write a complete nbgrader course (all assignments in source/, nbgrader_config.py)"
    nbg = ex_sub.add_parser("nbgrader", help=what)
    nbg.add_argument("course_dir", type=Path, help="the course directory to write")
    nbg.add_argument("--source", type=Path, default=None, help=SOURCE)
    nbg.set_defaults(func=_nbgrader)

    what = "run an exercise notebook and report each part as passed or failed (the visible "
    check = subparsers.add_parser("check", help=what + "tests; --all adds the hidden ones)")
    check.add_argument("notebooks", nargs="+", help="exercise notebook(s) to check")
    what = "run the hidden tests too, as grading does (self-study: needs the course's solutions/)"
    check.add_argument("--all", action="store_true", help=what)
    check.add_argument("--timeout", type=float, default=60.0, help="seconds per cell (60)")
    what = "allow answers to use the course package's reference implementation"
    check.add_argument("--allow-reference", action="store_true", help=what)
    check.set_defaults(func=_check)

    d = Limits()
    what = "grade a class: SUBMISSIONS/<student>/<NN_slug>.ipynb -> SQLite + CSV gradebook"
    grade = subparsers.add_parser("grade", help=what)
    what = "folder with one sub-folder per student (or a single NN_slug.ipynb)"
    grade.add_argument("submissions", type=Path, help=what)
    what = "gradebook CSV (rebuilt from the SQLite file)"
    grade.add_argument("--out", type=Path, required=True, help=what)
    grade.add_argument("--db", type=Path, default=None, help="SQLite gradebook (OUT.sqlite)")
    grade.add_argument("--source", type=Path, default=None, help=SOURCE)
    what = "grade only this exercise slug (repeatable)"
    grade.add_argument("--exercise", action="append", help=what)
    grade.add_argument("--jobs", "-j", type=int, default=1, help="submissions run in parallel")
    for flag, kind, default, text in (
        ("--cell-timeout", float, d.cell_timeout, f"seconds per cell ({d.cell_timeout:g})"),
        ("--timeout", float, d.wall_clock, f"seconds per submission ({d.wall_clock:g})"),
        ("--memory-mb", int, d.memory_mb, f"MB of memory a notebook may add ({d.memory_mb})"),
        ("--cpus", float, d.cpus, f"CPUs a submission may use at once ({d.cpus:g})"),
        ("--output-cap", int, d.output_cap, "characters of printed output kept"),
    ):
        grade.add_argument(flag, type=kind, default=default, help=text)
    what = "the student's name, when grading a single notebook"
    grade.add_argument("--student", default=None, help=what)
    what = "sandbox each submission in Linux namespaces: auto (else a loudly marked fallback, "
    what += "refused unless as another uid), namespaces (refuse without), none (the fallback)"
    grade.add_argument(
        "--isolation", choices=("auto", "namespaces", "none"), default="auto", help=what
    )
    what = "do not zero answers that use the course package's reference implementation"
    grade.add_argument("--allow-reference", action="store_true", help=what)
    grade.add_argument("--quiet", action="store_true", help="no progress bar")
    grade.set_defaults(func=_grade)
