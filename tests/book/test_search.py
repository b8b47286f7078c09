"""Search snippets from file://: the pages' text as the search page reads it."""

import json

from pecourse.book import search

PAGE = """<html><body><nav>sidebar</nav>
<main id="main-content" role="main"><article>
<nav class="page-toc">Contents 1. Intro</nav>
<section id="rope"><h1>RoPE<a class="headerlink" href="#rope">#</a></h1>
<p>Rotate <em>queries</em> &amp; keys.</p><script>var x = "not text";</script>
<section id="pairs"><h2>Pairs</h2><p>Half &lt;and&gt; interleaved.<br>Both.</p></section>
</section></article></main><footer>footer</footer></body></html>"""


def test_the_main_text_keeps_sections_and_drops_code_and_navigation():
    text = search.main_text(PAGE)
    assert text == (
        '<div role="main"><section id="rope"> RoPE Rotate queries &amp; keys. '
        '<section id="pairs"> Pairs Half &lt;and&gt; interleaved. Both.</section> </section></div>'
    )


def test_every_page_of_a_site_is_written_once(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "_static").mkdir()
    (tmp_path / "notebooks" / "08_rope.html").write_text(PAGE)
    (tmp_path / "search.html").write_text(PAGE)  # the search page itself is left out
    (tmp_path / "_static" / "theme.html").write_text(PAGE)
    target = search.write_pages(tmp_path)
    prefix, body = target.read_text(encoding="utf-8").split("=", 1)
    assert prefix.strip() == "window.PECOURSE_PAGES"
    pages = json.loads(body.strip().rstrip(";"))
    assert list(pages) == ["notebooks/08_rope.html"]
    assert 'id="pairs"' in pages["notebooks/08_rope.html"]
