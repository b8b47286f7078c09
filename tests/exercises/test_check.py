"""``pecourse check`` runs exactly what grading runs, on the visible tests: one verdict."""

from __future__ import annotations

import re

import pytest

from pecourse.cli import main as pecourse_main
from pecourse.exercises.check import check_notebooks, format_report
from pecourse.exercises.notebook import read_notebook, write_notebook

from .conftest import SLUG
from .helpers import SLUGS, SOURCES, answered


@pytest.fixture(scope="module")
def hint_notebook(tmp_path_factory):
    """Part 1 right, part 2 wrong in a way the visible test sees, part 3 does not parse."""
    source = read_notebook(SOURCES[0].parent / f"{SLUG}.ipynb")
    nb = answered(
        source,
        {
            "answer_shift": "def shift_matrix(delta, dim, base=10000.0):\n    return torch.eye(dim)",
            "answer_wavelengths": "def wavelengths(dim, base=10000.0):\n    return 2 *",
        },
    )
    path = tmp_path_factory.mktemp("hint") / f"{SLUG}.ipynb"
    write_notebook(nb, path)
    return path


@pytest.fixture(scope="module")
def checked(class_dir, hostile, hint_notebook):
    """One check run (one grading server) over every notebook the tests below look at."""
    paths = [class_dir / "cyd" / f"{slug}.ipynb" for slug in SLUGS]
    paths += [
        hostile.root / s / f"{SLUG}.ipynb"
        for s in ("added_cell", "duplicated", "atk_reference", "atk_read_solutions")
    ]
    return check_notebooks(paths + [hint_notebook])


def _numbers(text: str) -> str:
    return re.sub(r"-?\d+\.\d+(e-?\d+)?", "<x>", text)


@pytest.mark.slow  # the module's class is graded and checked once: ~40 s
def test_check_agrees_with_grade_on_every_part(checked, class_dir, class_rows, hostile):
    graded = {(r.student, r.exercise, r.part): r for r in class_rows}
    graded.update({(s, SLUG, p): r for (s, p), r in hostile.rows.items()})
    compared = 0
    for path, parts in checked.items():
        path = str(path)
        if "/hint" in path:
            continue
        student = path.split("/")[-2]
        slug = path.split("/")[-1].removesuffix(".ipynb")
        for part in parts:
            row = graded[(student, slug, part.part)]
            if row.points == row.max_points:
                assert part.passed, (student, slug, part.part, part.hint)
            if not part.passed:
                # the same failure, found by the same (visible) assertion
                assert row.points == 0, (student, slug, part.part)
                # (random test data differ: grading also draws for the hidden tests)
                assert _numbers(row.reason.split("; ")[0]) == _numbers(part.hint.split("; ")[0]), (
                    row.reason,
                    part.hint,
                )
            compared += 1
    assert compared >= 50
    # the added cell's helper and the duplicated answer work in both
    assert all(p.passed for p in checked[str(hostile.root / "duplicated" / f"{SLUG}.ipynb")])
    added = {p.part: p.passed for p in checked[str(hostile.root / "added_cell" / f"{SLUG}.ipynb")]}
    assert added["test_table"]


@pytest.mark.slow  # the module's class is graded and checked once: ~40 s
def test_check_applies_the_reference_policy(checked, hostile):
    parts = checked[str(hostile.root / "atk_reference" / f"{SLUG}.ipynb")]
    assert parts[0].hint.startswith("policy: ")


@pytest.mark.slow  # the module's class is graded and checked once: ~40 s
def test_check_sandbox_hides_what_grading_hides(checked, hostile):
    # The attack runs the answers it reads from solutions/: a pass in check would be a 0 in
    # grading. The same sandbox hides solutions/ and the course package in both.
    parts = checked[str(hostile.root / "atk_read_solutions" / f"{SLUG}.ipynb")]
    graded = hostile.rows[("atk_read_solutions", "test_table")]
    assert not parts[0].passed, parts[0]
    assert "No such file or directory" in parts[0].hint and graded.points == 0, parts[0].hint


@pytest.mark.slow  # the module's class is graded and checked once: ~40 s
def test_check_reports_each_part_with_its_hint(checked, hint_notebook):
    out = format_report(hint_notebook, checked[str(hint_notebook)])
    assert "[PASS] test_table (2 points)" in out
    assert "[FAIL] test_shift (2 points)" in out
    assert "M(3) @ PE(t) should equal PE(t + 3)" in out  # the hint from the assertion
    assert "[FAIL] test_wavelengths" in out and "NameError" in out
    assert "answer cell answer_wavelengths failed earlier: SyntaxError" in out
    assert "1/3 parts passed, 2/6 points" in out


def test_check_of_a_missing_file(capsys, tmp_path):
    assert pecourse_main(["check", str(tmp_path / "nope.ipynb")]) == 2
    assert "no such notebook" in capsys.readouterr().err
