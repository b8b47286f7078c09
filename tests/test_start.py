"""`pecourse start`: the course's notebooks copied into a learner's folder, never over the
learner's work, and JupyterLab opened there (tests/test_wheel.py runs it from a wheel)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from pecourse import course


def _notebook(text: str) -> bytes:
    return json.dumps({"cells": [{"cell_type": "markdown", "source": text}]}).encode()


@pytest.fixture
def source(tmp_path) -> Path:
    """A course of two chapters and one exercise, laid out as a checkout or the wheel's copy."""
    root = tmp_path / "course"
    for rel in (
        "notebooks/00_start_here.ipynb",
        "notebooks/08_rope.ipynb",
        "exercises/08_rope.ipynb",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(_notebook(f"course text of {rel}"))
    (root / "notebooks" / "README.txt").write_text("not a notebook")
    return root


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and p.name != course.COPIED_FILE
    }


def test_a_first_copy_holds_every_notebook_and_a_second_changes_nothing(source, tmp_path):
    learner = tmp_path / "me" / "pecourse"  # made, parents too
    done = course.copy_course(learner, source)
    want = {rel: data for rel, data in _files(source).items() if rel.endswith(".ipynb")}
    assert _files(learner) == want
    assert sorted(done.added) == sorted(want) and (
        done.count("notebooks"),
        done.count("exercises"),
    ) == (2, 1)
    again = course.copy_course(learner, source)
    assert sorted(again.unchanged) == sorted(want) and not (
        again.added or again.updated or again.kept
    )
    assert _files(learner) == want


def test_the_learners_edit_survives_every_later_copy(source, tmp_path):
    learner = tmp_path / "pecourse"
    course.copy_course(learner, source)
    mine = learner / "exercises" / "08_rope.ipynb"
    mine.write_bytes(_notebook("my answer"))

    # the same course again: the edit is the learner's, nothing new to offer
    done = course.copy_course(learner, source)
    assert done.yours == ["exercises/08_rope.ipynb"] and not done.kept
    assert mine.read_bytes() == _notebook("my answer")
    assert not (learner / "exercises" / "08_rope.course.ipynb").exists()

    # a newer course: untouched notebooks take it, the edited one is kept and the new version
    # goes beside it
    for rel in ("notebooks/08_rope.ipynb", "exercises/08_rope.ipynb"):
        (source / rel).write_bytes(_notebook(f"newer {rel}"))
    done = course.copy_course(learner, source)
    assert done.updated == ["notebooks/08_rope.ipynb"]
    assert (learner / "notebooks" / "08_rope.ipynb").read_bytes() == _notebook(
        "newer notebooks/08_rope.ipynb"
    )
    assert done.kept == [("exercises/08_rope.ipynb", "exercises/08_rope.course.ipynb")]
    assert mine.read_bytes() == _notebook("my answer")
    beside = learner / "exercises" / "08_rope.course.ipynb"
    assert beside.read_bytes() == _notebook("newer exercises/08_rope.ipynb")

    # once offered, the newer version is not offered again; a still newer one replaces the
    # copy beside, unless the learner changed that too
    assert course.copy_course(learner, source).yours == ["exercises/08_rope.ipynb"]
    (source / "exercises" / "08_rope.ipynb").write_bytes(_notebook("newest"))
    assert course.copy_course(learner, source).kept[0][1] == "exercises/08_rope.course.ipynb"
    assert beside.read_bytes() == _notebook("newest")
    beside.write_bytes(_notebook("my notes on the new version"))
    (source / "exercises" / "08_rope.ipynb").write_bytes(_notebook("newer still"))
    assert course.copy_course(learner, source).kept == [("exercises/08_rope.ipynb", None)]
    assert beside.read_bytes() == _notebook("my notes on the new version")
    assert mine.read_bytes() == _notebook("my answer")
    assert not list(learner.rglob("*.partial"))


def test_a_folder_with_notebooks_of_its_own_keeps_them(source, tmp_path):
    """No record of a copy: a differing notebook is the learner's (the course's goes beside)."""
    learner = tmp_path / "pecourse"
    (learner / "notebooks").mkdir(parents=True)
    (learner / "notebooks" / "08_rope.ipynb").write_bytes(_notebook("written before"))
    done = course.copy_course(learner, source)
    assert done.kept == [("notebooks/08_rope.ipynb", "notebooks/08_rope.course.ipynb")]
    assert (learner / "notebooks" / "08_rope.ipynb").read_bytes() == _notebook("written before")
    # a damaged record is no record: still nothing of the learner's is replaced
    (learner / course.COPIED_FILE).write_text("{not json")
    (learner / "notebooks" / "00_start_here.ipynb").write_bytes(_notebook("mine too"))
    done = course.copy_course(learner, source)
    assert (learner / "notebooks" / "00_start_here.ipynb").read_bytes() == _notebook("mine too")
    assert ("notebooks/00_start_here.ipynb", "notebooks/00_start_here.course.ipynb") in done.kept


def test_a_file_where_the_folder_should_be_is_refused(source, tmp_path):
    (tmp_path / "taken").write_text("a file")
    with pytest.raises(ValueError, match="folder must be a folder.*taken"):
        course.copy_course(tmp_path / "taken", source)
    assert (tmp_path / "taken").read_text() == "a file"


def test_reading_times_come_from_the_packaged_copy_outside_a_checkout(
    source, tmp_path, monkeypatch
):
    """Chapter 00 asks for each chapter's reading time by its checkout path
    (notebooks/NN_slug.ipynb) from a learner's folder, which is not a checkout."""
    learner = tmp_path / "pecourse"
    course.copy_course(learner, source)
    monkeypatch.chdir(learner / "notebooks")
    monkeypatch.setattr(course, "packaged_course", lambda: None)
    with pytest.raises(course.NotACheckoutError):
        course.reading_minutes("notebooks/08_rope.ipynb")
    monkeypatch.setattr(course, "packaged_course", lambda: source)
    assert course.course_root() == source
    assert course.reading_minutes("notebooks/08_rope.ipynb") == 1
    assert course.reading_minutes("notebooks/99_missing.ipynb") is None


def test_jupyterlab_opens_in_the_folder_with_this_pythons_scripts_on_path(tmp_path):
    command, env = course.lab_command(tmp_path)
    assert command[:3] == [sys.executable, "-m", "jupyterlab"]
    assert f"--ServerApp.root_dir={tmp_path}" in command
    assert (tmp_path / command[-1]).as_posix().endswith("/notebooks/00_start_here.ipynb")
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    if os.name == "posix":
        assert ("--allow-root" in command) == (os.geteuid() == 0)


def test_the_command_refuses_a_file_in_one_line(tmp_path, capsys):
    from pecourse.cli import main

    (tmp_path / "taken").write_text("a file")
    assert main(["start", str(tmp_path / "taken"), "--no-lab"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pecourse start: folder must be a folder") and "Traceback" not in err
