"""The instructor's side does bounded work whatever a submission holds.

The reference-import policy runs in the grader's own process on every answer cell. IPython
re-tokenises a whole cell once per magic it rewrites, so a cell of many magics cost time
quadratic in its length (a 130 KB cell: minutes); the check now rewrites only the lines
that need it, and a cell over ``MAX_CHECKED_CHARS`` is refused without being parsed.
"""

from __future__ import annotations

from types import SimpleNamespace

import IPython.core.inputtransformer2 as transformer

from pecourse.exercises import policy
from pecourse.exercises.policy import MAX_CHECKED_CHARS, reference_uses


def test_the_policy_check_reads_each_line_a_bounded_number_of_times(monkeypatch):
    lines_read = []
    real = transformer.make_tokens_by_line

    def counting(lines):
        lines_read.append(len(lines))
        return real(lines)

    monkeypatch.setattr(transformer, "make_tokens_by_line", counting)
    cell = "\n".join(["%time x = 1"] * 400 + ["import pecourse.positions"])
    assert reference_uses(cell) == ["pecourse.positions"]
    assert sum(lines_read) <= 4 * cell.count("\n"), sum(lines_read)


def test_a_cell_too_large_to_check_is_refused_unparsed(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("a cell over the limit was parsed")

    monkeypatch.setattr(policy, "ast", SimpleNamespace(parse=never))
    uses = reference_uses("x = 1\n" * (MAX_CHECKED_CHARS // 6 + 1))
    assert len(uses) == 1 and "too large to check" in uses[0], uses
