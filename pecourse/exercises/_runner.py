"""Run one submission's cells in this process, under limits; report each cell as it ends.

:mod:`pecourse.exercises.grade` starts ``python -m pecourse.exercises._runner --serve``
once per batch (:func:`serve`): it imports torch and IPython once, then forks one process
per submission, which runs in its own session and a fresh temporary working directory
(:func:`run_job`; ``python -m pecourse.exercises._runner JOB`` runs a single job without the
server). A job is a JSON file: ``{"cells": [[source, grade_id or null, kind], ...],
"cell_timeout": s, "memory_mb": n, "output_cap": chars, "result": path, "workdir": path,
"env": {...}}``. Each cell's outcome is appended to ``result`` as one JSON line the moment
the cell ends (written with ``os.write``, unbuffered), so whatever
the notebook does next — ``os._exit``, a crash, an endless loop the parent has to kill —
the parts already run keep their result.

The cells run in an IPython shell (the same machinery as the Jupyter kernel: magics,
``display``, tracebacks), without a kernel process and its start-up cost. Limits:

* ``RLIMIT_AS`` caps the address space (``memory_mb`` beyond what the interpreter maps at
  the start), so a huge allocation fails with ``MemoryError`` (or
  torch's allocator error) in the cell that made it, instead of swapping the machine;
* a per-cell timer raises :class:`CellTimeout` in a cell that runs too long (the parent
  also kills the whole process group at its wall-clock limit, for loops that swallow it);
* the learner's printing goes to a buffer capped at ``output_cap`` characters.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time

MAX_ERROR_CHARS = 600
# Imported once by the fork server, so that each submission starts in milliseconds.
PRELOAD = (
    "torch",
    "numpy",
    "matplotlib.pyplot",
    "IPython.core.interactiveshell",
    "traitlets.config",
    "pecourse.attention",
    "pecourse.positions.absolute",
    "pecourse.positions.alibi",
    "pecourse.positions.relative",
    "pecourse.positions.rope",
    "pecourse.positions.rope_scaling",
    "pecourse.positions.augmentation",
    "pecourse.positions.cope",
    "pecourse.positions.multidim",
)


class CellTimeout(BaseException):
    """Raised inside a cell that ran past its time limit (a BaseException, like Ctrl-C)."""


class CappedOutput:
    """A text stream that keeps the first ``cap`` characters and counts the rest."""

    def __init__(self, cap: int):
        self.cap = cap
        self.kept: list[str] = []
        self.size = 0
        self.encoding = "utf-8"
        self.errors = "replace"

    def write(self, text) -> int:
        text = str(text)
        room = self.cap - min(self.size, self.cap)
        if room > 0:
            self.kept.append(text[:room])
        self.size += len(text)
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:  # some libraries ask; the real fd is /dev/null
        return 1


def _describe(exc: BaseException, memory_mb: int, cell_timeout: float) -> str:
    if isinstance(exc, CellTimeout):
        return f"timed out: the cell ran longer than {cell_timeout:g} s (an endless loop?)"
    name = type(exc).__name__
    message = str(exc).strip()
    if isinstance(exc, SystemExit):
        return f"SystemExit({message}): the notebook called sys.exit/exit"
    if isinstance(exc, MemoryError) or "can't allocate memory" in message:
        return f"{name}: out of memory (the limit is {memory_mb} MB)"
    if isinstance(exc, NotImplementedError) and not message:
        return "NotImplementedError: the answer is not written yet"
    text = f"{name}: {message}" if message else name
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 3] + "..."
    return text


def _address_space() -> int:
    """This process's current virtual size in bytes (0 where /proc is not available)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _set_limits(memory_mb: int) -> None:
    # The allowance is on top of what the preloaded interpreter already maps (torch alone
    # maps over a gigabyte, more for CUDA builds), so the notebook gets the same room
    # whatever the build.
    limit = _address_space() + memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Writing a huge file fails with EFBIG instead of filling the disk.
    fsize = 64 * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def run_job(job: dict) -> None:
    """Run one submission in this (fresh) process and leave with ``os._exit``; never returns.

    ``job``: ``cells``, ``cell_timeout``, ``memory_mb``, ``output_cap``, ``result`` (the file
    that receives one JSON line per cell), ``workdir`` and ``env`` (variables to set).
    """
    fd = os.open(job["result"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def report(record: dict) -> None:
        os.write(fd, (json.dumps(record) + "\n").encode())

    os.environ.update(job.get("env", {}))
    os.chdir(job["workdir"])
    cell_timeout = float(job["cell_timeout"])
    memory_mb = int(job["memory_mb"])
    out = CappedOutput(int(job["output_cap"]))

    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "nocolor"
    config.InteractiveShell.xmode = "Plain"

    class GradingShell(InteractiveShell):
        def enable_gui(self, gui=None):  # no event loop to hook: ``%matplotlib inline`` is fine
            pass

    shell = GradingShell.instance(config=config)
    _set_limits(memory_mb)

    def on_alarm(signum, frame):
        raise CellTimeout()

    signal.signal(signal.SIGALRM, on_alarm)
    report({"started": True})
    sys.stdout = sys.stderr = out
    for index, (source, gid, kind) in enumerate(job["cells"]):
        error = None
        printed_before = out.size
        try:
            signal.setitimer(signal.ITIMER_REAL, cell_timeout)
            result = shell.run_cell(source, store_history=True)
            signal.setitimer(signal.ITIMER_REAL, 0)
            exc = result.error_before_exec or result.error_in_exec
            if exc is not None:
                error = _describe(exc, memory_mb, cell_timeout)
            elif not result.success:
                error = "the cell failed"
        except BaseException as exc:  # noqa: BLE001 - a timeout outside the learner's code, ...
            signal.setitimer(signal.ITIMER_REAL, 0)
            error = _describe(exc, memory_mb, cell_timeout)
        report(
            {
                "index": index,
                "grade_id": gid,
                "kind": kind,
                "ok": error is None,
                "error": error,
                "printed": out.size - printed_before,
            }
        )
    report({"done": True, "printed": out.size})
    os.close(fd)
    # Leave at once: the notebook may have left threads or handlers that would hang exit.
    os._exit(0)


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when the server dies (a notebook that kills its parent
    must not go on grading itself unobserved). Elsewhere a no-op."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent already died between fork and prctl
        os._exit(70)


def _detach_stdio() -> None:
    """Point fds 0-2 at /dev/null, so the notebook cannot write into the server's pipes."""
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(null, target)
    os.close(null)


def serve() -> None:
    """A fork server: preload the heavy imports once, then fork one process per submission.

    Protocol (lines on stdin/stdout): ``RUN <id> <job.json>`` forks a child that runs the
    job in a new session (its own process group) and answers ``PID <id> <pid>``; when the
    child ends the server says ``EXIT <id> <code>`` (negative: killed by that signal, as
    :mod:`subprocess` reports it); ``KILL <id>`` kills the child's whole process group. EOF
    on stdin kills what is left and ends the server. Forking from a process that has already
    imported torch and IPython saves each submission seconds of start-up.
    """
    import select

    for module in PRELOAD:
        try:
            __import__(module)
        except Exception:  # noqa: BLE001 - a module that fails here fails in the notebook too
            pass
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    children: dict[int, str] = {}  # pid -> job id

    def say(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    say("READY")
    stdin = sys.stdin.buffer
    pending = b""
    open_input = True
    while open_input or children:
        if open_input:
            ready, _, _ = select.select([stdin], [], [], 0.02)
        else:
            ready = []
            time.sleep(0.02)
        if ready:
            chunk = os.read(stdin.fileno(), 65536)
            if not chunk:
                open_input = False
                for pid in list(children):
                    _killpg(pid)
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                words = line.decode().split(" ", 2)
                if words[0] == "RUN":
                    job_id, job_path = words[1], words[2]
                    with open(job_path, encoding="utf-8") as f:
                        job = json.load(f)
                    # The job holds the hidden tests: not for the notebook's eyes.
                    os.unlink(job_path)
                    pid = os.fork()
                    if pid == 0:  # the child: a submission of its own
                        try:
                            os.setsid()
                            _die_with_parent()
                            _detach_stdio()
                            signal.signal(signal.SIGINT, signal.SIG_DFL)
                            run_job(job)
                        finally:
                            os._exit(70)
                    children[pid] = job_id
                    say(f"PID {job_id} {pid}")
                elif words[0] == "KILL":
                    for pid, jid in children.items():
                        if jid == words[1]:
                            _killpg(pid)
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            job_id = children.pop(pid, None)
            if job_id is not None:
                _killpg(pid)  # anything the notebook left running in its group
                say(f"EXIT {job_id} {_returncode(status)}")


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _returncode(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def main(argv: list[str]) -> None:
    if argv == ["--serve"]:
        serve()
        return
    (job_path,) = argv
    with open(job_path, encoding="utf-8") as f:
        run_job(json.load(f))


if __name__ == "__main__":
    main(sys.argv[1:])
