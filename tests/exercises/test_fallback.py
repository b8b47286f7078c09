"""Where namespaces are refused: the fallback still grades, the same way, and says so."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

import pytest

from pecourse.cli import main as pecourse_main
from pecourse.exercises import sandbox
from pecourse.exercises.grade import NOT_ISOLATED, ForkServer, grade_class
from pecourse.exercises.notebook import write_notebook

from .attacks import MARKER
from .conftest import HOSTILE_LIMITS, SLUG, source09
from .helpers import TEST_LIMITS, answered, left_behind, typed


def test_fallback_grades_alike_warns_and_leaves_nothing(hostile, class_rows, tmp_path, caplog):
    root = tmp_path / "class"
    for student in ("ada", "cyd", "atk_reference"):
        shutil.copytree(hostile.root / student, root / student)
    escape = (
        "import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        f"        os.execv('/bin/sleep', ['sleep', {MARKER!r}])\n    os._exit(0)\n"
    )
    (root / "escaper").mkdir()
    write_notebook(typed(source09(), {"answer_table": escape}), root / "escaper" / f"{SLUG}.ipynb")
    with left_behind() as survivors:  # this grading's processes, not another grader's
        rows = grade_class(
            root,
            exercises=[SLUG],
            limits=HOSTILE_LIMITS,
            isolation="none",
            allow_reference=True,  # and the instructor's switch for self-study
            progress=False,
        )
    assert "submissions are NOT isolated" in caplog.text
    assert {r.isolation for r in rows} == {NOT_ISOLATED}
    alone = {(r.student, r.part): r for r in class_rows if r.exercise == SLUG}
    for r in rows:
        if r.student in ("ada", "cyd"):
            expected = alone[(r.student, r.part)]
            assert (r.points, r.reason) == (expected.points, expected.reason), r
    reference = {r.part: r.points for r in rows if r.student == "atk_reference"}
    assert reference == {"test_table": 2.0, "test_shift": 0.0, "test_wavelengths": 0.0}
    # the subreaper caught the setsid + double-fork escape
    assert survivors == []


def test_left_behind_sees_a_survivor_of_its_own_and_no_one_elses():
    # The survivor checks above count only the grading's own processes: an orphan that a
    # double fork inside the block left (re-parented to this process), not a process that
    # another grader on this machine runs.
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        with left_behind(wait=0.5) as left:
            escape = "(sleep 30 & exit 0) & exit 0"  # the shell exits, its child's child stays
            subprocess.run(["sh", "-c", escape], check=True)
        assert len(left) == 1 and "sleep 30" in left[0] and str(other.pid) not in left[0]
        os.kill(int(left[0].split()[0]), signal.SIGKILL)
        with left_behind(wait=0.5) as none_left:
            subprocess.run(["sh", "-c", "exit 0"], check=True)
        assert none_left == []
    finally:
        other.kill()
        other.wait()


def _one_student(tmp_path):
    root = tmp_path / "class"
    (root / "ada").mkdir(parents=True)
    write_notebook(answered(source09()), root / "ada" / f"{SLUG}.ipynb")
    return root


def _as(monkeypatch, euid, *, probe_refuses=True, python_readable=True):
    """The grader runs as ``euid``; the server's probe finds no namespaces (whatever this
    machine allows: its answer is replaced as the server reports it); other uids can or
    cannot read this Python. Returns the list of jobs the server was asked to run."""
    start, run, jobs = ForkServer._start, ForkServer.run, []

    def started(self):
        start(self)
        if probe_refuses:
            self.level, self.detail = "none", "unshare(CLONE_NEWUSER): Permission denied"

    def running(self, job_path, wall_clock):
        jobs.append(job_path)
        return run(self, job_path, wall_clock)

    monkeypatch.setattr(ForkServer, "_start", started)
    monkeypatch.setattr(ForkServer, "run", running)
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    monkeypatch.setattr(sandbox, "others_can_run_python", lambda: python_readable)
    return jobs


@pytest.mark.parametrize("euid, readable", [(1000, True), (0, False)])
def test_auto_refuses_to_run_students_as_the_grader(tmp_path, monkeypatch, capsys, euid, readable):
    # Not root (or root with a Python other uids cannot read) and no namespaces: the only
    # level left would run each notebook as the grader's own uid, able to read solutions/,
    # the other submissions and the gradebook. The default refuses before any notebook runs.
    root, out = _one_student(tmp_path), tmp_path / "grades.csv"
    jobs = _as(monkeypatch, euid, python_readable=readable)
    assert pecourse_main(["grade", str(root), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "isolation 'auto' found no namespaces (unshare(CLONE_NEWUSER)" in err, err
    assert f"as your uid {euid}" in err and "sudo" in err and "--isolation none" in err, err
    assert "kernel.apparmor_restrict_unprivileged_userns=0" in err, err
    assert jobs == [] and not out.exists() and not out.with_suffix(".sqlite").exists()


@pytest.mark.parametrize("euid, isolation", [(0, "auto"), (1000, "none")])
def test_as_root_auto_keeps_the_fallback_and_none_runs_students_as_the_grader(
    tmp_path, monkeypatch, caplog, euid, isolation
):
    # Root with a Python other uids can read: the fallback's fresh uid per job is allowed
    # under auto, with its warning. Not root, an explicit --isolation none still grades
    # (the instructor's informed choice), loudly, every row marked not isolated.
    jobs = _as(monkeypatch, euid, probe_refuses=isolation == "auto")
    rows = grade_class(_one_student(tmp_path), limits=TEST_LIMITS, isolation=isolation)
    assert len(jobs) == 1 and "submissions are NOT isolated" in caplog.text
    assert rows and {r.isolation for r in rows} == {NOT_ISOLATED}
    assert all(r.points == r.max_points for r in rows), rows
