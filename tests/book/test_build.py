"""Staging the book's sources (no Sphinx here: tests/book/test_browser.py builds it)."""

import json
import logging
import os
import re
import sys

import pytest

from pecourse import course
from pecourse.book import builder

ROOT = course.checkout()
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)


def hidden_test_lines(number: int) -> list[str]:
    """Lines only a chapter's hidden tests hold, read from solutions/ (the single source)."""
    slug = course.concept(number).slug
    nb = json.loads((ROOT / "solutions" / f"{slug}.ipynb").read_text(encoding="utf-8"))
    text = "\n".join("".join(c["source"]) for c in nb["cells"])
    visible = {ln.strip() for ln in HIDDEN.sub("", text).splitlines()}
    lines = [ln.strip() for block in HIDDEN.findall(text) for ln in block.splitlines()]
    return [ln for ln in lines if len(ln) > 20 and ln not in visible]


def test_chapters_are_checked():
    assert builder.check_chapters(None) == tuple(range(1, 17))
    assert builder.check_chapters([3, 2, 3]) == (2, 3)
    with pytest.raises(TypeError, match="chapters must be a list"):
        builder.check_chapters("3")
    with pytest.raises(ValueError, match="1 to 16"):
        builder.check_chapters([17])
    with pytest.raises(ValueError, match="1 to 16"):
        builder.check_chapters([True])
    with pytest.raises(ValueError, match="at least one chapter"):
        builder.check_chapters([])


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    src = tmp_path_factory.mktemp("book-src")
    docs = builder.stage(src, chapters=[2, 3])
    return src, docs


def test_a_partial_build_stages_its_chapters_and_their_practice(staged):
    src, docs = staged
    assert {
        "index",
        "notebooks/00_start_here",
        "notebooks/02_why_attention_needs_positions",
        "notebooks/03_alibi",
        "exercises/03_alibi",
        "flashcards/03_alibi",
    } <= set(docs)
    assert not any("08_rope" in d for d in docs)
    assert not any(p.name.startswith("08_") for p in src.rglob("*"))


def test_the_start_page_keeps_links_to_staged_chapters_only(staged):
    src, _ = staged
    text = (src / "notebooks" / "00_start_here.ipynb").read_text(encoding="utf-8")
    assert "](02_why_attention_needs_positions.ipynb)" in text
    assert "](08_rope.ipynb)" not in text
    index = (src / "index.md").read_text(encoding="utf-8")
    assert "[ALiBi: Attention with Linear Biases](notebooks/03_alibi.ipynb)" in index
    assert "| 08 | Rotary Position Embeddings (RoPE) |" in index  # listed, not linked
    assert "A partial build" in index


def test_no_hidden_test_reaches_the_book(staged):
    src, _ = staged
    for number in (2, 3):
        lines = hidden_test_lines(number)
        assert lines, f"solutions/ of chapter {number} has no hidden tests to look for"
        page = (src / "exercises" / f"{course.concept(number).slug}.ipynb").read_text()
        leaked = [ln for ln in lines if json.dumps(ln)[1:-1] in page]
        assert not leaked, f"hidden tests in the book's exercise {number}: {leaked[:2]}"


def test_restaging_rewrites_only_what_changed_and_drops_stale_files(staged, tmp_path):
    src, _ = staged
    chapter = src / "notebooks" / "03_alibi.ipynb"
    mtime = chapter.stat().st_mtime_ns
    stale = src / "notebooks" / "99_gone.ipynb"
    stale.write_text("{}")
    builder.stage(src, chapters=[2, 3])
    assert chapter.stat().st_mtime_ns == mtime  # Sphinx will not re-read it
    assert not stale.exists()


def test_a_partial_build_shows_the_source_its_chapters_link_to(tmp_path):
    root, src = tmp_path / "course", tmp_path / "src"
    (root / "notebooks").mkdir(parents=True)
    (root / "pecourse" / "positions").mkdir(parents=True)
    (root / "pecourse" / "positions" / "alibi.py").write_text('"""ALiBi."""\n')
    (root / "pecourse" / "course.py").write_text('"""The map."""\n')
    results = root / "pecourse" / "lab" / "results"
    results.mkdir(parents=True)
    for name in ("alibi_windows", "rope_base"):
        (results / f"{name}.json").write_text('{"rows": []}')
    nb = {
        "cells": [
            {
                "cell_type": "markdown",
                "metadata": {},
                "source": "# 03\n\nSee `pecourse/positions/alibi.py`.",
            },
            {  # a recording the chapter reads gets its page, as in the whole book
                "cell_type": "code",
                "metadata": {},
                "source": 'windows = recorded("alibi_windows")',
                "outputs": [],
                "execution_count": None,
            },
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (root / "notebooks" / "03_alibi.ipynb").write_text(json.dumps(nb))
    docs = builder.stage(src, chapters=[3], root=root)
    assert "source/pecourse/positions/alibi.py" in docs
    assert "source/pecourse/course.py" not in docs
    assert "source/pecourse/lab/results/alibi_windows.json" in docs
    assert "source/pecourse/lab/results/rope_base.json" not in docs
    assert (src / "source" / "pecourse" / "positions" / "alibi.py").read_text() == '"""ALiBi."""\n'
    staged = json.loads((src / "notebooks" / "03_alibi.ipynb").read_text())
    assert "](../source/pecourse/positions/alibi.py.md)" in staged["cells"][0]["source"]
    # The whole book shows every file.
    assert "source/pecourse/course.py" in builder.stage(tmp_path / "all", root=root)


def test_sphinx_progress_is_logged_by_quarters(caplog):
    lines = [f"reading sources... [{p:3d}%] page{p}" for p in range(10, 101, 10)]
    lines += ["writing output... [100%] index", "build succeeded."]
    script = "import sys; print(*sys.argv[1:], sep='\\n'); sys.exit(3)"
    with caplog.at_level(logging.INFO, logger="pecourse.book.builder"):
        code, tail = builder._sphinx([sys.executable, "-c", script, *lines], dict(os.environ))
    assert code == 3 and tail.splitlines()[-1] == "build succeeded."
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert logged == [
        "sphinx: reading sources 10%",
        "sphinx: reading sources 30%",
        "sphinx: reading sources 50%",
        "sphinx: reading sources 80%",
        "sphinx: reading sources 100%",
        "sphinx: writing output 100%",
    ]
