"""The namespace sandbox itself: what a student's process can see."""

from __future__ import annotations

import os
import tempfile

import pytest

from pecourse.exercises import sandbox


def test_a_course_under_tmp_stays_visible_inside_the_private_tmp():
    # The sandbox gives the student a private /tmp. A course, or its virtual environment,
    # that lives under /tmp (a CI clone, say) must still be bound inside it, not hidden
    # beneath it: otherwise every lazy import in the student's process fails.
    if sandbox.probe([])[0] != sandbox.NAMESPACES:
        pytest.skip("no namespace sandbox on this machine (the fallback has no private /tmp)")
    folder = tempfile.mkdtemp(prefix="course-under-tmp-", dir="/tmp")
    os.chmod(folder, 0o755)
    path = os.path.join(folder, "module.py")
    with open(path, "w") as f:
        f.write("here = True\n")
    os.chmod(path, 0o644)

    def readable():
        with open(path) as f:
            assert f.read() == "here = True\n"
        assert not os.path.exists("/tmp/some-host-file-that-is-not-bound")

    level, detail = sandbox.probe([], allow_paths=[folder], check=readable)
    assert level == sandbox.NAMESPACES, detail
