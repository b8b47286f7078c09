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


@pytest.mark.parametrize("in_checkout", [True, False])
def test_the_grader_hides_the_checkout_it_imports_pecourse_from(tmp_path, monkeypatch, in_checkout):
    # An editable install: the package's folder is in a checkout, whose solutions/ the sandbox
    # must hide. An installed package (site-packages, no checkout above it): nothing to hide,
    # and site-packages must stay on the server's path. Either way the grading server imports
    # pecourse from the folder this process imports it from.
    from pecourse.exercises import grade

    root = tmp_path / ("course" if in_checkout else "site-packages")
    (root / "pecourse").mkdir(parents=True)
    if in_checkout:
        (root / "pyproject.toml").write_text("")
        (root / "notebooks").mkdir()
    monkeypatch.setattr(grade.resources, "files", lambda name: root / name)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    expected = [str(root.resolve()), str(root.resolve() / "solutions")] if in_checkout else []
    assert grade._protected_defaults() == expected
    assert grade._child_env()["PYTHONPATH"] == str(root)
