"""Feedback that teaches without leaking.

A hidden test's reason says which property failed (shape, dtype, how many values, where)
and on what kind of input, not the expected values: otherwise a lookup table of them
passes after a few resubmissions. When the student's function raises inside a hidden
check, the reason still names the case and its hint.
"""

from __future__ import annotations

import pytest
import torch

from pecourse.exercises.grade import Limits, grade_class
from pecourse.exercises.notebook import read_notebook, write_notebook
from pecourse.exercises.testing import expect_number, expect_tensor

from .helpers import SOURCES, answered

EXPECTED = torch.tensor([[0.1234567, -0.7654321], [0.3141592, 0.2718281]])
EX01 = "01_learned_absolute_positions"
EX08 = "08_rope"


def _failure(check) -> str:
    with pytest.raises(AssertionError) as info:
        check()
    return str(info.value)


@pytest.mark.parametrize(
    "got",
    [torch.zeros(2, 2), EXPECTED + torch.tensor([[0.0, 1e-3], [0.0, 0.0]]), torch.zeros(1, 2)],
)
def test_a_tensor_failure_names_the_property_not_the_expected_values(got):
    message = _failure(lambda: expect_tensor(got, EXPECTED, "f(x [2, 2])", "the hint"))
    for value in EXPECTED.flatten().tolist():
        assert f"{value:.4f}"[:6] not in message, message
    assert message.startswith("f(x [2, 2]): ") and message.endswith("; hint: the hint")
    if got.shape == EXPECTED.shape:
        assert "of 4 values differ" in message and "index" in message, message
    else:
        assert "expected shape (2, 2), got (1, 2)" in message, message


def test_an_integer_tensor_failure_does_not_list_the_expected_ids():
    expected = torch.tensor([0, 1, 2, 8, 9, 17])
    message = _failure(lambda: expect_tensor(torch.arange(6), expected, "ids", "chunks"))
    assert "17" not in message and "[0, 1, 2, 8" not in message, message
    assert "3 of 6 values differ" in message, message


def test_a_number_failure_does_not_give_the_expected_number():
    message = _failure(lambda: expect_number(2.0, 3.14159265, "pi-ish", "hint"))
    assert "3.14" not in message and "got 2.0" in message, message


def test_a_raising_answer_keeps_the_case_and_its_hint(tmp_path):
    source = read_notebook(next(p for p in SOURCES if p.stem == EX01))
    raising = (
        "def rows_with_gradient(max_positions, train_lengths):\n"
        "    if max_positions == 4:\n"
        "        raise IndexError('boom')\n"
        "    return torch.arange(max_positions) < max(train_lengths)"
    )
    (tmp_path / "ann").mkdir()
    write_notebook(answered(source, {"answer_rows": raising}), tmp_path / "ann" / f"{EX01}.ipynb")
    rows = grade_class(tmp_path, exercises=[EX01], limits=Limits(cell_timeout=10.0), progress=False)
    reason = next(r.reason for r in rows if r.part == "test_rows")
    assert "raised IndexError: boom" in reason, reason
    assert "rows_with_gradient(4, [1])" in reason, reason  # the case, as the test names it
    assert "hint: a sequence of length 1 reaches row 0 only" in reason, reason
    assert "rows_with_gradient(int, list)" in reason, reason  # the kinds of the arguments


def test_a_dtype_problem_says_the_dtype_expected_against_the_one_returned(tmp_path):
    # Exercise 08's rope_half must return x's dtype; this one returns float64, and the
    # visible test's torch.allclose(out, expected) raises "Double did not match Float".
    source = read_notebook(next(p for p in SOURCES if p.stem == EX08))
    right = next(
        c.source
        for c in source.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == "answer_half"
    )
    double = right + "\n\n_right = rope_half\nrope_half = lambda *a: _right(*a).double()"
    (tmp_path / "ann").mkdir()
    write_notebook(answered(source, {"answer_half": double}), tmp_path / "ann" / f"{EX08}.ipynb")
    rows = grade_class(tmp_path, exercises=[EX08], limits=Limits(cell_timeout=10.0), progress=False)
    reason = next(r.reason for r in rows if r.part == "test_half")
    assert reason.startswith("dtype problem: expected float32, rope_half returned float64"), reason
    assert "compare in float64" not in reason, reason
