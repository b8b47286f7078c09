"""Results printed as aligned text become HTML tables in the book (pecourse.book.tables)."""

import json
import re
from pathlib import Path

import pytest

from pecourse import course
from pecourse.book import pages, tables

ROOT = course.checkout()
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
RECORDINGS = sorted((ROOT / "pecourse" / "lab" / "results").glob("*.json"))

# As chapter 14 prints it: the last cell of two rows overflows its 19 characters and runs
# into the one before it.
PRINTED = """\
seeds [0], 65,536 characters; perplexity [95% interval]
                                    64                 128                 256                 512
none                 4.58 [4.51, 4.65]   4.75 [4.68, 4.83]   7.78 [7.65, 7.91]13.06 [12.83, 13.27]
PI + fine-tune       5.56 [5.48, 5.64]   5.47 [5.39, 5.56]   5.43 [5.34, 5.52]   5.82 [5.73, 5.92]
learned              5.58 5.78 5.73                      —                   —                   —

recomputed live: YaRN + fine-tune at 256 = 4.473 (recorded 4.473)
"""


def test_a_printed_table_is_read_cell_by_cell():
    segments = tables.split_tables(PRINTED)
    assert [s.table is not None for s in segments] == [False, True, False]
    assert "".join(s.text for s in segments) == PRINTED
    table = segments[1].table
    assert table.header == ["", "64", "128", "256", "512"]
    assert table.rows[0] == ["none", "4.58 [4.51, 4.65]", "4.75 [4.68, 4.83]",
                             "7.78 [7.65, 7.91]", "13.06 [12.83, 13.27]"]  # fmt: skip
    assert table.rows[1][0] == "PI + fine-tune"
    # one value per seed under 64, then a dash in each later column (placed by position)
    assert table.rows[2] == ["learned", "5.58 5.78 5.73", "—", "—", "—"]
    html = tables.table_html(table)
    assert '<th scope="row">none</th>' in html
    assert '<td>13.06<span class="pc-ci">[12.83, 13.27]</span></td>' in html


@pytest.mark.parametrize(
    "text",
    [
        # a row with words between its values: a sentence, not a table row
        "model   64   128   256\nrope   4.58 and 4.75   7.78\nalibi   5.05   5.01   4.99\n",
        # a header whose labels are measured values is a row, not a header
        "rope   4.58 [4.51, 4.65]   4.75   7.78\nalibi   5.05   5.01   4.99\nt5   1   2   3\n",
        # values that leave a column empty
        "model      64      128      256\nrope    4.58                7.78\nt5        1       2      3\n",
        # one row only
        "model   64   128   256\nrope   4.58   4.75   7.78\n",
    ],
)
def test_text_that_is_not_a_table_stays_text(text):
    segments = tables.split_tables(text)
    assert all(s.table is None for s in segments)
    assert "".join(s.text for s in segments) == text
    assert tables.output_as_tables(text) is None


def test_rows_that_name_their_columns():
    text = (
        "none          0-64 1.508 [1.470, 1.547]     64-256 2.232 [2.206, 2.259]\n"
        "PI            0-64 3.178 [3.139, 3.218]     64-256 3.279 [3.253, 3.305]\n"
    )
    (segment,) = tables.split_tables(text)
    assert segment.table.header == ["", "0-64", "64-256"]
    assert segment.table.rows[1] == ["PI", "3.178 [3.139, 3.218]", "3.279 [3.253, 3.305]"]
    # rows that do not name the same columns are not one table
    other = text.replace("PI            0-64", "PI            0-32")
    assert all(s.table is None for s in tables.split_tables(other))


def _cells_text(table: tables.Table, keyed: bool) -> str:
    """A table's rows as its characters in order (a keyed row names each column first)."""
    if keyed:
        rows = [[row[0]] + [k + v for k, v in zip(table.header[1:], row[1:])] for row in table.rows]
    else:
        rows = table.rows
    return "".join("".join(row) for row in rows).replace(" ", "")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_printed_output_is_kept_whole(path):
    # No character of a chapter's output is lost or moved: the text segments and the tables'
    # lines give back the output, and a table's cells hold its rows' characters in order.
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            if out.get("output_type") != "stream":
                continue
            text = "".join(out["text"])
            segments = tables.split_tables(text)
            assert "".join(s.text for s in segments) == text
            for s in segments:
                if s.table is None:
                    continue
                lines = s.text.rstrip("\n").split("\n")
                rows = lines[-len(s.table.rows) :]
                keyed = len(lines) == len(s.table.rows)
                assert _cells_text(s.table, keyed).replace(":", "") == (
                    "".join(rows).replace(" ", "").replace(":", "")
                )


def test_the_chapters_wide_results_become_tables():
    # The review found chapter 14's result tables cut off at 1366 px; these are the tables the
    # book now shows as HTML, by chapter (a change in how a chapter prints may lower a count).
    found = {}
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text(encoding="utf-8"))
        outputs = [o for c in nb["cells"] for o in pages.printed_tables(c.get("outputs", []))]
        found[path.stem[:2]] = sum("text/html" in o.get("data", {}) for o in outputs)
    assert found["14"] >= 5 and found["13"] >= 4 and found["03"] >= 4 and found["04"] >= 2
    assert sum(found.values()) >= 25


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_every_recording_has_a_page_of_tables(path):
    recording = json.loads(path.read_text(encoding="utf-8"))
    repo_path = path.relative_to(ROOT).as_posix()
    page = tables.recording_page(repo_path, recording)
    assert page.startswith(f"---\nnosearch: true\n---\n\n# Recording: {path.stem}\n")
    assert f"`{repo_path}`" in page
    assert f"```{{literalinclude}} {path.name}" in page  # the JSON itself, under the tables
    html = "".join(re.findall(r"```\{raw\} html\n(.*?)\n```", page, re.S))
    assert html.count("<tr>") - html.count("<thead><tr>") == len(recording["rows"])
    # an interval of the rows shows as the value with its interval under it
    for row in recording["rows"]:
        for value in row.values():
            if isinstance(value, dict) and isinstance(value.get("ci95"), list):
                low = tables._number(value["ci95"][0])
                assert f'<span class="pc-ci">[{low}, ' in html
                return


def test_a_recordings_estimate_and_interval_and_long_values():
    assert tables._format({"perplexity": 5.5833, "ci95": [5.5083, 5.6638], "windows": 1024}) == (
        "5.583 [5.508, 5.664]"
    )
    assert tables._format([[0, 4.4], [20, 3.2]] * 5) == "(10 values)"
    assert tables._format(None) == "—"
    assert tables._format("b8a0dca5b677e4da253ef92fbef37370967c26be255006e31e7f6ba9fff6a1a6") == (
        "b8a0dca5b677e4da…"
    )
    rows = [{"model": "a", "64": {"perplexity": 2.0, "ci95": [1.0, 3.0]}}, {"model": "b", "x": 1}]
    (first, columns, cells), (second, *_rest) = tables.recording_tables({"rows": rows})
    assert columns == ["model", "64"] and cells == [["a", "2 [1, 3]"]]
    assert "kind 2 of 2" in second
    assert tables.recording_tables({"rows": "not rows"}) == []


def test_the_book_shows_recordings_as_tables(tmp_path):
    from pecourse.book import builder

    builder.stage(tmp_path, chapters=[14])  # chapter 14 links to its recording
    page = Path(tmp_path, "source", "pecourse", "lab", "results", "extension_seeds.json.md")
    assert "\n# Recording: extension_seeds\n" in page.read_text(encoding="utf-8")
    assert Path(tmp_path, "source", "pecourse", "lab", "results", "extension_seeds.json").exists()
