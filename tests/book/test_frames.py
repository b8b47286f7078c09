"""Explorers redrawn in the book from figures drawn at build time (pecourse.book.frames)."""

from __future__ import annotations

import base64
import json
import math
import re
from pathlib import Path

import pytest

from pecourse import course
from pecourse.book import builder, check, frames, pages

ROOT = course.checkout()
CHAPTER_01 = ROOT / "notebooks" / "01_learned_absolute_positions.ipynb"


NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_a_sliders_grid_spans_it_on_its_steps_and_holds_the_saved_value():
    grid = frames.slider_grid({"min": 0, "max": 63, "step": 1, "value": 20})
    assert grid[0] == 0 and grid[-1] == 63 and 20 in grid
    assert len(grid) == frames.MAX_VALUES + 1 and list(grid) == sorted(set(grid))
    assert frames.slider_grid({"min": 2, "max": 5, "step": 1, "value": 3}) == (2, 3, 4, 5)
    floats = frames.slider_grid({"min": 0.0, "max": 1.0, "step": 0.05, "value": 0.15}, float)
    assert floats[0] == 0.0 and floats[-1] == 1.0 and 0.15 in floats
    assert all(abs(v / 0.05 - round(v / 0.05)) < 1e-9 for v in floats)  # on the lattice
    with pytest.raises(ValueError, match="state must be a slider's"):
        frames.slider_grid({"min": 0, "max": 10, "step": 0, "value": 1})


def test_each_kind_of_control_offers_its_values_and_starts_at_the_saved_one():
    log = frames.control_from_state(
        "FloatLogSliderModel",
        {"description": "base", "base": 10, "min": 2.0, "max": 7.0, "step": 0.1,
         "value": 10000.0, "readout_format": ".3g"},
    )  # fmt: skip
    assert log.kind == "range" and log.values[log.saved] == 10000.0  # exactly the saved value
    assert log.values[0] == pytest.approx(100.0) and log.values[-1] == pytest.approx(1e7)
    exponents = [math.log10(v) for v in log.values]
    assert all(abs(e * 10 - round(e * 10)) < 1e-9 for e in exponents)  # on the 0.1 lattice
    assert log.labels[log.saved] == "1e+04"  # the widget's own readout format
    box = frames.control_from_state("CheckboxModel", {"description": "causal", "value": True})
    assert (box.kind, box.values, box.saved) == ("checkbox", (False, True), 1)
    menu = frames.control_from_state(
        "DropdownModel", {"description": "seed", "_options_labels": ["0", "1", "2"], "index": 2}
    )
    assert (menu.kind, menu.values, menu.labels, menu.saved) == (
        "select", (0, 1, 2), ("0", "1", "2"), 2
    )  # fmt: skip
    lengths = frames.control_from_state(
        "SelectionSliderModel", {"description": "n", "_options_labels": ["64", "128"], "index": 1}
    )
    assert (lengths.kind, lengths.values, lengths.saved) == ("range", (0, 1), 1)
    many = frames.control_from_state(
        "SelectMultipleModel",
        {"description": "schemes", "_options_labels": ["a", "b", "c"], "index": [2, 0]},
    )
    # the saved selection first, then each option alone, then all of them
    assert many.values == ((2, 0), (0,), (1,), (2,), (0, 1, 2)) and many.saved == 0
    assert many.labels == ("c, a", "a", "b", "c", "a, b, c")
    assert frames.control_from_state("IntRangeSliderModel", {"value": [1, 2]}) is None
    assert frames.control_from_state("TextModel", {"value": "x"}) is None


def _control(name: str, n: int, saved: int = 0) -> frames.Control:
    return frames.Control(name, "range", tuple(range(n)), tuple(map(str, range(n))), saved)


def test_a_small_grid_is_drawn_whole_and_a_large_one_one_control_at_a_time():
    small = (_control("a", 4, saved=2), _control("b", 3))
    combos, full = frames.combinations(small)
    assert full and combos[0] == (2, 0) and len(set(combos)) == len(combos) == 12
    big = (_control("a", 13, saved=5), _control("b", 12, saved=3), _control("c", 2))
    assert 13 * 12 * 2 > frames.FULL_GRID_MAX
    combos, full = frames.combinations(big)
    assert not full and combos[0] == (5, 3, 0)
    assert len(set(combos)) == len(combos) == 1 + 12 + 11 + 1
    for combo in combos:  # each moves at most one control away from the saved values
        assert sum(k != s for k, s in zip(combo, combos[0])) <= 1
    for i, control in enumerate(big):  # and every value of every control is reachable
        assert {c[i] for c in combos} == set(range(len(control.values)))


def test_every_explorer_in_every_chapter_is_drawn_in_the_book():
    total = 0
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text())
        explorers = pages.find_explorers(nb)
        made = [
            i
            for i, c in enumerate(nb["cells"])
            if c["cell_type"] == "code"
            and "interact(" in "".join(c["source"])
            and pages._widget_views(c)
        ]
        assert [e.cell for e in explorers] == made, path.name
        for e in explorers:
            assert e.combos[0] == e.saved and len(set(e.combos)) == len(e.combos)
            assert len(e.combos) <= max(frames.FULL_GRID_MAX, 1 + sum(
                len(c.values) - 1 for c in e.controls
            )), path.name  # fmt: skip
        total += len(explorers)
    assert total >= 17  # chapters 01-16, chapter 07 has two
    # chapter 03's five sliders, in the order the explorer shows them, saved values first
    alibi = json.loads((ROOT / "notebooks" / "03_alibi.ipynb").read_text())
    (explorer,) = pages.find_explorers(alibi)
    assert [c.name for c in explorer.controls] == [
        "num_heads", "head", "context", "needle_distance", "margin"
    ]  # fmt: skip
    assert frames.describe(explorer, explorer.saved) == (
        "num_heads = 8, head = 0, context = 256, needle_distance = 64, margin = 8.00"
    )
    assert not explorer.full  # 13 x 12 x 13 x 13 x 13 combinations would be too many


def _fake_frames(explorer: frames.Explorer) -> frames.Frames:
    return frames.Frames(
        explorer, tuple(f"png {frames.describe(explorer, c)}".encode() for c in explorer.combos)
    )


def _around(prepared):
    i = next(
        i for i, c in enumerate(prepared["cells"]) if "interact(" in "".join(c.get("source", ""))
    )
    return prepared["cells"][i - 1]["source"], prepared["cells"][i]["outputs"]


def _page_data(html: str) -> dict:
    found = re.search(r'<script type="application/json">(.*?)</script>', html)
    return json.loads(found.group(1))


def test_a_drawn_explorer_replaces_the_widget_in_the_page_and_its_note_says_so():
    nb = json.loads(CHAPTER_01.read_text())
    (explorer,) = pages.find_explorers(nb)
    site = pages.Site(root=ROOT, docs={"notebooks/01_learned_absolute_positions"}, source_pages={})
    plain = pages.prepare_notebook(nb, site, "notebooks")
    drawn = pages.prepare_notebook(
        nb, site, "notebooks", frames={explorer.cell: _fake_frames(explorer)}
    )
    assert len(drawn["cells"]) == len(plain["cells"])  # one note above the explorer in each
    note, outputs = _around(plain)
    assert pages.NEEDS_PYTHON[0] in note and pages.WIDGET_VIEW in outputs[0]["data"]
    note, outputs = _around(drawn)
    (position,) = explorer.controls
    assert pages.FRAMED[0] in note and "13 values of `position`" in note
    (shown,) = outputs
    html = shown["data"]["text/html"]
    assert pages.WIDGET_VIEW not in shown["data"]
    assert f'max="{len(position.values) - 1}"' in html
    assert f'value="{position.saved}"' in html and "<output>20</output>" in html
    saved_file = frames.frame_file(b"png position = 20")
    assert f'src="../{saved_file}"' in html  # the saved value's figure first, beside the page
    data = _page_data(html)
    assert data["labels"] == [[str(v) for v in position.values]] and data["full"] is True
    assert data["frames"] == {
        str(k): "../" + frames.frame_file(f"png position = {v}".encode())
        for k, v in enumerate(position.values)
    }


def test_an_explorer_drawn_one_control_at_a_time_says_so_and_offers_each_control():
    nb = json.loads((ROOT / "notebooks" / "02_why_attention_needs_positions.ipynb").read_text())
    (explorer,) = pages.find_explorers(nb)
    assert not explorer.full
    drawn = frames.Frames(explorer, (b"png saved", *(f"printed {c}" for c in explorer.combos[1:])))
    site = pages.Site(root=ROOT, docs=set(), source_pages={})
    note, (shown,) = _around(
        pages.prepare_notebook(nb, site, "notebooks", frames={explorer.cell: drawn})
    )
    assert f"{len(explorer.combos)} figures" in note and pages.FRAMED_ONE in note
    html = shown["data"]["text/html"]
    # a drop-down, two checkboxes and a slider, in the explorer's order
    kinds = re.findall(r'<(select|input type="\w+")[^>]*data-control="(\d)"', html)
    assert kinds == [
        ("select", "0"), ('input type="checkbox"', "1"), ('input type="checkbox"', "2"),
        ('input type="range"', "3"),
    ]  # fmt: skip
    assert '<option value="0" selected>reverse</option>' in html
    data = _page_data(html)
    assert data["full"] is False and data["saved"] == list(explorer.saved)
    assert data["frames"]["0,0,0,0"] == "../" + frames.frame_file(b"png saved")
    assert data["frames"]["0,0,0,3"] == {"text": "printed (0, 0, 0, 3)"}


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
    assert len(drawn_01.frames) == len(explorer.combos) == 13
    assert all(png.startswith(b"\x89PNG") for png in drawn_01.frames)
    assert len(set(drawn_01.frames)) == len(explorer.combos)  # every value draws its own figure
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
    assert explorer.combos[0] == explorer.saved and drawn_01.frames[0] in saved
    # a second build reads the cache: no kernel
    monkeypatch.setattr(frames, "draw", lambda *a, **k: pytest.fail("drew again"))
    again = frames.drawn(CHAPTER_01, pages.find_explorers(nb), cache)
    assert again[cell].frames == drawn_01.frames


def test_a_failed_drawing_leaves_the_saved_output(tmp_path, monkeypatch, caplog):
    def fails(*args, **kwargs):
        raise RuntimeError("a long cell\n...\nthe chapter raised")

    monkeypatch.setattr(frames, "draw", fails)
    assert builder._frames(CHAPTER_01, tmp_path) == {}
    assert "explorers not drawn" in caplog.text and "the chapter raised" in caplog.text
    assert "a long cell" not in caplog.text  # the error's last line, not the whole cell


def _shown(page, box) -> tuple[list[str], str, int]:
    """What a drawn explorer shows: its readouts, its figure's file, the figure's width."""
    page.wait_for_function(
        "box => box.querySelector('img')?.complete ?? true", arg=box.element_handle(), timeout=5000
    )
    readouts = [o.inner_text() for o in box.locator("output").all()]
    figure = box.locator("img")
    width = figure.evaluate("img => img.complete ? img.naturalWidth : 0")
    return readouts, figure.get_attribute("src"), width


@pytest.mark.slow  # a Sphinx build of chapter 01 and a browser session: 1-2 minutes
def test_the_drawn_explorer_redraws_in_the_browser(chapter_01_frames, tmp_path):
    from tests.book.test_browser import _require_browser

    _require_browser()
    cache, drawn = chapter_01_frames
    (drawn_01,) = drawn.values()
    (position,) = drawn_01.explorer.controls
    values = position.values
    out = tmp_path / "book"
    result = builder.build(out, chapters=[1], frames_cache=cache)  # drawn above
    assert result.warnings == ()
    page_path = out / "notebooks" / "01_learned_absolute_positions.html"

    def frame_of(value) -> bytes:
        k = values.index(value)
        return drawn_01.frames[drawn_01.explorer.combos.index((k,))]

    def file_of(src: str) -> bytes:
        return (page_path.parent / src).read_bytes()

    # every figure the page can show is in the site
    data = _page_data(page_path.read_text(encoding="utf-8"))
    assert len(data["frames"]) == len(values)
    assert all((page_path.parent / src).is_file() for src in data["frames"].values())
    with check.OfflineBrowser() as browser:
        report = browser.check(page_path, check.PageReport(page_path.name))
        page = browser.page
        box = page.locator(".pecourse-frames")
        assert box.count() == 1
        readouts, src, width = _shown(page, box)
        assert readouts == ["20"] and file_of(src) == frame_of(20) and width > 0
        slider = box.locator("input[type=range]")
        slider.focus()
        page.keyboard.press("ArrowRight")  # the next value on the grid; the page stays
        after = values[values.index(20) + 1]
        readouts, src, width = _shown(page, box)
        assert readouts == [str(after)] and file_of(src) == frame_of(after) and width > 0
        assert page.url == page_path.as_uri()
        track = slider.bounding_box()  # a click at the left end of the track: the first value
        page.mouse.click(track["x"] + 2, track["y"] + track["height"] / 2)
        page.wait_for_timeout(200)
        readouts, src, width = _shown(page, box)
        assert readouts == [str(values[0])] and file_of(src) == frame_of(values[0]) and width > 0
        assert check._move_slider(page) == ""  # what make book-check does
    assert report.problems == [] and browser.outside == []


def _page_with(tmp_path: Path, drawn: frames.Frames) -> Path:
    """A plain page showing one drawn explorer, its figures beside it as the book writes them."""
    for frame in drawn.frames:
        if isinstance(frame, bytes):
            (tmp_path / frames.frame_file(frame)).parent.mkdir(exist_ok=True)
            (tmp_path / frames.frame_file(frame)).write_bytes(frame)
    page = tmp_path / "page.html"
    page.write_text(
        f"<html><body><main>{frames.explorer_html(drawn, '.')}</main></body></html>",
        encoding="utf-8",
    )
    return page


def _png(width: int) -> bytes:
    """A one-row grey PNG ``width`` pixels wide (each figure told apart by its width)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, 1, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"\x00" + b"\x80" * width)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


@pytest.mark.slow  # a browser session: 5-15 s
def test_one_control_at_a_time_in_the_browser(tmp_path):
    # A drop-down, a checkbox and a slider, drawn one control at a time: moving one puts the
    # others back at their saved values, and each figure (or printed text) is the one drawn
    # for what the controls show.
    from tests.book.test_browser import _require_browser

    _require_browser()
    controls = [
        frames.Control("scheme", "select", (0, 1, 2), ("RoPE", "ALiBi", "NoPE"), 0),
        frames.Control("causal", "checkbox", (False, True), ("off", "on"), 0),
        frames.Control("shift", "range", (0, 5, 10, 15), ("0", "5", "10", "15"), 1),
    ]
    combos, full = frames.combinations(tuple(controls), most=1)  # 24 would fit: force it
    explorer = frames.Explorer(0, tuple(controls), combos, full)
    assert explorer.combos[0] == (0, 0, 1) and len(explorer.combos) == 1 + 2 + 1 + 3
    figures = {
        combo: ("the explorer refuses this" if combo == (2, 0, 1) else _png(10 + i))
        for i, combo in enumerate(explorer.combos)
    }
    drawn = frames.Frames(explorer, tuple(figures.values()))
    page_path = _page_with(tmp_path, drawn)
    with check.OfflineBrowser() as browser:
        report = check.PageReport("page.html")
        browser.open(page_path, report)
        page = browser.page
        box = page.locator(".pecourse-frames")
        menu, tick, slider = (box.locator(f"[data-control='{i}']") for i in range(3))

        def width() -> int:
            return _shown(page, box)[2]

        assert width() == 10 and box.locator("output").inner_text() == "5"
        slider.focus()
        page.keyboard.press("End")
        assert box.locator("output").inner_text() == "15"
        assert width() == 10 + explorer.combos.index((0, 0, 3))
        menu.select_option(label="ALiBi")  # the slider goes back to its saved 5
        assert box.locator("output").inner_text() == "5" and slider.input_value() == "1"
        assert width() == 10 + explorer.combos.index((1, 0, 1))
        tick.check()  # the drop-down goes back to RoPE
        assert menu.input_value() == "0"
        assert width() == 10 + explorer.combos.index((0, 1, 1))
        assert "causal = on" in box.locator("img").get_attribute("alt")
        menu.select_option(label="NoPE")  # printed text instead of a figure
        text = box.locator("pre")
        assert text.is_visible() and text.inner_text() == "the explorer refuses this"
        assert not box.locator("img").is_visible() and not tick.is_checked()
        menu.select_option(label="RoPE")
        assert box.locator("img").is_visible() and not text.is_visible() and width() == 10
    assert report.problems == [] and browser.outside == []


@pytest.mark.slow  # one kernel: 5-20 s
def test_drawing_calls_the_explorer_with_each_controls_values(tmp_path, caplog):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# A page"),
        nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nOFFSET = 10"),
        nbformat.v4.new_code_cell(
            "from ipywidgets import Checkbox, Dropdown, IntSlider, SelectMultiple, interact\n"
            "def f(x=1, kind='a', flip=False, picks=('p',)):\n"
            "    if x == 0:\n"
            "        print('nothing to draw')\n"
            "        return\n"
            "    if x == 3 and kind == 'b':\n"
            "        raise ValueError('x = 3 with b')\n"
            "    plt.plot([0, 1], [0, x + OFFSET])\n"
            "    plt.title(f'{x} {kind} {flip} {picks}')\n"
            "    plt.show()\n"
            "_ = interact(f, x=IntSlider(value=1, min=0, max=3),\n"
            "             kind=Dropdown(options={'first': 'a', 'second': 'b'}),\n"
            "             flip=Checkbox(value=False), picks=SelectMultiple(options=['p', 'q']))"
        ),
        nbformat.v4.new_code_cell("raise RuntimeError('after the explorer: never run')"),
        nbformat.v4.new_code_cell("_ = interact(lambda n=1: print(n), n=(0, 2))"),
    ]
    path = tmp_path / "page.ipynb"
    nbformat.write(nb, path)
    controls = (
        frames.Control("x", "range", (0, 1, 3), ("0", "1", "3"), 1),
        frames.Control("kind", "select", (0, 1), ("first", "second"), 0),
        frames.Control("flip", "checkbox", (False, True), ("off", "on"), 0),
        frames.Control("picks", "select", ((0,), (1,), (0, 1)), ("p", "q", "p, q"), 0),
    )
    combos = ((1, 0, 0, 0), (1, 1, 1, 2), (0, 0, 0, 0), (2, 1, 0, 0), (2, 0, 0, 1))
    explorer = frames.Explorer(2, controls, combos, full=False)
    (drawn,) = frames.draw(path, [explorer]).values()
    saved, varied, printed, raised, last = drawn.frames
    assert all(isinstance(f, bytes) and f.startswith(b"\x89PNG") for f in (saved, varied, last))
    assert len({saved, varied, last}) == 3  # each call drew its own figure
    assert printed == "nothing to draw\n"  # printed instead of a figure: shown as text
    assert raised == "ValueError: x = 3 with b"  # as a reader of the notebook would see it
    assert "the explorer raised at x = 3, kind = second, flip = off, picks = p" in caplog.text
    nb.cells[2] = nbformat.v4.new_code_cell(
        "from ipywidgets import interact\n_ = interact(lambda x=1: None, x=(0, 2))"
    )
    nbformat.write(nb, path)  # an explorer that neither draws nor prints: refused
    with pytest.raises(RuntimeError, match="drew no figure at x = 0"):
        frames.draw(path, [frames.Explorer(2, controls[:1], ((0,),), full=True)])
