"""`pecourse report`: the instructor's view of a class, from the gradebooks `pecourse grade`
writes. A simulated class with planted patterns is really graded (two rounds), and the report
must show them: a part most students fail, a common dtype mistake, a stuck student. The
pure functions are pinned on rows written by hand; the page opens in Chromium offline with no
console error, and a hostile student name stays text."""

from __future__ import annotations

import csv
import os
import sqlite3
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pecourse.cli import main as pecourse_main
from pecourse.exercises.grade import Limits, Row, grade_class, write_sqlite
from pecourse.exercises.notebook import read_notebook, write_notebook
from pecourse.report import (
    current_rows,
    failure_groups,
    lms_rows,
    pass_rate_grid,
    pass_rates,
    read_gradebook,
    reason_kind,
    reason_pattern,
    stuck_students,
    write_report,
)

from ..exercises.helpers import SOLUTIONS_DIR, answered
from ..exercises.regressions import REGRESSIONS
from ..exercises.wrong_answers import WRONG

ALIBI, SINUS = "03_alibi", "09_sinusoidal_positional_encodings"
DTYPE = (
    "AssertionError: expected dtype float64, got float32: the exercise asks for a float64 tensor"
)


def row(student, part, points, reason="", exercise=ALIBI, max_points=2.0):
    return Row(student, exercise, part, points, max_points, reason, "namespaces")


# --------------------------------------------------------------------------- pure functions


@pytest.mark.parametrize(
    "reason, kind",
    [
        ("no submission", "missing"),
        ("refused: ada/03_alibi.ipynb is a symbolic link (links are not followed)", "refused"),
        (
            "policy: the answer uses the course package's reference implementation (alibi); "
            "write the function yourself (an instructor can allow this with --allow-reference)",
            "policy",
        ),
        ("NotImplementedError: the answer is not written yet", "not answered"),
        ("timed out: the cell ran past the 30 s limit and ignored the interrupt", "timeout"),
        (
            "the notebook ended its grading process (killed by signal 9): os._exit, a crash "
            "or the memory limit",
            "limit",
        ),
        (
            "AssertionError: softmax(...); this part uses alibi_bias (answer cell answer_bias), "
            "whose part test_bias failed too: fix that one first",
            "earlier part",
        ),
        (DTYPE, "dtype"),
        ("AssertionError: bias: expected shape (1, 3, 3), got (3, 3)", "shape"),
        (
            "AssertionError: gap: expected a Python float, got a Tensor (tensor(0.)); use .item()",
            "type",
        ),  # fmt: skip
        ("AssertionError: slopes: expected [[0.5, 0.25]], got [[0.25, 0.5]]", "expected vs got"),
        ("AssertionError: even columns hold the sine", "check failed"),
        ("ZeroDivisionError: division by zero", "error"),
        ("something new", "other"),
    ],
)
def test_reason_kind_reads_the_graders_wording(reason, kind):
    assert reason_kind(reason) == kind


def test_reason_pattern_groups_one_mistake_made_with_different_values():
    a = "AssertionError: at position 1: expected [[0.54, 0.0, 0.84]], got [[0.54, 0.0, -0.84]]"
    b = "AssertionError: at position 7: expected [[-0.75, 0.65]], got [[0.75, -inf]]"
    assert reason_pattern(a) == reason_pattern(b) == "at position #: expected […], got […]"
    # dtype names and identifiers keep their digits
    assert reason_pattern(DTYPE).startswith("expected dtype float64, got float32")
    assert reason_pattern("theta_0 = 1 rad") == "theta_0 = # rad"
    # the grader's look-alike note is not part of what the reason says
    assert reason_pattern(f"{DTYPE}; check who this is: the name 'аda' may look like ...") == (
        reason_pattern(DTYPE)
    )
    assert len(reason_pattern("x" * 500, width=40)) == 40


def test_a_later_no_submission_does_not_erase_a_graded_round():
    first = [row("ada", "test_slopes", 2.0), row("ada", "test_bias", 0.0, "AssertionError: x")]
    later = [row("ada", "test_slopes", 0.0, "no submission"), row("ada", "test_bias", 0.0, "no submission")]  # fmt: skip
    assert current_rows([first, later]) == first
    resubmitted = [row("ada", "test_slopes", 2.0), row("ada", "test_bias", 2.0)]
    assert current_rows([first, later, resubmitted]) == resubmitted


def test_stuck_means_failed_in_every_round_handed_in_at_least_twice():
    r1 = [
        row("ada", "test_slopes", 0.0, DTYPE),  # fails twice: stuck
        row("bob", "test_slopes", 0.0, DTYPE),  # fails, then fixes
        row("cyd", "test_slopes", 0.0, DTYPE),  # fails once, hands nothing in later
    ]
    r2 = [
        row("ada", "test_slopes", 0.0, "AssertionError: expected [1], got [2]"),
        row("bob", "test_slopes", 2.0),
        row("cyd", "test_slopes", 0.0, "no submission"),
    ]
    stuck = stuck_students([r1, r2])
    assert [(s.student, s.part, s.rounds) for s in stuck] == [("ada", "test_slopes", 2)]
    assert stuck[0].reason.startswith("AssertionError: expected [1]")  # the latest
    assert stuck_students([r1]) == []
    with pytest.raises(ValueError, match="at_least"):
        stuck_students([r1], at_least=0)


def test_pass_rates_count_only_students_who_handed_the_exercise_in():
    rows = [
        row("ada", "test_slopes", 2.0),
        row("bob", "test_slopes", 0.0, DTYPE),
        row("cyd", "test_slopes", 0.0, "no submission"),
    ]
    assert pass_rates(rows) == {(ALIBI, "test_slopes"): 0.5}
    assert pass_rates(rows, handed_in_only=False) == {(ALIBI, "test_slopes"): pytest.approx(1 / 3)}


def test_lms_csv_has_one_row_per_student_and_quotes_formulas():
    rows = [
        row("=HYPERLINK(1)", "test_slopes", 2.0),
        row("=HYPERLINK(1)", "test_bias", 0.0, DTYPE),
        row("bob", "test_slopes", 2.0),
        row("bob", "test_bias", 2.0),
        row("bob", "test_table", 1.0, "x", exercise=SINUS, max_points=3.0),
    ]
    assert lms_rows(rows) == [
        ["student", ALIBI, SINUS, "total"],
        ["max", "4", "3", "7"],
        ["'=HYPERLINK(1)", "2", "0", "2"],  # has no row for SINUS: 0
        ["bob", "4", "1", "5"],
    ]


def test_a_path_that_is_not_a_gradebook_is_refused_and_left_as_it_was(tmp_path, capsys):
    missing = tmp_path / "missing.sqlite"
    assert pecourse_main(["report", str(missing), "--out", str(tmp_path / "r")]) == 2
    assert "GRADEBOOK" in capsys.readouterr().err and not missing.exists()

    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    before = other.read_bytes()
    with pytest.raises(ValueError, match="not a pecourse gradebook.*missing: student"):
        read_gradebook(other)
    assert other.read_bytes() == before  # no table was added

    text = tmp_path / "gradebook.csv"
    text.write_text("student,exercise\n")
    with pytest.raises(ValueError, match="not an SQLite gradebook"):
        read_gradebook(text)

    empty = tmp_path / "empty.sqlite"
    write_sqlite([], empty)
    with pytest.raises(ValueError, match="no grades yet"):
        write_report([empty], tmp_path / "r")
    with pytest.raises(ValueError, match="not a folder"):
        write_report([empty], text)


def test_the_report_module_loads_neither_torch_nor_the_model():
    code = (
        "import sys, pecourse.report; "
        "print(sorted(m for m in ('torch', 'pecourse.lab.model') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- a graded class


def write_class(root: Path, answers: dict[str, dict[str, dict]]) -> Path:
    """``root/<student>/<slug>.ipynb`` with the solution's answers, ``answers[student][slug]``
    replacing some of them."""
    for student, by_slug in answers.items():
        (root / student).mkdir(parents=True)
        for slug, replacements in by_slug.items():
            source = read_notebook(SOLUTIONS_DIR / f"{slug}.ipynb")
            write_notebook(answered(source, replacements), root / student / f"{slug}.ipynb")
    return root


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """Two rounds of a class of eight. Round 1: two right; three make the 12-head ALiBi
    mistake (test_slopes_12); three return float32 slopes (test_slopes and test_slopes_12,
    the dtype mistake), two of them also with a wrong sinusoidal wavelength. Round 2: s3 hands
    the same ALiBi mistake in again (stuck), s6 fixes theirs."""
    tmp = tmp_path_factory.mktemp("report-class")
    wrong_slopes = WRONG[ALIBI][0]
    float32 = REGRESSIONS["eve"][ALIBI][0]
    wrong_sinus = WRONG[SINUS][0]
    r1 = {
        "s1": {ALIBI: {}, SINUS: {}},
        "s2": {ALIBI: {}, SINUS: {}},
        "s3": {ALIBI: wrong_slopes, SINUS: {}},
        "s4": {ALIBI: wrong_slopes, SINUS: {}},
        "s5": {ALIBI: wrong_slopes, SINUS: {}},
        "s6": {ALIBI: float32, SINUS: {}},
        "s7": {ALIBI: float32, SINUS: wrong_sinus},
        "s8": {ALIBI: float32, SINUS: wrong_sinus},
    }
    r2 = {"s3": {ALIBI: wrong_slopes}, "s6": {ALIBI: {}}}
    limits = Limits(cell_timeout=30.0, wall_clock=90.0)
    books = []
    for name, answers in (("round1", r1), ("round2", r2)):
        rows = grade_class(write_class(tmp / name, answers), limits=limits, jobs=2, progress=False)
        books.append(tmp / f"{name}.sqlite")
        write_sqlite(rows, books[-1])
    return books, tmp


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_report_shows_the_planted_patterns(graded_class, tmp_path, capsys):
    books, _ = graded_class
    rounds = [read_gradebook(b) for b in books]
    rows = current_rows(rounds)

    # a part most students fail: test_slopes_12 (s3-s5 and s7-s8 fail it; s6 fixed it)
    rates = pass_rates(rows)
    assert rates[(ALIBI, "test_slopes_12")] == 3 / 8
    assert min(rates, key=rates.get) == (ALIBI, "test_slopes_12")
    exercises, grid = pass_rate_grid(rows)
    assert exercises == [ALIBI, SINUS]
    assert grid[0][1] == ("test_slopes_12", 3 / 8)  # the heatmap's darkest cell
    assert [c and c[0] for c in grid[1]] == ["test_table", "test_shift", "test_wavelengths", None]

    # the common dtype mistake: one group holds both dtype failures of test_slopes
    groups = {(g.part, g.kind): g for g in failure_groups(rows)}
    dtype = groups[("test_slopes", "dtype")]
    assert dtype.students == ("s7", "s8") and dtype.failed == 2
    assert dtype.pattern.startswith("expected dtype float64, got float32")
    wrong_12 = [g for g in failure_groups(rows) if g.part == "test_slopes_12"]
    assert sorted((g.kind, len(g.students)) for g in wrong_12) == [
        ("check failed", 3),  # the 12-head mistake, one pattern for three students
        ("dtype", 2),
    ]
    assert groups[("test_wavelengths", "check failed")].students == ("s7", "s8")

    # the stuck student: s3 failed test_slopes_12 in both rounds; s6 fixed theirs
    stuck = stuck_students(rounds)
    assert [(s.student, s.exercise, s.part, s.rounds) for s in stuck] == [
        ("s3", ALIBI, "test_slopes_12", 2)
    ]

    # the command writes it all, and the page says the same
    out = tmp_path / "report"
    assert pecourse_main(["report", *map(str, books), "--out", str(out)]) == 0
    assert "1 stuck part(s)" in capsys.readouterr().out
    tables = page_tables((out / "index.html").read_text())
    reasons = tables["Why parts fail"]
    assert ["03_alibi", "test_slopes", "wrong dtype", "2 of 2"] == reasons[1][:4]
    assert reasons[1][4].startswith("expected dtype float64, got float32")
    assert tables["Students who are stuck"][1][:4] == ["s3", ALIBI, "test_slopes_12", "2"]
    by_part = {(r[0], r[1]): r[2] for r in tables["Pass rate by part"][1:]}
    assert by_part[(ALIBI, "test_slopes_12")] == "38%"
    progress = {r[0]: r[1:] for r in tables["Progress per student"][1:]}
    assert progress["s6"][0] == "4 → 8" and progress["s3"][0] == "6 → 6"
    assert progress["s1"] == ["8 → –", "6 → –", "14"]
    with (out / "lms.csv").open(newline="") as f:
        lms = list(csv.reader(f))
    assert lms[1] == ["max", "8", "6", "14"]
    assert {r[0]: r[-1] for r in lms[2:]} == {
        "s1": "14", "s2": "14", "s3": "12", "s4": "12", "s5": "12",
        "s6": "14", "s7": "8", "s8": "8",
    }  # fmt: skip
    for png in ("scores.png", "pass_rates.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


class _Tables(HTMLParser):
    """Each table's cell texts, under the h2 heading before it."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.heading = None
        self._in = None
        self._text = []

    def handle_starttag(self, tag, attrs):
        if tag in ("h2", "td", "th"):
            self._in, self._text = tag, []
        elif tag == "tr":
            self.tables.setdefault(self.heading, []).append([])

    def handle_endtag(self, tag):
        if tag == self._in:
            text = "".join(self._text).strip()
            if tag == "h2":
                self.heading = text
            else:
                self.tables[self.heading][-1].append(text)
            self._in = None

    def handle_data(self, data):
        if self._in:
            self._text.append(data)


def page_tables(page: str) -> dict[str, list[list[str]]]:
    parser = _Tables()
    parser.feed(page)
    return parser.tables


# --------------------------------------------------------------------------- in a browser

CHROMIUM = Path("/usr/bin/chromium")
HOSTILE = '<img src=x onerror="document.title=1">'


@pytest.mark.slow
def test_the_report_opens_offline_in_chromium_with_no_console_error(tmp_path):
    if not CHROMIUM.exists():
        if os.environ.get("PECOURSE_REQUIRE_BROWSER") == "1":
            pytest.fail(f"PECOURSE_REQUIRE_BROWSER=1 but {CHROMIUM} is missing")
        pytest.skip(f"{CHROMIUM} is not installed")
    from playwright.sync_api import sync_playwright

    first = [row(HOSTILE, "test_slopes", 0.0, DTYPE), row("bob", "test_slopes", 2.0)]
    second = [row(HOSTILE, "test_slopes", 0.0, "AssertionError: <b>bold</b> expected 1, got 2")]
    books = []
    for i, rows in enumerate((first, second)):
        books.append(tmp_path / f"round{i}.sqlite")
        write_sqlite(rows, books[-1])
    paths = write_report(books, tmp_path / "report")

    errors, requests = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(paths["html"].as_uri())
            page.wait_for_load_state("load")
            widths = page.eval_on_selector_all("img", "imgs => imgs.map(i => i.naturalWidth)")
            title = page.title()
            text = page.inner_text("body")
        finally:
            browser.close()
    assert errors == []
    assert all(url.startswith("file://") for url in requests), requests
    assert len(widths) == 2 and all(w > 0 for w in widths)  # both figures load
    assert title == "Class report"  # the name's onerror never ran
    assert HOSTILE in text and "<b>bold</b>" in text  # shown as text
