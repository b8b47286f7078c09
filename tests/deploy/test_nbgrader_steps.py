"""``pecourse exercises nbgrader`` prints next steps that run as printed, in a shell whose PATH
does not have the course's environment on it (a fresh terminal on a fresh clone).

Here rather than in tests/exercises, which pytest-xdist runs as one unit (its files share a
graded class): this test shares nothing with them and runs beside them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pecourse.cli import main as pecourse_main
from pecourse.exercises.nbgrader import nbgrader_command
from pecourse.exercises.notebook import grade_id, read_notebook, write_notebook

from ..exercises.helpers import SOLUTIONS_DIR, answered
from ..exercises.wrong_answers import WRONG

SLUG = "09_sinusoidal_positional_encodings"  # three parts, each runs in well under a second


def bare_path() -> str:
    """$PATH without this interpreter's folder: the environment is not activated."""
    here = Path(sys.executable).parent
    keep = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p) != here]
    return os.pathsep.join(keep or ["/usr/bin", "/bin"])


def printed_blocks(out: str) -> tuple[list[str], list[str]]:
    """The indented command lines under "next, in a shell:" and under "then, ...:"."""
    blocks, current = [], None
    for line in out.splitlines():
        if line.startswith("  "):
            current.append(line.strip())
        elif line.startswith(("next, in a shell:", "then, ")):
            current = []
            blocks.append(current)
    assert len(blocks) == 2, out
    return blocks[0], blocks[1]


def test_nbgrader_command_names_this_environment(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    python = bindir / "python"
    python.touch()
    # nbgrader on PATH is another environment's (or missing): the interpreter's -m, quoted
    assert nbgrader_command(str(python), path="") == f"{python} -m nbgrader"
    spaced = tmp_path / "my env" / "python"
    assert nbgrader_command(str(spaced), path="") == f"'{spaced}' -m nbgrader"
    (bindir / "nbgrader").touch(mode=0o755)
    assert nbgrader_command(str(python), path=str(bindir)) == "nbgrader"
    other = tmp_path / "other"
    other.mkdir()
    (other / "nbgrader").touch(mode=0o755)
    assert nbgrader_command(str(python), path=str(other)) == f"{python} -m nbgrader"


@pytest.mark.slow
def test_printed_steps_run_as_printed(tmp_path, capsys, monkeypatch):
    """Slow: nbgrader starts a kernel per submission (about 20 s in all)."""
    pytest.importorskip("nbgrader")
    from nbgrader.api import Gradebook

    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(SOLUTIONS_DIR / f"{SLUG}.ipynb", src)
    course = tmp_path / "course"
    env = {**os.environ, "PATH": bare_path()}
    # a fresh terminal: neither this environment's nbgrader nor its alembic is on PATH
    mine = Path(sys.executable).parent
    for tool in ("nbgrader", "alembic"):
        found = shutil.which(tool, path=env["PATH"])
        assert found is None or Path(found).parent != mine
    monkeypatch.setenv("PATH", env["PATH"])
    assert pecourse_main(["exercises", "nbgrader", str(course), "--source", str(src)]) == 0
    out = capsys.readouterr().out
    before, after = printed_blocks(out)
    assert before[0].startswith("cd ") and "--all" not in out

    def run(lines, cwd):
        script = "set -e\n" + "\n".join(lines)
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-4000:]
        return done.stdout

    run(before, tmp_path)
    released = course / "release" / SLUG / f"{SLUG}.ipynb"
    source_nb = read_notebook(SOLUTIONS_DIR / f"{SLUG}.ipynb")
    replacements, failing = WRONG[SLUG]
    for student, nb in {
        "ada": answered(source_nb),
        "bob": answered(source_nb, replacements),
    }.items():
        target = course / "submitted" / student / SLUG
        target.mkdir(parents=True)
        write_notebook(nb, target / f"{SLUG}.ipynb")
    assert released.exists()
    log = run(after, course)

    # the right answer scores every point; the wrong one loses exactly the part its mistake
    # breaks, which only the hidden tests see: autograde put them back
    points = {
        grade_id(c): c.metadata.nbgrader["points"]
        for c in source_nb.cells
        if c.metadata.get("nbgrader", {}).get("grade")
    }
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {
            student: {
                g.name: g.score for g in gb.find_submission_notebook(SLUG, SLUG, student).grades
            }
            for student in ("ada", "bob")
        }
    assert scores["ada"] == points
    assert scores["bob"] == {k: (0.0 if k in failing else v) for k, v in points.items()}
    for student in ("ada", "bob"):
        assert (course / "feedback" / student / SLUG / f"{SLUG}.html").exists()

    # the checksum warning the printed note explains: once per test cell with hidden tests,
    # per submission, and for no other cell
    hidden = {
        grade_id(c)
        for c in source_nb.cells
        if c.cell_type == "code" and "### BEGIN HIDDEN TESTS" in c.source
    }
    warned = re.findall(r"Attribute 'checksum' for cell (\S+) has changed", log)
    assert hidden and sorted(warned) == sorted([*hidden, *hidden])
    assert "has changed" in out and "hidden tests" in out
    assert json.loads(released.read_text())["cells"]  # the release is a notebook
