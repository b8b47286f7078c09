"""A learner's set-up, ``make lab``'s, in a fresh virtual environment: the course,
JupyterLab, widgets and torch, none of the tools for instructors, the book or the tests; the
README states its size. Asking for an extra later installs it (the stamp records the extras).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from pecourse import course

ROOT = course.checkout()
LEARNER_HAS = ("pecourse", "torch", "jupyterlab", "ipywidgets", "transformers", "nbclient")
LEARNER_LACKS = ("nbgrader", "sphinx", "playwright", "triton", "pytest", "jupyterhub")


def _make(target: str, venv) -> subprocess.CompletedProcess:
    """``make lab`` (or another target that opens JupyterLab) into ``venv``, with JupyterLab
    asked only for its version, so that the set-up runs as the learner's does and then stops."""
    env = dict(os.environ, TORCH_INDEX="default")  # torch as pip is configured: no network here
    env.pop("VIRTUAL_ENV", None)
    env.pop("EXTRAS", None)
    base = getattr(sys, "_base_executable", sys.executable)
    return subprocess.run(
        ["make", target, f"VENV={venv}", f"PYTHON={base}", "LAB_FLAGS=--version"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )


def _distributions(venv) -> set[str]:
    listing = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {d["name"].lower().replace("_", "-") for d in json.loads(listing)}


def _size_bytes(folder) -> int:
    out = subprocess.run(["du", "-sb", str(folder)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def _readme_size() -> float:
    """The learner environment's size the README states, in bytes."""
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    match = re.search(r"learner's environment[^.]*? about ([\d.]+) (MB|GB)", text)
    assert match, "README.md does not state the size of a learner's environment"
    return float(match.group(1)) * {"MB": 1e6, "GB": 1e9}[match.group(2)]


@pytest.mark.slow
def test_a_learners_install_has_the_course_and_none_of_the_tools(tmp_path):
    # Slow (2 minutes with a warm uv cache on a quiet machine, 6 on a loaded one): a fresh
    # environment with torch and JupyterLab, then nbgrader on top.
    if shutil.which("du") is None or shutil.which("make") is None:
        pytest.skip("needs make and du")
    venv = tmp_path / "learner"
    first = _make("lab", venv)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    # progress: each step says what it does, and the end says how big the result is
    steps = [line for line in first.stdout.splitlines() if line.startswith("[set-up]")]
    assert any("learner's install" in line for line in steps), first.stdout
    assert "done in" in steps[-1] and "holds" in steps[-1], steps

    names = _distributions(venv)
    assert set(LEARNER_HAS) <= names, sorted(set(LEARNER_HAS) - names)
    assert not names & set(LEARNER_LACKS), sorted(names & set(LEARNER_LACKS))
    assert (venv / ".pecourse-installed").read_text().strip() == ""
    check = subprocess.run(
        [str(venv / "bin" / "pecourse"), "check", "--help"], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr

    # The README states the size with the CPU build of torch; a machine whose index resolves
    # PyPI's CUDA build (TORCH_INDEX=default here) cannot compare it.
    cuda = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import torch; print(torch.version.cuda or '')"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not cuda:
        size = _size_bytes(venv)
        stated = _readme_size()
        assert 0.75 * stated <= size <= 1.25 * stated, (
            f"a learner's environment holds {size / 1e9:.2f} GB; "
            f"README.md says {stated / 1e9:.2f} GB"
        )

    # nothing to install the second time, well under the time an install takes
    start = time.monotonic()
    again = _make("lab", venv)
    assert again.returncode == 0 and "[set-up]" not in again.stdout, again.stdout + again.stderr
    assert time.monotonic() - start < 10

    # an extra asked for later is installed (make instructor), and the record keeps it
    instructor = _make("instructor", venv)
    assert instructor.returncode == 0, instructor.stdout[-3000:] + instructor.stderr[-3000:]
    assert "nbgrader" in _distributions(venv)
    assert (venv / ".pecourse-installed").read_text().strip() == "instructor"
