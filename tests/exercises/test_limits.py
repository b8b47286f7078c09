"""The instructor's side does bounded work whatever a submission holds.

The reference-import policy runs in the grader's own process on every answer cell. IPython
re-tokenises a whole cell once per magic it rewrites, so a cell of many magics cost time
quadratic in its length (a 130 KB cell: minutes); the check now rewrites only the lines
that need it, and a cell over ``MAX_CHECKED_CHARS`` is refused without being parsed.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import IPython.core.inputtransformer2 as transformer
import pytest

from pecourse.exercises import policy
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
    assert not [p for p in os.listdir(_memory_cgroup()) if p.startswith("pecourse-job-")]


def _memory_cgroup() -> str:
    with open("/proc/self/cgroup") as f:
        own = [line.split(":", 2)[2].strip() for line in f if line.split(":")[1] == "memory"]
    return "/sys/fs/cgroup/memory" + own[0]
