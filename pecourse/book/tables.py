"""Results printed as aligned text become HTML tables in the book.

The chapters print their measurements as fixed-width text (a header of column labels, then one
row per model: ``none   4.58 [4.51, 4.65]   4.75 [4.68, 4.83] ...``), which reads well in
JupyterLab and nbval compares exactly, but is wider than the book's text column. The book
shows such a block as an HTML table instead: each value under its header, an interval
``[lo, hi]`` set on its own line under the value, so five columns fit a 1366 px laptop screen.

The reading is deliberately narrow: a block becomes a table only when every one of its rows is
a label followed by values (numbers, numbers with an interval, ``—``, ``n/a``) that fall into
the header's columns — one for one, the same number in each (the rows that list one value per
seed), or each under the column edge nearest to it — leaving no column empty, and the cells,
read back in order, hold the row's characters exactly.
Anything else stays printed text, as it was. Recordings (``pecourse/lab/results/*.json``) are
shown as tables too: :func:`recording_page`.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

# One value: a number (thousands commas, decimals, exponent, percent), optionally followed by
# an interval in brackets; or a dash/"n/a" for a missing one. Not inside a word ("t5", "x2").
_VALUE = re.compile(
    r"(?<![\w.\[])(?:[-−]?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?%?"
    r"(?: ?\[[^\]\n]{1,40}\]|(?![\w.]))|—|(?<!\S)-(?!\S)|n/a(?![\w.]))"
)
# A header's labels name columns ("64", "1,000", "passkey@96"); a measured value in it (a
# decimal or an interval) means the line is a row.
_MEASURED = re.compile(r"\d\.\d|\[[^\]]*,")
_HEADER_SPLIT = re.compile(r"\S+(?: \S+)*")  # labels separated by two spaces or more


@dataclass(frozen=True)
class Table:
    header: list[str]  # the column labels; the first is the row labels' column ("" if none)
    rows: list[list[str]]  # one list of cells per row, the row label first
    caption: str = ""  # a note printed at the end of the header line, "(perplexity [95%])"


@dataclass(frozen=True)
class Segment:
    """A piece of a printed output: its text as it was, and the table read from it if any."""

    text: str
    table: Table | None = None


def _header(line: str) -> list[tuple[int, int, str]] | None:
    """The labels of a header line with their spans, or None if it cannot be one."""
    labels = [(m.start(), m.end(), m.group(0)) for m in _HEADER_SPLIT.finditer(line)]
    if labels and labels[-1][2].startswith("(") and labels[-1][2].endswith(")"):
        labels = labels[:-1]  # a caption, not a column
    if len(labels) < 3 or any(_MEASURED.search(text) for *_, text in labels):
        return None
    return labels


def _row(line: str, edges: list[int]) -> list[str] | None:
    """A data row's label and one cell per column, or None when the line is not one.

    ``edges`` are where the header's value columns end (the values are right-aligned under
    them). Values fall into the columns one for one, or the same number in each (one value
    per seed); otherwise each goes to the column whose edge is nearest to its end.
    """
    # The label runs to the first gap of two spaces (none when the line starts with a space).
    gap = re.search(r"\S(?=\s{2,}\S)", line)
    label_end = 0 if not line[:1].strip() else (gap.end() if gap else len(line))
    label = line[:label_end]
    values = list(_VALUE.finditer(line, label_end))
    if not values or line[label_end : values[0].start()].strip():
        return None
    # Between values only spaces; after the last, nothing.
    for left, right in zip(values, values[1:]):
        if line[left.end() : right.start()].strip():
            return None
    if line[values[-1].end() :].strip():
        return None
    columns = len(edges)
    groups = None
    if len(values) % columns == 0:
        per = len(values) // columns
        groups = [values[i * per : (i + 1) * per] for i in range(columns)]
        if not _under_their_columns(groups, edges):
            groups = None
    if groups is None:
        groups = [[] for _ in edges]
        for value in values:
            nearest = min(range(columns), key=lambda j: abs(edges[j] - value.end()))
            groups[nearest].append(value)
        order = [j for j, group in enumerate(groups) for _ in group]
        if order != sorted(order) or not all(groups):
            return None
    return [label.strip()] + [" ".join(v.group(0) for v in group) for group in groups]


def _under_their_columns(groups: list[list[re.Match]], edges: list[int]) -> bool:
    """Whether each group of values ends at its column's edge: right-aligned, or pushed right
    by the overflow of the cells before it (a 20-character value in a 19-character column),
    or, in the last column, left-aligned after its start."""
    shift = 0
    for j, (group, edge) in enumerate(zip(groups, edges)):
        end = group[-1].end()
        last = j == len(edges) - 1
        if end > edge + shift + 1 and not last:
            return False
        if j and group[0].start() < edges[j - 1] + shift:
            return False
        shift = max(shift, end - edge)
    return True


def _table(lines: list[str]) -> Table | None:
    """The table a header line and its rows make, or None."""
    labels = _header(lines[0])
    if labels is None or len(lines) < 3:
        return None
    has_label_column = labels[0][0] < 2 and not _VALUE.fullmatch(labels[0][2])
    edges = [end for _, end, _ in labels[1 if has_label_column else 0 :]]
    rows = []
    for number, line in enumerate(lines[1:], start=1):
        if number < len(lines) - 1 and line[:1].strip() and not re.search(r"\S\s{2,}\S", line):
            rows.append([line.strip()] + [""] * len(edges))  # a group's heading inside the table
            continue
        row = _row(line, edges)
        if row is not None and not row[0] and has_label_column:
            # A row whose label is a number ("0", "1", ...) under a header such as "pair".
            row = _row(line, [labels[0][1]] + edges)
            row = row and row[1:]
        if row is None:
            return None
        # Read back: the cells in order hold the line's characters in order.
        if "".join(row).replace(" ", "") != line.replace(" ", ""):
            return None
        rows.append(row)
    header = [text for *_, text in labels]
    caption = lines[0][labels[-1][1] :].strip()[1:-1]
    return Table(header=header if has_label_column else [""] + header, rows=rows, caption=caption)


_KEYED_CELL = re.compile(r"(\S+?):? (" + _VALUE.pattern + r")")


def _keyed_table(lines: list[str]) -> Table | None:
    """Rows without a header whose cells name their column: ``none   0-64 1.508 [1.470,
    1.547]   64-256 2.232 [2.206, 2.259]``. Every row must name the same columns in order."""
    if len(lines) < 2:
        return None
    keys, rows = None, []
    for line in lines:
        gap = re.search(r"\S(?=\s{2,}\S)", line)
        if not line[:1].strip() or gap is None:
            return None
        label, rest = line[: gap.end()], line[gap.end() :]
        parts = [p for p in re.split(r"\s{2,}", rest.strip())]
        cells = [_KEYED_CELL.fullmatch(p) for p in parts]
        if len(cells) < 2 or not all(cells):
            return None
        names = [c.group(1) for c in cells]
        if keys is None:
            keys = names
        elif names != keys:
            return None
        rows.append([label.strip()] + [c.group(2) for c in cells])
        if "".join(label.split() + parts).replace(" ", "").replace(":", "") != line.replace(
            " ", ""
        ).replace(":", ""):
            return None
    return Table(header=[""] + keys, rows=rows)


def split_tables(text: str) -> list[Segment]:
    """Split printed text into text and the tables found in it (see the module docstring).

    A table is a header line followed by at least two rows, ending at a blank line, the end of
    the text, or the first line that is not a row; or a block of rows, up to a blank line, whose
    cells name their columns alike. Joining the segments' texts gives back ``text``.
    """
    lines = text.split("\n")
    segments: list[Segment] = []
    pending: list[str] = []
    i = 0
    while i < len(lines):
        end = i + 1
        while end < len(lines) and lines[end].strip():
            end += 1
        best = None
        # The longest run of rows under line i that reads as a table.
        for stop in range(end, i + 2, -1):
            best = _table(lines[i:stop])
            if best is not None:
                break
        if best is None and end - i >= 2:  # rows that name their columns, up to a blank line
            best, stop = _keyed_table(lines[i:end]), end
        if best is None:
            pending.append(lines[i])
            i += 1
            continue
        if pending:
            segments.append(Segment(text="\n".join(pending) + "\n"))
            pending = []
        segments.append(Segment(text="\n".join(lines[i:stop]) + "\n", table=best))
        i = stop
    if pending:
        segments.append(Segment(text="\n".join(pending)))
    segments = [s for s in segments if s.text or s.table]
    if segments and segments[-1].table is not None and not text.endswith("\n"):
        segments[-1] = Segment(text=segments[-1].text[:-1], table=segments[-1].table)
    return segments


def _cell_html(cell: str) -> str:
    """A cell's values, each interval on its own line under its value."""
    parts = []
    for value in _VALUE.findall(cell) or [cell]:
        number, bracket, interval = value.partition("[")
        if bracket:
            parts.append(
                f'{html.escape(number.strip())}<span class="pc-ci">[{html.escape(interval)}</span>'
            )
        else:
            parts.append(html.escape(value))
    return " ".join(parts)


def table_html(table: Table) -> str:
    """The table as HTML (class ``pc-results``; the book's stylesheet sets it). A label column
    with no label in it is left out."""
    labelled = bool(table.header[0] or any(row[0] for row in table.rows))
    skip = 0 if labelled else 1
    label_th = '<th class="pc-label">'
    head = "".join(
        (label_th if i == 0 and labelled else "<th>") + f"{html.escape(label)}</th>"
        for i, label in enumerate(table.header[skip:])
    )
    body = "".join(
        "<tr>"
        + (f'<th scope="row">{html.escape(row[0])}</th>' if labelled else "")
        + "".join(f"<td>{_cell_html(cell)}</td>" for cell in row[1:])
        + "</tr>"
        for row in table.rows
    )
    caption = f"<caption>{html.escape(table.caption)}</caption>" if table.caption else ""
    return (
        '<div class="pc-results-wrap"><table class="pc-results">'
        f"{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def output_as_tables(text: str) -> list[dict] | None:
    """Notebook outputs for a printed text that holds tables: the text around them as plain
    text displays (not streams: MyST-NB merges a cell's streams into one, which would move all
    the text above the tables), each table as an HTML display. None when it holds none."""
    segments = split_tables(text)
    if not any(s.table for s in segments):
        return None
    outputs = []
    for segment in segments:
        if segment.table is not None:
            data = {"text/html": table_html(segment.table)}
        elif segment.text.strip():
            data = {"text/plain": segment.text}
        else:
            continue
        outputs.append({"output_type": "display_data", "metadata": {}, "data": data})
    return outputs


# --- recordings -------------------------------------------------------------------------------


def _format(value) -> str:
    """A recorded value for a table cell: an estimate with its interval on one line; a long
    list or string shortened (the whole value is in the JSON under the table)."""
    if isinstance(value, dict):
        interval = value.get("ci95")
        estimate = next(
            (v for k, v in value.items() if k != "ci95" and isinstance(v, (int, float))), None
        )
        if estimate is not None and isinstance(interval, list) and len(interval) == 2:
            return f"{_number(estimate)} [{_number(interval[0])}, {_number(interval[1])}]"
        return f"({len(value)} fields)"
    if isinstance(value, list):
        if len(value) > 6 or any(isinstance(v, (list, dict)) for v in value):
            return f"({len(value)} values)"
        return ", ".join(_format(v) for v in value)
    if value is None:
        return "—"
    if isinstance(value, str) and len(value) > 40:
        return value[:16] + "…"
    return _number(value)


def _number(value) -> str:
    if isinstance(value, (bool, int)):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:.3e}"
    return str(value)


def _flatten(row: dict, prefix: str = "") -> dict[str, object]:
    """Nested fields become dotted columns, down to a value or an estimate with its interval."""
    flat: dict[str, object] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and "ci95" not in value and value:
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def recording_tables(recording: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """A recording's rows as tables: (title, columns, rows) for each list of row objects.

    Rows are grouped by the set of columns they have, so each table is rectangular.
    """
    rows = recording.get("rows")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        return []
    groups: dict[tuple[str, ...], list[dict]] = {}
    for row in rows:
        flat = _flatten(row)
        groups.setdefault(tuple(flat), []).append(flat)
    tables = []
    for n, (columns, members) in enumerate(groups.items(), start=1):
        title = "rows" if len(groups) == 1 else f"rows, kind {n} of {len(groups)}"
        tables.append((title, list(columns), [[_format(m[c]) for c in columns] for m in members]))
    return tables


def recording_page(repo_path: str, recording: dict) -> str:
    """The MyST page of a recording: what it is, its rows as tables, then the JSON itself."""
    name = repo_path.rsplit("/", 1)[-1]
    # Out of the search: its numbers are in the chapters that read it, where they mean something.
    stem = name.removesuffix(".json")
    lines = ["---", "nosearch: true", "---", "", f"# Recording: {stem}", ""]
    lines += [f"The file `{repo_path}`, as `pecourse.lab.results.recorded({stem!r})` reads it.", ""]
    about = {k: v for k, v in recording.items() if k != "rows" and not isinstance(v, (dict, list))}
    if isinstance(recording.get("summary"), dict):  # the reading a chapter's prose asserts
        about.update(_flatten(recording["summary"], "summary."))
    if about:
        lines += ["| field | value |", "|---|---|"]
        lines += [f"| {_md(k)} | {_md(_format(v))} |" for k, v in about.items()]
        lines.append("")
    for title, columns, rows in recording_tables(recording):
        lines += [f"## {title.capitalize()} ({len(rows)})", ""]
        lines.append("```{raw} html")
        table = Table(header=columns, rows=[[r[0]] + r[1:] for r in rows])
        lines.append(table_html(table))
        lines += ["```", ""]
    lines += [
        "## The file",
        "",
        f"{{download}}`Download {name} <{name}>`: the recording as the chapters read it.",
        "",
        "```{raw} html\n<details><summary>Show the JSON</summary>\n```",
        "",
        f"```{{literalinclude}} {name}\n:language: json\n```",
        "",
        "```{raw} html\n</details>\n```",
        "",
    ]
    return "\n".join(lines)


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")
