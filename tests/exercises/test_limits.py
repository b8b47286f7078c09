"""The instructor's side does bounded work whatever a submission holds.

The reference-import policy runs in the grader's own process on every answer cell. IPython
re-tokenises a whole cell once per magic it rewrites, so a cell of many magics cost time
quadratic in its length (a 130 KB cell: minutes); the check now rewrites only the lines
that need it, and a cell over ``MAX_CHECKED_CHARS`` is refused without being parsed.
"""

from __future__ import annotations

from types import SimpleNamespace

import IPython.core.inputtransformer2 as transformer
import pytest

from pecourse.exercises import policy
from pecourse.exercises.grade import IsolationUnavailable, grade_class
from pecourse.exercises.notebook import write_notebook
from pecourse.exercises.policy import MAX_CHECKED_CHARS, reference_uses

from .conftest import SLUG, source09
from .helpers import typed


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


NESTED = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
userns = libc.unshare(0x10000000 | 0x00020000)  # CLONE_NEWUSER | CLONE_NEWNS
mounted = libc.mount(b"none", b"/tmp", b"tmpfs", 0, b"size=4g") if userns == 0 else -1
raise ValueError(f"NESTED userns={userns} mount={mounted}")
"""


def test_no_namespace_and_no_mount_inside_the_job(tmp_path):
    # A nested user namespace gives the notebook every capability over its own mounts: a
    # 4 GiB tmpfs outside the memory limit, a sandbox of its own. The kernel refuses it.
    (tmp_path / "nester").mkdir()
    write_notebook(
        typed(source09(), {"answer_table": NESTED}), tmp_path / "nester" / f"{SLUG}.ipynb"
    )
    try:
        rows = grade_class(tmp_path, exercises=[SLUG], progress=False, isolation="namespaces")
    except IsolationUnavailable as exc:  # pragma: no cover - CI machines are root on Linux
        pytest.skip(f"needs the namespace sandbox: {exc}")
    reason = next(r.reason for r in rows if r.part == "test_table")
    assert "NESTED userns=-1 mount=-1" in reason, reason
