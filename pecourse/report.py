"""The instructor's view of a class: ``pecourse report GRADEBOOK [GRADEBOOK ...] --out DIR``.

Reads the SQLite gradebooks ``pecourse grade`` writes (table ``grades``, one row per
student, exercise and part: :data:`pecourse.exercises.grade.CSV_COLUMNS`) and writes an
offline report into ``DIR``: ``index.html`` (no script, no network), the figures it shows as
PNG files beside it, and ``lms.csv`` for a learning-management system's gradebook.

Several gradebooks are read as **rounds** in the order given (one per round of submissions:
``pecourse grade week3/ --out rounds/week3.csv``), so a student's history can be followed;
one cumulative gradebook is one round. A student's *current* result for an exercise is the
last round in which they handed it in (a later round's ``no submission`` does not erase it).

What the report shows, and the pure function that computes each:

* the score distribution per exercise (:func:`score_table`, figure ``scores.png``);
* the pass rate of every part, exercise by part (:func:`pass_rates`, ``pass_rates.png``);
* why parts fail, grouped by what the reasons say (:func:`reason_kind` sorts a reason into
  expected-vs-got, dtype, shape, timeout, policy, an earlier part's failure ...;
  :func:`reason_pattern` drops its numbers so that the same mistake groups together;
  :func:`failure_groups`);
* students who are stuck: a part failed in every round they handed its exercise in, at least
  twice (:func:`stuck_students`);
* each student's progress, exercise by exercise and round by round (:func:`progress`);
* ``lms.csv``: one row per student, one column per exercise, points (:func:`lms_rows`).

Student names and reasons come from hostile notebooks (a reason may quote a student's own
exception message): everything is HTML-escaped, and CSV fields a spreadsheet would read as a
formula are quoted as text. Reading never writes: a gradebook is opened read-only.
"""

from __future__ import annotations

import csv
import html
import logging
import os
import re
import sqlite3
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from .exercises.grade import CSV_COLUMNS, NOT_ISOLATED, Row, shown

log = logging.getLogger(__name__)

__all__ = [
    "read_gradebook",
    "current_rows",
    "reason_kind",
    "reason_pattern",
    "score_table",
    "pass_rates",
    "pass_rate_grid",
    "failure_groups",
    "stuck_students",
    "progress",
    "lms_rows",
    "write_report",
    "KINDS",
]

NO_SUBMISSION = "no submission"
# Reason kinds, in the order they are tried (the first that matches wins), with the text an
# instructor reads. A reason is the grader's, built from fixed phrases (grade.py, _runner.py,
# testing.py, policy.py) around values; the phrases are what is matched.
KINDS = {
    "missing": "not handed in",
    "refused": "file refused (link, not a regular file)",
    "policy": "used the course's reference implementation",
    "not answered": "answer not written (NotImplementedError)",
    "timeout": "timed out",
    "limit": "stopped: memory limit, crash or exit",
    "earlier part": "an earlier part it uses failed",
    "dtype": "wrong dtype",
    "shape": "wrong shape",
    "type": "wrong type of result",
    "expected vs got": "wrong values (expected vs got)",
    "check failed": "a property the test checks does not hold",
    "error": "raised an error",
    "other": "other",
}
_LIMIT_PHRASES = (
    "ended its grading process",
    "stopped answering",
    "the sandbox could not be set up",
    "the grading server died",
    "MemoryError",
)
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d+\.?\d*(?:e[+-]?\d+)?|inf|nan)(?![\w.])")
_LIST_OF_NUMBERS = re.compile(r"\[[#,\s\[\]]*#[#,\s\[\]]*\]")
_LOOK_ALIKE_NOTE = re.compile(r";? ?check who this is: .*$")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def reason_kind(reason: str) -> str:
    """Which of :data:`KINDS` a failed part's ``reason`` is (``"other"`` when none fits)."""
    text = reason.strip()
    if text.startswith(NO_SUBMISSION):
        return "missing"
    if text.startswith("refused:"):
        return "refused"
    if text.startswith("policy:"):
        return "policy"
    if "NotImplementedError" in text:
        return "not answered"
    if text.startswith("timed out"):
        return "timeout"
    if any(p in text for p in _LIMIT_PHRASES):
        return "limit"
    if "whose part " in text and "failed too" in text:
        return "earlier part"
    body = text.removeprefix("AssertionError: ")
    if body.startswith("expected dtype") or ": expected dtype" in body:
        return "dtype"
    if "expected shape" in body:
        return "shape"
    if re.search(r"expected a (tensor|Python \w+)", body):
        return "type"
    if text.startswith("AssertionError"):
        return "expected vs got" if re.search(r"expected .*got", body) else "check failed"
    if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b", text):
        return "error"
    return "other"


def reason_pattern(reason: str, width: int = 160) -> str:
    """``reason`` with its numbers replaced by ``#`` and lists of numbers by ``[…]``, so the
    same mistake made with different values reads the same; cut to ``width`` characters."""
    text = _LOOK_ALIKE_NOTE.sub("", reason.strip()).removeprefix("AssertionError: ")
    text = _NUMBER.sub("#", text)
    while True:
        shorter = _LIST_OF_NUMBERS.sub("[…]", text)
        if shorter == text:
            break
        text = shorter
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


# --------------------------------------------------------------------------- reading


def read_gradebook(path: str | Path) -> list[Row]:
    """Every row of the gradebook at ``path``, opened read-only (a path that is not a
    gradebook is refused, never created or changed)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"GRADEBOOK {str(path)!r} does not exist or is not a file")
    try:
        db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ValueError(f"GRADEBOOK {str(path)!r} cannot be opened: {exc}") from None
    try:
        columns = [r[1] for r in db.execute("PRAGMA table_info(grades)")]
        missing = [c for c in CSV_COLUMNS if c not in columns]
        if missing:
            raise ValueError(
                f"GRADEBOOK {str(path)!r} is not a pecourse gradebook: it has no table "
                f"'grades' with the columns {', '.join(CSV_COLUMNS)} (missing: "
                f"{', '.join(missing)}); write one with `pecourse grade ... --out FILE.csv`"
            )
        return [
            Row(*r)
            for r in db.execute(
                f"SELECT {', '.join(CSV_COLUMNS)} FROM grades ORDER BY student, exercise, rowid"
            )
        ]
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"GRADEBOOK {str(path)!r} is not an SQLite gradebook ({exc})") from None
    finally:
        db.close()


def _handed_in(rows: list[Row]) -> bool:
    return not all(r.reason.startswith(NO_SUBMISSION) for r in rows)


def _by_submission(rounds: list[list[Row]]) -> dict[tuple[str, str], list[list[Row]]]:
    """``{(student, exercise): [rows of each round, in order]}``, the rounds in which the
    student's exercise appears at all."""
    found: dict[tuple[str, str], list[list[Row]]] = defaultdict(list)
    for rows in rounds:
        for key, group in _group(rows).items():
            found[key].append(group)
    return found


def current_rows(rounds: list[list[Row]]) -> list[Row]:
    """Each student's exercise as it stands: the last round that holds a submission of it
    (or the last round, if none does)."""
    out = []
    for _, history in sorted(_by_submission(rounds).items()):
        handed = [rows for rows in history if _handed_in(rows)]
        out += (handed or history)[-1]
    return out


# --------------------------------------------------------------------------- tables


def _exercises(rows: list[Row]) -> list[str]:
    return sorted({r.exercise for r in rows})


def _parts(rows: list[Row]) -> dict[str, list[str]]:
    """``{exercise: [parts in the grader's order]}``."""
    parts: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        if r.part not in parts[r.exercise]:
            parts[r.exercise].append(r.part)
    return dict(parts)


def score_table(rows: list[Row]) -> dict[str, dict[str, tuple[float, float]]]:
    """``{exercise: {student: (points, max_points)}}`` over the current rows."""
    table: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for r in rows:
        cell = table[r.exercise][r.student]
        cell[0] += r.points
        cell[1] += r.max_points
    return {ex: {s: (p, m) for s, (p, m) in by.items()} for ex, by in table.items()}


def pass_rates(rows: list[Row], handed_in_only: bool = True) -> dict[tuple[str, str], float]:
    """``{(exercise, part): fraction of students with full points}``; by default among the
    students who handed the exercise in (a missing notebook is counted in the scores, not
    against a part)."""
    passed: Counter = Counter()
    seen: Counter = Counter()
    for r in rows:
        if handed_in_only and r.reason.startswith(NO_SUBMISSION):
            continue
        seen[(r.exercise, r.part)] += 1
        passed[(r.exercise, r.part)] += r.points >= r.max_points
    return {key: passed[key] / n for key, n in seen.items()}


@dataclass(frozen=True)
class FailureGroup:
    exercise: str
    part: str
    kind: str
    pattern: str
    students: tuple[str, ...]
    failed: int  # students who failed this part, whatever the reason


def failure_groups(rows: list[Row]) -> list[FailureGroup]:
    """Failed parts grouped by (exercise, part, kind, pattern), largest group first within
    each part; parts in the grader's order. Missing notebooks are left out."""
    groups: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)
    failed: Counter = Counter()
    for r in rows:
        if r.points >= r.max_points or r.reason.startswith(NO_SUBMISSION):
            continue
        failed[(r.exercise, r.part)] += 1
        kind = reason_kind(r.reason)
        groups[(r.exercise, r.part, kind, reason_pattern(r.reason))].append(r.student)
    order = _parts(rows)
    rank = {(ex, p): (ex, i) for ex, ps in order.items() for i, p in enumerate(ps)}
    return [
        FailureGroup(ex, part, kind, pattern, tuple(sorted(students)), failed[(ex, part)])
        for (ex, part, kind, pattern), students in sorted(
            groups.items(), key=lambda kv: (rank[kv[0][:2]], -len(kv[1]), kv[0][2:])
        )
    ]


@dataclass(frozen=True)
class Stuck:
    student: str
    exercise: str
    part: str
    rounds: int  # rounds in which the student handed the exercise in (all of them failed)
    reason: str  # the latest


def stuck_students(rounds: list[list[Row]], at_least: int = 2) -> list[Stuck]:
    """Parts a student failed in every round they handed the exercise in, when that is at
    least ``at_least`` rounds."""
    if at_least < 1:
        raise ValueError(f"at_least must be a positive number of rounds, got {at_least!r}")
    found = []
    for (student, exercise), history in sorted(_by_submission(rounds).items()):
        handed = [rows for rows in history if _handed_in(rows)]
        if len(handed) < at_least:
            continue
        by_part = defaultdict(list)
        for rows in handed:
            for r in rows:
                by_part[r.part].append(r)
        for part, seen in by_part.items():
            if len(seen) == len(handed) and all(r.points < r.max_points for r in seen):
                found.append(Stuck(student, exercise, part, len(handed), seen[-1].reason))
    return found


def progress(rounds: list[list[Row]]) -> dict[str, dict[str, list[tuple[float, float] | None]]]:
    """``{student: {exercise: [(points, max_points) or None per round]}}``: None where the
    student did not hand the exercise in that round."""
    students = sorted({r.student for rows in rounds for r in rows})
    exercises = sorted({r.exercise for rows in rounds for r in rows})
    table = {s: {ex: [None] * len(rounds) for ex in exercises} for s in students}
    for i, rows in enumerate(rounds):
        for (student, exercise), group in _group(rows).items():
            if _handed_in(group):
                table[student][exercise][i] = (
                    sum(r.points for r in group),
                    sum(r.max_points for r in group),
                )
    return table


def _group(rows: list[Row]) -> dict[tuple[str, str], list[Row]]:
    out: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows:
        out[(r.student, r.exercise)].append(r)
    return out


def _text_cell(text: str) -> str:
    """A CSV field a spreadsheet shows as text (formula starters get a leading quote)."""
    text = shown(text)
    return "'" + text if text.startswith(_FORMULA) else text


def lms_rows(rows: list[Row]) -> list[list[str]]:
    """The LMS gradebook: a header (``student``, one column per exercise, ``total``), a
    ``max`` row, then one row per student with their current points."""
    scores = score_table(rows)
    exercises = _exercises(rows)
    students = sorted({r.student for r in rows})
    maxima = {ex: max(m for _, m in scores[ex].values()) for ex in exercises}
    out = [["student", *exercises, "total"]]
    out.append(["max", *(f"{maxima[ex]:g}" for ex in exercises), f"{sum(maxima.values()):g}"])
    for s in students:
        points = [scores[ex].get(s, (0.0, maxima[ex]))[0] for ex in exercises]
        out.append([_text_cell(s), *(f"{p:g}" for p in points), f"{sum(points):g}"])
    return out


# --------------------------------------------------------------------------- figures


def _plot_scores(rows: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    scores = score_table(rows)
    exercises = _exercises(rows)
    cols = min(4, len(exercises))
    nrows = -(-len(exercises) // cols)
    fig, axes = plt.subplots(
        nrows, cols, figsize=(3.2 * cols, 2.4 * nrows), squeeze=False, constrained_layout=True
    )
    for ax in axes.flat[len(exercises) :]:
        ax.set_visible(False)
    for ax, ex in zip(axes.flat, exercises):
        values = [p for p, _ in scores[ex].values()]
        top = max(m for _, m in scores[ex].values())
        step = max(1.0, top / 20)
        edges = [i * step - step / 2 for i in range(int(top / step) + 2)]
        ax.hist(values, bins=edges, color="#3465a4", edgecolor="white")
        mean = sum(values) / len(values)
        ax.axvline(mean, color="#cc0000", lw=1)
        ax.set_title(f"{ex}\nmean {mean:.1f} of {top:g}", fontsize=8)
        ax.set_xlabel("points", fontsize=8)
        ax.set_ylabel("students", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle("Score distribution per exercise (current results; red: mean)", fontsize=10)
    fig.savefig(path, dpi=110, format="png")
    plt.close(fig)


def pass_rate_grid(rows: list[Row]) -> tuple[list[str], list[list[tuple[str, float] | None]]]:
    """The heatmap's cells: exercises (rows, sorted) and, for each, its parts in the
    grader's order as ``(part, pass rate)``, padded with None to the longest exercise."""
    rates = pass_rates(rows)
    parts = _parts(rows)
    exercises = _exercises(rows)
    width = max(len(p) for p in parts.values())
    grid = [
        [(p, rates[(ex, p)]) if (ex, p) in rates else None for p in parts[ex]]
        + [None] * (width - len(parts[ex]))
        for ex in exercises
    ]
    return exercises, grid


def _plot_pass_rates(rows: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    exercises, cells = pass_rate_grid(rows)
    width = len(cells[0])
    grid = np.array([[np.nan if c is None else c[1] for c in row] for row in cells])
    fig, ax = plt.subplots(
        figsize=(2.2 + 1.9 * width, 0.9 + 0.55 * len(exercises)), constrained_layout=True
    )
    cmap = plt.get_cmap("RdYlGn").with_extremes(bad="#dddddd")
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    for i, row in enumerate(cells):
        for j, cell in enumerate(row):
            if cell is not None:
                ax.text(j, i, f"{cell[0]}\n{cell[1]:.0%}", ha="center", va="center", fontsize=7)
    ax.set_yticks(range(len(exercises)), exercises, fontsize=8)
    ax.set_xticks(range(width), [f"part {j + 1}" for j in range(width)], fontsize=8)
    ax.set_title("Pass rate by exercise and part (students who handed it in)", fontsize=10)
    fig.colorbar(image, ax=ax, label="passed", shrink=0.8)
    fig.savefig(path, dpi=110, format="png")
    plt.close(fig)


# --------------------------------------------------------------------------- the report

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em;
       color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; }
.warn { background: #fff3cd; border: 1px solid #e0c060; padding: 0.5em 1em; }
.muted { color: #666; }
"""


def _e(text) -> str:
    return html.escape(shown(text), quote=True)


def _table(header: list[str], body: list[list[str]], numeric: set[int] = frozenset()) -> str:
    """An HTML table; ``body`` cells are already HTML."""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    lines = [
        "<tr>"
        + "".join(
            f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
            for i, c in enumerate(cells)
        )
        + "</tr>"
        for cells in body
    ]
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody></table>"


def _shade(fraction: float) -> str:
    """A background from red (0) through yellow to green (1), readable under black text."""
    hue = int(120 * max(0.0, min(1.0, fraction)))
    return f"hsl({hue}, 70%, 82%)"


def render_html(rounds: list[list[Row]], names: list[str], figures: dict[str, str]) -> str:
    """The report's HTML (pure: no file is read or written)."""
    rows = current_rows(rounds)
    exercises = _exercises(rows)
    students = sorted({r.student for r in rows})
    parts = _parts(rows)
    rates = pass_rates(rows)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>Class report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>Class report</h1>",
        f"<p>{len(students)} students, {len(exercises)} exercises, {len(rounds)} round(s) of "
        f"grading: {', '.join(_e(n) for n in names)}. Current results are each student's last "
        "handed-in round.</p>",
    ]
    if any(r.isolation == NOT_ISOLATED for rs in rounds for r in rs):
        out.append(
            '<p class="warn">Some of these grades were computed WITHOUT isolation '
            f"({_e(NOT_ISOLATED)}): a notebook could read the hidden tests.</p>"
        )

    out.append("<h2>Scores</h2>")
    scores = score_table(rows)
    handed_in = Counter(ex for (_, ex), group in _group(rows).items() if _handed_in(group))
    body = []
    for ex in exercises:
        values = sorted(p for p, _ in scores[ex].values())
        top = max(m for _, m in scores[ex].values())
        full = sum(p >= m for p, m in scores[ex].values())
        handed = handed_in[ex]
        body.append(
            [
                _e(ex),
                f"{handed}",
                f"{sum(values) / len(values):.2f}",
                f"{values[len(values) // 2]:g}",
                f"{top:g}",
                f"{full / len(values):.0%}",
            ]
        )
    out.append(
        _table(
            ["exercise", "handed in", "mean", "median", "max", "full marks"],
            body,
            numeric={1, 2, 3, 4, 5},
        )
    )
    out.append(f'<img src="{_e(figures["scores"])}" alt="score distribution per exercise">')

    out.append("<h2>Pass rate by part</h2>")
    out.append(f'<img src="{_e(figures["pass_rates"])}" alt="pass rate by exercise and part">')
    body = [
        [
            _e(ex),
            _e(p),
            f'<span style="background:{_shade(rates[(ex, p)])}">{rates[(ex, p)]:.0%}</span>'
            if (ex, p) in rates
            else '<span class="muted">nobody handed it in</span>',
        ]
        for ex in exercises
        for p in parts[ex]
    ]
    out.append(_table(["exercise", "part", "passed"], body, numeric={2}))

    out.append("<h2>Why parts fail</h2>")
    out.append(
        "<p>Failed parts grouped by what their reasons say (numbers replaced by #); the kind "
        "is read from the grader's wording. Missing notebooks are counted in the scores "
        "only.</p>"
    )
    body = [
        [
            _e(g.exercise),
            _e(g.part),
            _e(KINDS[g.kind]),
            f"{len(g.students)} of {g.failed}",
            _e(g.pattern),
            _e(", ".join(g.students[:8]) + (" …" if len(g.students) > 8 else "")),
        ]
        for g in failure_groups(rows)
    ]
    out.append(
        _table(
            [
                "exercise",
                "part",
                "kind",
                "students (of those failing)",
                "what the reason says",
                "who",
            ],
            body,
            {3},
        )
        if body
        else "<p>No part failed.</p>"
    )

    out.append("<h2>Students who are stuck</h2>")
    stuck = stuck_students(rounds)
    if len(rounds) < 2:
        out.append(
            '<p class="muted">Needs two or more rounds: pass one gradebook per round of '
            "submissions, oldest first.</p>"
        )
    elif not stuck:
        out.append("<p>Nobody failed the same part in every round they handed it in.</p>")
    else:
        out.append(
            _table(
                ["student", "exercise", "part", "rounds failed", "latest reason"],
                [
                    [_e(s.student), _e(s.exercise), _e(s.part), f"{s.rounds}", _e(s.reason)]
                    for s in stuck
                ],
                numeric={3},
            )
        )

    out.append("<h2>Progress per student</h2>")
    out.append(
        "<p>Points per exercise, round by round (– : not handed in that round); the colour is "
        "the current share of the points.</p>"
    )
    table = progress(rounds)
    body = []
    for s in students:
        cells = [_e(s)]
        total = 0.0
        for ex in exercises:
            history = table[s][ex]
            now = scores[ex].get(s)
            total += now[0] if now else 0.0
            text = " → ".join("–" if h is None else f"{h[0]:g}" for h in history)
            fraction = now[0] / now[1] if now and now[1] else 0.0
            cells.append(f'<span style="background:{_shade(fraction)}">{_e(text)}</span>')
        cells.append(f"{total:g}")
        body.append(cells)
    out.append(_table(["student", *exercises, "total"], body, numeric={len(exercises) + 1}))
    out.append(
        '<p>The same current points, one row per student and one column per exercise: <a href="'
        'lms.csv">lms.csv</a> (a <code>max</code> row first).</p>'
    )
    out.append("</body></html>")
    return "\n".join(out)


def _write_atomic(path: Path, write) -> None:
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def write_report(gradebooks: list[str | Path], out_dir: str | Path) -> dict[str, Path]:
    """Read ``gradebooks`` (rounds, oldest first) and write the report into ``out_dir``.
    Returns the paths written: ``html``, ``scores``, ``pass_rates``, ``lms``."""
    if not gradebooks:
        raise ValueError("gradebooks: give at least one GRADEBOOK (an SQLite file)")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} exists and is not a folder")
    rounds = [read_gradebook(p) for p in gradebooks]
    empty = [str(p) for p, rows in zip(gradebooks, rounds) if not rows]
    if empty:
        raise ValueError(f"GRADEBOOK {empty[0]!r} has no grades yet")
    out.mkdir(parents=True, exist_ok=True)
    rows = current_rows(rounds)
    log.info("read %d round(s), %d rows now current; drawing the figures", len(rounds), len(rows))
    paths = {
        "scores": out / "scores.png",
        "pass_rates": out / "pass_rates.png",
        "lms": out / "lms.csv",
        "html": out / "index.html",
    }
    _write_atomic(paths["scores"], lambda p: _plot_scores(rows, p))
    _write_atomic(paths["pass_rates"], lambda p: _plot_pass_rates(rows, p))

    def write_lms(p: Path) -> None:
        with open(p, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(lms_rows(rows))

    _write_atomic(paths["lms"], write_lms)
    page = render_html(
        rounds,
        [Path(g).name for g in gradebooks],
        {"scores": paths["scores"].name, "pass_rates": paths["pass_rates"].name},
    )
    _write_atomic(paths["html"], lambda p: p.write_text(page, encoding="utf-8"))
    return paths


# --------------------------------------------------------------------------- command


def register(subparsers) -> None:
    report = subparsers.add_parser(
        "report",
        help="the class at a glance: an offline HTML report with plots and an LMS CSV from "
        "the SQLite gradebook(s)",
        description="Read one or more SQLite gradebooks written by `pecourse grade` (one per "
        "round of submissions, oldest first) and write DIR/index.html, its PNG figures and "
        "DIR/lms.csv.",
    )
    report.add_argument(
        "gradebooks",
        nargs="+",
        type=Path,
        metavar="GRADEBOOK",
        help="SQLite gradebook (the .sqlite file beside pecourse grade's CSV)",
    )
    report.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="folder to write the report in"
    )
    report.set_defaults(func=_main)


def _main(args) -> int:
    logging.basicConfig(level=logging.INFO, format="pecourse report: %(message)s")
    try:
        paths = write_report(args.gradebooks, args.out)
    except ValueError as exc:
        print(f"pecourse report: {exc}", file=sys.stderr)
        return 2
    rounds = [read_gradebook(p) for p in args.gradebooks]
    rows = current_rows(rounds)
    print(
        f"{len({r.student for r in rows})} students, {len({r.exercise for r in rows})} "
        f"exercises, {len(rounds)} round(s); {len(stuck_students(rounds))} stuck part(s)"
    )
    print(f"wrote {paths['html']} (open it in a browser), its figures and {paths['lms']}")
    return 0
