"""Grading at class scale: a simulated class goes through nbgrader's exchange and is graded.

The instructor writes an nbgrader course (`pecourse exercises nbgrader`), generates and
releases the assignments; every simulated student fetches each one through the exchange,
types an answer (right, wrong in a known way, or none) and submits; the instructor collects
(all with nbgrader 0.9's own exchange classes and commands, as on a Hub). Then:

* the whole class is graded once by `pecourse grade --jobs 2` (sandboxed): notebooks per
  minute, and the verdicts checked against the planted answers;
* on a subset, side by side in interleaved rounds: `pecourse grade --jobs 1`, `--jobs 2`
  and `nbgrader autograde` (one Jupyter kernel per notebook, no sandbox), notebooks per
  minute each and the ratios.

    .venv/bin/python benchmarks/grade_class.py                 # 100 students x 4: ~15 min
    .venv/bin/python benchmarks/grade_class.py --quick         # 2 students x 1, smoke test

Writes results/grade_class.json (not with --quick, unless --out says where).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import RESULTS, ROOT, table, write_results

from pecourse.exercises.notebook import read_notebook, write_notebook

sys.path.insert(0, str(ROOT))
from tests.exercises.helpers import answered  # noqa: E402
from tests.exercises.wrong_answers import WRONG  # noqa: E402

COURSE_ID = "pecourse"
EXERCISES = (
    "02_why_attention_needs_positions",
    "03_alibi",
    "08_rope",
    "09_sinusoidal_positional_encodings",
)
KINDS = ("right", "wrong", "blank")  # student i answers every exercise as KINDS[i % 3]
BIN = Path(sys.executable).parent


def nbgrader(*args: str, cwd: Path) -> None:
    """Run an nbgrader command as the printed steps do (the course's nbgrader_config.py)."""
    done = subprocess.run(
        METER.wrap([sys.executable, "-m", "nbgrader", *args]),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{done.stdout[-3000:]}")


def exchange_config(exchange: Path, root: Path):
    from traitlets.config import Config

    c = Config()
    c.Exchange.root = str(exchange)
    c.Exchange.assignment_dir = str(root)
    c.CourseDirectory.course_id = COURSE_ID
    c.CourseDirectory.root = str(root)
    return c


def student_submits(exchange: Path, home: Path, student: str, slug: str, kind: str) -> None:
    """One student fetches ``slug`` from the exchange, answers and submits (nbgrader's classes,
    as the Assignments tab of their server calls them)."""
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default import ExchangeFetchAssignment, ExchangeSubmit

    config = exchange_config(exchange, home)
    for cls in (ExchangeFetchAssignment, ExchangeSubmit):
        coursedir = CourseDirectory(config=config)
        coursedir.assignment_id = slug
        coursedir.student_id = student
        if cls is ExchangeSubmit:
            path = home / slug / f"{slug}.ipynb"
            if kind != "blank":
                source = read_notebook(ROOT / "solutions" / f"{slug}.ipynb")
                write_notebook(answered(source, WRONG[slug][0] if kind == "wrong" else {}), path)
        cls(coursedir=coursedir, authenticator=Authenticator(config=config), config=config).start()


class CpuMeter:
    """CPU seconds of the commands run through :meth:`wrap`, every descendant included: a
    cgroup v1 ``cpuacct`` group of their own where the machine has one and we are root (a
    sandboxed job's processes are reaped inside their own PID namespace, where the rusage
    of this process's children does not reach them); else that rusage (a lower bound)."""

    ROOT = Path("/sys/fs/cgroup/cpuacct")

    def __init__(self):
        self.group = self.ROOT / f"pecourse-bench-{os.getpid()}"
        try:
            self.group.mkdir()
            self.how = "cgroup v1 cpuacct"
        except OSError:
            self.group = None
            self.how = "rusage of waited-for children (a lower bound)"

    def wrap(self, command: list[str]) -> list[str]:
        if self.group is None:
            return command
        tasks = self.group / "tasks"
        return ["sh", "-c", f'echo $$ > {tasks} && exec "$@"', "sh", *command]

    def seconds(self) -> float:
        if self.group is None:
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            return usage.ru_utime + usage.ru_stime
        return int((self.group / "cpuacct.usage").read_text()) / 1e9

    def close(self) -> None:
        if self.group is not None:
            self.group.rmdir()


METER: CpuMeter  # made by main()
CPU: dict[str, list[float]] = {}  # CPU seconds of each timed command, by variant


def children_cpu() -> float:
    return METER.seconds()


def grade(submitted: Path, out: Path, jobs: int, name: str = "") -> float:
    start, cpu = time.monotonic(), children_cpu()
    done = subprocess.run(
        METER.wrap(
            [str(BIN / "pecourse"), "grade", str(submitted), "--out", str(out)]
            + ["--jobs", str(jobs), "--quiet"]
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seconds = time.monotonic() - start
    CPU.setdefault(name or f"grade_j{jobs}", []).append(children_cpu() - cpu)
    if done.returncode:
        raise RuntimeError(f"pecourse grade failed:\n{done.stdout[-3000:]}")
    return seconds


def autograde(course: Path, gradebook: Path) -> float:
    """``nbgrader autograde`` from the gradebook ``generate_assignment`` wrote (every round
    starts from it)."""
    shutil.copy(gradebook, course / "gradebook.db")
    start, cpu = time.monotonic(), children_cpu()
    nbgrader("autograde", "*", "--create", "--force", cwd=course)
    CPU.setdefault("nbgrader", []).append(children_cpu() - cpu)
    return time.monotonic() - start


def expected_points(slugs) -> dict[str, dict[str, float]]:
    """``{kind: {exercise: points}}`` the planted answers must score."""
    out = {kind: {} for kind in KINDS}
    for slug in slugs:
        nb = read_notebook(ROOT / "solutions" / f"{slug}.ipynb")
        points = {
            c.metadata.nbgrader["grade_id"]: c.metadata.nbgrader["points"]
            for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade")
        }
        out["right"][slug] = sum(points.values())
        out["wrong"][slug] = sum(v for k, v in points.items() if k not in WRONG[slug][1])
        out["blank"][slug] = 0.0
    return out


def pecourse_points(csv_path: Path) -> dict[tuple[str, str], float]:
    import csv

    got: dict[tuple[str, str], float] = {}
    with csv_path.open(newline="") as f:
        for r in csv.DictReader(f):
            key = (r["student"], r["exercise"])
            got[key] = got.get(key, 0.0) + float(r["points"])
    return got


def nbgrader_points(course: Path, students: list[str], slugs) -> dict[tuple[str, str], float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", COURSE_ID) as gb:
        return {(s, slug): gb.find_submission(slug, s).score for s in students for slug in slugs}


def check_points(got: dict, students: list[str], slugs) -> None:
    want = expected_points(slugs)
    wrong = [
        (s, slug, got.get((s, slug)), want[KINDS[i % len(KINDS)]][slug])
        for i, s in enumerate(students)
        for slug in slugs
        if got.get((s, slug)) != want[KINDS[i % len(KINDS)]][slug]
    ]
    if wrong:
        raise AssertionError(f"verdicts differ from the planted answers: {wrong[:5]}")


def run(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--subset", type=int, default=6, help="students in the side-by-side")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved side-by-side rounds")
    parser.add_argument("--quick", action="store_true", help="2 students, 1 exercise")
    parser.add_argument("--out", type=Path, default=None, help="results folder")
    args = parser.parse_args(argv)
    slugs = EXERCISES[:1] if args.quick else EXERCISES
    n = 2 if args.quick else args.students
    subset = min(n, 2 if args.quick else args.subset)
    if n < 1 or subset < 1 or args.rounds < 1:
        parser.error("--students, --subset and --rounds must be at least 1")
    students = [f"s{i:04d}" for i in range(n)]
    load_before = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="pecourse-class-") as tmp:
        tmp = Path(tmp)
        src, course, exchange = tmp / "src", tmp / "course", tmp / "exchange"
        src.mkdir()
        exchange.mkdir()
        exchange.chmod(0o777)
        for slug in slugs:
            shutil.copy(ROOT / "solutions" / f"{slug}.ipynb", src)
        subprocess.run(
            [str(BIN / "pecourse"), "exercises", "nbgrader", str(course), "--source", str(src)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        with (course / "nbgrader_config.py").open("a") as f:
            f.write(f"c.Exchange.root = {str(exchange)!r}\n")
        t0 = time.monotonic()
        nbgrader("generate_assignment", "*", cwd=course)
        for slug in slugs:
            nbgrader("release_assignment", slug, cwd=course)
        t_release = time.monotonic() - t0

        t0 = time.monotonic()
        for i, student in enumerate(students):
            home = tmp / "home" / student
            home.mkdir(parents=True)
            for slug in slugs:
                student_submits(exchange, home, student, slug, KINDS[i % len(KINDS)])
        t_submit = time.monotonic() - t0
        print(f"{n} students fetched and submitted {n * len(slugs)} notebooks: {t_submit:.1f} s")

        t0 = time.monotonic()
        for slug in slugs:
            nbgrader("collect", slug, cwd=course)
        t_collect = time.monotonic() - t0
        notebooks = sorted((course / "submitted").glob("*/*/*.ipynb"))
        assert len(notebooks) == n * len(slugs), f"collected {len(notebooks)} notebooks"

        t_whole = grade(course / "submitted", tmp / "whole.csv", jobs=2, name="whole")
        check_points(pecourse_points(tmp / "whole.csv"), students, slugs)
        per_min = len(notebooks) / t_whole * 60
        print(f"pecourse grade --jobs 2, whole class: {len(notebooks)} notebooks {t_whole:.1f} s")

        # the side by side: a course of the first `subset` students, graded three ways per round
        small = tmp / "small"
        small.mkdir()
        shutil.copy(course / "nbgrader_config.py", small)
        (small / "nbgrader_config.py").write_text(
            (small / "nbgrader_config.py").read_text().replace(str(course), str(small))
        )
        for folder in ("source", "release"):
            shutil.copytree(course / folder, small / folder)
        for student in students[:subset]:
            shutil.copytree(course / "submitted" / student, small / "submitted" / student)
        k = subset * len(slugs)
        times: dict[str, list[float]] = {"grade_j1": [], "grade_j2": [], "nbgrader": []}
        for _ in range(args.rounds):
            times["grade_j1"].append(grade(small / "submitted", tmp / "j1.csv", jobs=1))
            times["grade_j2"].append(grade(small / "submitted", tmp / "j2.csv", jobs=2))
            times["nbgrader"].append(autograde(small, course / "gradebook.db"))
        for name in ("j1", "j2"):
            check_points(pecourse_points(tmp / f"{name}.csv"), students[:subset], slugs)
        check_points(nbgrader_points(small, students[:subset], slugs), students[:subset], slugs)

    def median(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2]

    side = [
        {
            "variant": name,
            "seconds": median(ts),
            "per_minute": k / median(ts) * 60,
            "vs_nbgrader": median(times["nbgrader"]) / median(ts),
            "cpu_per_notebook": median(CPU[name]) / k,
        }
        for name, ts in times.items()
    ]
    print()
    print(
        f"Whole class: {n} students x {len(slugs)} exercises = {n * len(slugs)} notebooks; "
        f"release {t_release:.1f} s, fetch+submit {t_submit:.1f} s "
        f"({n * len(slugs) / t_submit * 60:.0f}/min), collect {t_collect:.1f} s, "
        f"pecourse grade --jobs 2 {t_whole:.1f} s = {per_min:.1f} notebooks/min, "
        f"{CPU['whole'][0] / (n * len(slugs)):.2f} CPU s a notebook; load average "
        f"{load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print(f"\nSide by side on {subset} students ({k} notebooks), {args.rounds} round(s), medians:")
    print(
        table(
            side,
            [
                ("variant", "variant", ""),
                ("seconds", "s", ".1f"),
                ("per_minute", "notebooks/min", ".1f"),
                ("vs_nbgrader", "x nbgrader", ".2f"),
                ("cpu_per_notebook", "CPU s/notebook", ".2f"),
            ],
        )
    )
    payload = {
        "exercises": list(slugs),
        "students": n,
        "notebooks": n * len(slugs),
        "answers": "student i answers every exercise " + "/".join(KINDS) + "[i % 3]",
        "exchange_seconds": {"release": t_release, "fetch_submit": t_submit, "collect": t_collect},
        "whole_class": {
            "jobs": 2,
            "seconds": t_whole,
            "notebooks_per_minute": per_min,
            "cpu_seconds": CPU["whole"][0],
            "cpu_seconds_per_notebook": CPU["whole"][0] / (n * len(slugs)),
        },
        "load_average_before": list(load_before),
        "cpu_measured_by": METER.how,
        "side_by_side": {"students": subset, "notebooks": k, "rounds": times, "medians": side},
    }
    if args.out or not args.quick:
        print(f"\nwrote {write_results('grade_class', payload, args.out or RESULTS)}")
    return 0


def main(argv=None) -> int:
    global METER
    METER = CpuMeter()
    try:
        return run(argv)
    finally:
        METER.close()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
