"""Open a built book in headless Chromium with the network blocked, and say what is wrong.

Drives Debian's ``/usr/bin/chromium`` through Python playwright (a dev dependency; never
``playwright install``). Every request that is not a local file (or ``data:``/``blob:``) is
refused and reported, so a page that would reach a CDN fails the check even if it renders.

Per page: no console error, no uncaught exception, no failed or outside request; maths
typeset (no raw ``$``/``$$``/``\\(`` left in the prose, no MathJax error); every image
loaded; every saved widget rendered; a copy button on every code cell; no code cell that
scrolls sideways on a 1366 px laptop screen (the viewport); on a chapter, previous/next links
and a table of contents. Then what a reader does: move an explorer's slider and see its label
change (and, for an explorer drawn at build time, its figure), press → on a slider and on a
code block and stay on the page, switch the system to dark mode and see the page follow, flip
a flashcard, search (the expected page among the first three results, a snippet under every
result, no recording in them). Plus a static pass
over every HTML file: each local link and asset it names exists, none loads from a server, and
the chapters' previous/next links follow the suggested reading path.
:func:`broken_maths_in` reads the staged Markdown before Sphinx does (the builder reports
what it finds as warnings): maths that Markdown breaks apart never reaches MathJax whole.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

log = logging.getLogger(__name__)
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # Not --allow-file-access-from-files: a reader's browser refuses fetch() between file://
    # pages, and the check must see what the reader sees (search snippets fetch nothing).
]
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")
# A common laptop screen: code cells must fit its text column without scrolling sideways.
VIEWPORT = {"width": 1366, "height": 768}

# Text a reader sees that should have become typeset maths.
_RAW_MATH = re.compile(r"\$\$|(?<![\w\\$])\$(?=\S)[^$\n]{1,200}?(?<=\S)\$(?![\w$])|\\\(|\\\[")

_PROSE_TEXT = """() => {
  const main = document.querySelector('main') || document.body;
  const copy = main.cloneNode(true);
  copy.querySelectorAll('pre, code, script, style, mjx-container, .cell_input')
      .forEach(e => e.remove());
  return copy.innerText;
}"""


@dataclass
class PageReport:
    path: str
    problems: list[str] = field(default_factory=list)
    widgets: int = 0
    sliders: int = 0
    maths: int = 0
    images: int = 0


@dataclass
class CheckReport:
    pages: list[PageReport]
    interactions: dict[str, str]  # what was tried -> "" when it worked, else the problem
    links: list[str]  # broken local links, "page: target"; previous/next off the reading path
    outside_requests: list[str]
    screenshots: list[Path]
    seconds: float

    @property
    def problems(self) -> list[str]:
        out = [f"{p.path}: {problem}" for p in self.pages for problem in p.problems]
        out += [f"{what}: {problem}" for what, problem in self.interactions.items() if problem]
        out += [f"broken link {link}" for link in self.links]
        out += [f"request outside the book: {url}" for url in self.outside_requests]
        return out

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        lines = [
            f"checked {len(self.pages)} pages in {self.seconds:.0f} s: "
            f"{sum(p.maths for p in self.pages)} maths, "
            f"{sum(p.images for p in self.pages)} images, "
            f"{sum(p.widgets for p in self.pages)} widgets rendered"
        ]
        lines += [f"  {what}: {problem or 'ok'}" for what, problem in self.interactions.items()]
        lines += [f"  screenshot: {path}" for path in self.screenshots]
        lines += [f"PROBLEM {p}" for p in self.problems] or ["no problems"]
        return "\n".join(lines)


# --- static pass ---------------------------------------------------------------------------


class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value and (name in ("src", "href") or (tag == "link" and name == "href")):
                self.refs.append(value)


def broken_local_links(site: Path) -> list[str]:
    """Local links and assets named by the site's HTML files that do not exist."""
    site = Path(site)
    broken = []
    for page in sorted(site.rglob("*.html")):
        if "_static" in page.relative_to(site).parts:  # the theme's template fragments
            continue
        parser = _Refs()
        parser.feed(page.read_text(encoding="utf-8", errors="replace"))
        for ref in parser.refs:
            parts = urlsplit(ref)
            if parts.scheme or ref.startswith(("#", "//")) or not parts.path:
                continue
            target = (page.parent / unquote(parts.path)).resolve()
            if not target.exists():
                broken.append(f"{page.relative_to(site)}: {ref}")
    return broken


class _PrevNext(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: dict[str, str] = {}  # "left-prev"/"right-next" -> href

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for kind in ("left-prev", "right-next"):
            if tag == "a" and kind in (attrs.get("class") or "").split():
                self.links[kind] = attrs.get("href") or ""


def reading_path_links(site: Path) -> list[str]:
    """Chapters whose previous/next links do not follow the suggested reading path
    (``course.LEARNING_PATH``, among the chapters this book has). One line per wrong link."""
    from pecourse import course

    site = Path(site)
    order = [course.concept(n).slug for n in course.LEARNING_PATH]
    built = [slug for slug in order if (site / "notebooks" / f"{slug}.html").exists()]
    problems = []
    for before, after in zip(built, built[1:]):
        pages = {}
        for slug in (before, after):
            parser = _PrevNext()
            parser.feed((site / "notebooks" / f"{slug}.html").read_text(encoding="utf-8"))
            pages[slug] = parser.links
        if pages[before].get("right-next") != f"{after}.html":
            problems.append(f"{before}: next is {pages[before].get('right-next')}, not {after}")
        if pages[after].get("left-prev") != f"{before}.html":
            problems.append(f"{after}: previous is {pages[after].get('left-prev')}, not {before}")
    return problems


def outside_references(site: Path) -> list[str]:
    """Scripts, stylesheets, fonts and images the site's files would load from a server."""
    found = []
    pattern = re.compile(
        r"""<(?:script|img|iframe|source)\b[^>]*\bsrc=["'](https?:)?//|"""
        r"""<link\b[^>]*\bhref=["'](https?:)?//|@import\s+url\(["']?https?:|"""
        r"""url\(["']?https?://"""
    )
    for path in sorted(Path(site).rglob("*")):
        if path.suffix not in (".html", ".css"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in pattern.finditer(text):
            found.append(f"{path.relative_to(site)}: {text[match.start() : match.start() + 120]}")
    return found


def broken_maths(markdown: str) -> list[str]:
    """Inline maths that Markdown itself breaks, as the book's parser (markdown-it with the
    dollar-maths plugin, what MyST uses) reads ``markdown``: a ``$`` left in the text.

    The usual cause: a line inside ``$...$`` that starts with ``+ ``, ``- ``, ``> `` or
    ``1. `` becomes a list item or a quote, and both halves of the formula are left raw.
    """
    from markdown_it import MarkdownIt
    from mdit_py_plugins.amsmath import amsmath_plugin
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    parser = MarkdownIt("commonmark").use(dollarmath_plugin).use(amsmath_plugin)
    parser.enable("table")
    found = []
    for token in parser.parse(markdown):
        for child in token.children or []:
            if child.type == "text" and "$" in child.content:
                found.append(child.content.strip()[:100])
    return found


def broken_maths_in(src: Path) -> list[str]:
    """Broken inline maths in every page of a staged book: Markdown files, notebooks'
    Markdown cells and the Markdown their cells print. One line per broken span."""
    import json

    problems = []
    for path in sorted(Path(src).rglob("*")):
        if "_ipynb" in path.relative_to(src).parts:  # downloads, the same text as the pages
            continue
        texts: list[str] = []
        if path.suffix == ".md":
            texts = [path.read_text(encoding="utf-8")]
        elif path.suffix == ".ipynb":
            for cell in json.loads(path.read_text(encoding="utf-8")).get("cells", []):
                if cell.get("cell_type") == "markdown":
                    texts.append("".join(cell.get("source", "")))
                for output in cell.get("outputs", []):
                    markdown = output.get("data", {}).get("text/markdown")
                    if markdown:
                        texts.append("".join(markdown))
        for text in texts:
            problems += [
                f"{path.relative_to(src)}: broken maths near {raw!r}" for raw in broken_maths(text)
            ]
    return problems


# --- in the browser ------------------------------------------------------------------------


def _settle(page, timeout_s: float = 20.0) -> tuple[int, int]:
    """Wait until MathJax has typeset and every saved widget view has rendered."""
    deadline = time.monotonic() + timeout_s
    page.wait_for_load_state("load")
    page.evaluate(
        """() => (window.MathJax && MathJax.startup && MathJax.startup.promise)
              ? MathJax.startup.promise.then(() => true) : true"""
    )
    views = page.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()
    while page.locator(".widget-subarea").count() < views and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    page.evaluate(
        """() => (window.MathJax && MathJax.startup && MathJax.startup.promise)
              ? MathJax.startup.promise.then(() => true) : true"""
    )
    return views, page.locator(".widget-subarea").count()


def _check_page(page, url: str, report: PageReport) -> None:
    page.goto(url, wait_until="load")
    views, rendered = _settle(page)
    report.widgets = rendered
    if rendered < views:
        report.problems.append(f"{views - rendered} of {views} saved widgets did not render")
    prose = page.evaluate(_PROSE_TEXT)
    raw = _RAW_MATH.findall(prose)
    if raw:
        match = _RAW_MATH.search(prose)
        around = prose[max(0, match.start() - 40) : match.end() + 40].replace("\n", " ")
        report.problems.append(f"untypeset maths ({len(raw)}), e.g. …{around}…")
    if re.search(r"\{\{c\d+::", prose):
        report.problems.append("raw cloze markup ({{c1::...}}) on the page")
    report.sliders = page.locator(f"{SLIDERS}, {DRAWN_SLIDERS}").count()
    report.maths = page.locator("mjx-container").count()
    errors = page.locator("mjx-merror").count()
    if errors:
        report.problems.append(f"{errors} MathJax errors")
    if "/notebooks/" in url:  # a chapter: previous/next links and its own contents
        if page.locator("a.left-prev, a.right-next").count() == 0:
            report.problems.append("no previous/next links")
        sections = page.locator("article h2").count()
        if sections and page.locator("nav.page-toc a").count() == 0:
            report.problems.append(f"no table of contents for the page's {sections} sections")
    wide, code_cells = _code_overflow(page)
    if wide:
        report.problems.append(
            f"{wide} of {code_cells} code cells scroll sideways at {VIEWPORT['width']} px"
        )
    wide, printed = _output_overflow(page)
    if wide:
        report.problems.append(
            f"{len(wide)} of {printed} printed outputs scroll sideways at "
            f"{VIEWPORT['width']} px, e.g. {wide[0]!r}"
        )
    buttons = page.locator(".cell_input button.copybtn").count()
    if buttons < code_cells:
        report.problems.append(
            f"{code_cells - buttons} of {code_cells} code cells lack a copy button"
        )
    images = page.evaluate(
        """() => Array.from(document.images).map(i => [i.getAttribute('src') || '',
                 i.complete && i.naturalWidth > 0])"""
    )
    report.images = len(images)
    report.problems += [f"image did not load: {src}" for src, ok in images if not ok]


def _code_overflow(page) -> tuple[int, int]:
    """How many code cells are wider than their box (a reader scrolls them sideways), of all."""
    return tuple(
        page.evaluate(
            """() => {
              const cells = Array.from(document.querySelectorAll('.cell_input pre'));
              const wide = cells.filter(e => e.scrollWidth > e.clientWidth + 1);
              return [wide.length, cells.length];
            }"""
        )
    )


def _output_overflow(page) -> tuple[list[str], int]:
    """The printed outputs (stream, text and tracebacks; HTML tables and widgets scroll on
    their own) wider than their box, each as the start of its longest line, and how many
    printed outputs the page shows."""
    wide, count = page.evaluate(
        """() => {
          const blocks = Array.from(document.querySelectorAll('.cell_output .output pre'))
            .filter(e => e.offsetParent !== null);  // folded outputs are not read
          const wide = blocks.filter(e => e.scrollWidth > e.clientWidth + 1
              || e.getBoundingClientRect().right > document.documentElement.clientWidth);
          const longest = e => e.innerText.split('\\n')
            .reduce((a, b) => (b.length > a.length ? b : a), '').slice(0, 60);
          return [wide.map(longest), blocks.length];
        }"""
    )
    return wide, count


# The WCAG contrast ratio of the first widget label's (or drawn explorer's label's) text
# against the background it is drawn on (the nearest ancestor with an opaque one); null
# without a widget label.
_WIDGET_CONTRAST = """() => {
  const label = document.querySelector(
    '.widget-slider .widget-readout, .widget-label, .pecourse-frames label');
  if (!label) return null;
  const rgb = c => (c.match(/[0-9.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map(v => {
      v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
    .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  let e = label, bg = null;
  while (e && !bg) {
    const c = rgb(getComputedStyle(e).backgroundColor);
    if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) bg = c.slice(0, 3);
    e = e.parentElement;
  }
  const a = lum(rgb(getComputedStyle(label).color)), b = lum(bg || [255, 255, 255]);
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}"""


def _dark_mode(page) -> str:
    """Switch the system to dark mode and back; '' when the page follows both times."""
    problems = []
    try:
        for scheme in ("dark", "light"):
            page.emulate_media(color_scheme=scheme)
            page.reload(wait_until="load")
            theme = page.evaluate("() => document.documentElement.dataset.theme || ''")
            background = page.evaluate(
                """() => {
                  const [r, g, b] = getComputedStyle(document.body).backgroundColor
                      .match(/[0-9.]+/g).map(Number);
                  return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
                }"""
            )
            if theme != scheme or (background < 0.5) != (scheme == "dark"):
                problems.append(
                    f"with the system in {scheme} mode the page is {theme or 'unthemed'} "
                    f"(background luminance {background:.2f})"
                )
            _settle(page)
            contrast = page.evaluate(_WIDGET_CONTRAST)
            if contrast is not None and contrast < 4.5:
                problems.append(
                    f"in {scheme} mode a widget's label has contrast {contrast:.1f} against "
                    "its background (4.5 is WCAG's minimum for text)"
                )
    finally:
        page.emulate_media(color_scheme="light")
    return "; ".join(problems)


# A saved widget's slider, and one of an explorer drawn at build time (pecourse.book.frames).
SLIDERS = ".widget-slider"
DRAWN_SLIDERS = ".pecourse-frames input[type=range]"

# What a drawn explorer shows: its figure's file and width (0 while loading), or the text it
# printed instead (width -1).
_DRAWN_FIGURE = """box => {
  const img = box.querySelector('img'), text = box.querySelector('pre');
  if (!img || img.style.display === 'none') return [text.textContent, -1];
  return [img.getAttribute('src') || '', img.complete ? img.naturalWidth : 0];
}"""


def _move_drawn(page) -> str:
    """Click along the first drawn explorer's first slider; '' when its readout and its
    figure (or the text it printed) changed and the new figure loaded."""
    box = page.locator(".pecourse-frames").filter(has=page.locator("input[type=range]")).first
    slider = box.locator("input[type=range]").first
    readout = box.locator("output").first  # a range input's readout (other controls have none)
    slider.scroll_into_view_if_needed()
    before, (figure, _) = readout.inner_text(), box.evaluate(_DRAWN_FIGURE)
    for where in (0.9, 0.1):  # a slider already near one end moves towards the other
        track = slider.bounding_box()
        if not track:
            return "the drawn explorer's slider has no size on the page"
        page.mouse.click(track["x"] + track["width"] * where, track["y"] + track["height"] / 2)
        page.wait_for_timeout(200)
        if readout.inner_text() == before:
            continue
        try:
            page.wait_for_function(
                "box => { const i = box.querySelector('img'); return !i || i.complete; }",
                arg=box.element_handle(),
                timeout=5000,
            )
        except Exception:
            return "the drawn explorer's new figure did not finish loading"
        src, width = box.evaluate(_DRAWN_FIGURE)
        if src == figure:
            return f"the readout moved to {readout.inner_text()!r} but the figure stayed {src}"
        return "" if width != 0 else f"the drawn explorer's figure did not load: {src}"
    return f"the drawn explorer's readout stayed at {before!r} after clicks along its track"


def _move_slider(page) -> str:
    """Move the page's first explorer: a drawn one (:func:`_move_drawn`) if it has one, else
    a saved widget's slider (:func:`_move_widget_slider`)."""
    return _move_drawn(page) if page.locator(DRAWN_SLIDERS).count() else _move_widget_slider(page)


def _move_widget_slider(page) -> str:
    """Drag the first saved widget's slider of the page; '' when its label changed."""
    slider = page.locator(SLIDERS).first
    if slider.count() == 0:
        return "no slider on the page"
    slider.scroll_into_view_if_needed()
    readout = slider.locator(".widget-readout").first
    before = readout.inner_text()
    for where in (0.8, 0.1):  # a slider already near one end moves towards the other
        handle = slider.locator(".noUi-handle").first.bounding_box()
        track = slider.locator(".noUi-target, .slider").first.bounding_box()
        if not handle or not track:
            return "the slider has no size on the page"
        y = handle["y"] + handle["height"] / 2
        page.mouse.move(handle["x"] + handle["width"] / 2, y)
        page.mouse.down()
        page.mouse.move(track["x"] + track["width"] * where, y, steps=8)
        page.mouse.up()
        page.wait_for_timeout(200)
        if readout.inner_text() != before:
            return ""
    return f"the slider's label stayed at {before!r} after a drag"


ARROW_TARGETS = (
    ("a slider", f"{SLIDERS} .noUi-handle, {DRAWN_SLIDERS}"),
    ("a code block", ".cell_input pre"),
)


def _arrow_keys(page, wait_ms: int = 800) -> str:
    """Focus a slider's handle, then a code block, press → on each; '' when the page stays.

    Sphinx's key navigation (off in book/conf.py) would load the next chapter: it ignores
    only form fields, and a slider handle is a div, an overflowing code block a focusable pre.
    """
    url = page.url
    problems = []
    for what, selector in ARROW_TARGETS:
        target = page.locator(selector).first
        if target.count() == 0:
            problems.append(f"no {what} on the page")
            continue
        target.scroll_into_view_if_needed()
        target.evaluate("e => { if (!e.hasAttribute('tabindex')) e.tabIndex = 0; e.focus(); }")
        page.keyboard.press("ArrowRight")
        page.wait_for_timeout(wait_ms)  # a navigation starts at once; give it time to commit
        if page.url != url:
            problems.append(f"→ on {what} left the page for {page.url.rsplit('/', 1)[-1]}")
            page.goto(url, wait_until="load")
            _settle(page)
    return "; ".join(problems)


def _flip_card(page) -> str:
    card = page.locator(".pc-card").first
    if card.count() == 0:
        return "no flashcard on the page"
    back = card.locator(".pc-card-back")
    if back.is_visible():
        return "the answer shows before the card is flipped"
    card.click()
    if not back.is_visible():
        return "the answer did not show after a click"
    if card.get_attribute("aria-pressed") != "true":
        return "the flipped card does not say so (aria-pressed)"
    card.click()
    return "" if not back.is_visible() else "a second click did not hide the answer"


def _search(page, index_url: str, query: str, expect: str) -> str:
    """Search from the sidebar's field; '' when ``expect`` is among the first three results,
    every result has a snippet, and no result is a recording's page (left out of the index)."""
    page.goto(index_url, wait_until="load")
    page.locator(".search-button-field").first.click()
    box = page.locator("form.bd-search input[name=q]:visible").first  # the theme's search box
    box.fill(query)
    box.press("Enter")
    page.wait_for_url(re.compile(r"search\.html"))
    results = page.locator("#search-results li a, ul.search li a")
    try:
        results.first.wait_for(timeout=20_000)
    except Exception:
        return f"searching {query!r} found nothing"
    items = page.locator("ul.search li")
    # Snippets arrive after the titles (Sphinx asks for each result's page).
    deadline = time.monotonic() + 10
    while page.locator("ul.search li p.context").count() < items.count():
        if time.monotonic() > deadline:
            break
        page.wait_for_timeout(100)
    hrefs = [results.nth(i).get_attribute("href") or "" for i in range(results.count())]
    problems = []
    if not any(expect in href for href in hrefs[:3]):
        problems.append(f"searching {query!r} did not rank {expect} in the first three {hrefs[:5]}")
    bare = items.count() - page.locator("ul.search li p.context").count()
    if bare:
        problems.append(f"{bare} of {items.count()} results have no snippet")
    recordings = [h for h in hrefs if re.search(r"results/[^/]+\.json", h)]
    if recordings:
        problems.append(f"recordings in the results: {recordings[:3]}")
    return "; ".join(problems)


class OfflineBrowser:
    """Headless Chromium in which every request that is not a local file is refused.

    ``with OfflineBrowser() as browser:`` gives ``browser.page``; :meth:`check` loads a page
    and records its problems (console errors, failed requests and everything
    :func:`_check_page` looks at) in a :class:`PageReport`. Requests that left or tried to
    leave the machine collect in ``browser.outside``.
    """

    def __init__(self, timeout_s: float = 60.0):
        self.timeout_s = timeout_s
        self.outside: list[str] = []
        self.report: PageReport | None = None  # problems of the page being looked at

    def __enter__(self) -> OfflineBrowser:
        from playwright.sync_api import sync_playwright

        if not CHROMIUM.exists():
            raise FileNotFoundError(f"{CHROMIUM} is missing (apt-get install chromium)")
        self._playwright = sync_playwright().start()
        try:
            self._browser = self._playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_ARGS
            )
            context = self._browser.new_context(viewport=VIEWPORT, service_workers="block")
            context.set_default_timeout(self.timeout_s * 1000)
            context.route(re.compile(r"^(?!file:|data:|blob:|about:).*"), self._refuse)
            page = self.page = context.new_page()
        except BaseException:
            self._playwright.stop()
            raise
        page.on("console", lambda m: m.type == "error" and self._note(f"console error: {m.text}"))
        page.on("pageerror", lambda e: self._note(f"uncaught exception: {e}"))
        page.on("requestfailed", lambda r: self._note(f"request failed: {r.url} ({r.failure})"))
        page.on("request", lambda r: r.url.startswith(LOCAL_SCHEMES) or self.outside.append(r.url))
        page.on("websocket", lambda ws: self.outside.append(ws.url))
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._browser.close()
        finally:
            self._playwright.stop()

    def _refuse(self, route) -> None:
        self.outside.append(route.request.url)
        route.abort()

    def _note(self, problem: str) -> None:
        if self.report is not None:
            self.report.problems.append(problem)

    def open(self, path: Path, report: PageReport) -> None:
        """Load a page and wait for it to settle; its problems go to ``report``."""
        self.report = report
        self.page.goto(Path(path).as_uri(), wait_until="load")
        _settle(self.page)

    def check(self, path: Path, report: PageReport) -> PageReport:
        """Load a page and check it (see :func:`_check_page`)."""
        self.report = report
        _check_page(self.page, Path(path).as_uri(), report)
        return report


def check_book(
    site: Path,
    *,
    pages: list[str] | None = None,
    screenshots: Path | None = None,
    explorer: str | None = None,
    flashcards: bool = True,
    search: tuple[str, str] | None = ("ALiBi", "notebooks/03_alibi.html"),
    timeout_s: float = 60.0,
) -> CheckReport:
    """Check a built book (see the module docstring).

    ``pages``: the pages to load (default: every page). ``explorer``: the page whose first
    slider is dragged and screenshotted (default: the first chapter with a slider).
    ``flashcards``: flip a card of the first flashcard page. ``search``: a query and a page
    its results must include. ``screenshots``: where the explorer page's screenshots go.
    """
    start = time.perf_counter()
    site = Path(site).resolve()
    if not (site / "index.html").exists():
        raise FileNotFoundError(f"no book at {site} (index.html missing): run `make book`")
    names = pages or sorted(
        p.relative_to(site).as_posix()
        for p in site.rglob("*.html")
        if p.name != "genindex.html" and "_static" not in p.relative_to(site).parts
    )
    reports: list[PageReport] = []
    interactions: dict[str, str] = {}
    shots: list[Path] = []
    with OfflineBrowser(timeout_s) as browser:
        page = browser.page
        for i, name in enumerate(names, start=1):
            reports.append(browser.check(site / name, PageReport(name)))
            if i % 50 == 0 or i == len(names):
                log.info("checked %d of %d pages", i, len(names))

        if explorer is None:
            chapters = [r for r in reports if r.path.startswith("notebooks/") and r.sliders]
            explorer = chapters[0].path if chapters else None
        what = "move an explorer's slider"
        if explorer and (site / explorer).exists():
            report = PageReport(f"{explorer} (slider)")
            browser.open(site / explorer, report)
            if screenshots is not None:
                shots += _screenshots(page, Path(screenshots), Path(explorer).stem)
            interactions[what] = _move_slider(page)
            interactions["press → on a slider and a code block"] = _arrow_keys(page)
            interactions["follow the system's dark mode"] = _dark_mode(page)
            if report.problems:
                reports.append(report)
        else:
            interactions[what] = f"no page with a slider ({explorer or 'none found'})"

        if flashcards:
            card_pages = sorted(site.glob("flashcards/[0-9]*.html"))
            what = "flip a flashcard"
            if card_pages:
                report = PageReport(f"{card_pages[0].relative_to(site)} (flip)")
                browser.open(card_pages[0], report)
                interactions[what] = _flip_card(page)
                if report.problems:
                    reports.append(report)
            else:
                interactions[what] = "no flashcard page in the book"

        if search:
            query, expect = search
            report = PageReport(f"search {query!r}")
            browser.report = report
            interactions[f"search {query!r}"] = _search(
                page, (site / "index.html").as_uri(), query, expect
            )
            if report.problems:
                reports.append(report)
        outside = list(browser.outside)
    return CheckReport(
        pages=reports,
        interactions=interactions,
        links=broken_local_links(site) + reading_path_links(site),
        outside_requests=outside + outside_references(site),
        screenshots=shots,
        seconds=time.perf_counter() - start,
    )


def _screenshots(page, folder: Path, stem: str) -> list[Path]:
    """The top of the page and its first explorer, as a reader at 1366x768 sees them."""
    folder.mkdir(parents=True, exist_ok=True)
    top, widget = folder / f"{stem}-top.png", folder / f"{stem}-explorer.png"
    page.evaluate("() => window.scrollTo(0, 0)")
    page.screenshot(path=str(top))
    page.locator(f".pecourse-frames, {SLIDERS}").first.scroll_into_view_if_needed()
    page.evaluate("() => window.scrollBy(0, -120)")
    page.screenshot(path=str(widget))
    return [top, widget]
