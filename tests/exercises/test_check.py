"""``pecourse check``: a learner runs a notebook and sees each part passed or failed."""

from __future__ import annotations

from pecourse.cli import main as pecourse_main
from pecourse.exercises.notebook import read_notebook, write_notebook

from .helpers import SOURCES, answered
from .wrong_answers import WRONG

SLUG = "09_sinusoidal_positional_encodings"


def test_check_reports_each_part_with_its_hint(tmp_path, capsys):
    source = read_notebook(SOURCES[0].parent / f"{SLUG}.ipynb")
    # Part 1 right, part 2 wrong in a way the visible test sees, part 3 does not parse.
    nb = answered(
        source,
        {
            "answer_shift": "def shift_matrix(delta, dim, base=10000.0):\n"
            "    return torch.eye(dim)",
            "answer_wavelengths": "def wavelengths(dim, base=10000.0):\n    return 2 *",
        },
    )
    path = tmp_path / f"{SLUG}.ipynb"
    write_notebook(nb, path)
    code = pecourse_main(["check", str(path)])
    out = capsys.readouterr().out
    assert code == 1
    assert "[PASS] test_table (2 points)" in out
    assert "[FAIL] test_shift (2 points)" in out
    assert "M(3) @ PE(t) should equal PE(t + 3)" in out  # the hint from the assertion
    assert "[FAIL] test_wavelengths" in out and "NameError" in out
    assert "answer cell answer_wavelengths failed earlier: SyntaxError" in out
    assert "1/3 parts passed, 2/6 points" in out


def test_grade_a_single_notebook(tmp_path, capsys):
    """``pecourse grade NOTEBOOK``: one learner, one exercise, graded like a class of one."""
    source = read_notebook(SOURCES[0].parent / f"{SLUG}.ipynb")
    path = tmp_path / f"{SLUG}.ipynb"
    write_notebook(answered(source, WRONG[SLUG][0]), path)
    out = tmp_path / "one.csv"
    assert pecourse_main(["grade", str(path), "--out", str(out), "--quiet"]) == 0
    lines = out.read_text().splitlines()
    assert lines[0] == "student,exercise,part,points,max_points,reason"
    assert [line.split(",")[2:5] for line in lines[1:]] == [
        ["test_table", "2", "2"],
        ["test_shift", "2", "2"],
        ["test_wavelengths", "0", "2"],
    ]
    assert "1 student(s), 1 exercise(s)" in capsys.readouterr().out
