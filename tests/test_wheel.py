"""The course as a wheel: built from the checkout's tracked files without the network, it holds
every file the package loads and the chapters and exercises, and from the unpacked wheel,
outside any checkout, a learner's commands work (`pecourse start`, the cards, the shipped
checkpoints and recordings, the C kernel's source) and the commands that need the course's
folders say so."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pecourse import course
from pecourse.flashcards.deck import CONCEPTS, concept_file

ROOT = Path(__file__).resolve().parent.parent  # the checkout these tests belong to
# The checkout's folders the wheel carries, and where (pyproject.toml's package-dir).
COURSE_FILES = {folder: f"pecourse/course_files/{folder}" for folder in course.LEARNER_FOLDERS}


def _tracked(*paths: str) -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [p for p in out.split("\0") if p and (ROOT / p).is_file()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """``pip wheel`` over a copy of the tracked package files (the checkout is shared: its
    build/ and egg-info are left alone), with no index and no build isolation."""
    source = tmp_path_factory.mktemp("source")
    for path in _tracked("pecourse", "pyproject.toml", "README.md", *COURSE_FILES):
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, source / path)
    out = tmp_path_factory.mktemp("wheel")
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "-w", str(out)]
        + ["--no-deps", "--no-build-isolation", "-q"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (whl,) = out.glob("pecourse-*.whl")
    return whl


def _named_by_the_code() -> set[str]:
    """The package data the code opens by name: each concept's cards, the retired ids and the
    C kernel's source. The recordings and checkpoints are read by listing their folders, so
    for them the wheel must hold every tracked file (below)."""
    files = {f"pecourse/cards/{concept_file(n)}" for n in CONCEPTS}
    return files | {"pecourse/cards/retired.json", "pecourse/kernels/rope_cpu.c"}


def test_pyproject_lists_every_package_folder():
    """pyproject.toml lists the packages (to map notebooks/ and exercises/ into the wheel): a
    folder of the package left off that list would be left out of the wheel."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {str(Path(p).parent).replace("/", ".") for p in _tracked("pecourse")}
    mapped = {f"pecourse.course_files.{folder}": folder for folder in COURSE_FILES}
    assert set(setuptools["packages"]) == folders | set(mapped)
    assert setuptools["package-dir"] == mapped


@pytest.mark.slow  # building the wheel takes 5-20 s on two busy cores
def test_the_wheel_holds_every_file_the_package_loads(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert not _named_by_the_code() - names, sorted(_named_by_the_code() - names)
    missing = set(_tracked("pecourse")) - names
    assert not missing, sorted(missing)
    # the chapters and exercises, for `pecourse start`
    notebooks = _tracked(*(f"{folder}/*.ipynb" for folder in COURSE_FILES))
    assert len(notebooks) == 1 + 2 * len(course.CONCEPTS)  # 00_start_here, chapters, exercises
    inside = {f"pecourse/course_files/{path}" for path in notebooks}
    assert not inside - names, sorted(inside - names)
    # and nothing a class must not see: no solutions/, no hidden test, no solution region (the
    # grader lets a student's code read the installed package)
    wheel_zip = zipfile.ZipFile(wheel)
    carried = [n for n in names if n.startswith("pecourse/course_files/")]
    assert sorted(carried) == sorted(inside) and not [n for n in names if "solutions" in n]
    for name in carried:
        text = wheel_zip.read(name).decode()
        assert "BEGIN HIDDEN TESTS" not in text and "BEGIN SOLUTION" not in text, name
    for folder, kind in (("results", ".json"), ("checkpoints", ".safetensors")):
        assert any(n.startswith(f"pecourse/lab/{folder}/") and n.endswith(kind) for n in names)


_LEARNER = """
import sys
from pathlib import Path

import pecourse
from pecourse.flashcards import load_deck, load_retired
from pecourse.kernels import rope_cpu
from pecourse.lab import model, results

site = Path(sys.argv[1]).resolve()
assert Path(pecourse.__file__).resolve().is_relative_to(site), pecourse.__file__
assert len(load_deck()) == 157 and load_retired()
assert "rope" in rope_cpu._c_source()
names = results.recordings()
assert names and all(results.recorded(n) for n in names)
net = model.load_checkpoint(model.list_checkpoints()[0])
print("ok", len(names), type(net).__name__)
"""


def _unpacked(wheel: Path, tmp_path: Path):
    """The wheel unpacked into ``site``, a learner's home outside any checkout, and a runner of
    Python there with the wheel's copy first on the path (before the checkout's editable
    install)."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    home = tmp_path / "learner"  # no pyproject.toml beside notebooks/ here or above
    home.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "PECOURSE_DATA_DIR": str(home / "data")}

    def run(*args, stdin="", cwd=home, path=(), **more_env):
        extra = {"PYTHONPATH": os.pathsep.join([*map(str, path), str(site)]), **more_env}
        return subprocess.run(
            [sys.executable, *args], cwd=cwd, env={**env, **extra}, input=stdin,
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    return site, home, run


@pytest.mark.slow
def test_a_learner_outside_a_checkout_uses_the_unpacked_wheel(wheel, tmp_path):
    site, home, run = _unpacked(wheel, tmp_path)
    loaded = run("-c", _LEARNER, str(site))
    assert loaded.returncode == 0 and loaded.stdout.startswith("ok"), loaded.stderr[-3000:]

    # the cards: one review through the terminal, saved in the learner's data folder
    review = run("-m", "pecourse.cli", "cards", "review", "--limit", "1", stdin="\n3\n")
    assert review.returncode == 0, review.stderr
    assert "Reviewed 1 card" in review.stdout
    with sqlite3.connect(home / "data" / "flashcards.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM review_log").fetchone() == (1,)

    # the syllabus's reading times come from the chapters the wheel carries
    table = run("-m", "pecourse.course")
    assert table.returncode == 0, table.stderr
    assert table.stdout.strip() == course.syllabus_table(root=ROOT)

    # what needs the course's folders says so, in one line, and writes nothing
    for args in (
        ["-m", "pecourse.cli", "exercises", "build"],
        ["-m", "pecourse.course", "--update-readme"],
    ):
        refused = run(*args)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "run this from the course's folder" in refused.stderr
        assert "Traceback" not in refused.stderr
    assert sorted(p.name for p in home.iterdir()) == ["data"]


# Stands in for JupyterLab: records how `pecourse start` started it.
_FAKE_LAB = """
import json, os, sys
out = os.environ["FAKE_LAB_RECORD"]
with open(out, "w") as f:
    json.dump({"argv": sys.argv[1:], "cwd": os.getcwd(), "path": os.environ["PATH"]}, f)
"""


@pytest.mark.slow
def test_pecourse_start_copies_the_course_from_the_wheel_and_keeps_the_learners_edits(
    wheel, tmp_path
):
    site, home, run = _unpacked(wheel, tmp_path)
    folder = home / "my course"

    first = run("-m", "pecourse.cli", "start", str(folder), "--no-lab")
    assert first.returncode == 0, first.stderr[-3000:]
    for name, inside in COURSE_FILES.items():
        wanted = {p.name: p.read_bytes() for p in (site / inside).glob("*.ipynb")}
        got = {p.name: p.read_bytes() for p in (folder / name).glob("*.ipynb")}
        assert got == wanted and got == {
            Path(p).name: (ROOT / p).read_bytes() for p in _tracked(f"{name}/*.ipynb")
        }
    assert "17 notebooks in notebooks/" in first.stdout and "16 in exercises/" in first.stdout
    assert f"pecourse start {folder}" in first.stdout  # how to open it again

    # chapter 00 asks for reading times by checkout path, from the learner's notebooks/
    minutes = run(
        "-c", "from pecourse import course; print(course.reading_minutes(course.concept(8).notebook))",
        cwd=folder / "notebooks",
    )  # fmt: skip
    assert minutes.stdout.strip() == str(course.reading_minutes("notebooks/08_rope.ipynb", ROOT))

    # the learner answers an exercise; starting again keeps it
    exercise = folder / "exercises" / "08_rope.ipynb"
    answered = json.loads(exercise.read_text())
    answered["cells"].append({"cell_type": "code", "metadata": {}, "source": "# my answer",
                              "outputs": [], "execution_count": None})  # fmt: skip
    exercise.write_text(json.dumps(answered))
    mine = exercise.read_bytes()
    second = run("-m", "pecourse.cli", "start", str(folder), "--no-lab")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "kept 1 notebook(s) you changed" in second.stdout
    assert exercise.read_bytes() == mine

    # a newer course (another wheel): what the learner did not touch is updated, the answered
    # exercise is kept and the new version written beside it
    for rel in ("notebooks/03_alibi.ipynb", "exercises/08_rope.ipynb"):
        packaged = site / "pecourse" / "course_files" / rel
        packaged.write_bytes(packaged.read_bytes().replace(b'"cells": [', b'"cells": [ ', 1))
    third = run("-m", "pecourse.cli", "start", str(folder), "--no-lab")
    assert third.returncode == 0, third.stderr[-3000:]
    assert "updated 1 notebook(s)" in third.stdout
    assert "kept your edited exercises/08_rope.ipynb" in third.stdout
    assert exercise.read_bytes() == mine
    newer = site / "pecourse" / "course_files" / "exercises" / "08_rope.ipynb"
    assert (folder / "exercises" / "08_rope.course.ipynb").read_bytes() == newer.read_bytes()
    alibi = site / "pecourse" / "course_files" / "notebooks" / "03_alibi.ipynb"
    assert (folder / "notebooks" / "03_alibi.ipynb").read_bytes() == alibi.read_bytes()

    # without --no-lab it opens JupyterLab in the folder, this Python's scripts first on PATH
    fake = tmp_path / "fake-lab"
    (fake / "jupyterlab").mkdir(parents=True)
    (fake / "jupyterlab" / "__init__.py").write_text("")
    (fake / "jupyterlab" / "__main__.py").write_text(_FAKE_LAB)
    record = tmp_path / "lab.json"
    opened = run(
        "-m", "pecourse.cli", "start", str(folder), path=[fake], FAKE_LAB_RECORD=str(record)
    )
    assert opened.returncode == 0, opened.stderr[-3000:]
    lab = json.loads(record.read_text())
    assert f"--ServerApp.root_dir={folder}" in lab["argv"]
    assert (folder / lab["argv"][-1]) == folder / "notebooks" / "00_start_here.ipynb"
    assert lab["path"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    assert exercise.read_bytes() == mine
