"""Where namespaces are refused: the fallback still grades, the same way, and says so."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

from pecourse.exercises.grade import NOT_ISOLATED, grade_class
from pecourse.exercises.notebook import write_notebook

from .attacks import MARKER
from .conftest import HOSTILE_LIMITS, SLUG, source09
from .helpers import left_behind, typed


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
