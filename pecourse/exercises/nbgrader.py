"""The whole course as an nbgrader course directory (``pecourse exercises nbgrader DIR``).

One assignment per exercise, named by its slug (``source/08_rope/08_rope.ipynb``; nbgrader
adds each to its database on ``nbgrader generate_assignment "*"``), so
nbgrader's ``submitted/<student>/<slug>/<slug>.ipynb`` is also a folder ``pecourse grade``
reads as it is. The notebooks are ``solutions/`` unchanged: their cells already carry
nbgrader's metadata (schema 3), solution regions and hidden-test regions.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .notebook import source_notebooks

__all__ = ["write_course", "CONFIG"]

CONFIG = """\
# nbgrader configuration for the pecourse exercises (written by `pecourse exercises nbgrader`).
c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "pecourse"
c.CourseDirectory.root = {root!r}
# Every exercise runs in a few seconds; this bounds an endless loop in a submission.
c.ExecutePreprocessor.timeout = 120
# Kernel channels that wait in quarter-second slices: a wake-up that pyzmq's asyncio poll
# misses then costs a slice, not the whole timeout (pecourse.notebook_tools.SlicedChannel).
c.ExecutePreprocessor.kernel_manager_class = "pecourse.notebook_tools.SlicedKernelManager"
# nbgrader runs student code as the user who runs it, with no sandbox: grade hostile
# submissions with `pecourse grade SUBMITTED_DIR`, which isolates each one.
"""


def write_course(course_dir: str | Path, source_dir: str | Path | None = None) -> list[Path]:
    """Write ``course_dir/source/<slug>/<slug>.ipynb`` for every exercise and
    ``nbgrader_config.py``; return the notebooks written."""
    course_dir = Path(course_dir).resolve()
    sources = source_notebooks(Path(source_dir) if source_dir is not None else None)
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
