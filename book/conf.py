"""Sphinx configuration of the course book (``make book``; see pecourse/book/).

``python -m pecourse.book build`` stages the sources (notebooks, exercises, flashcard pages, package source) in a
build folder and runs Sphinx with this file. Everything a page loads is copied into the site:
MathJax and the Jupyter widget manager come from npm packages pinned in ``assets.json``, whose
unpacked folder the builder passes in ``PECOURSE_BOOK_ASSETS``. Notebooks are rendered with
their saved outputs and widget state; nothing is executed.
"""

import os

project = "pecourse"
html_title = "Positional encoding in transformers"
author = "the pecourse authors"
copyright = "the pecourse authors, MIT licence"

extensions = ["myst_nb", "sphinx_copybutton"]
# _ipynb/ holds the committed notebooks the pages offer for download, not pages.
exclude_patterns = ["**.ipynb_checkpoints", "_ipynb"]
suppress_warnings = ["mystnb.unknown_mime_type"]

# Notebooks are committed executed: render what they hold, never run them.
nb_execution_mode = "off"
nb_merge_streams = True
# Markdown outputs (the derivations print Markdown with maths) get the same parser as cells.
nb_render_markdown_format = "myst"
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "attrs_inline"]
myst_heading_anchors = 3

# Local copies only: pecourse.book unpacks the pinned npm packages into this folder.
_assets = os.environ.get("PECOURSE_BOOK_ASSETS")
if not _assets:
    raise RuntimeError("build the book with `make book` (python -m pecourse.book build)")
html_static_path = ["_static", _assets]
mathjax_path = "mathjax/tex-mml-chtml.js"
# HTMLMath widgets hold $...$ as JupyterLab writes it (MathJax 3 alone knows only \(...\)).
# MyST adds the option that restricts MathJax to maths elements, widgets and outputs.
mathjax3_config = {"tex": {"inlineMath": [["$", "$"], ["\\(", "\\)"]], "processEscapes": True}}
# The widget manager without RequireJS: it bundles the standard controls and the output
# widget, which is all the course uses; any other widget module would be fetched from a CDN,
# which the tests forbid.
nb_ipywidgets_js = {"widgets/embed.js": {}}

html_theme = "sphinx_book_theme"
html_css_files = ["pecourse-book.css"]
html_js_files = ["pecourse-book.js"]
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
html_theme_options = {
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "show_navbar_depth": 1,
    "use_download_button": False,
    "use_fullscreen_button": False,
    # Off: Sphinx's arrow-key navigation ignores only form fields, so → on a focused widget
    # slider or a scrollable code block would load the next chapter.
    "navigation_with_keys": False,
    "search_bar_text": "Search the course…",
    # The search field sits in the sidebar; no second one in a header bar.
    "navbar_persistent": [],
}
# Light or dark as the reader's system asks (prefers-color-scheme); the theme's switch still
# chooses. pecourse-book.css gives the saved widgets the theme's colours in the dark.
html_context = {"default_mode": "auto"}
# Chapters and exercises rank above flashcards, and those above the package's source.
html_search_scorer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "search_scorer.js")
html_sidebars = {"**": ["navbar-logo.html", "search-button-field.html", "sbt-sidebar-nav.html"]}


def _maths_for_widgets(app, pagename, templatename, context, doctree):
    """Load MathJax on pages with saved widgets: an HTMLMath widget typesets with it, and
    Sphinx on its own loads MathJax only on pages whose text has maths."""
    if "application/vnd.jupyter.widget-view+json" in context.get("body", ""):
        context["has_maths_elements"] = True  # what sphinx.ext.mathjax reads in Sphinx 9.0
        # Sphinx 8.1 (what pip picks on Python 3.10) asks the math domain instead
        flags = app.env.domains.math_domain.data.get("has_equations")
        if isinstance(flags, dict):
            flags[pagename] = True


def _search_page(app, pagename, templatename, context, doctree):
    """The search page answers Sphinx's snippet requests from the pages' text, which
    pecourse.book writes after the build (fetch() is refused on file://)."""
    if pagename == "search":
        app.add_js_file("pecourse-search-pages.js")
        app.add_js_file("pecourse-search.js")


def setup(app):
    app.connect("html-page-context", _search_page)
    # Before sphinx.ext.mathjax decides, at the default priority 500, whether to load it.
    app.connect("html-page-context", _maths_for_widgets, priority=400)
