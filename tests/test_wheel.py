"""The course as a wheel: built from the checkout's tracked files without the network, it holds
every file the package loads, and from the unpacked wheel, outside any checkout, a learner's
commands work (the cards, the shipped checkpoints and recordings, the C kernel's source) and
the commands that need the course's folders say so."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pecourse.flashcards.deck import CONCEPTS, concept_file

ROOT = Path(__file__).resolve().parent.parent  # the checkout these tests belong to

# Building the wheel takes 5-20 s on two busy cores.
pytestmark = pytest.mark.slow


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
    for path in _tracked("pecourse", "pyproject.toml", "README.md"):
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


def test_the_wheel_holds_every_file_the_package_loads(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert not _named_by_the_code() - names, sorted(_named_by_the_code() - names)
    missing = set(_tracked("pecourse")) - names
    assert not missing, sorted(missing)
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


def test_a_learner_outside_a_checkout_uses_the_unpacked_wheel(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    home = tmp_path / "learner"  # no pyproject.toml beside notebooks/ here or above
    home.mkdir()
    # the wheel's copy comes first on the path (before the checkout's editable install)
    env = {**os.environ, "PYTHONPATH": str(site), "PECOURSE_DATA_DIR": str(home / "data")}

    def run(*args, stdin=""):
        return subprocess.run(
            [sys.executable, *args], cwd=home, env=env, input=stdin, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip

    loaded = run("-c", _LEARNER, str(site))
    assert loaded.returncode == 0 and loaded.stdout.startswith("ok"), loaded.stderr[-3000:]

    # the cards: one review through the terminal, saved in the learner's data folder
    review = run("-m", "pecourse.cli", "cards", "review", "--limit", "1", stdin="\n3\n")
    assert review.returncode == 0, review.stderr
    assert "Reviewed 1 card" in review.stdout
    with sqlite3.connect(home / "data" / "flashcards.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM review_log").fetchone() == (1,)

    # what needs the course's folders says so, in one line, and writes nothing
    for args in (["-m", "pecourse.cli", "exercises", "build"], ["-m", "pecourse.course"]):
        refused = run(*args)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "run this from the course's folder" in refused.stderr
        assert "Traceback" not in refused.stderr
    assert sorted(p.name for p in home.iterdir()) == ["data"]
