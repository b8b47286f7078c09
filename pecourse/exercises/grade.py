"""Grade a whole class: ``SUBMISSIONS/<student>/<NN_slug>.ipynb`` -> CSV + SQLite gradebook.

For each submission the graded notebook is rebuilt from the source (set-up cells and test
cells, hidden tests included) and the student's answer cells, matched by ``grade_id``
(:func:`pecourse.exercises.notebook.assemble_graded`). It then runs in its own process
(:mod:`pecourse.exercises._runner`) in a temporary working directory, with a per-cell time
limit, a wall-clock limit for the whole submission (the process group is killed), a memory
limit (``RLIMIT_AS``) and a cap on printed output. Each test cell is one part, scored
all-or-nothing; a part that fails gets zero and a ``reason`` (the assertion message, the
error, the limit that was hit). A broken or hostile submission costs only its own parts:
the batch goes on.

Output: one CSV row per student, exercise and part (``student,exercise,part,points,
max_points,reason``), the same rows in a SQLite file next to the CSV (table ``grades``),
and a class summary (mean score per exercise, pass rate per part).
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ..course import REPO_ROOT
from .notebook import GradedNotebook, Part, assemble_graded, parts, read_notebook, source_notebooks

__all__ = [
    "Limits",
    "Row",
    "grade_submission",
    "grade_class",
    "find_submissions",
    "write_csv",
    "write_sqlite",
    "summarize",
    "CSV_COLUMNS",
]

CSV_COLUMNS = ("student", "exercise", "part", "points", "max_points", "reason")
MAX_RESULT_BYTES = 4 * 1024 * 1024
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
SERVER_DIED = "the grading server died while running this notebook (did it kill its parent?)"


@dataclass(frozen=True)
class Limits:
    """Per-submission limits.

    ``cell_timeout`` and ``wall_clock`` in seconds; ``memory_mb``: address space the
    notebook may add to the interpreter's (``RLIMIT_AS``); ``output_cap``: characters of
    printed output kept.
    """

    cell_timeout: float = 30.0
    wall_clock: float = 180.0
    memory_mb: int = 3072
    output_cap: int = 100_000


@dataclass(frozen=True)
class Row:
    student: str
    exercise: str
    part: str
    points: float
    max_points: float
    reason: str

    def csv_fields(self) -> list[str]:
        return [
            self.student,
            self.exercise,
            self.part,
            f"{self.points:g}",
            f"{self.max_points:g}",
            self.reason,
        ]


def _zero_rows(student: str, exercise: str, graded_parts: list[Part], reason: str) -> list[Row]:
    return [Row(student, exercise, p.grade_id, 0.0, p.points, reason) for p in graded_parts]


def _child_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(
                [str(REPO_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
            ),
            "MPLBACKEND": "Agg",
            "PYTHONHASHSEED": "0",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "MALLOC_ARENA_MAX": "2",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    return env


class ForkServer:
    """The parent's side of :func:`pecourse.exercises._runner.serve` (one per batch).

    Thread-safe: the grading threads share it. If the server dies (a notebook could kill
    its parent), the jobs it was running end with exit code ``None`` and their process
    groups are killed; the next job starts a fresh server.
    """

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self._lock = threading.Lock()  # the maps below and writes to the server
        self._start_lock = threading.Lock()
        self._exits: dict[str, int | None] = {}
        self._events: dict[str, threading.Event] = {}
        self._pids: dict[str, int] = {}
        self._owner: dict[str, subprocess.Popen] = {}
        self._counter = 0
        self.restarts = 0
        self._start()

    def _start(self) -> None:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pecourse.exercises._runner", "--serve"],
            cwd=self.tmp,
            env=_child_env(self.tmp),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            text=True,
            bufsize=1,
        )
        ready = proc.stdout.readline().strip()
        if ready != "READY":
            _kill_group(proc.pid)
            proc.wait()
            raise RuntimeError(f"the grading server did not start (said {ready!r})")
        self.proc = proc
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            words = line.split()
            if len(words) != 3:
                continue
            with self._lock:
                if words[0] == "PID":
                    self._pids[words[1]] = int(words[2])
                elif words[0] == "EXIT":
                    self._exits[words[1]] = int(words[2])
                    event = self._events.get(words[1])
                    if event is not None:
                        event.set()
        with self._lock:  # this server is gone: end the jobs it was running
            for job_id, event in self._events.items():
                if self._owner.get(job_id) is proc and not event.is_set():
                    if job_id in self._pids:
                        _kill_group(self._pids[job_id])
                    self._exits.setdefault(job_id, None)
                    event.set()

    def _send(self, proc: subprocess.Popen, line: str) -> bool:
        try:
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            return True
        except (OSError, ValueError):  # the server is gone
            return False

    def run(self, job_path: Path, wall_clock: float) -> tuple[int | None, bool]:
        """Run a job; return (its exit code, or None if the server died; timed out?)."""
        with self._start_lock:
            if self.proc.poll() is not None:
                self.restarts += 1
                self._start()
            proc = self.proc
        with self._lock:
            self._counter += 1
            job_id = str(self._counter)
            event = self._events[job_id] = threading.Event()
            self._owner[job_id] = proc
            if not self._send(proc, f"RUN {job_id} {job_path}"):
                self._exits[job_id] = None
                event.set()
        timed_out = not event.wait(wall_clock)
        if timed_out:
            with self._lock:
                self._send(proc, f"KILL {job_id}")
            event.wait(30)
        with self._lock:
            return self._exits.get(job_id), timed_out

    def close(self) -> None:
        proc = self.proc
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.wait()


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _run(
    graded: GradedNotebook, limits: Limits, server: ForkServer, name: str, text: str
) -> tuple[list[dict], str | None]:
    """Run the cells in a process of their own; return its cell records and why it stopped.

    The working directory holds a copy of the submission (``name``), as nbgrader's does.
    """
    with tempfile.TemporaryDirectory(prefix="pecourse-grade-") as tmp_name:
        tmp = Path(tmp_name)
        work = tmp / "work"
        work.mkdir()
        (work / name).write_text(text, encoding="utf-8")
        job = tmp / "job.json"
        result = tmp / "result.jsonl"
        job.write_text(
            json.dumps(
                {
                    "cells": graded.cells,
                    "cell_timeout": limits.cell_timeout,
                    "memory_mb": limits.memory_mb,
                    "output_cap": limits.output_cap,
                    "result": str(result),
                    "workdir": str(work),
                    "env": {
                        "IPYTHONDIR": str(tmp / "ipython"),
                        "PECOURSE_DATA_DIR": str(tmp / "data"),
                    },
                }
            ),
            encoding="utf-8",
        )
        code, timed_out = server.run(job, limits.wall_clock)
        stopped = None
        if timed_out:
            stopped = f"timed out: the notebook ran past the {limits.wall_clock:g} s limit"
        records = []
        if result.exists():
            with open(result, "rb") as f:
                data = f.read(MAX_RESULT_BYTES)
            for line in data.decode("utf-8", "replace").splitlines():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    break
        for r in records:  # keep the gradebook deterministic: no temporary paths or addresses
            if r.get("error"):
                error = r["error"].replace(os.path.realpath(tmp), "<tmp>")
                r["error"] = _ADDRESS.sub("0x…", error.replace(str(tmp), "<tmp>"))
        if stopped is None and not any(r.get("done") for r in records):
            if code is None:
                stopped = SERVER_DIED
            else:
                how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
                stopped = (
                    f"the notebook ended its grading process ({how}): os._exit, a crash "
                    "or the memory limit"
                )
        return records, stopped


def _run_retrying(graded, limits, server, exercise, text):
    """:func:`_run`; if the server died under the job, once more on a server of its own.

    The death may not be this job's fault (another notebook may have killed the shared
    server), so the job is retried alone, where only its own behaviour can end it.
    """
    records, stopped = _run(graded, limits, server, f"{exercise}.ipynb", text)
    if stopped == SERVER_DIED:
        with tempfile.TemporaryDirectory(prefix="pecourse-server-") as tmp:
            private = ForkServer(Path(tmp))
            try:
                records, stopped = _run(graded, limits, private, f"{exercise}.ipynb", text)
            finally:
                private.close()
    return records, stopped


def grade_submission(
    student: str,
    exercise: str,
    source_nb,
    submission: Path | None,
    limits: Limits = Limits(),
    server: ForkServer | None = None,
) -> list[Row]:
    """Grade one student's notebook for one exercise; never raises for a bad submission.

    ``server``: a running :class:`ForkServer` (one is started for this call if omitted).
    """
    graded_parts = parts(source_nb)
    if submission is None:
        return _zero_rows(student, exercise, graded_parts, "no submission")
    try:
        text = Path(submission).read_text(encoding="utf-8", errors="replace")
        nb = nbformat.reads(text, as_version=4)
        if not isinstance(nb.get("cells"), list):
            raise ValueError("it has no list of cells")
        graded = assemble_graded(source_nb, nb)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the submission's fault
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return _zero_rows(student, exercise, graded_parts, f"not a valid notebook ({first[:200]})")

    if server is None:
        with tempfile.TemporaryDirectory(prefix="pecourse-server-") as tmp:
            server = ForkServer(Path(tmp))
            try:
                records, stopped = _run_retrying(graded, limits, server, exercise, text)
            finally:
                server.close()
    else:
        records, stopped = _run_retrying(graded, limits, server, exercise, text)
    by_part = {r["grade_id"]: r for r in records if r.get("kind") == "test"}
    # Answer cells that raised (other than the untouched stub): a failing part that comes
    # after one is most likely failing because of it, so the reason says so.
    broken_answers = [
        (r["index"], r["grade_id"], r["error"])
        for r in records
        if r.get("kind") == "answer" and not r["ok"] and "NotImplementedError" not in r["error"]
    ]
    printed = sum(r.get("printed", 0) for r in records if "index" in r)
    general = []
    if printed > limits.output_cap:
        general.append(
            f"output capped: the notebook printed {printed} characters, "
            f"{limits.output_cap} were kept"
        )
    if not records:
        general.append("the grading process did not start")

    rows = []
    for p in graded_parts:
        notes = list(graded.notes.get(p.grade_id, ()))
        record = by_part.get(p.grade_id)
        if record is None:
            reason = stopped or "not run"
            ok = False
        else:
            ok = bool(record["ok"])
            reason = "" if ok else (record.get("error") or "failed")
            if not ok:
                notes += [
                    f"answer cell {gid} failed earlier: {error}"
                    for index, gid, error in broken_answers
                    if index < record["index"]
                ]
        text = "; ".join(x for x in [reason, *notes, *general] if x)
        rows.append(Row(student, exercise, p.grade_id, p.points if ok else 0.0, p.points, text))
    return rows


def find_submissions(submissions_dir: Path, exercise: str) -> dict[str, Path | None]:
    """``{student: notebook}`` for one exercise: ``<student>/<exercise>.ipynb``, or nbgrader's
    ``<student>/<exercise>/<exercise>.ipynb``; ``None`` where a student has no such file."""
    found: dict[str, Path | None] = {}
    for student_dir in sorted(p for p in Path(submissions_dir).iterdir() if p.is_dir()):
        if student_dir.name.startswith("."):
            continue
        candidates = [
            student_dir / f"{exercise}.ipynb",
            student_dir / exercise / f"{exercise}.ipynb",
        ]
        found[student_dir.name] = next((c for c in candidates if c.is_file()), None)
    return found


def grade_class(
    submissions_dir: str | Path,
    *,
    source_dir: str | Path | None = None,
    exercises: list[str] | None = None,
    limits: Limits = Limits(),
    jobs: int = 1,
    progress: bool = True,
) -> list[Row]:
    """Grade every submission under ``submissions_dir``; rows sorted by student, exercise, part.

    ``exercises`` (slugs) defaults to every exercise that at least one student submitted;
    a student who lacks one of them gets zero with the reason ``no submission``.
    """
    from tqdm.auto import tqdm

    submissions_dir = Path(submissions_dir)
    if not submissions_dir.is_dir():
        raise ValueError(f"submissions_dir must be a directory, got {str(submissions_dir)!r}")
    sources = {p.stem: p for p in source_notebooks(source_dir)}
    if not sources:
        raise ValueError(f"no exercise sources found in {source_dir!r}")
    if exercises is None:
        per_exercise = {name: find_submissions(submissions_dir, name) for name in sources}
        exercises = [n for n, found in per_exercise.items() if any(found.values())]
    else:
        unknown = [e for e in exercises if e not in sources]
        if unknown:
            raise ValueError(f"unknown exercise(s) {unknown}; known: {sorted(sources)}")
        per_exercise = {name: find_submissions(submissions_dir, name) for name in exercises}

    tasks = []
    source_nbs = {name: read_notebook(sources[name]) for name in exercises}
    for name in exercises:
        for student, path in per_exercise[name].items():
            tasks.append((student, name, path))

    results: dict[tuple[str, str], list[Row]] = {}
    bar = tqdm(total=len(tasks), desc="grading", unit="notebook", disable=not progress)
    with tempfile.TemporaryDirectory(prefix="pecourse-server-") as tmp:
        server = ForkServer(Path(tmp))
        try:
            with ThreadPoolExecutor(max_workers=max(1, int(jobs))) as pool:
                futures = {
                    pool.submit(grade_submission, s, e, source_nbs[e], p, limits, server): (s, e)
                    for s, e, p in tasks
                }
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    bar.update(1)
        finally:
            server.close()
            bar.close()
    order = {name: i for i, name in enumerate(sorted(exercises))}
    rows = []
    for key in sorted(results, key=lambda k: (k[0], order[k[1]])):
        rows.extend(results[key])
    return rows


def write_csv(rows: list[Row], path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        writer.writerows(r.csv_fields() for r in rows)


def write_sqlite(rows: list[Row], path: str | Path) -> None:
    """Store rows in table ``grades``; a regraded (student, exercise) replaces its old rows."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE IF NOT EXISTS grades (student TEXT NOT NULL, exercise TEXT NOT NULL, "
            "part TEXT NOT NULL, points REAL NOT NULL, max_points REAL NOT NULL, "
            "reason TEXT NOT NULL, PRIMARY KEY (student, exercise, part))"
        )
        for student, exercise in sorted({(r.student, r.exercise) for r in rows}):
            db.execute("DELETE FROM grades WHERE student = ? AND exercise = ?", (student, exercise))
        db.executemany(
            "INSERT INTO grades VALUES (?, ?, ?, ?, ?, ?)",
            [(r.student, r.exercise, r.part, r.points, r.max_points, r.reason) for r in rows],
        )
    # ``with`` commits but does not close.
    db.close()


def summarize(rows: list[Row]) -> str:
    """The class at a glance: each exercise's mean score, then each part's pass rate."""
    if not rows:
        return "no submissions graded"
    lines = []
    exercises = sorted({r.exercise for r in rows})
    students = sorted({r.student for r in rows})
    lines.append(f"{len(students)} student(s), {len(exercises)} exercise(s)")
    lines.append(f"{'exercise / part':<48} {'mean':>8} {'max':>6} {'passed':>8}")
    for ex in exercises:
        ex_rows = [r for r in rows if r.exercise == ex]
        per_student: dict[str, float] = {}
        for r in ex_rows:
            per_student[r.student] = per_student.get(r.student, 0.0) + r.points
        max_points = sum(r.max_points for r in ex_rows if r.student == ex_rows[0].student)
        mean = sum(per_student.values()) / len(per_student)
        lines.append(f"{ex:<48} {mean:>8.2f} {max_points:>6g}")
        part_names = list(dict.fromkeys(r.part for r in ex_rows))
        for part in part_names:
            pr = [r for r in ex_rows if r.part == part]
            passed = sum(1 for r in pr if r.points >= r.max_points)
            lines.append(f"  {part:<46} {'':>8} {pr[0].max_points:>6g} {passed / len(pr):>8.0%}")
    return "\n".join(lines)


def main_grade(args) -> int:
    """``pecourse grade``: grade, write the CSV and the SQLite gradebook, print the summary."""
    limits = Limits(
        cell_timeout=args.cell_timeout,
        wall_clock=args.timeout,
        memory_mb=args.memory_mb,
        output_cap=args.output_cap,
    )
    start = time.monotonic()
    submissions = Path(args.submissions)
    single = None
    if submissions.is_file():
        # One notebook: grade it as the only submission of a class of one.
        single = tempfile.TemporaryDirectory(prefix="pecourse-single-")
        folder = Path(single.name) / "student"
        folder.mkdir()
        shutil.copy(submissions, folder / submissions.name)
        submissions = Path(single.name)
    try:
        rows = grade_class(
            submissions,
            source_dir=args.source,
            exercises=args.exercise or None,
            limits=limits,
            jobs=args.jobs,
            progress=not args.quiet,
        )
    except ValueError as exc:
        print(f"pecourse grade: {exc}", file=sys.stderr)
        return 2
    finally:
        if single is not None:
            single.cleanup()
    out = Path(args.out)
    db_path = Path(args.db) if args.db else out.with_suffix(".sqlite")
    write_csv(rows, out)
    write_sqlite(rows, db_path)
    print(summarize(rows))
    print(f"wrote {out} and {db_path} ({len(rows)} rows, {time.monotonic() - start:.1f} s)")
    return 0
