"""Where namespaces are refused: the fallback still grades, the same way, and says so."""

from __future__ import annotations

import shutil

from pecourse.exercises.grade import NOT_ISOLATED, grade_class
from pecourse.exercises.notebook import write_notebook
from pecourse.exercises.sandbox import UID_BASE

from .attacks import MARKER
from .conftest import HOSTILE_LIMITS, SLUG, source09
from .helpers import processes_matching, typed


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
    assert processes_matching(MARKER, uid_from=UID_BASE) == []
