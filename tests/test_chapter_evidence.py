"""Every chapter argues from recordings with three or more training seeds, within the course's
prose budget.

A chapter that read a one-seed recording would state a single training run's number as the
scheme's. These tests read the committed notebooks: every recording a code cell loads must be a
declared study (or chapter 16's base-crossing run) with three or more seeds, and the prose must
stay within the 2,600 words the course allows a chapter.
"""

import json
import re
from pathlib import Path

import pytest

from pecourse.course import prose_words
from pecourse.lab.results import recorded
from pecourse.lab.studies import STUDIES

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
#: Recordings that are not declared studies: the base-crossing run (pecourse.lab.base_crossing).
OTHER_RECORDINGS = {"rope_base_crossing"}
MAX_PROSE_WORDS = 2600
RECORDED = re.compile(r"""recorded\(\s*["']([A-Za-z0-9_]+)["']\s*\)""")


def _notebook(name: str) -> dict:
    return json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))


def recordings_read(notebook: dict) -> set[str]:
    """The names passed to ``recorded(...)`` in a notebook's code cells."""
    code = "\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code")
    return set(RECORDED.findall(code))


def test_the_chapters_that_read_recordings_are_found():
    """The pattern still matches the chapters' cells: most chapters read a recording."""
    reading = [c for c in CHAPTERS if recordings_read(_notebook(c))]
    assert len(CHAPTERS) == 17 and len(reading) >= 10, reading


def test_recordings_read_finds_names_in_code_cells_only():
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "source": ['a = recorded("needle_seeds")\n', "b = recorded('x_y')"],
            },
            {"cell_type": "markdown", "source": 'recorded("extrapolation")'},
        ]
    }
    assert recordings_read(nb) == {"needle_seeds", "x_y"}


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_reads_only_three_seed_studies(chapter):
    names = recordings_read(_notebook(chapter))
    not_studies = sorted(n for n in names if n not in STUDIES and n not in OTHER_RECORDINGS)
    assert not not_studies, (
        f"{chapter} reads recordings that are not declared studies: {not_studies}"
    )
    few_seeds = {n: recorded(n)["seeds"] for n in names if len(recorded(n)["seeds"]) < 3}
    assert not few_seeds, f"{chapter} reads recordings with fewer than three seeds: {few_seeds}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_prose_within_budget(chapter):
    words = prose_words(_notebook(chapter))
    assert words <= MAX_PROSE_WORDS, (
        f"{chapter} has {words} words of prose (at most {MAX_PROSE_WORDS})"
    )
