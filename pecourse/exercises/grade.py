"""Grade a whole class: ``SUBMISSIONS/<student>/<NN_slug>.ipynb`` -> SQLite + CSV gradebook.

Threat model
------------
The student's code is hostile. Whatever a notebook does, it must not be able to raise its
own grade, lower anyone else's, read the hidden tests or the solutions, or change anything
outside its own scratch directory; the instructor's files, the gradebook and the grader
are out of its reach, and nothing it starts outlives its job. How:

* **The verdict is computed outside the student's process.** Each submission runs as two
  processes (:mod:`pecourse.exercises._runner`): the *student's* process runs the set-up,
  answer and added cells and only evaluates the student's functions on the inputs it is
  sent; the *judge* runs the test cells, hidden tests included, in its own interpreter,
  computes the expected values there (from the source notebook and the course package)
  and compares. Between them pass only plain data (JSON and safetensors,
  :mod:`pecourse.exercises.wire`), so patching ``torch.allclose``, builtins or
  ``pecourse`` in the notebook, wrapping the cell runner, or inspecting the caller's frame
  reaches nothing that decides a grade; a "forged" reply is just the value a function
  returned. The student's process never holds a test cell: of the tests it sees only the
  inputs they pass to its functions.
* **Nothing of another job, and no test, is in the student's process's memory**, freed
  memory included (``process_vm_readv`` on itself reads it). The server hands each job
  file, unread, to a judge it forks, which forks the student's process before it reads
  its job and then sends it only its own notebook, folders and limits. The student's
  process starts as a copy of the server: its preloaded modules, start-up state and
  protocol ids and paths. Its command line (the protected paths) and environment are
  readable (``/proc/self/environ``, once dumpable again): the server gets only the
  variables Python, the compilers, torch and the course read (``_SERVER_ENV``).
* **The student's process is sandboxed** (:mod:`pecourse.exercises.sandbox`): its own
  user, PID, mount, network, IPC and UTS namespaces, a read-only root holding only the
  Python installation, a private tmpfs home and ``/tmp``, a fresh unprivileged uid per job
  as root, no capabilities, ``no_new_privs``, no namespace (so no mount) of its own, and
  limits (what each covers and where it does not hold: :class:`Limits`). ``solutions/``,
  the course package (:mod:`pecourse.exercises.policy`), the submissions, the gradebook,
  other jobs and the grader's processes do not exist in it; when its PID 1 dies the
  kernel kills every process it started, ``setsid`` or not.
* **Nothing of the student's process flows into the judge but values**: what its
  functions return and the arguments they changed in place (written into the test's own
  tensors, as one kernel would show them). The judge seeds its random generators from each
  test cell's ``grade_id`` and never takes the student's random state, so the tests'
  inputs are the same whatever the notebook did; callbacks into the judge do not extend a
  cell's time limit.
* **Submissions are read as the student may read them**, though the grader may be root: no
  link is followed (a notebook or folder linking to ``solutions/`` or a root-only file),
  only regular files with no other hard link are read, and the rest is refused with a
  reason. No reason quotes a file's bytes. Names reach the terminal and the gradebook
  escaped (:func:`shown`), and names that could pass for another student's (a letter of
  another script that looks like one of the name's own, or the same Unicode TR39 skeleton
  as another name, one character for one) are flagged.
* **The gradebook is written only by the grader**, after the jobs ended; the CSV is
  rebuilt from the SQLite file each time, and fields that a spreadsheet would read as a
  formula (``=``, ``+``, ``-``, ``@``) are escaped.

Where the machine refuses namespaces (no unprivileged user namespaces, some containers, a
non-Linux OS), the fallback is a new session, the same limits, a subreaper that kills every
descendant, a fresh uid per job as root, and a mark in every row (``isolation``). Without
another uid (no root, or a Python other uids cannot read) a notebook would run as the
grader, able to read ``solutions/``, other submissions and the gradebook and to signal the
grader: ``auto`` refuses (:data:`AS_OURSELVES`); an explicit ``--isolation none`` runs it.

Out of scope: kernel exploits and side channels, and an instructor who grades with
``--isolation none`` or ``--allow-reference``.

Scoring
-------
Each submission is rebuilt from the source's set-up and test cells, hidden tests included,
and the student's code cells (:func:`pecourse.exercises.notebook.assemble_graded`). Each
test cell is one part, all-or-nothing; a failed part gets zero and a ``reason`` (the
assertion, the error, the limit hit, an earlier part it depends on). A broken or hostile
submission costs only its own parts. Output: one row per student, exercise and part
(:data:`CSV_COLUMNS`) in a SQLite file (table ``grades``: :func:`write_sqlite`), the CSV
rebuilt from it, and a class summary.

Rounds add up in one gradebook: a new notebook for a student's exercise replaces its rows; a
round without one keeps an earlier grade (``no submission`` is stored only where none is).
"""

from __future__ import annotations

import csv
import difflib
import json
import logging
import os
import re
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import asdict, astuple, dataclass, replace
from functools import partial
from importlib import resources
from pathlib import Path

import nbformat

from ..course import NotACheckoutError, checkout
from . import sandbox
from .notebook import (
    GradedNotebook,
    Part,
    answer_names,
    assemble_graded,
    parts,
    read_notebook,
    source_notebooks,
)
from .policy import MAX_CHECKED_CHARS, POLICY_REASON, reference_uses
from .sandbox import kill as _kill

log = logging.getLogger(__name__)

__all__ = ["Limits", "Row", "grade_submission", "grade_class", "find_submissions", "scan_class"]
__all__ += ["write_csv", "write_sqlite", "read_sqlite", "export_csv", "summarize", "CSV_COLUMNS"]
__all__ += ["IsolationUnavailable", "pace"]

CSV_COLUMNS = ("student", "exercise", "part", "points", "max_points", "reason", "isolation")
MAX_RESULT_BYTES = 4 * 1024 * 1024
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
SERVER_DIED = "the grading server died while running this notebook"
NOT_ISOLATED = "none: NOT ISOLATED"
_FORMULA = ("=", "+", "-", "@", "\t", "\r")
MAX_NOTEBOOK_BYTES = 16 * 1024 * 1024  # read and parsed in the grader's own process


AS_OURSELVES = (  # why ``auto`` refuses where the fallback would keep the grader's uid
    "isolation 'auto' found no namespaces ({}) and would run students' notebooks as your uid "
    "{}, able to read solutions/, other submissions and the gradebook. Grade as root (sudo), "
    "enable unprivileged user namespaces (sysctl kernel.apparmor_restrict_unprivileged_userns"
    "=0 on Ubuntu 23.10+, kernel.unprivileged_userns_clone=1 on older Debian), or pass "
    "--isolation none to run them as yourself anyway"
)


class IsolationUnavailable(ValueError):
    """The isolation asked for (``namespaces``, or ``auto``'s other uid) is not available."""


@dataclass(frozen=True)
class Limits:
    """Per-submission limits.

    ``cell_timeout`` and ``wall_clock`` in seconds; ``memory_mb``: address space the
    notebook may add to the interpreter's (``RLIMIT_AS``); ``cpus``: the CPUs a job may
    use at once; ``output_cap``: characters of printed output kept.

    What they cover: ``cell_timeout`` bounds each cell and each test cell as a whole,
    callbacks into the judge included; ``wall_clock`` the whole job. Where the grader may
    make cgroups (root; on cgroup v2 a cgroup holding only the grader's processes:
    :func:`sandbox.prepare_cgroups`), the job, its judge and every process the notebook
    forks, is one cgroup of each of memory, pids and cpu (:class:`sandbox.JobCgroup`):
    ``memory_mb`` plus ``_runner.JUDGE_MB`` and ``_runner.COPIED_MB`` together, ``memfd``,
    shared memory and tmpfs pages included; ``sandbox.NPROC + _runner.JUDGE_TASKS``
    processes and threads; ``cpus`` CPUs, so at most ``cpus * wall_clock`` CPU seconds.
    Every process of the notebook also has its own: ``memory_mb`` of address space,
    ``cpus * wall_clock`` CPU seconds, ``sandbox.OPEN_FILES`` descriptors, 64 MB files,
    ``sandbox.NPROC`` processes per job uid. Where no cgroup can be made, only those hold:
    the job may hold ``sandbox.NPROC`` times each, and a ``memfd`` it does not map is
    counted nowhere (``tests/exercises/test_limits.py`` grades both cases). The tmpfs
    folders (``/tmp``, home, ``/dev/shm``) hold ``sandbox.SCRATCH_MB`` each. The judge's
    own address space is ``memory_mb`` plus ``_runner.JUDGE_MB``; the policy check is
    linear in a cell and refuses cells over ``policy.MAX_CHECKED_CHARS``. With job cgroups,
    the grader's processes together hold at most about 1.5 GB (itself and the server, with
    torch preloaded) plus ``jobs`` times the job's cgroup limit
    (``tests/exercises/test_class_of_100.py`` measures it). Run: cgroup v1 as root on a
    real kernel (``test_limits.py``); cgroup v2 only on a stand-in file system, never on a
    kernel whose v2 root offers these controllers.
    """

    cell_timeout: float = 30.0
    wall_clock: float = 180.0
    memory_mb: int = 3072
    output_cap: int = 100_000
    cpus: float = 1.0


@dataclass(frozen=True)
class Row:
    student: str
    exercise: str
    part: str
    points: float
    max_points: float
    reason: str
    isolation: str = ""

    def csv_fields(self) -> list[str]:
        """Fields a spreadsheet shows as text: formula starters get a leading quote."""
        return [
            ("'" + x if x.startswith(_FORMULA) else x) if isinstance(x, str) else f"{x:g}"
            for x in astuple(self)
        ]


def shown(text: str) -> str:
    """``text`` for a terminal or a CSV: what is not printable (escape codes, line breaks,
    invisible or direction marks) written as a Python escape, backslashes doubled."""
    return "".join(
        c if c.isprintable() and c != "\\" else c.encode("unicode_escape").decode("ascii")
        for c in str(text)
    )


def _refusal(path: Path, root: Path) -> str | None:
    """Why the grader will not read ``path`` under ``root`` as a submission, or None.

    The grader may run as root; a student may hand in only what is theirs. So no link is
    followed (a notebook or folder that links to ``solutions/`` or to a root-only file),
    nothing but a regular file is read (a device, a pipe), and a file with other hard
    links (the same file as one outside the folder) is refused."""
    current, what = root, "the file"
    for part in path.relative_to(root).parts:
        current = current / part
        what = shown(current.relative_to(root))
        try:
            info = os.lstat(current)
        except OSError as exc:
            return f"refused: {what} cannot be read ({exc.strerror})"
        if stat.S_ISLNK(info.st_mode):
            return f"refused: {what} is a symbolic link (links are not followed)"
    if not stat.S_ISREG(info.st_mode):
        return f"refused: {what} is not a regular file"
    if info.st_nlink > 1:
        return f"refused: {what} has another hard link (the same file as one elsewhere)"
    return None


class Unreadable(ValueError):
    """A submission the grader will not read; the message quotes nothing of the file."""


def _read_submission(path: Path) -> str:
    """The notebook's text, read only if it is a regular file (a pipe does not block). The
    class's links were refused before (:func:`_refusal`); ``pecourse check`` may follow
    a learner's own link."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Unreadable("not a regular file")
        data = f.read(MAX_NOTEBOOK_BYTES + 1)
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise Unreadable(f"over {MAX_NOTEBOOK_BYTES // 2**20} MB")
    return data.decode("utf-8", errors="replace")


def _look_alikes(names: list[str]) -> dict[str, str]:
    """``{name: why}`` for student names that could pass for another: letters of another
    script that look like letters of the name's own (Cyrillic "а" in "аda"), or the same
    skeleton as another name (Unicode TR39's, one character for one: "rn" and "m" are not
    equated) after NFKC, casefolded. Confusables.txt comes from confusable-homoglyphs."""
    from confusable_homoglyphs import categories, confusables

    def prototype(c: str) -> str:  # the least character of c's confusable class
        near = [h["c"] for h in confusables.confusables_data.get(c, []) if len(h["c"]) == 1]
        near += [h["c"] for n in near for h in confusables.confusables_data.get(n, [])]
        return min([c, *[n for n in near if len(n) == 1]])

    by_skeleton: dict[str, list[str]] = {}
    for name in names:
        text = unicodedata.normalize("NFKC", name)
        by_skeleton.setdefault("".join(map(prototype, text)).casefold(), []).append(name)
    flagged = {}
    for same in by_skeleton.values():
        for name in same:
            scripts = [categories.alias(c) for c in name if c.isalpha()]
            own = max(scripts, key=scripts.count) if scripts else "LATIN"  # the most letters'
            mixed = confusables.is_confusable(name, greedy=True, preferred_aliases=[own]) or []
            why = [
                f"{m['alias']} {ascii(m['character'])}" for m in mixed if m["character"].isalpha()
            ]
            why += [f"reads as {ascii(n)}" for n in same if n != name]
            if why:
                flagged[name] = (
                    f"check who this is: the name {ascii(name)} may look like another "
                    f"({', '.join(why)})"
                )
    return flagged


def _zero_rows(student, exercise, graded_parts: list[Part], reason: str, isolation="") -> list[Row]:
    return [
        Row(student, exercise, p.grade_id, 0.0, p.points, reason, isolation) for p in graded_parts
    ]


# The grading server's environment, which every student's process can read (forked from
# it): what Python, the compilers, torch, Triton and the course read; no tokens or passwords.
_SERVER_ENV = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR", "TERM",
        "LD_LIBRARY_PATH", "CC", "CXX", "CUDA_VISIBLE_DEVICES", "ATEN_CPU_CAPABILITY",
        "PYTHONPATH", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED",
        "PYTHONWARNINGS", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONNOUSERSITE",
        "PYTHONUSERBASE", "PYTHONFAULTHANDLER", "PYTHONMALLOC", "PYTHONSAFEPATH",
    }
)  # fmt: skip
_SERVER_ENV_PREFIXES = tuple("LC_ PECOURSE_ TORCH_ TORCHINDUCTOR_ TRITON_ OMP_ MKL_ KMP_".split())


def _child_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k in _SERVER_ENV or k.startswith(_SERVER_ENV_PREFIXES)
    }
    # the server imports the package from where this process does (a checkout or site-packages)
    path = [os.path.dirname(str(resources.files("pecourse"))), env.get("PYTHONPATH", "")]
    env.update(PYTHONPATH=os.pathsep.join(filter(None, path)), MPLBACKEND="Agg", PYTHONHASHSEED="0")
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MALLOC_ARENA_MAX="2")
    return {**env, "PYTHONDONTWRITEBYTECODE": "1"}


class ForkServer:
    """The parent's side of :func:`pecourse.exercises._runner.serve` (one per batch).

    ``isolation``: ``"auto"`` (namespaces, else the fallback: :func:`grading_server`),
    ``"namespaces"`` (refuse without them) or ``"none"``. ``protected``: paths to hide even
    under a folder the sandbox binds, besides the checkout and ``solutions/`` (always, for
    ``check`` too). Once started, ``level`` is ``"namespaces"`` or ``"none"``, ``detail`` why.

    Thread-safe: the grading threads share it. If the server dies, the jobs it was running
    end with exit code ``None``; the next job starts a fresh server.
    """

    def __init__(self, tmp: Path, isolation: str = "auto", protected: list[str] = ()):
        if isolation not in ("auto", "namespaces", "none"):
            raise ValueError(f"isolation must be 'auto', 'namespaces' or 'none', got {isolation!r}")
        self.tmp = tmp
        self.isolation = isolation
        # solutions/ and the course package are hidden for ``check`` as for ``grade``
        self.protected = list(dict.fromkeys([*map(str, protected), *_protected_defaults()]))
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
        command = [sys.executable, "-m", "pecourse.exercises._runner", "--serve", self.isolation]
        proc = subprocess.Popen(
            command + self.protected,
            cwd=self.tmp,
            env=_child_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            text=True,
            bufsize=1,
        )
        first = proc.stdout.readline().strip()
        word, _, rest = first.partition(" ")
        if word != "READY":
            _kill(proc.pid, group=True)
            proc.wait()
            if word == "REFUSED":
                raise IsolationUnavailable(
                    f"isolation 'namespaces' is not available on this machine: {rest}"
                )
            raise RuntimeError(f"the grading server did not start (said {first!r})")
        self.level, _, self.detail = rest.partition(" ")
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
                        _kill(self._pids[job_id], group=True)
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
        with suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _kill(proc.pid, group=True)
            proc.wait()

    @property
    def isolation_label(self) -> str:
        return self.level if self.level != "none" else NOT_ISOLATED


@contextmanager
def grading_server(isolation: str, protected: list[str], *, own_notebooks=False):
    """A :class:`ForkServer` of its own for the ``with`` block, closed after it. ``auto``
    refuses a fallback that would run others' notebooks as our uid (``check``'s are ours)."""
    with tempfile.TemporaryDirectory(prefix="pecourse-server-") as tmp:
        server = ForkServer(Path(tmp), isolation, protected)
        try:
            if isolation == "auto" and not own_notebooks and server.level == "none":
                if os.geteuid() != 0 or not sandbox.others_can_run_python():
                    raise IsolationUnavailable(AS_OURSELVES.format(server.detail, os.geteuid()))
            yield server
        finally:
            server.close()


def _run(
    graded: GradedNotebook,
    limits: Limits,
    server: ForkServer,
    name: str,
    text: str,
    allow_reference: bool,
) -> tuple[list[dict], str | None]:
    """Run the cells (student's process + judge); return the judge's records and why it
    stopped early (None if it did not)."""
    with tempfile.TemporaryDirectory(prefix="pecourse-grade-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "work").mkdir()
        (tmp / "scratch").mkdir()
        # Searchable, not listable: the fallback's job uid must reach its own two folders;
        # the job file (already deleted when the job starts) and the results are 0600.
        tmp.chmod(0o711)
        job = tmp / "job.json"
        result = tmp / "result.jsonl"
        fields = {"result": str(result), "workdir": str(tmp / "work")}
        fields |= {"scratch": str(tmp / "scratch"), "cells": graded.cells, "notebook": [name, text]}
        fields |= {"answer_names": graded.answer_names, "protected": server.protected + [str(tmp)]}
        fields |= {"allow_reference": allow_reference, **asdict(limits)}
        job.write_text(json.dumps(fields), encoding="utf-8")
        job.chmod(0o600)
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
                error = r["error"]
                for path in (os.path.realpath(tmp / "work"), str(tmp / "work"), "/home/student"):
                    error = error.replace(path, "<work>")
                for path in (os.path.realpath(tmp), str(tmp)):
                    error = error.replace(path, "<tmp>")
                r["error"] = _ADDRESS.sub("0x…", error)
        failed = next((r["judge_error"] for r in records if "judge_error" in r), None)
        if stopped is None and failed:
            stopped = f"the grader could not run this notebook: {failed}"
        if stopped is None and not any(r.get("done") for r in records):
            if code is None:
                stopped = SERVER_DIED
            else:
                how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
                stopped = f"the grading process ended early ({how})"
        return records, stopped


def _run_retrying(graded, limits, server, exercise, text, allow_reference):
    """:func:`_run`; if the server died under the job, once more on a server of its own."""
    job = (f"{exercise}.ipynb", text, allow_reference)
    records, stopped = _run(graded, limits, server, *job)
    if stopped == SERVER_DIED:
        with grading_server(server.isolation, server.protected) as private:
            records, stopped = _run(graded, limits, private, *job)
    return records, stopped


def _names_in(source: str) -> set[str]:
    import ast

    if len(source) > MAX_CHECKED_CHARS:  # a student's cell, parsed in the grader's process
        return set()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _policy_parts(graded: GradedNotebook) -> dict[str, str]:
    """Parts that score 0 under the reference-implementation policy, with the reason."""
    found: dict[str, str] = {}
    for i, (source, _, kind) in enumerate(graded.cells):
        if kind not in ("answer", "added"):
            continue
        uses = reference_uses(source)
        if not uses:
            continue
        reason = POLICY_REASON.format(what=", ".join(uses))
        for _, gid, later_kind in graded.cells[i + 1 :]:
            if later_kind == "answer":
                break
            if later_kind == "test":
                found.setdefault(gid, reason)
    return found


def _dependency_notes(graded: GradedNotebook, failed: set[str]) -> dict[str, list[str]]:
    """For each failed part: the other answers it relies on whose own parts failed."""
    code = {gid: source for source, gid, kind in graded.cells if kind in ("answer", "test")}
    defined: dict[str, str] = {}  # name -> the answer cell that defines it in the source
    for source, gid, kind in graded.cells:
        for name in answer_names([source]) if kind == "answer" else ():
            defined.setdefault(name, gid)
    notes: dict[str, list[str]] = {}
    for part in failed:
        own = graded.owner.get(part)
        for name in sorted(_names_in(code.get(part, "")) | _names_in(code.get(own, ""))):
            dep = defined.get(name)
            bad = [p for p, answer in graded.owner.items() if answer == dep and p in failed]
            if dep not in (None, own) and bad:
                notes.setdefault(part, []).append(
                    f"this part uses {name} (answer cell {dep}), whose part {', '.join(bad)} "
                    "failed too: fix that one first"
                )
    return notes


def grade_submission(
    student: str,
    exercise: str,
    source_nb,
    submission: Path | None,
    limits: Limits = Limits(),
    server: ForkServer | None = None,
    *,
    allow_reference: bool = False,
    missing_note: str = "",
    isolation: str = "auto",
) -> list[Row]:
    """Grade one student's notebook for one exercise; never raises for a bad submission.

    ``server``: a running :class:`ForkServer` (one is started for this call if omitted, with
    ``isolation``).
    """
    graded_parts = parts(source_nb)
    label = server.isolation_label if server is not None else ""
    if submission is None:
        reason = "no submission" + (f" ({missing_note})" if missing_note else "")
        return _zero_rows(student, exercise, graded_parts, reason, label)
    try:
        text = _read_submission(Path(submission))
        nb = nbformat.reads(text, as_version=4)
        if not isinstance(nb.get("cells"), list):
            raise ValueError("it has no list of cells")
        graded = assemble_graded(source_nb, nb)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the submission's fault
        # the kind of problem, never the message: it may quote the file's bytes
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
        why = str(exc) if isinstance(exc, Unreadable) else why
        return _zero_rows(student, exercise, graded_parts, f"not a valid notebook ({why})", label)

    own = server is None  # a server for this call only
    with grading_server(isolation, []) if own else nullcontext(server) as used:
        records, stopped = _run_retrying(graded, limits, used, exercise, text, allow_reference)
    label = used.isolation_label
    policy = {} if allow_reference else _policy_parts(graded)
    by_part = {r["grade_id"]: r for r in records if r.get("kind") == "test"}
    # Code cells that raised (other than the untouched stub): a failing part after one is
    # most likely failing because of it, so the reason says so.
    broken = [
        (r["index"], r["grade_id"] or f"added cell {r['index']}", r["error"])
        for r in records
        if r.get("kind") in ("answer", "added")
        and not r["ok"]
        and "NotImplementedError" not in (r["error"] or "")
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

    passed = {}
    for p in graded_parts:
        record = by_part.get(p.grade_id)
        passed[p.grade_id] = bool(record and record["ok"]) and p.grade_id not in policy
    depends = _dependency_notes(graded, {g for g, ok in passed.items() if not ok})
    rows = []
    for p in graded_parts:
        notes = list(graded.notes.get(p.grade_id, ()))
        record = by_part.get(p.grade_id)
        ok = passed[p.grade_id]
        if p.grade_id in policy:
            reason = policy[p.grade_id]
        elif record is None:
            reason = stopped or "not run"
        else:
            reason = "" if ok else (record.get("error") or "failed")
        if not ok and record is not None:
            notes += [
                f"{gid if gid.startswith('added') else 'answer cell ' + gid} failed earlier: {error}"
                for index, gid, error in broken
                if index < record["index"]
            ]
            notes += depends.get(p.grade_id, [])
        reason = "; ".join(x for x in [reason, *notes, *general] if x)
        points = p.points if ok else 0.0
        rows.append(Row(student, exercise, p.grade_id, points, p.points, reason, label))
    return rows


def _protected_defaults() -> list[str]:
    """The checkout that holds the package (an editable install: on the sandbox's path) and
    its solutions; nothing for a package installed outside one (site-packages, needed)."""
    with suppress(NotACheckoutError):
        root = checkout(str(resources.files("pecourse")))
        return [str(root), str(root / "solutions")]
    return []


def scan_class(
    submissions_dir: Path, exercises: list[str]
) -> tuple[dict[str, dict[str, Path | None]], dict[str, list[str]]]:
    """``({exercise: {student: notebook or None}}, {student: [misnamed files]})``.

    A notebook is ``<student>/<exercise>.ipynb`` or nbgrader's
    ``<student>/<exercise>/<exercise>.ipynb``; any other ``.ipynb`` in a student's folder
    is reported as misnamed (checkpoints excluded). Students are named as :func:`shown`
    writes their folder's name; a file found here may still be refused (:func:`_refusal`).
    """
    found: dict[str, dict[str, Path | None]] = {e: {} for e in exercises}
    stray: dict[str, list[str]] = {}
    for student_dir in sorted(p for p in Path(submissions_dir).iterdir() if p.is_dir()):
        if student_dir.name.startswith("."):
            continue
        student = shown(student_dir.name)
        matched = set()
        for exercise in exercises:
            candidates = [
                student_dir / f"{exercise}.ipynb",
                student_dir / exercise / f"{exercise}.ipynb",
            ]
            hit = next((c for c in candidates if os.path.lexists(c)), None)
            found[exercise][student] = hit
            if hit is not None:
                matched.add(hit)
        if student_dir.is_symlink():
            continue  # refused when graded; its target is not listed
        others = [
            p
            for p in sorted(student_dir.rglob("*.ipynb"))
            if p not in matched and ".ipynb_checkpoints" not in p.parts
        ]
        if others:
            stray[student] = [shown(p.relative_to(student_dir)) for p in others]
    return found, stray


def find_submissions(submissions_dir: Path, exercise: str) -> dict[str, Path | None]:
    """``{student: notebook}`` for one exercise (``None`` where a student has no such file)."""
    return scan_class(submissions_dir, [exercise])[0][exercise]


def _guess(exercise: str, files: list[str]) -> str | None:
    """The misnamed file that most likely is ``exercise`` (same number or close name)."""
    number = exercise.split("_", 1)[0]
    stems = {f: Path(f).stem for f in files}
    for f, stem in stems.items():
        if re.match(rf"^0*{int(number)}(\D|$)", stem) or exercise in stem:
            return f
    close = difflib.get_close_matches(exercise, list(stems.values()), n=1, cutoff=0.75)
    return next((f for f, s in stems.items() if close and s == close[0]), None)


def isolation_warning(server: ForkServer) -> str | None:
    """The terminal's warning when submissions run without namespaces (None otherwise)."""
    if server.level != "none":
        return None
    return (
        f"WARNING: submissions are NOT isolated ({server.detail}). A hostile notebook can "
        "read what its uid can read (solutions/ included) and, without root, signal the "
        f"grader; verdicts are still computed outside it. Every row is marked '{NOT_ISOLATED}'."
    )


def grade_class(
    submissions_dir: str | Path,
    *,
    source_dir: str | Path | None = None,
    exercises: list[str] | None = None,
    limits: Limits = Limits(),
    jobs: int = 1,
    progress: bool = True,
    isolation: str = "auto",
    allow_reference: bool = False,
    protected: list[str] = (),
) -> list[Row]:
    """Grade every submission under ``submissions_dir``; rows sorted by student, exercise, part.

    ``exercises`` (slugs) defaults to every exercise that at least one student submitted;
    a student who lacks one of them gets zero with the reason ``no submission`` (naming a
    misnamed file that is probably it). ``isolation`` and ``allow_reference``: see
    :class:`ForkServer` and :mod:`pecourse.exercises.policy`.
    """
    from tqdm.auto import tqdm

    submissions_dir = Path(submissions_dir)
    if not submissions_dir.is_dir():
        raise ValueError(f"submissions_dir must be a directory, got {str(submissions_dir)!r}")
    sources = {p.stem: p for p in source_notebooks(source_dir)}
    if not sources:
        where = source_dir or "solutions/: run from a course checkout, or pass --source"
        raise ValueError(f"no exercise sources found in {where}")
    unknown = [e for e in exercises or () if e not in sources]
    if unknown:
        raise ValueError(f"unknown exercise(s) {unknown}; known: {sorted(sources)}")
    per_exercise, stray = scan_class(submissions_dir, list(sources))
    if exercises is None:
        exercises = [n for n, found in per_exercise.items() if any(found.values())]
    per_exercise = {n: per_exercise[n] for n in exercises}
    for student, files in stray.items():
        log.warning(
            "%s: misnamed notebook(s) not graded: %s (name each NN_slug.ipynb, one of %s...)",
            *(student, ", ".join(files), ", ".join(sorted(sources))[:60]),
        )

    tasks = []
    source_nbs = {name: read_notebook(sources[name]) for name in exercises}
    for name in exercises:
        for student, path in per_exercise[name].items():
            tasks.append((student, name, path))
    refused = {(s, e): _refusal(p, submissions_dir) for s, e, p in tasks if p is not None}
    work = [t for t in tasks if t[2] is not None and refused[t[:2]] is None]

    results: dict[tuple[str, str], list[Row]] = {}
    for student, name, path in tasks:
        if refused.get((student, name)):
            why = refused[(student, name)]
            results[(student, name)] = _zero_rows(student, name, parts(source_nbs[name]), why)
        elif path is None:
            guess = _guess(name, stray.get(student, []))
            note = f"found {guess!r}: rename it to {name}.ipynb" if guess else ""
            results[(student, name)] = grade_submission(
                student, name, source_nbs[name], None, limits, missing_note=note
            )
    if work:  # the progress bar counts notebooks to run, not folders
        protected = [*protected, str(submissions_dir)]
        if source_dir is not None:
            protected.append(str(source_dir))
        with grading_server(isolation, protected) as server:
            warning = isolation_warning(server)
            log.log(logging.WARNING if warning else logging.INFO, warning or server.detail)
            bar = tqdm(total=len(work), desc="grading", unit="notebook", disable=not progress)
            with bar, ThreadPoolExecutor(max_workers=max(1, int(jobs))) as pool:
                run = partial(grade_submission, allow_reference=allow_reference)
                futures = {
                    pool.submit(run, s, e, source_nbs[e], p, limits, server): (s, e)
                    for s, e, p in work
                }
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    bar.update(1)
    order = {name: i for i, name in enumerate(sorted(exercises))}
    flagged = _look_alikes(sorted({s for s, _ in results}))
    for why in flagged.values():
        log.warning(why)
    rows = []
    for key in sorted(results, key=lambda k: (k[0], order[k[1]])):
        note = flagged.get(key[0])
        rows += [replace(r, reason="; ".join(filter(None, [r.reason, note]))) for r in results[key]]
    return rows


# --------------------------------------------------------------------------- gradebook


def write_csv(rows: list[Row], path: str | Path) -> None:
    """Write ``rows`` as CSV; text fields that start like a formula are escaped."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        writer.writerows(r.csv_fields() for r in rows)
    os.replace(tmp, path)  # a reader never sees half a gradebook


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE IF NOT EXISTS grades (student TEXT NOT NULL, exercise TEXT NOT NULL, "
        "part TEXT NOT NULL, points REAL NOT NULL, max_points REAL NOT NULL, "
        "reason TEXT NOT NULL, isolation TEXT NOT NULL DEFAULT '', "
        "PRIMARY KEY (student, exercise, part))"
    )
    columns = {row[1] for row in db.execute("PRAGMA table_info(grades)")}
    if "isolation" not in columns:  # a gradebook written before the column existed
        db.execute("ALTER TABLE grades ADD COLUMN isolation TEXT NOT NULL DEFAULT ''")
    return db


def write_sqlite(rows: list[Row], path: str | Path) -> None:
    """Store rows in table ``grades``; a regraded (student, exercise) replaces its old rows.

    A later round that did not receive a student's exercise (every row ``no submission``)
    keeps the grade of an earlier round that did: rounds graded into one gradebook add up.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    db = _connect(path)
    try:
        with db:
            kept = set()
            for student, exercise in sorted({(r.student, r.exercise) for r in rows}):
                absent = all(
                    r.reason.startswith("no submission")
                    for r in rows
                    if (r.student, r.exercise) == (student, exercise)
                )
                graded = db.execute(
                    "SELECT 1 FROM grades WHERE student = ? AND exercise = ? "
                    "AND reason NOT LIKE 'no submission%'",
                    (student, exercise),
                ).fetchone()
                if absent and graded:
                    kept.add((student, exercise))
                    continue
                db.execute(
                    "DELETE FROM grades WHERE student = ? AND exercise = ?", (student, exercise)
                )
            db.executemany(
                "INSERT INTO grades VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (r.student, r.exercise, r.part, r.points, r.max_points, r.reason, r.isolation)
                    for r in rows
                    if (r.student, r.exercise) not in kept
                ],
            )
    finally:
        db.close()


def read_sqlite(path: str | Path) -> list[Row]:
    """Every row of the gradebook, by student, exercise and part order."""
    db = _connect(Path(path))
    try:
        return [
            Row(*r)
            for r in db.execute(
                "SELECT student, exercise, part, points, max_points, reason, isolation "
                "FROM grades ORDER BY student, exercise, rowid"
            )
        ]
    finally:
        db.close()


def export_csv(db_path: str | Path, csv_path: str | Path) -> list[Row]:
    """Rebuild the CSV from the whole SQLite gradebook (every exercise ever graded)."""
    rows = read_sqlite(db_path)
    write_csv(rows, csv_path)
    return rows


def summarize(rows: list[Row]) -> str:
    """The class at a glance: each exercise's mean score, then each part's pass rate."""
    if not rows:
        return "no submissions graded"
    exercises = sorted({r.exercise for r in rows})
    lines = [f"{len({r.student for r in rows})} student(s), {len(exercises)} exercise(s)"]
    lines.append(f"{'exercise / part':<48} {'mean':>8} {'max':>6} {'passed':>8}")
    for ex in exercises:
        ex_rows = [r for r in rows if r.exercise == ex]
        max_points = sum(r.max_points for r in ex_rows if r.student == ex_rows[0].student)
        mean = sum(r.points for r in ex_rows) / len({r.student for r in ex_rows})
        lines.append(f"{ex:<48} {mean:>8.2f} {max_points:>6g}")
        for part in dict.fromkeys(r.part for r in ex_rows):
            pr = [r for r in ex_rows if r.part == part]
            passed = sum(1 for r in pr if r.points >= r.max_points) / len(pr)
            lines.append(f"  {part:<46} {'':>8} {pr[0].max_points:>6g} {passed:>8.0%}")
    return "\n".join(lines)


def pace(rows: list[Row], seconds: float) -> str:
    """How many notebooks were handed in (rows not ``no submission``) and graded a minute."""
    handed_in = {(r.student, r.exercise) for r in rows if not r.reason.startswith("no submission")}
    per_minute = len(handed_in) * 60 / seconds if seconds > 0 else 0.0
    return f"{len(handed_in)} notebook(s) graded in {seconds:.1f} s: {per_minute:.1f} a minute"


def main_grade(args) -> int:
    """``pecourse grade``: grade, update the SQLite gradebook, rebuild the CSV, summarize."""
    limits = Limits(args.cell_timeout, args.timeout, args.memory_mb, args.output_cap, args.cpus)
    level = logging.WARNING if args.quiet else logging.INFO
    logging.basicConfig(level=level, format="pecourse grade: %(message)s")
    start = time.monotonic()
    submissions = Path(args.submissions)
    out = Path(args.out)
    db_path = Path(args.db) if args.db else out.with_suffix(".sqlite")
    single = None
    if submissions.is_file():
        # One notebook: grade it as the only submission of a class of one, named by --student.
        if not args.student:
            why = "grading a single notebook needs --student NAME (the name its gradebook rows get)"
            print(f"pecourse grade: {why}", file=sys.stderr)
            return 2
        single = tempfile.TemporaryDirectory(prefix="pecourse-single-")
        folder = Path(single.name) / args.student
        folder.mkdir()
        (folder / submissions.name).write_bytes(submissions.read_bytes())
        submissions = Path(single.name)
    elif args.student:
        print("pecourse grade: --student is for grading a single notebook", file=sys.stderr)
        return 2
    try:
        rows = grade_class(
            submissions,
            source_dir=args.source,
            exercises=args.exercise or None,
            limits=limits,
            jobs=args.jobs,
            progress=not args.quiet,
            isolation=args.isolation,
            allow_reference=args.allow_reference,
            protected=[str(out.resolve().parent), str(db_path.resolve().parent)],
        )
    except ValueError as exc:
        print(f"pecourse grade: {exc}", file=sys.stderr)
        return 2
    finally:
        if single is not None:
            single.cleanup()
    seconds = time.monotonic() - start
    write_sqlite(rows, db_path)
    everything = export_csv(db_path, out)
    print(summarize(rows))
    print(pace(rows, seconds))
    print(
        f"wrote {db_path} and rebuilt {out} from it ({len(rows)} rows graded now, "
        f"{len(everything)} in the gradebook)"
    )
    if any(r.isolation == NOT_ISOLATED for r in rows):
        print(f"WARNING: grades computed WITHOUT isolation ('{NOT_ISOLATED}')", file=sys.stderr)
    return 0
