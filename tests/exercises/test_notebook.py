"""The notebook format: stubbing answers, hiding tests, rebuilding what gets graded."""

from __future__ import annotations

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from pecourse.exercises.grade import _dependency_notes
from pecourse.exercises.notebook import (
    assemble_graded,
    build_student_notebook,
    parts,
    strip_hidden_tests,
    strip_solutions,
)
from pecourse.exercises.policy import reference_uses


def meta(gid, *, grade=False, solution=False, locked=False, points=None):
    m = {
        "grade": grade,
        "grade_id": gid,
        "locked": locked,
        "solution": solution,
        "schema_version": 3,
        "task": False,
    }
    if points is not None:
        m["points"] = points
    return {"nbgrader": m}


def source_nb():
    return new_notebook(
        cells=[
            new_markdown_cell("# Title"),
            new_code_cell("import math", metadata=meta("setup", locked=True)),
            new_code_cell(
                'def f(x):\n    """Doc."""\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION',
                metadata=meta("answer_f", solution=True),
            ),
            new_code_cell(
                "assert f(1) == 2, 'hint'\n### BEGIN HIDDEN TESTS\nassert f(5) == 10\n### END HIDDEN TESTS",
                metadata=meta("test_f", grade=True, locked=True, points=3),
            ),
        ]
    )


def test_strip_solutions_keeps_the_signature_and_indents_the_stub():
    stub = strip_solutions(source_nb().cells[2].source)
    assert (
        stub == 'def f(x):\n    """Doc."""\n    # YOUR CODE HERE\n    raise NotImplementedError()'
    )


def test_strip_hidden_tests():
    assert strip_hidden_tests(source_nb().cells[3].source) == "assert f(1) == 2, 'hint'"


@pytest.mark.parametrize(
    "source",
    [
        "### BEGIN SOLUTION\nx = 1",
        "x = 1\n### END SOLUTION",
        "### BEGIN SOLUTION\n### BEGIN SOLUTION",
    ],
)
def test_unbalanced_markers_are_refused(source):
    with pytest.raises(ValueError):
        strip_solutions(source)


def test_student_notebook():
    nb = build_student_notebook(source_nb())
    assert "return 2 * x" not in nb.cells[2].source
    assert "f(5)" not in nb.cells[3].source
    assert nb.cells[1].source == "import math"
    nbformat.validate(nb)


def test_duplicate_grade_ids_are_refused():
    nb = source_nb()
    nb.cells[1].metadata = meta("answer_f", locked=True)
    with pytest.raises(ValueError, match="used twice"):
        build_student_notebook(nb)


def test_parts():
    assert [(p.grade_id, p.points) for p in parts(source_nb())] == [("test_f", 3.0)]


def test_assemble_takes_answers_from_the_student_and_everything_else_from_the_source():
    student = build_student_notebook(source_nb())
    student.cells[1].source = "import math\nmath.pi = 3"  # a locked cell, edited
    student.cells[2].source = "def f(x):\n    return x + x"
    student.cells[3].source = "pass"  # the test, weakened
    student.cells.insert(2, new_code_cell("import cmath"))  # added cells run where they stand
    student.cells.append(new_code_cell("f = lambda x: 0"))
    graded = assemble_graded(source_nb(), student)
    assert graded.cells == [
        ("import math", "setup", "setup"),
        ("import cmath", None, "added"),
        ("def f(x):\n    return x + x", "answer_f", "answer"),
        (source_nb().cells[3].source, "test_f", "test"),
        ("f = lambda x: 0", None, "added"),
    ]
    assert graded.notes == {"test_f": ["test cell edited by the student; graded with the original"]}
    assert graded.answer_names == ["f"] and graded.owner == {"test_f": "answer_f"}


def test_assemble_grades_the_last_copy_of_a_duplicated_answer():
    student = build_student_notebook(source_nb())
    copy = new_code_cell("def f(x):\n    return 2 * x", metadata=student.cells[2].metadata)
    student.cells.insert(3, copy)
    graded = assemble_graded(source_nb(), student)
    assert [c for c in graded.cells if c[2] == "answer"] == [
        ("def f(x):\n    return 2 * x", "answer_f", "answer")
    ]
    assert graded.notes["test_f"] == [
        "answer cell answer_f appears 2 times; the last copy was graded"
    ]


def test_dependency_notes_name_the_failing_earlier_part():
    nb = source_nb()
    nb.cells.append(
        new_code_cell(
            "def g(x):\n    ### BEGIN SOLUTION\n    return f(x) + 1\n    ### END SOLUTION",
            metadata=meta("answer_g", solution=True),
        )
    )
    nb.cells.append(
        new_code_cell(
            "assert g(1) == 3", metadata=meta("test_g", grade=True, locked=True, points=1)
        )
    )
    graded = assemble_graded(nb, nb)  # the student wrote the solution's g, which calls f
    notes = _dependency_notes(graded, {"test_f", "test_g"})
    assert (
        list(notes) == ["test_g"]
        and "uses f (answer cell answer_f), whose part test_f failed" in notes["test_g"][0]
    )
    assert _dependency_notes(graded, {"test_g"}) == {}


@pytest.mark.parametrize(
    "code,uses",
    [
        ("from pecourse.positions.rope import apply_rope", ["pecourse.positions.rope"]),
        ("import pecourse.positions as P\nP.x", ["pecourse.positions"]),
        ("m = __import__('pecourse.positions.alibi')", ["pecourse.positions.alibi"]),
        ("import importlib\nimportlib.import_module('pecourse')", ["pecourse"]),
        ("import sys\nsys.modules['pecourse.positions']", ["pecourse.positions"]),
        ("%matplotlib inline\nimport torch  # pecourse is mentioned only here", []),
        ('def f():\n    """Like pecourse.positions.rope."""\n    return 1', []),
    ],
)
def test_reference_policy_reads_the_code(code, uses):
    assert reference_uses(code) == uses


def test_assemble_notes_missing_and_deleted_cells():
    student = build_student_notebook(source_nb())
    del student.cells[2:4]
    graded = assemble_graded(source_nb(), student)
    assert "missing from the submission" in graded.cells[1][0]
    notes = " ".join(graded.notes["test_f"])
    assert "deleted" in notes and "answer_f" in notes
