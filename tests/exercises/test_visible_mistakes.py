"""The visible tests (what ``pecourse check`` runs) catch the common mistakes each exercise's
hints name, pass right answers written another way, and give no answer away.

The handed-out notebook (built from ``solutions/``, hidden tests removed) is run cell by cell
in one namespace, as a single Jupyter kernel would; a mistake's listed parts must raise. One
end-to-end run through ``pecourse check`` covers the case of issue 28 (a wrong frequency
ladder that got [PASS]).
"""

from __future__ import annotations

import json
import re

import pytest

from pecourse.exercises.check import check_notebook
from pecourse.exercises.notebook import (
    default_exercise_dir,
    grade_id,
    is_test_cell,
    read_notebook,
    write_notebook,
)

from .common_mistakes import _LADDER_HALF, KINDS, MISTAKES, RIGHT
from .helpers import SLUGS, answered, default_source_dir_path


def visible_failures(slug: str, answers: dict[str, str] | None = None) -> dict[str, str]:
    """Run the handed-out notebook with ``answers`` typed in: {failed test cell: error}."""
    nb = answered(read_notebook(default_source_dir_path(slug)), answers)
    namespace = {"__name__": "__main__"}
    failed = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            exec(compile(cell.source, f"<{grade_id(cell)}>", "exec"), namespace)
        except Exception as exc:  # noqa: BLE001 - a failing test cell is what is measured
            if is_test_cell(cell):
                failed[grade_id(cell)] = f"{type(exc).__name__}: {exc}"
    return failed


def is_test_cell_json(cell: dict) -> bool:
    return bool(cell.get("metadata", {}).get("nbgrader", {}).get("grade"))


def test_every_exercise_names_its_common_mistakes():
    assert set(MISTAKES) == set(SLUGS)
    for slug, mistakes in MISTAKES.items():
        assert mistakes, slug
        for kind, answers, parts in mistakes:
            assert kind in KINDS and answers and parts, (slug, kind)


@pytest.mark.parametrize("slug", SLUGS)
def test_right_answers_pass_the_visible_tests(slug):
    assert visible_failures(slug) == {}
    if slug in RIGHT:
        assert visible_failures(slug, RIGHT[slug]) == {}


@pytest.mark.parametrize("slug", SLUGS)
def test_common_mistakes_fail_the_visible_tests(slug):
    for kind, answers, parts in MISTAKES[slug]:
        failed = visible_failures(slug, answers)
        missed = parts - set(failed)
        assert not missed, f"{slug}: a {kind} mistake in {sorted(answers)} passes {sorted(missed)}"


def test_the_failures_say_what_is_wrong():
    # the ladder mistake is named by the assertion, with expected and got
    reason = visible_failures("08_rope", {"answer_half": _LADDER_HALF})["test_half"]
    assert "theta_1" in reason and "expected" in reason and "got" in reason


def test_exercise_08_gives_no_answer_away():
    # The review found working versions of Parts 1 and 2 in Part 3's visible test (and the
    # setup's angle helper), and Part 3's answer in its message.
    nb = json.loads((default_exercise_dir() / "08_rope.ipynb").read_text(encoding="utf-8"))
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    code = ["".join(c["source"]) for c in cells]
    tests = [src for c, src in zip(cells, code) if is_test_cell_json(c)]
    assert len(tests) == 3
    for src in code:
        if "YOUR CODE HERE" in src:
            continue  # an answer cell: the learner's
        assert not re.search(r"^\s*def ", src, re.M), src  # no helper that rotates
        assert "torch.cos(" not in src and "torch.sin(" not in src, src
    permutation = tests[2]
    assert "2i" not in permutation and "2 * i" not in permutation and "p[i" not in permutation


@pytest.mark.slow
def test_pecourse_check_fails_the_wrong_ladder(tmp_path):
    # Slow (about 6 s): the grader's own engine, visible tests only.
    source = read_notebook(default_source_dir_path("08_rope"))
    path = tmp_path / "08_rope.ipynb"
    write_notebook(answered(source, {"answer_half": _LADDER_HALF}), path)
    parts = {r.part: r for r in check_notebook(path)}
    assert not parts["test_half"].passed and "theta_1" in parts["test_half"].hint
    assert parts["test_interleaved"].passed and parts["test_permutation"].passed


@pytest.mark.slow
def test_check_all_runs_the_hidden_tests(tmp_path, capsys):
    # Slow (about 30 s on a busy machine): three check runs. A stratified sample (one position per stratum)
    # passes the visible tests of exercise 13 and fails a hidden one.
    from pecourse.cli import main as pecourse_main

    from .regressions import REGRESSIONS

    slug = "13_position_augmented_training"
    source = read_notebook(default_source_dir_path(slug))
    path = tmp_path / f"{slug}.ipynb"
    write_notebook(answered(source, REGRESSIONS["fay"][slug][0]), path)
    visible = {r.part: r.passed for r in check_notebook(path)}
    assert visible == {"test_layout": True, "test_sample": True, "test_randomized": True}

    assert pecourse_main(["check", "--all", str(path)]) == 1
    out = capsys.readouterr().out
    assert "[PASS] test_layout" in out and "[FAIL] test_randomized" in out
    assert "each of the 6 pairs should appear" in out  # the hidden test's own reason
    assert "2/3 parts passed, 4/6 points (visible and hidden tests, as grading runs them)" in out

    other = tmp_path / "my_answers.ipynb"  # no solutions/my_answers.ipynb to take tests from
    other.write_bytes(path.read_bytes())
    assert pecourse_main(["check", "--all", str(other)]) == 2
    assert "--all runs the hidden tests" in capsys.readouterr().err
