"""Search snippets that work from ``file://`` (see ``book/_static/pecourse-search.js``).

Sphinx's search cuts each result's snippet from the result's page, which it fetches; a browser
refuses ``fetch()`` on ``file://``. After Sphinx has written the site, :func:`write_pages`
reads every page back and writes its main text — the article in the ``[role="main"]``
element, with only its sections (their ids, which Sphinx's snippets look up for a result in a
section) and their text — into ``_static/pecourse-search-pages.js``, which the search page
loads; ``book/search_scorer.js`` ranks with the same text. The HTML is read with the standard
library's parser.
"""

from __future__ import annotations

import html
import json
from html.parser import HTMLParser
from pathlib import Path

PAGES_JS = "pecourse-search-pages.js"
# Not the page's own words: code that runs, navigation, buttons.
_SKIPPED = {"script", "style", "template", "svg", "math", "nav", "button"}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
         "track", "wbr"}  # fmt: skip


class _MainText(HTMLParser):
    """The text of the ``<article>`` in a page's ``[role="main"]`` element, keeping its
    ``<section id>`` nesting."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.stack: list[str] = []  # open elements inside main: "section", "skip" or "other"
        self.in_main = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if not self.in_main:
            if attrs.get("role") == "main":
                self.in_main = True
                self.stack = []
            return
        if tag in _VOID:
            if tag == "br":
                self.out.append(" ")
            return
        skipping = any(kind == "skip" for kind in self.stack)
        classes = (attrs.get("class") or "").split()
        if tag in _SKIPPED or "headerlink" in classes:
            self.stack.append("skip")
        elif tag == "article":
            self.stack.append("article")
        elif tag == "section" and attrs.get("id") and not skipping:
            self.stack.append("section")
            self.out.append(f'<section id="{html.escape(attrs["id"])}">')
        else:
            self.stack.append("other")
            if tag in ("p", "div", "li", "tr", "pre", "h1", "h2", "h3", "h4") and not skipping:
                self.out.append(" ")

    def handle_endtag(self, tag):
        if not self.in_main or tag in _VOID:
            return
        if not self.stack:
            self.in_main = False  # the main element itself closed
            return
        kind = self.stack.pop()
        if kind == "section":
            self.out.append("</section>")

    def handle_data(self, data):
        # The article's words only: not the buttons and contents list around it.
        if "article" in self.stack and "skip" not in self.stack:
            self.out.append(html.escape(data, quote=False))


def main_text(page_html: str) -> str:
    """A page reduced to what Sphinx's snippet reads: ``<div role="main">`` holding the main
    element's text, its sections kept (with their ids) and every other tag dropped."""
    parser = _MainText()
    parser.feed(page_html)
    parser.close()
    body = " ".join("".join(parser.out).split())
    return f'<div role="main">{body}</div>'


def write_pages(site: Path) -> Path:
    """Write ``_static/pecourse-search-pages.js`` for the built site; returns its path."""
    site = Path(site)
    pages = {}
    for path in sorted(site.rglob("*.html")):
        relative = path.relative_to(site).as_posix()
        if relative.startswith(("_static/", "_downloads/")) or relative in (
            "search.html",
            "genindex.html",
        ):
            continue
        pages[relative] = main_text(path.read_text(encoding="utf-8", errors="replace"))
    target = site / "_static" / PAGES_JS
    text = json.dumps(pages, ensure_ascii=False, separators=(",", ":"))
    target.write_text(f"window.PECOURSE_PAGES = {text};\n", encoding="utf-8")
    return target
