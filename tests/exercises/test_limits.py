"""The instructor's side does bounded work whatever a submission holds.

The reference-import policy runs in the grader's own process on every answer cell. IPython
re-tokenises a whole cell once per magic it rewrites, so a cell of many magics cost time
quadratic in its length (a 130 KB cell: minutes); the check now rewrites only the lines
that need it, and a cell over ``MAX_CHECKED_CHARS`` is refused without being parsed.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import IPython.core.inputtransformer2 as transformer
import pytest

from pecourse.exercises import _runner, policy, sandbox
from pecourse.exercises.grade import IsolationUnavailable, Limits, grade_class
from pecourse.exercises.notebook import write_notebook
from pecourse.exercises.policy import MAX_CHECKED_CHARS, reference_uses

from .conftest import SLUG, source09
from .helpers import typed


def test_the_policy_check_reads_each_line_a_bounded_number_of_times(monkeypatch):
    lines_read = []
    real = transformer.make_tokens_by_line

    def counting(lines):
        lines_read.append(len(lines))
        return real(lines)

    monkeypatch.setattr(transformer, "make_tokens_by_line", counting)
    cell = "\n".join(["%time x = 1"] * 400 + ["import pecourse.positions"])
    assert reference_uses(cell) == ["pecourse.positions"]
    assert sum(lines_read) <= 4 * cell.count("\n"), sum(lines_read)


def test_a_cell_too_large_to_check_is_refused_unparsed(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("a cell over the limit was parsed")

    monkeypatch.setattr(policy, "ast", SimpleNamespace(parse=never))
    uses = reference_uses("x = 1\n" * (MAX_CHECKED_CHARS // 6 + 1))
    assert len(uses) == 1 and "too large to check" in uses[0], uses


NESTED = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
userns = libc.unshare(0x10000000 | 0x00020000)  # CLONE_NEWUSER | CLONE_NEWNS
mounted = libc.mount(b"none", b"/tmp", b"tmpfs", 0, b"size=4g") if userns == 0 else -1
raise ValueError(f"NESTED userns={userns} mount={mounted}")
"""


def test_no_namespace_and_no_mount_inside_the_job(tmp_path):
    # A nested user namespace gives the notebook every capability over its own mounts: a
    # 4 GiB tmpfs outside the memory limit, a sandbox of its own. The kernel refuses it.
    (tmp_path / "nester").mkdir()
    write_notebook(
        typed(source09(), {"answer_table": NESTED}), tmp_path / "nester" / f"{SLUG}.ipynb"
    )
    try:
        rows = grade_class(tmp_path, exercises=[SLUG], progress=False, isolation="namespaces")
    except IsolationUnavailable as exc:  # pragma: no cover - CI machines are root on Linux
        pytest.skip(f"needs the namespace sandbox: {exc}")
    reason = next(r.reason for r in rows if r.part == "test_table")
    assert "NESTED userns=-1 mount=-1" in reason, reason


HOARD = """
import os, time, torch
children = []
for _ in range(8):
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        block = torch.ones(50_000_000)  # 200 MB, written
        os.write(w, b"1")
        time.sleep(60)
        os._exit(0)
    os.close(w)
    os.read(r, 1)
    children.append(child)
time.sleep(0.5)
alive = sum(os.waitpid(child, os.WNOHANG)[0] == 0 for child in children)
raise ValueError(f"HOARD held {alive} of 8 blocks at once")
"""
MEMFD = """
import os
held = 0
try:
    for _ in range(24):  # each file stops at the 64 MB file-size limit: take many
        fd = os.memfd_create("hoard")
        for _ in range(64):
            os.write(fd, b"x" * 2**20)
            held += 1
except OSError:
    pass
raise ValueError(f"MEMFD held {held} MB")
"""


@pytest.mark.slow  # ~12 s
def test_memory_is_limited_per_job_not_per_process(tmp_path):
    # RLIMIT_AS holds each process to --memory-mb: eight processes held eight times that,
    # and memfd files, which are not mapped, were counted nowhere. The job's cgroup counts
    # everything its processes hold together.
    if os.geteuid() != 0 or not os.path.isdir("/sys/fs/cgroup/memory"):
        pytest.skip("no cgroup v1 memory controller to use here (the limits per process hold)")
    for student, code in (("hoarder", HOARD), ("memfd", MEMFD)):
        (tmp_path / student).mkdir()
        notebook = typed(source09(), {"answer_table": code})
        write_notebook(notebook, tmp_path / student / f"{SLUG}.ipynb")
    limits = Limits(cell_timeout=60.0, wall_clock=120.0, memory_mb=256)
    rows = grade_class(tmp_path, exercises=[SLUG], limits=limits, progress=False)
    reasons = {r.student: r.reason for r in rows if r.part == "test_table"}
    assert "HOARD held 8 of 8" not in reasons["hoarder"], reasons
    assert "HOARD held" in reasons["hoarder"] or "killed" in reasons["hoarder"], reasons
    assert "MEMFD held 1536 MB" not in reasons["memfd"], reasons
    assert not _left_behind()


OPEN_MANY = """
import os
opened = []
try:
    for _ in range(2000):
        opened.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
raise ValueError(f"FILES opened {len(opened)}")
"""
SPIN = """
import resource

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

while cpu() < 3:
    pass
raise ValueError(f"SPIN used {cpu():.2f} s")
"""
TEAM = """
import os, time
for _ in range(2):
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "TOKEN"])
time.sleep(float("TOKEN"))
raise ValueError("TEAM done")
"""


def _grade_one(tmp_path, code: str, limits: Limits) -> str:
    (tmp_path / "student").mkdir()
    notebook = typed(source09(), {"answer_table": code})
    write_notebook(notebook, tmp_path / "student" / f"{SLUG}.ipynb")
    rows = grade_class(tmp_path, exercises=[SLUG], limits=limits, progress=False)
    return next(r.reason for r in rows if r.part == "test_table")


def _job_cgroups_here() -> list[str]:
    return [c for c, _, _ in sandbox._own_cgroups(sandbox.CGROUP_FS, None)]


def test_open_files_are_limited_per_process(tmp_path):
    # Per process, on every machine; a job holds at most NPROC processes of them.
    reason = _grade_one(tmp_path, OPEN_MANY, Limits(cell_timeout=20.0, wall_clock=60.0))
    opened = int(reason.split("FILES opened ")[1].split()[0])
    assert opened < sandbox.OPEN_FILES, reason


@pytest.mark.slow  # 11 s alone: the notebook sleeps 6 s in its cgroups, then is graded
def test_the_job_is_one_cgroup_of_memory_processes_and_cpu(tmp_path):
    # The kernel enforces a cgroup's limits; this checks that the whole job, the judge and
    # every process the notebook forks, sits in one cgroup of each controller, limited.
    # Other graders may run on this machine: the job's cgroup is the one holding the two
    # `sleep TOKEN` processes the notebook started.
    if os.geteuid() != 0 or not _job_cgroups_here():
        pytest.skip("no cgroup to use here (the limits per process hold)")
    token = f"6.{uuid.uuid4().int % 10**9}"
    limits = Limits(cell_timeout=30.0, wall_clock=90.0, memory_mb=300, cpus=0.5)
    code = TEAM.replace("TOKEN", token)
    grading = threading.Thread(target=_grade_one, args=(tmp_path, code, limits))
    grading.start()
    seen: dict[str, tuple[str, str]] = {}
    knobs = {"memory": "memory.limit_in_bytes", "pids": "pids.max", "cpu": "cpu.cfs_quota_us"}
    while grading.is_alive() and len(seen) < len(knobs):
        for controller, job in _job_folders():
            try:
                tasks = (Path(job) / "cgroup.procs").read_text().split()
                ours = sum(token in _cmdline(pid) for pid in tasks) == 2
                limit = (Path(job) / knobs[controller]).read_text().strip()
            except OSError:  # another grader's job, ended meanwhile
                continue
            if ours:
                seen[controller] = (limit, job)
        time.sleep(0.2)
    grading.join()
    memory = (300 + _runner.JUDGE_MB + _runner.COPIED_MB) * 2**20
    assert {c: limit for c, (limit, _) in seen.items()} == {
        "memory": str(memory),
        "pids": str(sandbox.NPROC + _runner.JUDGE_TASKS),
        "cpu": "50000",
    }, seen
    assert not [job for _, job in seen.values() if os.path.exists(job)]  # removed at the end


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def _job_folders() -> list[tuple[str, str]]:
    """``(controller, folder)`` of every job cgroup that exists now, any grader's."""
    return [
        (controller, os.path.join(base, name))
        for controller, _, base in sandbox._own_cgroups(sandbox.CGROUP_FS, None)
        for name in os.listdir(base)
        if name.startswith("pecourse-job-")
    ]


def _left_behind(wait: float = 5.0) -> list[str]:
    """Job cgroups that stay empty: a grader removes its own as soon as they empty (the job
    cgroups of other graders running on this machine hold processes)."""
    end = time.monotonic() + wait
    while True:
        empty = []
        for _, job in _job_folders():
            try:
                if not (Path(job) / "cgroup.procs").read_text().split():
                    empty.append(job)
            except OSError:
                pass
        if not empty or time.monotonic() > end:
            return empty
        time.sleep(0.1)


def test_without_cgroups_the_limits_per_process_hold(tmp_path, monkeypatch):
    # The statement of Limits: where no cgroup can be made, each process is held to
    # cpus * wall_clock CPU seconds (here 1 s), memory_mb and OPEN_FILES, NPROC of them.
    monkeypatch.setenv("PECOURSE_CGROUP_FS", str(tmp_path / "no-cgroups"))
    limits = Limits(cell_timeout=60.0, wall_clock=60.0, cpus=1 / 60)
    reason = _grade_one(tmp_path, SPIN, limits)
    assert "SPIN used" not in reason, reason
    assert "killed by signal 9" in reason and "CPU-time" in reason, reason  # at 1 s of CPU


def test_job_cgroups_on_cgroup_v2(tmp_path, monkeypatch):
    # This machine has cgroup v1 controllers: v2 is tried on a stand-in file system, whose
    # mkdir makes a cgroup's files as the kernel does.
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    own = tmp_path / "grading"
    own.mkdir()
    ours = [os.getpid(), os.getppid()]
    (own / "cgroup.procs").write_text("\n".join(map(str, ours)))
    real_mkdir = os.mkdir

    def kernel_mkdir(path, mode=0o777):
        real_mkdir(path, mode)
        for knob in ("cgroup.procs", "memory.max", "memory.swap.max", "pids.max", "cpu.max"):
            (Path(path) / knob).write_text("")

    monkeypatch.setattr(os, "mkdir", kernel_mkdir)
    said = sandbox.prepare_cgroups(str(tmp_path), "0::/grading\n")
    assert said == "job cgroups: memory (v2), pids (v2), cpu (v2)", said
    assert (own / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    assert (own / sandbox.GRADER_LEAF / "cgroup.procs").read_text() == str(max(ours))
    job = sandbox.JobCgroup("job-7", str(tmp_path), f"0::/grading/{sandbox.GRADER_LEAF}\n")
    assert job.enter() == ["cpu", "memory", "pids"]
    job.limit(300, 80, 0.5)
    values = {k: (own / "job-7" / k).read_text() for k in ("memory.max", "pids.max", "cpu.max")}
    assert values == {"memory.max": str(300 * 2**20), "pids.max": "80", "cpu.max": "50000 100000"}
    assert (own / "job-7" / "cgroup.procs").read_text() == str(os.getpid())
    # a cgroup that holds another process (pid 1 is nobody's ancestor here) is not used
    (own / "cgroup.procs").write_text("1\n")
    said = sandbox.prepare_cgroups(str(tmp_path), "0::/grading\n")
    assert "not used" in said and "per process only" in said, said
