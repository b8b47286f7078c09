"""Explorers redrawn in the book from figures drawn at build time (pecourse.book.frames)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from pecourse import course
from pecourse.book import builder, check, frames, pages

ROOT = course.checkout()
CHAPTER_01 = ROOT / "notebooks" / "01_learned_absolute_positions.ipynb"


def test_a_sliders_grid_spans_it_on_its_steps_and_holds_the_saved_value():
    grid = frames.slider_grid({"min": 0, "max": 63, "step": 1, "value": 20})
    assert grid[0] == 0 and grid[-1] == 63 and 20 in grid
    assert len(grid) == frames.MAX_FRAMES + 1 and list(grid) == sorted(set(grid))
    assert frames.slider_grid({"min": 2, "max": 5, "step": 1, "value": 3}) == (2, 3, 4, 5)
    floats = frames.slider_grid({"min": 0.0, "max": 1.0, "step": 0.05, "value": 0.15}, float)
    assert floats[0] == 0.0 and floats[-1] == 1.0 and 0.15 in floats
    assert all(abs(v / 0.05 - round(v / 0.05)) < 1e-9 for v in floats)  # on the lattice
    with pytest.raises(ValueError, match="state must be a slider's"):
        frames.slider_grid({"min": 0, "max": 10, "step": 0, "value": 1})


def test_one_slider_explorers_are_found_and_others_are_left():
    (explorer,) = pages.find_explorers(json.loads(CHAPTER_01.read_text()))
    nb = json.loads(CHAPTER_01.read_text())
    assert "interact(" in "".join(nb["cells"][explorer.cell]["source"])
    assert explorer.name == "position" and explorer.saved == 20 and 20 in explorer.values
    # chapter 03's explorer has five controls: it keeps its saved output and the note
    alibi = json.loads((ROOT / "notebooks" / "03_alibi.ipynb").read_text())
    assert pages.find_explorers(alibi) == []


def _fake_frames(explorer: frames.Explorer) -> frames.Frames:
    return frames.Frames(explorer, tuple(f"png {v}".encode() for v in explorer.values))


def test_a_drawn_explorer_replaces_the_widget_in_the_page_and_its_note_says_so():
    nb = json.loads(CHAPTER_01.read_text())
    (explorer,) = pages.find_explorers(nb)
    site = pages.Site(root=ROOT, docs={"notebooks/01_learned_absolute_positions"}, source_pages={})
    plain = pages.prepare_notebook(nb, site, "notebooks")
    drawn = pages.prepare_notebook(
        nb, site, "notebooks", frames={explorer.cell: _fake_frames(explorer)}
    )
    assert len(drawn["cells"]) == len(plain["cells"])  # one note above the explorer in each

    def around(prepared):
        i = next(
            i
            for i, c in enumerate(prepared["cells"])
            if "interact(" in "".join(c.get("source", ""))
        )
        return prepared["cells"][i - 1]["source"], prepared["cells"][i]["outputs"]

    note, outputs = around(plain)
    assert pages.NEEDS_PYTHON[0] in note and pages.WIDGET_VIEW in outputs[0]["data"]
    note, outputs = around(drawn)
    assert pages.FRAMED[0] in note and f"{len(explorer.values)} values of `position`" in note
    (shown,) = outputs
    html = shown["data"]["text/html"]
    assert pages.WIDGET_VIEW not in shown["data"]
    assert f'max="{len(explorer.values) - 1}"' in html
    start = explorer.values.index(explorer.saved)
    assert f'value="{start}"' in html and "<output>20</output>" in html
    saved_png = base64.b64encode(b"png 20").decode()
    assert f'src="data:image/png;base64,{saved_png}"' in html  # the saved value's figure first
    data = json.loads(re.search(r'<script type="application/json">(.*?)</script>', html).group(1))
    assert data["labels"] == [str(v) for v in explorer.values]
    assert [base64.b64decode(f) for f in data["frames"]] == [
        f"png {v}".encode() for v in explorer.values
    ]


@pytest.fixture(scope="module")
def chapter_01_frames(tmp_path_factory) -> tuple[Path, dict[int, frames.Frames]]:
    cache = tmp_path_factory.mktemp("frames")
    return cache, frames.drawn(
        CHAPTER_01, pages.find_explorers(json.loads(CHAPTER_01.read_text())), cache
    )


@pytest.mark.slow  # runs chapter 01 in a kernel up to its explorer: 20-60 s
def test_frames_are_the_explorers_own_figures_and_are_kept(chapter_01_frames, monkeypatch):
    cache, drawn = chapter_01_frames
    ((cell, drawn_01),) = drawn.items()
    explorer = drawn_01.explorer
    assert len(drawn_01.pngs) == len(explorer.values)
    assert all(png.startswith(b"\x89PNG") for png in drawn_01.pngs)
    assert len(set(drawn_01.pngs)) == len(explorer.values)  # every value draws its own figure
    # at the saved value, the frame is the figure the notebook saved, byte for byte
    nb = json.loads(CHAPTER_01.read_text())
    state = pages.saved_widget_state(nb)
    saved = [
        base64.b64decode(out["data"]["image/png"])
        for model in state.values()
        if model.get("model_name") == "OutputModel"
        for out in model["state"].get("outputs", [])
        if "image/png" in out.get("data", {})
    ]
    assert drawn_01.pngs[explorer.values.index(explorer.saved)] in saved
    # a second build reads the cache: no kernel
    monkeypatch.setattr(frames, "draw", lambda *a, **k: pytest.fail("drew again"))
    assert (
        frames.drawn(CHAPTER_01, pages.find_explorers(json.loads(CHAPTER_01.read_text())), cache)[
            cell
        ].pngs
        == drawn_01.pngs
    )


def test_a_failed_drawing_leaves_the_saved_output(tmp_path, monkeypatch, caplog):
    def fails(*args, **kwargs):
        raise RuntimeError("the chapter raised")

    monkeypatch.setattr(frames, "draw", fails)
    assert builder._frames(CHAPTER_01, tmp_path) == {}
    assert "explorers not drawn" in caplog.text and "the chapter raised" in caplog.text


@pytest.mark.slow  # a Sphinx build of chapter 01 and a browser session: 1-2 minutes
def test_the_drawn_explorer_redraws_in_the_browser(chapter_01_frames, tmp_path):
    from tests.book.test_browser import _require_browser

    _require_browser()
    cache, drawn = chapter_01_frames
    (drawn_01,) = drawn.values()
    values = drawn_01.explorer.values
    out = tmp_path / "book"
    # the build finds its frames in the cache beside the site (drawn above)
    (tmp_path / "book-frames").symlink_to(cache, target_is_directory=True)
    result = builder.build(out, chapters=[1])
    assert result.warnings == ()
    page_path = out / "notebooks" / "01_learned_absolute_positions.html"

    def shown(page) -> tuple[str, bytes, int]:
        box = page.locator(".pecourse-frames")
        src = box.locator("img").get_attribute("src")
        width = box.locator("img").evaluate("img => img.complete ? img.naturalWidth : 0")
        return box.locator("output").inner_text(), base64.b64decode(src.split(",", 1)[1]), width

    def frame_of(value) -> bytes:
        return drawn_01.pngs[values.index(value)]

    with check.OfflineBrowser() as browser:
        report = browser.check(page_path, check.PageReport(page_path.name))
        page = browser.page
        assert page.locator(".pecourse-frames").count() == 1
        label, png, width = shown(page)
        assert (label, png) == ("20", frame_of(20)) and width > 0
        slider = page.locator(".pecourse-frames input[type=range]")
        slider.focus()
        page.keyboard.press("ArrowRight")  # the next value on the grid; the page stays
        after = values[values.index(20) + 1]
        label, png, width = shown(page)
        assert (label, png) == (str(after), frame_of(after)) and width > 0
        assert page.url == page_path.as_uri()
        box = slider.bounding_box()  # a click at the left end of the track: the first value
        page.mouse.click(box["x"] + 2, box["y"] + box["height"] / 2)
        page.wait_for_timeout(200)
        label, png, width = shown(page)
        assert (label, png) == (str(values[0]), frame_of(values[0])) and width > 0
    assert report.problems == [] and browser.outside == []


@pytest.mark.slow  # two kernels: 5-20 s
def test_drawing_runs_the_cells_before_the_explorer_and_refuses_a_value_with_no_figure(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# A page"),
        nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nOFFSET = 10"),
        nbformat.v4.new_code_cell(
            "from ipywidgets import IntSlider, interact\n"
            "def f(x=1):\n"
            "    if x == 0:\n"
            "        print('nothing to draw')\n"
            "        return\n"
            "    plt.plot([0, 1], [0, x + OFFSET])\n"
            "    plt.title(f'x = {x}')\n"
            "    plt.show()\n"
            "_ = interact(f, x=IntSlider(value=1, min=0, max=3))"
        ),
        nbformat.v4.new_code_cell("raise RuntimeError('after the explorer: never run')"),
    ]
    path = tmp_path / "page.ipynb"
    nbformat.write(nb, path)
    drawn = frames.draw(path, frames.Explorer(cell=2, name="x", values=(1, 2, 3), saved=1))
    assert len(drawn.pngs) == 3 and len(set(drawn.pngs)) == 3
    assert all(png.startswith(b"\x89PNG") for png in drawn.pngs)
    with pytest.raises(RuntimeError, match=r"drew no figure at x = \[0\]"):
        frames.draw(path, frames.Explorer(cell=2, name="x", values=(0, 1), saved=1))
