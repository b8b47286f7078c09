"""Nothing of the student's process flows into the judge but the values its functions return.

The judge draws the tests' random inputs. A notebook that sets its own random state (to a
valid Mersenne-Twister state of zeros, so that every draw is 0 and a trivial answer matches
the reference) changes only its own draws: the judge reseeds itself for each test cell and
never takes a random state back. A function that changes its argument in place changes it
in the judge too, as it would in a single Jupyter kernel.
"""

from __future__ import annotations

import pytest

from pecourse.exercises.grade import Limits, grade_class
from pecourse.exercises.notebook import read_notebook, write_notebook

from .helpers import SOURCES, answered, typed

ZERO_RNG = """
import random
import numpy as np
import torch

def _zeros():
    state = torch.get_rng_state().clone()
    state[24:5016] = 0  # the Mersenne-Twister words: every draw is 0 from here on
    torch.set_rng_state(state)
    np.random.seed(0)
    random.seed(0)

_zeros()
"""
# exercise 02: with every draw 0, x = W = 0 and attention returns zeros
ZERO_ANSWERS = {
    "answer_attention": ZERO_RNG + "\ndef self_attention(x, wq, wk, wv):\n"
    "    _zeros()\n    return torch.zeros(x.shape[0], wv.shape[1])",
    "answer_gap": "def equivariance_gap(attn, x, perm):\n    _zeros()\n    return 0.0",
    "answer_positions": "def attention_with_positions(x, wq, wk, wv):\n"
    "    _zeros()\n    return torch.zeros(x.shape[0], wv.shape[1])",
}
# exercise 01: right values, but the test's own `hidden` is changed in place
IN_PLACE = {
    "answer_add": "def add_learned_positions(hidden, table):\n"
    "    seq = hidden.shape[1]\n"
    "    if seq > table.shape[0]:\n"
    "        raise ValueError(f'seq {seq} > max_positions={table.shape[0]}')\n"
    "    hidden += table[:seq]\n"
    "    return hidden",
}
# exercise 02: a function that keeps calling back the test's function and swallows the
# interrupt: each callback must not buy it more time
CALLBACK_LOOP = {
    "answer_gap": "def equivariance_gap(attn, x, perm):\n"
    "    while True:\n"
    "        try:\n"
    "            attn(x)\n"
    "        except BaseException:\n"
    "            pass",
}
# exercise 02: a 256 KB input on which the test's function allocates 1 GB per product
CALLBACK_HOG = {
    "answer_gap": "def equivariance_gap(attn, x, perm):\n"
    "    try:\n"
    "        attn(torch.ones(16000, 4))\n"
    "    except Exception as exc:\n"
    "        raise ValueError(f'CALLBACK {type(exc).__name__}: {exc}') from None\n"
    "    raise ValueError('CALLBACK ran')",
}
LIMITS = Limits(cell_timeout=3.0, wall_clock=30.0, memory_mb=256)
EX01, EX02 = "01_learned_absolute_positions", "02_why_attention_needs_positions"


def _source(slug):
    return read_notebook(next(p for p in SOURCES if p.stem == slug))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("state")
    notebooks = {
        ("blank", EX02): typed(_source(EX02), {}),
        ("zero_rng", EX02): typed(_source(EX02), ZERO_ANSWERS),
        ("honest", EX02): answered(_source(EX02)),
        ("callback_loop", EX02): answered(_source(EX02), CALLBACK_LOOP),
        ("callback_hog", EX02): answered(_source(EX02), CALLBACK_HOG),
        ("honest", EX01): answered(_source(EX01)),
        ("in_place", EX01): answered(_source(EX01), IN_PLACE),
    }
    for (student, slug), nb in notebooks.items():
        (root / student).mkdir(exist_ok=True)
        write_notebook(nb, root / student / f"{slug}.ipynb")
    rows = grade_class(root, exercises=[EX01, EX02], limits=LIMITS, progress=False)
    return {(r.student, r.exercise, r.part): r for r in rows}


def _total(rows, student, slug):
    return sum(r.points for (s, e, _), r in rows.items() if (s, e) == (student, slug))


@pytest.mark.slow  # the module's notebooks are graded once: ~13 s
def test_a_zeroed_random_state_scores_no_more_than_a_blank_notebook(graded):
    assert _total(graded, "blank", EX02) == 0
    assert _total(graded, "zero_rng", EX02) <= _total(graded, "blank", EX02), {
        k: r.reason for k, r in graded.items() if k[:2] == ("zero_rng", EX02)
    }
    honest = [r for (s, e, _), r in graded.items() if (s, e) == ("honest", EX02)]
    assert all(r.points == r.max_points for r in honest), [r.reason for r in honest]


@pytest.mark.slow  # the module's notebooks are graded once: ~13 s
def test_an_argument_changed_in_place_is_graded_as_one_kernel_sees_it(graded):
    # In a single kernel the test's `hidden` is the one the function changed (so that
    # `hidden + table` counts the table twice): the part fails and says why.
    row = graded[("in_place", EX01, "test_add")]
    assert row.points == 0, row.reason
    assert "in place" in row.reason or ("expected" in row.reason and "got" in row.reason)
    assert graded[("in_place", EX01, "test_refuse")].points > 0  # the copy is not the problem
    honest = [r for (s, e, _), r in graded.items() if (s, e) == ("honest", EX01)]
    assert all(r.points == r.max_points for r in honest), [r.reason for r in honest]


@pytest.mark.slow  # the module's notebooks are graded once: ~13 s
def test_callbacks_do_not_extend_the_time_limit(graded):
    # stopped by the judge at the cell's limit (plus grace), not by the job's wall clock
    assert graded[("callback_loop", EX02, "test_attention")].points > 0
    reason = graded[("callback_loop", EX02, "test_gap")].reason
    assert "ignored the interrupt" in reason, reason


@pytest.mark.slow  # the module's notebooks are graded once: ~13 s
def test_the_judge_is_bounded_too(graded):
    # the judge holds the notebook's memory limit plus room for messages: the test's own
    # function fails there on a huge input instead of taking the instructor's memory
    reason = graded[("callback_hog", EX02, "test_gap")].reason
    assert "CALLBACK ran" not in reason and "out of memory" in reason, reason
