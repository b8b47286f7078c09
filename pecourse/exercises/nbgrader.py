"""The whole course as an nbgrader course directory (``pecourse exercises nbgrader DIR``).

One assignment per exercise, named by its slug (``source/08_rope/08_rope.ipynb``; nbgrader
adds each to its database on ``nbgrader generate_assignment "*"``), so
nbgrader's ``submitted/<student>/<slug>/<slug>.ipynb`` is also a folder ``pecourse grade``
reads as it is. The notebooks are ``solutions/`` unchanged: their cells already carry
nbgrader's metadata (schema 3), solution regions and hidden-test regions.

:func:`next_steps` is what the command prints after writing the course: shell lines that
run as printed, whether or not the instructor's environment is activated.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from .notebook import default_source_dir, source_notebooks

__all__ = ["write_course", "next_steps", "nbgrader_command", "CONFIG", "CHECKSUM_NOTE"]

CONFIG = """\
# nbgrader configuration for the pecourse exercises (written by `pecourse exercises nbgrader`).
import os
import sys

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "pecourse"
c.CourseDirectory.root = {root!r}
# Every exercise runs in a few seconds; this bounds an endless loop in a submission.
c.ExecutePreprocessor.timeout = 120
# Kernel channels that wait in quarter-second slices: a wake-up that pyzmq's asyncio poll
# misses then costs a slice, not the whole timeout (pecourse.notebook_tools.SlicedChannel).
c.ExecutePreprocessor.kernel_manager_class = "pecourse.notebook_tools.SlicedKernelManager"
# nbgrader runs `alembic` by name, from PATH, when it creates gradebook.db
# (nbgrader.api.get_alembic_version): the alembic installed with nbgrader sits beside the
# Python that runs it, which is on PATH only when its environment is activated.
os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
# nbgrader runs student code as the user who runs it, with no sandbox: grade hostile
# submissions with `pecourse grade SUBMITTED_DIR`, which isolates each one.
"""

CHECKSUM_NOTE = (
    "autograde logs \"Attribute 'checksum' for cell test_... has changed!\" for every test cell "
    "that holds hidden tests, in every submission, touched or not: nbgrader stores that "
    "checksum before it removes the hidden tests from the release (nbgrader 0.9.6, issue "
    "jupyter/nbgrader#1961). It then grades with the cell as the source has it, hidden tests "
    "included, which is what grading needs. The same warning for a test cell without hidden "
    "tests means the student edited it; nbgrader grades with the source's tests either way."
)


def write_course(course_dir: str | Path, source_dir: str | Path | None = None) -> list[Path]:
    """Write ``course_dir/source/<slug>/<slug>.ipynb`` for every exercise and
    ``nbgrader_config.py``; return the notebooks written."""
    course_dir = Path(course_dir).resolve()
    sources = source_notebooks(Path(source_dir) if source_dir is not None else default_source_dir())
    if not sources:
        raise ValueError(f"no exercise sources found in {source_dir!r}")
    written = []
    for src in sources:
        target = course_dir / "source" / src.stem / src.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
        written.append(target)
    (course_dir / "nbgrader_config.py").write_text(
        CONFIG.format(root=str(course_dir)), encoding="utf-8"
    )
    return written


def nbgrader_command(python: str | None = None, path: str | None = None) -> str:
    """How a shell reaches this environment's nbgrader: ``nbgrader`` when the one on ``path``
    (default: ``$PATH``) is the script beside ``python`` (default: this interpreter), else
    ``PYTHON -m nbgrader``, which needs no activated environment."""
    python = python or sys.executable
    script = Path(python).parent / "nbgrader"
    found = shutil.which("nbgrader", path=path if path is not None else os.environ.get("PATH"))
    if found and script.exists() and os.path.samefile(found, script):
        return "nbgrader"
    return f"{shlex.quote(python)} -m nbgrader"


def next_steps(course_dir: str | Path, nbgrader: str = "nbgrader") -> tuple[list[str], list[str]]:
    """Shell lines for the instructor: (before submissions, once they are in ``submitted/``).

    The second block runs in the course directory the first one entered."""
    before = [f"cd {shlex.quote(str(Path(course_dir).resolve()))}"]
    before.append(f'{nbgrader} generate_assignment "*"')
    after = [f'{nbgrader} autograde "*"', f'{nbgrader} generate_feedback "*"']
    return before, after
