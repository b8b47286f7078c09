"""A class of 100 graded in one batch: honest, partial and wrong learners among attackers of
every kind the grader has met (``attacks.py``, and the side channel, links, limits, policy
and names of the later attacks).

Every honest student gets the grade they get alone (graded one at a time on a server of
their own), every attacker at most what a blank notebook of the same exercise gets, the
grading processes stay within the memory ``grade.Limits`` states, and nothing is left
running or in a cgroup.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from pecourse.exercises import _runner
from pecourse.exercises.grade import ForkServer, Limits, grade_class, grade_submission
from pecourse.exercises.notebook import read_notebook, write_notebook

from .attacks import WRONG_REST, WRONG_TABLE, attacks
from .conftest import SLUG, source09
from .helpers import SOLUTIONS_DIR, SOURCES, answered, left_behind, typed
from .test_judge_state import ZERO_ANSWERS
from .test_limits import HOARD, MEMFD, NESTED, OPEN_MANY, SPIN, _left_behind
from .wrong_answers import WRONG
from .wrong_answers_more import WRONG_MORE

EX02 = "02_why_attention_needs_positions"
LIMITS = Limits(cell_timeout=4.0, wall_clock=20.0, memory_mb=256)
JOBS = 2
# The grader's process and the server (torch, IPython, matplotlib preloaded)
GRADER_MB = 1500
# Proportional set sizes summed over the grader's processes never pass this
BOUND_MB = GRADER_MB + JOBS * (LIMITS.memory_mb + _runner.JUDGE_MB + _runner.COPIED_MB)


def _honest() -> dict[str, tuple[str, object]]:
    """``{kind: (exercise, notebook)}``: right, blank, partly and plausibly wrong."""
    s09, s02 = source09(), read_notebook(next(p for p in SOURCES if p.stem == EX02))
    return {
        "full": (SLUG, answered(s09)),
        "blank": (SLUG, typed(s09, {})),
        "table_wrong": (SLUG, answered(s09, {"answer_table": WRONG_TABLE})),
        "shift_wrong": (SLUG, answered(s09, {"answer_shift": WRONG_REST["answer_shift"]})),
        "all_wrong": (SLUG, answered(s09, {"answer_table": WRONG_TABLE, **WRONG_REST})),
        "hidden_wrong": (SLUG, answered(s09, WRONG[SLUG][0])),
        "more_wrong": (SLUG, answered(s09, WRONG_MORE[SLUG][0])),
        "full02": (EX02, answered(s02)),
        "blank02": (EX02, typed(s02, {})),
    }


def _attackers(secret: Path) -> dict[str, tuple[str, object]]:
    """``{name: (exercise, notebook, or a path the submission links to)}``."""
    s09, s02 = source09(), read_notebook(next(p for p in SOURCES if p.stem == EX02))
    found = {n: (SLUG, typed(s09, a)) for n, a in attacks(str(SOLUTIONS_DIR), []).items()}
    table = {
        "atk_hoard": HOARD,
        "atk_memfd": MEMFD,
        "atk_nested_namespace": NESTED,
        "atk_open_files": OPEN_MANY,
        "atk_spin": SPIN,
        "atk_policy_bomb": "\n".join(["%time x = 1"] * 400)
        + "\nimport pecourse.positions as P\nsinusoidal_table = P.sinusoidal_table",
        "atk_obfuscated_reference": "import importlib\n"
        "P = importlib.import_module('pec' + 'ourse.positions')\n"
        "sinusoidal_table = P.sinusoidal_table",
    }
    found.update({n: (SLUG, typed(s09, {"answer_table": code})) for n, code in table.items()})
    found["atk_zero_rng"] = (EX02, typed(s02, ZERO_ANSWERS))
    found["\u0430da_0"] = (SLUG, typed(s09, {}))  # Cyrillic a: passes for ada_0
    found["atk_\x1b[2Jescape"] = (SLUG, typed(s09, {}))
    solution = SOLUTIONS_DIR / f"{SLUG}.ipynb"
    found.update({"atk_link_file": (SLUG, solution), "atk_link_secret": (SLUG, secret)})
    return found


def _write(root: Path, student: str, exercise: str, notebook) -> None:
    folder = root / student
    folder.mkdir(exist_ok=True)
    if isinstance(notebook, Path):
        (folder / f"{exercise}.ipynb").symlink_to(notebook)
    else:
        write_notebook(notebook, folder / f"{exercise}.ipynb")


class MemoryWatch(threading.Thread):
    """The largest sum of proportional set sizes over this process and its descendants."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak_mb = 0.0
        self.running = True

    def run(self) -> None:
        while self.running:
            self.peak_mb = max(self.peak_mb, sum(map(_pss_mb, _tree(os.getpid()))))
            time.sleep(0.2)


def _tree(root: int) -> list[int]:
    parents = {}
    for name in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes() if name.isdigit() else b""
        except OSError:
            continue
        if stat:
            parents[int(name)] = int(stat[stat.rfind(b")") + 2 :].split()[1])
    found, todo = [root], [root]
    while todo:
        pid = todo.pop()
        kids = [p for p, parent in parents.items() if parent == pid]
        todo += kids
        found += kids
    return found


def _pss_mb(pid: int) -> float:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0.0
    return next(
        (int(line.split()[1]) / 1024 for line in text.splitlines() if line[:4] == "Pss:"), 0
    )


@pytest.mark.slow
def test_a_class_of_100(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the attackers of this class need the namespace sandbox, as root")
    secret = tmp_path / "shadow"
    secret.write_text("root:SECRET-HASH\n")
    secret.chmod(0o600)
    root = tmp_path / "class"
    root.mkdir()
    honest, attackers = _honest(), _attackers(secret)
    kinds = list(honest)
    students = {}  # honest student -> kind
    for i in range(100 - len(attackers) - 1):  # and atk_link_dir
        students[f"{kinds[i % len(kinds)]}_{i}" if i else "ada_0"] = kinds[i % len(kinds)]
    for student, kind in students.items():
        _write(root, student, *honest[kind])
    for student, (exercise, notebook) in attackers.items():
        _write(root, student, exercise, notebook)
    (root / "atk_link_dir").symlink_to(SOLUTIONS_DIR, target_is_directory=True)

    watch = MemoryWatch()
    watch.start()
    start = time.monotonic()
    with left_behind() as left:  # this grading's processes, not another grader's
        rows = grade_class(root, exercises=[SLUG, EX02], limits=LIMITS, jobs=JOBS, progress=False)
    seconds = time.monotonic() - start
    watch.running = False
    watch.join()

    alone_dir = tmp_path / "alone"
    alone_dir.mkdir()
    alone = {}
    server = ForkServer(alone_dir, "namespaces")
    try:
        for kind, (exercise, notebook) in honest.items():
            path = alone_dir / kind / f"{exercise}.ipynb"
            path.parent.mkdir()
            write_notebook(notebook, path)
            source = read_notebook(next(p for p in SOURCES if p.stem == exercise))
            for r in grade_submission(kind, exercise, source, path, LIMITS, server):
                alone[(kind, exercise, r.part)] = (r.points, r.reason)
    finally:
        server.close()

    points: dict[str, float] = {}
    for r in rows:
        points[f"{r.student} {r.exercise}"] = points.get(f"{r.student} {r.exercise}", 0) + r.points
    blank = {
        e: sum(p for (k, x, _), (p, _) in alone.items() if x == e and k in ("blank", "blank02"))
        for e in (SLUG, EX02)
    }
    for r in rows:
        kind = students.get(r.student)
        if kind is not None and honest[kind][0] == r.exercise:
            reason = r.reason.split("check who this is")[0].removesuffix("; ")  # ada_0's note
            assert (r.points, reason) == alone[(kind, r.exercise, r.part)], r
        elif kind is None and not r.reason.startswith("no submission"):
            total = points[f"{r.student} {r.exercise}"]
            assert total <= blank[r.exercise], (r.student, r.exercise, total, r.reason)
    assert "reads as" in next(r.reason for r in rows if r.student == "ada_0")
    assert watch.peak_mb <= BOUND_MB, (watch.peak_mb, BOUND_MB)
    assert not left and not _left_behind(), left
    print(f"100 students, {len(rows)} rows, {seconds:.0f} s, peak {watch.peak_mb:.0f} MB")
    shutil.rmtree(root)
