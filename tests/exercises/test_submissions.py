"""Submissions are read as the student would be allowed to read them.

The grader runs as the instructor (often root). A submission that is a link (to
``solutions/``, to a file only root can read), a device, or a hard link to a file outside
the submissions folder is refused with a reason, and no reason quotes a file's bytes. Names
reach the terminal and the CSV escaped, and a student name that looks like another's
(Cyrillic "а" for Latin "a") is flagged.
"""

from __future__ import annotations

import io
import logging
import os
import shutil

import pytest
from nbformat.v4 import new_markdown_cell

from pecourse.exercises.grade import _look_alikes, grade_class, write_csv
from pecourse.exercises.notebook import write_notebook

from .conftest import SLUG, source09
from .helpers import SOLUTIONS_DIR, typed

SECRET = "root:SECRET-HASH-$6$abcdefgh$"  # what a root-only file holds
ESCAPE = "evil\x1b[2J\x1b[31mFAKE\x07"  # clears the screen, paints a fake message
LOOK_ALIKE = "\u0430da"  # Cyrillic a, then Latin "da"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("subs")
    outside = tmp_path_factory.mktemp("outside")
    secret = outside / "shadow"
    secret.write_text(SECRET + "\n")
    secret.chmod(0o600)
    solution = SOLUTIONS_DIR / f"{SLUG}.ipynb"
    copy = outside / f"{SLUG}.ipynb"
    shutil.copy(solution, copy)
    name = f"{SLUG}.ipynb"
    blank = typed(source09(), {})
    for student in ("ada", LOOK_ALIKE):
        (root / student).mkdir()
        write_notebook(blank, root / student / name)
    (root / "link_file").mkdir()
    (root / "link_file" / name).symlink_to(solution)
    (root / "link_dir").symlink_to(SOLUTIONS_DIR, target_is_directory=True)
    (root / "link_secret").mkdir()
    (root / "link_secret" / name).symlink_to(secret)
    (root / "hard_link").mkdir()
    os.link(copy, root / "hard_link" / name)
    (root / "device").mkdir()
    os.mknod(root / "device" / name, 0o600 | 0o020000, os.makedev(1, 3))  # /dev/null's
    (root / "huge").mkdir()  # a notebook the grader would have to parse in its own process
    padded = typed(source09(), {})
    padded.cells.append(new_markdown_cell("x" * (17 * 2**20)))
    write_notebook(padded, root / "huge" / name)
    (root / ESCAPE).mkdir()
    (root / ESCAPE / f"x\x1b]0;owned\x07{SLUG}.ipynb").write_text("{}")
    err, log = io.StringIO(), logging.getLogger("pecourse.exercises.grade")
    log.addHandler(handler := logging.StreamHandler(err))
    try:
        rows = grade_class(root, exercises=[SLUG], progress=False)
    finally:
        log.removeHandler(handler)
    return {(r.student, r.part): r for r in rows}, rows, err.getvalue()


def _reasons(rows, student):
    return {part: r.reason for (s, part), r in rows.items() if s == student}


@pytest.mark.parametrize(
    "student, why",
    [
        ("link_file", "symbolic link"),
        ("link_dir", "symbolic link"),
        ("link_secret", "symbolic link"),
        ("hard_link", "hard link"),
        ("device", "not a regular file"),
    ],
)
def test_links_devices_and_outside_files_are_refused(graded, student, why):
    rows = graded[0]
    reasons = _reasons(rows, student)
    assert reasons, rows.keys()
    assert all(rows[(student, p)].points == 0 for p in reasons), reasons
    assert all(why in r and "refused" in r for r in reasons.values()), reasons


def test_a_notebook_too_large_to_read_is_refused(graded):
    reasons = _reasons(graded[0], "huge")
    assert reasons and all("not a valid notebook (over 16 MB)" in r for r in reasons.values())


def test_no_reason_quotes_a_files_bytes(graded):
    rows = graded[1]
    assert not [r for r in rows if "SECRET" in r.reason]


def test_names_reach_the_terminal_and_the_csv_escaped(graded, tmp_path):
    rows = graded[1]
    write_csv(rows, tmp_path / "book.csv")
    text = (tmp_path / "book.csv").read_text()
    assert not [c for c in text if not c.isprintable() and c not in "\r\n"]
    assert "evil\\x1b[2J" in text  # the folder is still named, escaped
    err = graded[2]
    assert "misnamed" in err and "owned" in err, err  # the file is named, escaped
    assert "\x1b" not in err and "\x07" not in err


def test_look_alike_names_are_flagged(graded):
    rows = graded[0]
    flagged = _reasons(rows, LOOK_ALIKE)
    assert flagged and all("look" in r and "CYRILLIC" in r for r in flagged.values()), flagged
    # both are flagged: which of the two is the real "ada" is for the instructor to tell
    assert all("reads as '\\u0430da'" in r for r in _reasons(rows, "ada").values())


def test_look_alike_names_within_one_script_are_flagged():
    # Unicode TR39 skeletons, one character for one: an all-Cyrillic name beside a Latin
    # one, capital I beside small l; digits and other scripts' own names are no sign.
    names = [
        "\u0430\u0441\u0435",
        "ace",
        "Iinus",
        "linus",
        "ada1",
        "Zo\u00eb",
        "\u674e",
        "mary",
        "rnary",
    ]
    flagged = _look_alikes(names)
    assert sorted(flagged) == sorted(names[:4]), flagged
    assert (
        "reads as 'ace'" in flagged["\u0430\u0441\u0435"] and "reads as 'linus'" in flagged["Iinus"]
    )
