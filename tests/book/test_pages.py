"""What happens to a notebook on its way into the book: links, widgets, the quiz, exercises."""

import json
import re
from pathlib import Path

import pytest

from pecourse import course
from pecourse.book import builder, check, pages

ROOT = course.checkout()
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def site(docs=("notebooks/03_alibi", "exercises/03_alibi"), root=ROOT):
    return pages.Site(
        root=Path(root),
        docs=set(docs),
        source_pages={"pecourse/positions/alibi.py": "source/pecourse/positions/alibi.py"},
        course_docs={f"{d}/{c.slug}" for c in course.CONCEPTS for d in ("notebooks", "exercises")},
    )


# --- links -----------------------------------------------------------------------------------


def test_links_between_pages_of_the_build_stay_relative():
    s = site(docs={"notebooks/02_why_attention_needs_positions", "notebooks/03_alibi"})
    assert s.resolve("02_why_attention_needs_positions.ipynb", "notebooks") == (
        "02_why_attention_needs_positions.ipynb"
    )
    assert s.resolve("03_alibi.ipynb#the-formula", "notebooks") == "03_alibi.ipynb#the-formula"
    assert s.resolve("../exercises/03_alibi.ipynb", "notebooks") is None  # not in this build


def test_a_chapter_left_out_of_a_partial_build_becomes_plain_text():
    text = "Read [chapter 08](08_rope.ipynb) and [ALiBi](03_alibi.ipynb)."
    out = pages.rewrite_markdown(text, site(), "notebooks")
    assert out == "Read chapter 08 and [ALiBi](03_alibi.ipynb)."


def test_package_files_link_to_their_source_page():
    s = site()
    assert s.resolve("../pecourse/positions/alibi.py#L10", "notebooks") == (
        "../source/pecourse/positions/alibi.py.md#L10"
    )
    out = pages.rewrite_markdown("See `pecourse/positions/alibi.py`.", s, "notebooks")
    assert out == "See [`pecourse/positions/alibi.py`](../source/pecourse/positions/alibi.py.md)."


def test_code_spans_naming_a_page_become_links_and_nothing_else_does():
    s = site()
    text = (
        "**Exercise:** `exercises/03_alibi.ipynb`, checked by "
        "`pecourse check exercises/03_alibi.ipynb`; `exercises/08_rope.ipynb` is elsewhere; "
        "[`exercises/03_alibi.ipynb`](../exercises/03_alibi.ipynb) is linked already.\n\n"
        "```python\n# `exercises/03_alibi.ipynb` inside a fence stays code\n```\n"
    )
    out = pages.rewrite_markdown(text, s, "notebooks")
    assert out.count("](../exercises/03_alibi.ipynb)") == 2  # the bare span and the old link
    assert "`pecourse check exercises/03_alibi.ipynb`;" in out  # a command, not a path
    assert "`exercises/08_rope.ipynb` is elsewhere" in out  # not in this build
    assert "# `exercises/03_alibi.ipynb` inside a fence stays code\n" in out


def test_external_links_anchors_and_the_readme():
    s = site()
    assert s.resolve("https://arxiv.org/abs/2108.12409", "notebooks") == (
        "https://arxiv.org/abs/2108.12409"
    )
    assert s.resolve("#the-formula", "notebooks") == "#the-formula"
    assert s.resolve("../README.md#syllabus", "notebooks") == "../index.md#syllabus"


def test_a_linked_repository_file_travels_with_the_book(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "figure.png").write_bytes(b"png")
    s = site(root=tmp_path)
    text = "![a figure](../docs/figure.png) and [missing](../docs/nothing.png)"
    assert pages.rewrite_markdown(text, s, "notebooks") == text
    assert s.copies == {"docs/figure.png"}


# --- widgets ---------------------------------------------------------------------------------


def _model(name, **state):
    return {"model_name": name, "model_module": "@jupyter-widgets/controls", "state": state}


def _linked_state(with_button=False):
    state = {
        "slider": _model("IntSliderModel", layout="IPY_MODEL_layout", style="IPY_MODEL_style"),
        "text": _model("IntTextModel"),
        "layout": _model("LayoutModel"),
        "style": _model("SliderStyleModel"),
        "math": _model("HTMLMathModel", value="$x$"),
        "box": _model(
            "VBoxModel", children=["IPY_MODEL_slider", "IPY_MODEL_text", "IPY_MODEL_math"]
        ),
        "link": _model(
            "LinkModel", source=["IPY_MODEL_slider", "value"], target=["IPY_MODEL_text", "value"]
        ),
    }
    if with_button:
        state["button"] = _model("ButtonModel")
        state["box"]["state"]["children"].append("IPY_MODEL_button")
    return state


def test_controls_joined_by_jslink_need_no_kernel():
    state = _linked_state()
    assert pages.reachable_models(state, "box") == {
        "box", "slider", "text", "math", "layout", "style"
    }  # fmt: skip
    assert pages.needs_kernel(state, "box") is False
    assert pages.needs_kernel(state, "math") is False


def test_an_unlinked_control_or_a_button_needs_a_kernel():
    state = _linked_state(with_button=True)
    assert pages.needs_kernel(state, "box") is True
    state = _linked_state()
    del state["link"]
    assert pages.needs_kernel(state, "box") is True
    with pytest.raises(KeyError, match="no saved state"):
        pages.needs_kernel(state, "nope")


def _read(path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_committed_widget_has_saved_state(path):
    # The book can show a widget only from the state saved with the notebook, which
    # `make outputs` (pecourse.notebook_tools) writes. A notebook saved without it would
    # show "needs Python" notes instead of its explorers.
    nb = _read(path)
    state = pages.saved_widget_state(nb)
    views = [v for cell in nb["cells"] for v in pages._widget_views(cell)]
    missing = [v for v in views if v not in state]
    assert not missing, f"{path.name}: widget views without saved state (run `make outputs`)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_chapters_in_the_book(path):
    original = _read(path)
    before = json.dumps(original, sort_keys=True)
    s = site(docs={f"notebooks/{path.stem}", f"flashcards/{path.stem}"})
    nb = pages.prepare_notebook(original, s, "notebooks", f"flashcards/{path.stem}.md")
    assert json.dumps(original, sort_keys=True) == before  # the committed copy is untouched
    cells, added = nb["cells"], 0
    for i, cell in enumerate(cells):
        source = pages._text(cell.get("source", ""))
        if cell.get("cell_type") != "code":
            continue
        if "interact(" in source:  # an explorer drawn by Python: a note above it
            assert pages.NEEDS_PYTHON[0] in cells[i - 1]["source"], f"cell {i}"
            assert pages._widget_views(cell), f"cell {i} lost its saved widget"
            added += 1
        if re.search(r"\bquiz\(", source):  # the quiz needs Python and a database
            assert not pages._widget_views(cell)
            assert f"](../flashcards/{path.stem}.md)" in cells[i + 1]["source"]
            added += 1
        if "pecourse.info" in source:  # the machine that ran it: not shown
            assert cell["outputs"] == [] and pages.YOUR_MACHINE[0] in cells[i + 1]["source"]
            added += 1
    assert added and len(cells) == len(original["cells"]) + added
    # nothing of the machine the notebook was executed on: its paths, its host's CPU
    shown = json.dumps([c.get("outputs", []) for c in cells])
    assert str(ROOT) not in shown and "/.venv/" not in shown


def test_the_start_pages_machine_report_is_not_shown():
    original = _read(ROOT / "notebooks" / "00_start_here.ipynb")
    saved = [c for c in original["cells"] if "pecourse.info import" in pages._text(c["source"])]
    assert len(saved) == 1 and "torch" in json.dumps(saved[0]["outputs"])  # what it would show
    nb = pages.prepare_notebook(original, site(), "notebooks")
    shown = json.dumps([c.get("outputs", []) for c in nb["cells"]])
    assert "torch " not in shown and "platform" not in shown


def test_a_widget_without_saved_state_is_replaced_by_a_note():
    view = {"model_id": "abc", "version_major": 2, "version_minor": 0}
    cell = {
        "cell_type": "code",
        "source": "slider",
        "metadata": {},
        "outputs": [{"output_type": "display_data", "data": {pages.WIDGET_VIEW: view}}],
    }
    nb = {"cells": [cell], "metadata": {}}
    out = pages.prepare_notebook(nb, site(), "notebooks")
    assert pages.NO_STATE[0] in out["cells"][0]["source"]
    assert out["cells"][1]["outputs"] == []


# --- exercises -------------------------------------------------------------------------------


def test_exercise_pages_refuse_solutions_and_hidden_tests():
    nb = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": "# Exercise"},
            {"cell_type": "code", "metadata": {}, "source": "### BEGIN HIDDEN TESTS\nassert 1"},
        ],
        "metadata": {},
    }
    with pytest.raises(ValueError, match="BEGIN HIDDEN TESTS"):
        pages.prepare_exercise(nb, site(), "exercises", "03_alibi", None)


def test_a_committed_exercise_gets_its_how_to_note_under_the_title():
    original = _read(ROOT / "exercises" / "03_alibi.ipynb")
    s = site()
    nb = pages.prepare_exercise(original, s, "exercises", "03_alibi", "notebooks/03_alibi.ipynb")
    assert pages._text(nb["cells"][0]["source"]) == pages._text(original["cells"][0]["source"])
    assert "How to do this exercise" in nb["cells"][1]["source"]
    assert "[the chapter](../notebooks/03_alibi.ipynb)" in nb["cells"][1]["source"]


def test_source_page_and_summary():
    assert "```{literalinclude} alibi.py\n:language: python" in pages.source_page(
        "pecourse/positions/alibi.py"
    )
    assert pages.module_summary(ROOT / "pecourse" / "course.py").startswith("The course's map")


@pytest.mark.parametrize(
    "markdown",
    [
        # chapter 08 §4 once: the second line became a list item
        "Multiplying by $e^{i\\varphi} = \\cos\\varphi\n+ i\\sin\\varphi$ gives the rotation.",
        "a difference $x_m\n- x_n$ of two rows",
        "a quotient $a\n> b$ is wrong",
        "an unclosed $x^2 in prose",
    ],
)
def test_broken_maths_is_found(markdown):
    assert check.broken_maths(markdown)


def test_maths_that_markdown_keeps_whole_passes():
    text = (
        "Inline $x^2 + y$ and $a + b$ in a sentence.\n\n$$\\sum_i \\cos(m\\theta_i)$$\n\n"
        "`$HOME` in code, and a table:\n\n| a | $b_i$ |\n|---|---|\n| 1 | $2^{-8/n}$ |\n"
    )
    assert check.broken_maths(text) == []
    # the same sentence wrapped before the '+': a list item splits the formula in two
    broken = check.broken_maths(text.replace("$a + b$", "$a\n+ b$"))
    assert broken == ["and $a", "b$ in a sentence."]


def test_no_page_of_the_book_breaks_its_maths(tmp_path):
    # Every staged page: chapters, exercises, flashcards, the start page and source listings.
    builder.stage(tmp_path, chapters=None)
    assert check.broken_maths_in(tmp_path) == []
