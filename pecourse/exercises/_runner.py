"""Run one submission: the student's code in a sandbox, the tests in a trusted judge.

:mod:`pecourse.exercises.grade` starts ``python -m pecourse.exercises._runner --serve
LEVEL`` once per batch (:func:`serve`): it imports torch, numpy, matplotlib and IPython
once, checks which isolation the machine allows (:func:`pecourse.exercises.sandbox.probe`),
and forks one **judge** per submission. The processes of one job::

    fork server ──fork──► judge (trusted: set-up and test cells, verdicts, result file)
    (reads no job)          └──fork──► gate (new user + PID namespaces)
                                        └──fork──► student (PID 1 there: set-up, answer
                                                   and added cells; sandboxed)

**No process the student's code runs in ever held another job, or a test**: a fork copies
freed memory too, which a notebook can read (``process_vm_readv``). The server hands each
job file to a new judge as a descriptor it never reads; the judge forks the student's
processes *before* it reads the job, then sends them only their part (:meth:`Judge.configure`:
the notebook, its folders and limits) and the set-up, answer and added cells one at a time.

The student's process runs those cells in an IPython shell and otherwise only answers the
judge: *run this cell*, *what is ``NAME`` now*, *call ``NAME`` with these arguments*. The
judge runs the set-up and test cells, hidden ones included, in its own interpreter, where
every name an answer defines is a proxy: calling ``rope_half(x, pos)`` sends ``x`` and
``pos`` as plain data (:mod:`pecourse.exercises.wire`), the function runs in the student's
process, and its result comes back as plain data, with the arguments it changed in place
(written into the test's own tensors, as one kernel would show them). Expected values,
``torch.allclose`` and the reference code live in the judge, out of the notebook's reach.
No other state comes back: the judge seeds torch, numpy and ``random`` from each test
cell's ``grade_id`` and sends its torch random state on when it moved, never taking the
student's. So an exercise's functions take and return plain data (tensors, numbers,
strings, lists, dicts, dtypes; a ``torch.Generator`` travels by its state, a function the
test passes in is called back in the judge); none of the sixteen asks for a module.

A job is a JSON file (opened and deleted by the server, read by the judge): ``cells``
(``[source, grade_id, kind]``, ``kind`` one of ``setup``, ``answer``, ``added``, ``test``),
``answer_names``, the fields of ``grade.Limits``, ``result`` (the file that receives one
JSON line per cell, written the moment a cell ends), ``workdir`` and ``scratch`` (the
fallback's folders), ``notebook`` (``[file name, text]``, copied into the student's home as
nbgrader does), ``protected`` (paths the sandbox hides) and ``allow_reference``.

Limits (``grade.Limits`` says what each covers): ``cell_timeout`` per cell and per test
cell, by ``SIGALRM`` in the student's process and by the judge, which kills a student that
ignores it (callbacks do not extend it); the judge's address space, ``memory_mb`` plus
:data:`JUDGE_MB`; the whole job one :class:`sandbox.JobCgroup` where the machine allows;
:func:`sandbox.set_limits` in every student process; ``output_cap`` characters of output;
messages of at most :data:`wire.MAX_MESSAGE`.
"""

from __future__ import annotations

import ast
import builtins
import io
import json
import os
import re
import signal
import socket
import sys
import time
import zlib
from functools import partial
from importlib import resources

from . import sandbox, wire

MAX_ERROR_CHARS = 600
GRACE = 3.0  # seconds the judge waits past a budget before it gives the student up
JUDGE_MB = 512  # the judge's memory on top of the notebook's limit: messages, references
COPIED_MB = 512  # the job's cgroup also counts the preloaded pages its processes copy
JUDGE_TASKS = 16  # the job's processes and threads on top of the notebook's: judge, gate
# Imported once by the fork server. Not the course package: the student's process descends
# from the server and must not hold the reference code.
PRELOAD = "torch numpy matplotlib.pyplot IPython.core.interactiveshell traitlets.config"
PRELOAD = (*PRELOAD.split(), "safetensors.torch")
STUDENT_ENV = "PATH LANG LC_ALL MPLBACKEND PYTHONHASHSEED OMP_NUM_THREADS MKL_NUM_THREADS"
STUDENT_ENV = (*STUDENT_ENV.split(), "PYTHONDONTWRITEBYTECODE")
SCRATCH_DIRS = ("matplotlib", "ipython", "pecourse")  # the libraries' folders, in scratch


class CellTimeout(BaseException):
    """Raised inside a cell that ran past its time limit (a BaseException, like Ctrl-C)."""


class StudentGone(BaseException):
    """The student's process died or stopped answering: nothing more can run there."""


class StudentExit(BaseException):
    """The student's function called ``sys.exit``."""


class CappedOutput(io.TextIOBase):
    """A text stream that keeps the first ``cap`` characters and counts the rest."""

    encoding, errors = "utf-8", "replace"

    def __init__(self, cap: int):
        self.cap, self.kept, self.size = cap, [], 0

    def write(self, text) -> int:
        text = str(text)
        self.kept.append(text[: max(0, self.cap - self.size)])
        self.size += len(text)
        return len(text)

    def fileno(self) -> int:  # some libraries ask; the real fd is /dev/null
        return 1


def clean_text(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """One line, printable, at most ``limit`` characters (text from the student's side)."""
    text = "".join(c if c.isprintable() else " " for c in str(text).replace("\n", " ")).strip()
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def describe(exc: BaseException, memory_mb: int, cell_timeout: float, returned=None) -> str:
    """The reason a cell failed, in the gradebook's words; ``returned``: ``{dtype: name}``
    of the tensors the answer's functions returned in the cell, for a dtype problem."""
    if isinstance(exc, CellTimeout):
        return f"timed out: the cell ran longer than {cell_timeout:g} s (an endless loop?)"
    if isinstance(exc, StudentGone):
        return str(exc)
    name = type(exc).__name__
    message = str(exc).strip()
    if isinstance(exc, (SystemExit, StudentExit)):
        return f"SystemExit({message}): the notebook called sys.exit/exit"
    if isinstance(exc, MemoryError) or "can't allocate memory" in message:
        return f"{name}: out of memory (the limit is {memory_mb} MB)"
    if isinstance(exc, NotImplementedError) and not message:
        return "NotImplementedError: the answer is not written yet"
    text = f"{name}: {message}" if message else name
    origin = getattr(exc, "pecourse_answer", None)
    if origin:  # raised inside the student's function
        return clean_text(f"{origin} raised {text}")
    named = _named_problem(exc, message, returned or {})  # raised by the test
    return clean_text(f"{named}: {text}" if named else text)


def _named_problem(exc: BaseException, message: str, returned: dict) -> str | None:
    """Say "dtype problem" or "shape problem" for the usual torch errors; for a dtype, the
    one expected against the one the answer returned, where the message names both."""
    if not isinstance(exc, (RuntimeError, TypeError, ValueError, IndexError)):
        return None
    low = message.lower()
    if any(m in low for m in _SHAPE_MARKS.split("|")):
        return "shape problem (check the shape the exercise asks for)"
    if not any(m in low for m in ("did not match", "scalar type", "dtype", "result type")):
        return None
    named = [_TORCH_DTYPES.get(w, w) for w in re.findall(r"[a-z]+\d*", low)]
    named = [d for d in dict.fromkeys(named) if d in _TORCH_DTYPES.values()]
    got = [d for d in named if d in returned]
    if len(named) == 2 and len(got) == 1:
        expected = next(d for d in named if d != got[0])
        return f"dtype problem: expected {expected}, {returned[got[0]]} returned {got[0]}"
    return "dtype problem (check the dtype the exercise asks for)"


_SHAPE_MARKS = (
    "size of tensor|shapes cannot be multiplied|shape '|must match the size|dimension out of "
    "range|invalid for input of size|mismatch in shape|expected size|does not match the shape|"
    "broadcast"
)
_TORCH_DTYPES = {"double": "float64", "float": "float32", "half": "float16", "long": "int64"}
_TORCH_DTYPES |= {"int": "int32", "short": "int16", "char": "int8", "byte": "uint8"}
_TORCH_DTYPES |= {"bfloat16": "bfloat16", "bool": "bool", "complexfloat": "complex64"}


# --------------------------------------------------------------------------- a channel


class Channel:
    """Requests and replies over one socket, both ways: while waiting for the reply to its
    own request, a side serves the other side's requests (a callback during a call)."""

    def __init__(self, sock: socket.socket, handle):
        self.sock = sock
        self.handle = handle  # (header, tensors) -> (header, tensors)

    def request(self, header: dict, tensors: dict | None = None, timeout: float | None = None):
        """The reply; ``timeout`` bounds the whole exchange, callbacks included."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            self.sock.settimeout(None if end is None else max(0.001, end - time.monotonic()))
            if header is not None:
                wire.send(self.sock, header, tensors)
                header = None
            reply, blobs = wire.recv(self.sock)
            if "op" not in reply:
                return reply, blobs
            self.reply(*self.handle(reply, blobs))

    def reply(self, header: dict, tensors: dict | None = None) -> None:
        wire.send(self.sock, header, tensors)


def _raised_payload(exc: BaseException) -> dict:
    try:
        bases = [c.__name__ for c in type(exc).__mro__]
        message = str(exc)
    except Exception:  # noqa: BLE001 - a hostile exception may refuse to describe itself
        bases, message = ["Exception"], ""
    return {
        "type": clean_text(type(exc).__name__, 80),
        "bases": [clean_text(b, 80) for b in bases[:20]],
        "message": clean_text(message, 2000),
    }


def rebuild_exception(info: dict, answer: str | None = None) -> BaseException:
    """The student's exception, as the judge raises it: its message and type name, based
    on the builtin exception it derives from (so ``except ValueError`` still catches it)."""
    name = clean_text(str(info.get("type", "Exception")), 80) or "Exception"
    message = clean_text(str(info.get("message", "")), 2000)
    bases = info.get("bases")
    bases = [str(b) for b in bases[:20]] if isinstance(bases, list) else []
    if name == "CellTimeout":
        return CellTimeout()
    if "SystemExit" in bases:
        return StudentExit(message)
    base: type = Exception
    for b in bases:
        candidate = getattr(builtins, b, None)
        if isinstance(candidate, type) and issubclass(candidate, Exception):
            base = candidate
            break
    try:
        cls = base if base.__name__ == name else type(name, (base,), {"__module__": "student"})
        exc = cls(message) if message else cls()
    except Exception:  # noqa: BLE001 - e.g. UnicodeDecodeError needs five arguments
        exc = type(name, (Exception,), {"__module__": "student"})(message)
    exc.pecourse_answer = answer
    return exc


# --------------------------------------------------------------------------- the student


def student_main(sock: socket.socket, job: dict, level: str, plan) -> None:
    """The student's process: build the sandbox, then serve the judge until told to stop."""
    name, text = job["notebook"]
    if level == sandbox.NAMESPACES:
        sandbox.enter_student(plan, {name: text.encode()})
        home, scratch, own = "/home/student", "/tmp", 0
    else:
        with open(os.path.join(job["workdir"], name), "w", encoding="utf-8") as f:
            f.write(text)
        scratch = job["scratch"]
        sandbox.enter_fallback(job["workdir"], scratch, plan.uid)
        home = job["workdir"]
        own = sandbox.processes_of(os.getuid()) if plan.uid is None else 0
    sandbox.die_with_parent()
    env = {k: os.environ[k] for k in STUDENT_ENV if k in os.environ}
    os.environ.clear()
    os.environ.update(env, HOME=home, TMPDIR=scratch)
    for name, folder in zip(("MPLCONFIGDIR", "IPYTHONDIR", "PECOURSE_DATA_DIR"), SCRATCH_DIRS):
        os.environ[name] = os.path.join(scratch, folder)
    if not job.get("allow_reference"):
        # Nothing of the course package stays in memory (the runner itself is running);
        # on disk it does not exist in the sandbox.
        for module in [m for m in sys.modules if m == "pecourse" or m.startswith("pecourse.")]:
            del sys.modules[module]

    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    shell_config = {"colors": "nocolor", "xmode": "Plain"}
    config = Config(HistoryManager={"enabled": False}, InteractiveShell=shell_config)

    class GradingShell(InteractiveShell):
        def enable_gui(self, gui=None):  # no event loop to hook: ``%matplotlib inline`` is fine
            pass

    shell = GradingShell.instance(config=config)
    sandbox.set_limits(int(job["memory_mb"]), float(job["cpu_seconds"]), own_processes=own)
    out = CappedOutput(int(job["output_cap"]))
    sys.stdout = sys.stderr = out

    signal.signal(signal.SIGALRM, _on_alarm)
    StudentServer(sock, job, shell, out).serve()


def _on_alarm(signum, frame):
    raise CellTimeout()


class StudentServer:
    """The student's side of the channel: one method per request of the judge's."""

    def __init__(self, sock: socket.socket, job: dict, shell, out: CappedOutput):
        import torch

        self.torch = torch
        self.sock = sock
        self.job = job
        self.shell = shell
        self.out = out
        self.memory_mb = int(job["memory_mb"])
        self.channel = Channel(sock, self.handle)

    def serve(self) -> None:
        while True:
            try:
                header, blobs = wire.recv(self.sock)
            except (wire.WireError, OSError):
                os._exit(0)
            self.channel.reply(*self.handle(header, blobs))

    def handle(self, header: dict, blobs: dict):
        op = header.get("op")
        if op == "bye":
            os._exit(0)
        method = {"cell": self.cell, "names": self.names, "call": self.call}.get(op)
        if method is None:
            return {"raised": _raised_payload(RuntimeError(f"unknown op {op!r}"))}, {}
        if "rng" in blobs:  # the judge's random state, sent when its stream moved; none goes back
            self.torch.set_rng_state(blobs.pop("rng"))
        return method(header, blobs, float(header.get("budget", self.job["cell_timeout"])))

    def cell(self, header: dict, blobs: dict, budget: float):
        printed_before = self.out.size
        error = None
        try:
            signal.setitimer(signal.ITIMER_REAL, budget)
            result = self.shell.run_cell(str(header["source"]), store_history=True)
            signal.setitimer(signal.ITIMER_REAL, 0)
            exc = result.error_before_exec or result.error_in_exec
            if exc is not None:
                error = describe(exc, self.memory_mb, budget)
            elif not result.success:
                error = "the cell failed"
        except BaseException as exc:  # noqa: BLE001 - a timeout outside the learner's code, ...
            signal.setitimer(signal.ITIMER_REAL, 0)
            error = describe(exc, self.memory_mb, budget)
        return {"ok": error is None, "error": error, "printed": self.out.size - printed_before}, {}

    def names(self, header: dict, blobs: dict, budget: float):
        kinds, values = {}, {}
        for n in header.get("names", []):
            if n not in self.shell.user_ns:
                kinds[n] = "missing"
            elif callable(self.shell.user_ns[n]):
                kinds[n] = "callable"
            else:
                kinds[n] = "value"
                values[n] = self.shell.user_ns[n]
        tree, tensors = _safe_encode(values)
        return {"kinds": kinds, "values": tree}, tensors

    def call(self, header: dict, blobs: dict, budget: float):
        generators: dict = {}
        # the arguments as sent: an argument the function changes in place goes back, so
        # that the test sees it changed, as it would in one kernel
        sent = {key: t.clone() for key, t in blobs.items()}
        try:
            args, kwargs = wire.decode(
                header["args"], blobs, invoke=self.invoke, generators=generators
            )
            function = self.shell.user_ns[str(header["name"])]
            signal.setitimer(signal.ITIMER_REAL, budget)
            try:
                value = function(*args, **kwargs)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            tree, tensors = _safe_encode(value)
            reply = {"result": tree}
        except BaseException as exc:  # noqa: BLE001 - the answer's exception goes back
            signal.setitimer(signal.ITIMER_REAL, 0)
            reply, tensors = {"raised": _raised_payload(exc)}, {}
        changed = {
            f"arg{k}": blobs[k].detach() for k, t in sent.items() if not _same_bytes(t, blobs[k])
        }
        states = {f"gen{handle}": g.get_state() for handle, g in generators.items()}
        return reply, {**tensors, **changed, **states}

    def invoke(self, handle: int, args, kwargs):
        """Call back a function of the test's (it runs in the judge)."""
        tree, tensors = wire.encode((list(args), kwargs))
        header = {"op": "callback", "handle": handle, "args": tree}
        reply, blobs = self.channel.request(header, tensors)
        if "raised" in reply:
            raise rebuild_exception(reply["raised"])
        return wire.decode(reply["result"], blobs)


def _same_bytes(a, b) -> bool:
    """Same shape, dtype and bytes (NaN included)."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    bytes_of = lambda t: t.detach().reshape(-1).view(torch.uint8)  # noqa: E731
    return torch.equal(bytes_of(a), bytes_of(b))


def _safe_encode(value):
    try:
        return wire.encode(value)
    except Exception as exc:  # noqa: BLE001 - whatever the student returned
        return {"$opaque": f"unsendable value ({clean_text(str(exc), 100)})"}, {}


# --------------------------------------------------------------------------- the judge


class AnswerProxy:
    """Stands in the judge's namespace for a function the answer defines."""

    def __init__(self, judge: Judge, name: str):
        self._judge = judge
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        return self._judge.call(self.__name__, args, kwargs)

    def __repr__(self) -> str:
        return f"<answer {self.__name__} (runs in the student's sandbox)>"


class Judge:
    """The trusted side of one job (see the module docstring)."""

    def __init__(self, level: str):
        import torch

        self.torch = torch
        self.job: dict = {}  # read only after the student's processes were forked (spawn)
        self.level = level
        self.report = None
        self.cell_timeout = 1.0
        self.memory_mb = 0
        self.deadline = None
        self.gone: str | None = None
        self.student_pid = self.gate_pid = self.uid = None
        self.callables: dict[int, object] = {}
        self.ns: dict = {"__name__": "__main__", "__builtins__": builtins}
        self.channel: Channel | None = None
        self._rng_sent = None  # the torch RNG state last sent to the student's process
        self.returned: dict[str, str] = {}  # {dtype: answer} of the tensors returned in a cell

    # ----------------------------------------------------------------- process set-up
    def spawn(self, keep_closed: tuple[int, ...] = ()) -> None:
        """Fork the student's processes, before this judge has read its job.

        The student's process is a fork of this process, so it starts with a copy of this
        process's memory, freed memory included: here that is the server's memory (the
        preloaded modules, never a job) and nothing else. It receives its own part of the
        job afterwards (:meth:`configure`). ``keep_closed``: descriptors the gate closes
        (the job file's)."""
        uid = sandbox.job_uid()  # from this process's pid: nothing of the job
        if self.level == sandbox.NONE and not sandbox.others_can_run_python():
            uid = None  # the grader's uid: only when asked, --isolation none (grading_server)
        self.uid = uid
        mine, theirs = socket.socketpair()
        if self.level == sandbox.NAMESPACES:
            self.gate_pid, student = sandbox.fork_gate(
                uid,
                lambda: self._become_student(theirs),
                close=(mine.fileno(), *keep_closed),
                close_after_fork=(theirs.fileno(),),
            )
            theirs.close()
            if isinstance(student, int):
                self.student_pid = student
            else:
                self.gone = "the sandbox could not be set up: " + clean_text(student)
        else:
            sandbox.become_subreaper()
            child = os.fork()
            if child == 0:
                self._become_student(theirs)
            theirs.close()
            self.student_pid = child
        self.channel = Channel(mine, self._serve_callback)

    def _become_student(self, sock) -> None:
        try:
            # This process is a fork of a judge that has not read its job yet (nor has any
            # ancestor): no test cell, no other notebook was ever in this
            # memory. Its own part of the job comes over the socket (configure).
            _to_devnull()
            os.dup2(sock.fileno(), 3)
            os.closerange(4, 2**16)  # every other descriptor the judge had
            sock = socket.socket(fileno=3)
            os.setsid() if self.level == sandbox.NAMESPACES else None
            sock.settimeout(None)
            job, _ = wire.recv(sock)
            if job.get("op") != "job":
                os._exit(0)  # the judge ended before it sent the job
            plan = sandbox.Plan(
                protected=list(job["protected"]), allow_paths=list(job["allow_paths"]), uid=self.uid
            )
            student_main(sock, job, self.level, plan)
        except BaseException:  # noqa: BLE001 - tell the judge, then leave
            try:
                import traceback

                wire.send(sock, {"setup_failed": clean_text(traceback.format_exc(), 3000)})
            except Exception:  # noqa: BLE001
                pass
        finally:
            os._exit(71)

    def configure(self, job: dict, report) -> None:
        """The job, read after the fork: keep it here, send the student's process its part
        (its notebook, its folders, its limits; no test cell)."""
        self.job, self.report = job, report
        self.cell_timeout, self.memory_mb = float(job["cell_timeout"]), int(job["memory_mb"])
        if self.gone or self.channel is None:
            return
        keys = ("notebook", "workdir", "scratch", "cell_timeout", "memory_mb", "output_cap")
        own = {k: job[k] for k in keys} | {"op": "job", "protected": list(job["protected"])}
        own["cpu_seconds"] = float(job["cpus"]) * float(job["wall_clock"])
        own["allow_reference"], own["allow_paths"] = bool(job["allow_reference"]), []
        if own["allow_reference"]:  # the reference code is there, the grader's code is not
            own["allow_paths"] = [package := str(resources.files("pecourse"))]
            own["protected"].append(os.path.join(package, "exercises"))
        try:
            self.channel.sock.settimeout(self.cell_timeout + GRACE)
            wire.send(self.channel.sock, own)
        except (wire.WireError, OSError) as exc:
            why = f"the notebook could not be sent to its process ({clean_text(str(exc), 100)})"
            self._stop(why)

    # ----------------------------------------------------------------- requests
    def _request(self, header: dict, tensors: dict | None = None):
        if self.gone:
            raise StudentGone(self.gone)
        budget = self.cell_timeout if self.deadline is None else self.deadline - time.monotonic()
        budget = max(0.05, budget)
        header["budget"] = budget
        tensors = dict(tensors or {})
        state = self.torch.get_rng_state()
        if self._rng_sent is None or not self.torch.equal(state, self._rng_sent):
            tensors["rng"] = self._rng_sent = state  # the judge's stream moved: send it
        try:
            reply, blobs = self.channel.request(header, tensors, timeout=budget + GRACE)
        except TimeoutError:
            self._stop(
                f"timed out: the cell ran past the {self.cell_timeout:g} s limit and "
                "ignored the interrupt, so the notebook was stopped"
            )
            raise StudentGone(self.gone) from None
        except (wire.WireError, OSError) as exc:
            self._stop(self._why_gone(exc))
            raise StudentGone(self.gone) from None
        if "setup_failed" in reply:
            self._stop("the sandbox could not be set up: " + clean_text(reply["setup_failed"]))
            raise StudentGone(self.gone)
        return reply, blobs

    def _why_gone(self, exc) -> str:
        code = self._reap_student()
        if code is None:
            return f"the notebook's process stopped answering ({clean_text(str(exc), 100)})"
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        why = "os._exit, a crash, the memory or the CPU-time limit"
        return f"the notebook ended its grading process ({how}): {why}"

    def _reap_student(self, wait: float = 1.0):
        """The student's exit code (negative: killed by that signal), None if it had to be
        killed because it closed the channel but did not exit."""
        via_gate = self.gate_pid is not None
        pid = self.gate_pid if via_gate else self.student_pid
        if pid is None:
            return None
        deadline = time.monotonic() + wait
        try:
            while not (done := os.waitpid(pid, os.WNOHANG))[0] and time.monotonic() < deadline:
                time.sleep(0.01)
        except ChildProcessError:
            return None
        if not done[0]:
            self.kill()
            os.waitpid(pid, 0)
        self.gate_pid = self.student_pid = None
        code = os.waitstatus_to_exitcode(done[1]) if done[0] else None
        if via_gate and code is not None and code > 128:  # the gate's "killed by signal n"
            code = 128 - code
        return code

    def _stop(self, why: str) -> None:
        self.gone = why
        self.kill()

    def kill(self) -> None:
        sandbox.kill(self.student_pid)
        sandbox.kill(self.gate_pid)
        if self.channel is not None:
            try:
                self.channel.sock.close()
            except OSError:
                pass

    def _serve_callback(self, header, blobs):
        try:
            if header.get("op") != "callback":
                raise RuntimeError("not allowed")
            function = self.callables[int(header["handle"])]
            args, kwargs = wire.decode(header["args"], blobs)
            value = function(*args, **dict(kwargs))
            tree, tensors = wire.encode(value)
            return {"result": tree}, tensors
        except Exception as exc:  # noqa: BLE001 - the grader's function failed on these inputs
            return {"raised": _raised_payload(exc)}, {}

    def call(self, name: str, args, kwargs):
        generators: dict = {}
        origins: dict = {}
        tree, tensors = wire.encode(
            (list(args), kwargs), callables=self.callables, generators=generators, origins=origins
        )
        reply, blobs = self._request({"op": "call", "name": name, "args": tree}, tensors)
        for key, origin in origins.items():  # what the answer changed in place, and the
            if f"arg{key}" in blobs:  # generators it drew from, as one kernel shows them
                _changed_in_place(name, origin, blobs[f"arg{key}"])
        for handle, g in generators.items():
            try:
                g.set_state(blobs[f"gen{handle}"])
            except (KeyError, RuntimeError, TypeError, ValueError):
                pass
        if "raised" in reply:
            raised = reply["raised"]
            answer = f"{name}({_kinds(args, kwargs)})"
            raise rebuild_exception(raised if isinstance(raised, dict) else {}, answer=answer)
        try:
            value = wire.decode(reply["result"], blobs)
        except (wire.WireError, KeyError) as exc:
            raise TypeError(f"{name}(...) returned a value the grader cannot read: {exc}") from None
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, self.torch.Tensor):  # for a dtype problem's reason
                self.returned[str(v.dtype).removeprefix("torch.")] = name
        return value

    def refresh_names(self) -> None:
        names = list(self.job.get("answer_names", []))
        if not names:
            return
        reply, blobs = self._request({"op": "names", "names": names})
        try:
            values = wire.decode(reply.get("values"), blobs)
        except wire.WireError:
            values = {}
        kinds = reply.get("kinds")
        kinds = kinds if isinstance(kinds, dict) else {}
        for n in names:
            kind = kinds.get(n, "missing")
            if kind == "callable":
                self.ns[n] = AnswerProxy(self, n)
            elif kind == "value" and isinstance(values, dict) and n in values:
                self.ns[n] = values[n]
            else:
                self.ns.pop(n, None)

    # ----------------------------------------------------------------- cells
    def run_student_cell(self, source: str) -> tuple[str | None, int]:
        reply, _ = self._request({"op": "cell", "source": source})
        error = reply.get("error")
        printed = reply.get("printed", 0)
        printed = printed if type(printed) is int and printed >= 0 else 0
        return (clean_text(error) if error else None), printed

    def run_judge_cell(self, source: str, label: str) -> str | None:
        self.deadline = time.monotonic() + self.cell_timeout  # its calls into the student too
        self.returned = {}
        try:
            code = compile(source, f"<{label}>", "exec")
            exec(code, self.ns)  # noqa: S102 - the course's own set-up and test code
            return None
        except BaseException as exc:  # noqa: BLE001 - the failing test's reason
            reason = describe(exc, self.memory_mb, self.cell_timeout, self.returned)
            what, hint = _expectation(exc, source, label)
            if what:  # the answer raised inside a check: name the case and give its hint
                reason = clean_text(f"{what}: {reason}" + (f"; hint: {hint}" if hint else ""))
            return reason

    def run(self) -> None:
        for index, (source, gid, kind) in enumerate(self.job["cells"]):
            error, printed = None, 0
            try:
                if kind == "setup":  # in both processes, each with the cell's time
                    error = self.run_judge_cell(source, gid or "setup")
                self.deadline = time.monotonic() + self.cell_timeout
                if kind in ("setup", "answer", "added") and error is None:
                    error, printed = self.run_student_cell(source)
                elif kind == "test":  # here, with the answers' names bound to the student's
                    self.refresh_names()
                    _reseed(gid or "test")
                    error = self.run_judge_cell(source, gid or "test")
            except StudentGone as exc:
                error = str(exc)
            self.deadline = None
            record = {"index": index, "grade_id": gid, "kind": kind, "ok": error is None}
            self.report({**record, "error": error, "printed": printed})
        self.finish()

    def finish(self) -> None:
        if not self.gone and self.channel is not None:
            try:
                self.channel.sock.settimeout(1.0)
                wire.send(self.channel.sock, {"op": "bye"})
            except OSError:
                pass
        self.kill()
        for pid in (self.student_pid, self.gate_pid):
            if pid:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
        sandbox.kill_descendants(os.getpid())


def _kinds(args, kwargs) -> str:
    """The kinds of a call's arguments (``tensor [3, 8] float32``, ``int``), not their values."""
    import torch

    def kind(x) -> str:
        if isinstance(x, torch.Tensor):
            return f"tensor {list(x.shape)} {str(x.dtype).removeprefix('torch.')}"
        return "function" if callable(x) else type(x).__name__

    return ", ".join([kind(a) for a in args] + [f"{k}={kind(v)}" for k, v in kwargs.items()])


_CHECKS = ("expect_tensor", "expect_number", "expect_raises")


def _expectation(exc: BaseException, source: str, label: str) -> tuple[str, str]:
    """``(what, hint)`` of the ``expect_*`` check an answer's exception escaped from (both
    ``""`` if none), evaluated in the test's frame: the case as the test names it."""
    if not getattr(exc, "pecourse_answer", None):
        return "", ""
    tb, frame, line = exc.__traceback__, None, 0
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == f"<{label}>":
            frame, line = tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next
    try:
        calls = [
            n
            for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Call)
            and getattr(n.func, "id", None) in _CHECKS
            and n.lineno <= line <= n.end_lineno
        ]
    except SyntaxError:
        calls = []
    if frame is None or not calls:
        return "", ""
    call = max(calls, key=lambda n: n.lineno)
    named = {k.arg: k.value for k in call.keywords}
    found = []
    for name, at in (("what", 2), ("hint", 3)):
        node = call.args[at] if len(call.args) > at else named.get(name)
        try:
            code = compile(ast.Expression(node), f"<{label}>", "eval")
            found.append(str(eval(code, frame.f_globals, frame.f_locals)) if node else "")  # noqa: S307
        except BaseException:  # noqa: BLE001 - no case named, the reason stands as it is
            found.append("")
    return found[0], found[1]


def _reseed(grade_id: str) -> None:
    """Seed the judge's random generators from the test cell's id: its inputs are the same
    whatever the notebook, or an earlier part, drew or failed to draw."""
    import random

    import numpy as np
    import torch

    seed = zlib.crc32(grade_id.encode())
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _changed_in_place(name: str, origin, new) -> None:
    """Write into the test's own tensor or array what the answer wrote into its copy."""
    import torch

    target = origin if isinstance(origin, torch.Tensor) else torch.from_numpy(origin)
    target = target.detach()
    if target.is_complex():
        target = torch.view_as_real(target)
    if target.shape != new.shape or target.dtype != new.dtype:
        raise TypeError(f"{name}(...) changed the shape or dtype of an argument in place")
    try:
        target.copy_(new)
    except (RuntimeError, ValueError):  # a read-only array, an expanded view...
        pass


def _to_devnull() -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(null, target)
    os.close(null)


def cgroup_name(judge_pid: int) -> str:
    return f"pecourse-job-{judge_pid}"


def run_job(job_fd: int, level: str) -> None:
    """The judge's whole life (a fresh process forked by the server); never returns.

    ``job_fd`` is the job file, still unread: the student's processes are forked first
    (:meth:`Judge.spawn`), so that they never share memory with a process that read a job."""
    sandbox.protect_from_same_uid()
    cgroup = sandbox.JobCgroup(cgroup_name(os.getpid()))  # the judge and all it forks
    cgroup.enter()
    judge = Judge(level)
    spawn_error = None
    try:
        judge.spawn(keep_closed=(job_fd,))
    except BaseException as exc:  # noqa: BLE001 - reported once the result file is open
        spawn_error = exc
    try:  # over the job's memory, the kernel stops the notebook, not the judge
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("-1000")
    except OSError:
        pass
    with os.fdopen(job_fd, "rb") as f:
        job = json.loads(f.read())
    fd = os.open(job["result"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def report(record: dict) -> None:
        os.write(fd, (json.dumps(record) + "\n").encode())

    sys.stdout = sys.stderr = CappedOutput(int(job["output_cap"]))
    try:
        report({"started": True, "isolation": level})
        if spawn_error is not None:
            raise spawn_error
        judge.configure(job, report)
        # the judge too: a test's callback on a huge input fails here, not the machine
        sandbox.limit_memory(judge.memory_mb + JUDGE_MB)
        # the whole job: the notebook's processes, the judge, the pages they copied
        memory = judge.memory_mb + JUDGE_MB + COPIED_MB
        cgroup.limit(memory, sandbox.NPROC + JUDGE_TASKS, float(job.get("cpus", 1.0)))
        judge.run()
        report({"done": True})
    except BaseException as exc:  # noqa: BLE001 - the judge itself failed: say so
        report({"judge_error": clean_text(f"{type(exc).__name__}: {exc}")})
        judge.kill()
    finally:
        os.close(fd)
        os._exit(0)


# --------------------------------------------------------------------------- the server


def serve(requested: str) -> None:
    """A fork server: preload the heavy imports once, then fork one judge per submission.

    Protocol (lines on stdin/stdout): the server first says ``READY <level> <detail>`` (or
    ``REFUSED <detail>`` when ``requested`` is ``namespaces`` and the machine cannot);
    ``RUN <id> <job.json>`` starts a judge in a new session and answers ``PID <id> <pid>``;
    when it ends the server says ``EXIT <id> <code>``; ``KILL <id>`` kills its process group
    (the sandbox dies with it). EOF on stdin kills what is left and ends the server.

    The server never reads a job: it opens each job file, deletes it and hands the open
    descriptor to a new judge, unread (the module docstring says why). What it holds is
    the preloaded modules, these protocol lines (ids and paths) and its children's pids.
    """
    import select

    for module in PRELOAD:
        try:
            __import__(module)
        except Exception:  # noqa: BLE001 - a module that fails here fails in the notebook too
            pass
    import torch

    torch.set_num_threads(1)
    sandbox.protect_from_same_uid()
    sandbox.become_subreaper()
    cgroups = sandbox.prepare_cgroups()
    if requested == sandbox.NONE:
        level, detail = sandbox.NONE, "isolation switched off (--isolation none)"
    else:
        level, detail = sandbox.probe(sys.argv[3:])
    detail += f"; {cgroups}"
    if level == sandbox.NONE and os.geteuid() == 0:
        detail += (
            "; each job runs as a fresh unprivileged uid"
            if sandbox.others_can_run_python()
            else "; jobs run AS ROOT: this Python installation is not readable by other users"
        )
    say = partial(print, flush=True)
    if requested == sandbox.NAMESPACES and level != sandbox.NAMESPACES:
        say(f"REFUSED {clean_text(detail)}")
        return
    say(f"READY {level} {clean_text(detail)}")
    judges: dict[int, str] = {}  # the judge's pid -> job id
    ended: set[int] = set()  # judges whose job cgroup is still to be removed
    stdin, pending, stopping = sys.stdin.buffer.fileno(), b"", 0.0
    while True:
        ended = {pid for pid in ended if not sandbox.JobCgroup(cgroup_name(pid)).remove()}
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in judges:
                sandbox.kill(pid, group=True)  # anything left in the judge's group
                ended.add(pid)
                say(f"EXIT {judges.pop(pid)} {os.waitstatus_to_exitcode(status)}")
        if stopping and not judges and (not ended or time.monotonic() > stopping + 2.0):
            break
        if stopping or not select.select([stdin], [], [], 0.02)[0]:
            time.sleep(0.02 if stopping else 0)
            continue
        chunk = os.read(stdin, 65536)
        if not chunk:  # the grader is gone or done: kill what is left, then end
            stopping = time.monotonic()
            for pid in judges:
                sandbox.kill(pid, group=True)
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            words = line.decode(errors="replace").split(" ", 2)
            if words[0] == "RUN" and len(words) == 3:
                try:  # opened, never read here; deleted at once: no process can open it again
                    job_fd = os.open(words[2], os.O_RDONLY | os.O_CLOEXEC)
                    os.unlink(words[2])
                except OSError:
                    say(f"EXIT {words[1]} 70")
                    continue
                pid = os.fork()
                if pid == 0:  # the judge of one submission
                    try:
                        os.setsid()
                        sandbox.die_with_parent()
                        _to_devnull()
                        signal.signal(signal.SIGINT, signal.SIG_DFL)
                        run_job(job_fd, level)
                    finally:
                        os._exit(70)
                os.close(job_fd)
                judges[pid] = words[1]
                say(f"PID {words[1]} {pid}")
            elif words[0] == "KILL" and len(words) == 2:
                for pid in [pid for pid, job in judges.items() if job == words[1]]:
                    sandbox.kill(pid, group=True)
    sandbox.kill_descendants(os.getpid())


if __name__ == "__main__":
    if sys.argv[1:2] != ["--serve"] or len(sys.argv) < 3:
        raise SystemExit("usage: python -m pecourse.exercises._runner --serve LEVEL [PROTECTED...]")
    serve(sys.argv[2])
