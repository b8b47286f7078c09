"""Reading the book: scaffolding folded, previous/next along the suggested path."""

import json

from pecourse import course
from pecourse.book import builder, check, pages

ROOT = course.checkout()


def code(source: str, outputs=(), tags=None) -> dict:
    cell = {"cell_type": "code", "source": source, "outputs": list(outputs), "metadata": {}}
    if tags:
        cell["metadata"]["tags"] = list(tags)
    return cell


PROSE = {
    "output_type": "display_data",
    "data": {"text/markdown": "ALiBi is flat.", "text/plain": ""},
}


def test_long_cells_and_cells_that_write_prose_fold():
    short_identity = code('identity = IDENTITIES["rope_relative_2x2"]\nidentity', [PROSE])
    writes_prose = code("\n".join(["x = 1"] * 5 + ["Markdown(f'{x}')"]), [PROSE])
    long_figure = code("\n".join(["plt.plot([1, 2])"] * pages.LONG_CELL_LINES))
    short_step = code("\n".join(["x = 1"] * (pages.LONG_CELL_LINES - 1)))
    assert not pages.collapses(short_identity)  # a derivation shown by name stays open
    assert pages.collapses(writes_prose)
    assert pages.collapses(long_figure)
    assert not pages.collapses(short_step)  # the lesson's code stays in view
    assert not pages.collapses(code(long_figure["source"], tags=["remove-input"]))
    assert not pages.collapses({"cell_type": "markdown", "source": "x\n" * 40})


def test_a_chapter_in_the_book_folds_its_scaffolding_and_keeps_its_steps():
    nb = json.loads((ROOT / "notebooks" / "14_rope_scaling.ipynb").read_text(encoding="utf-8"))
    s = pages.Site(root=ROOT, docs={"notebooks/14_rope_scaling"}, source_pages={})
    out = pages.prepare_notebook(nb, s, "notebooks")
    code_cells = [c for c in out["cells"] if c["cell_type"] == "code"]
    folded = [c for c in code_cells if pages.HIDE_INPUT in c["metadata"].get("tags", [])]
    assert 3 <= len(folded) < len(code_cells) / 2, (len(folded), len(code_cells))
    # the committed notebook is not changed
    assert not any(pages.HIDE_INPUT in c["metadata"].get("tags", []) for c in nb["cells"])


def test_the_sidebar_lists_chapters_in_reading_order(tmp_path):
    builder.stage(tmp_path, chapters=[8, 14, 16])
    index = (tmp_path / "index.md").read_text(encoding="utf-8")
    toc = index[index.index(":caption: Chapters") :]
    positions = [toc.index(f"notebooks/{course.concept(n).slug}") for n in (8, 16, 14)]
    assert positions == sorted(positions)  # the path goes 08 → 16 → … → 14
    assert [c.number for c in builder.path_order()] == list(course.LEARNING_PATH)


def _page(folder, slug, prev, nxt):
    (folder / f"{slug}.html").write_text(
        f'<html><body><a class="left-prev" href="{prev}">p</a>'
        f'<a class="right-next" href="{nxt}">n</a></body></html>'
    )


def test_the_check_finds_next_links_that_follow_the_numbers(tmp_path):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    rope, base = course.concept(8).slug, course.concept(16).slug
    numbered = course.concept(9).slug
    _page(folder, rope, "x.html", f"{numbered}.html")  # number order: 08 → 09
    _page(folder, base, f"{rope}.html", "y.html")
    assert check.reading_path_links(tmp_path) == [f"{rope}: next is {numbered}.html, not {base}"]
    _page(folder, rope, "x.html", f"{base}.html")
    assert check.reading_path_links(tmp_path) == []


def test_each_chapter_and_exercise_page_offers_its_notebook(tmp_path):
    builder.stage(tmp_path, chapters=[14])
    for folder in ("notebooks", "exercises"):
        name = "14_rope_scaling.ipynb"
        offered = tmp_path / builder.DOWNLOADS / folder / name
        assert offered.read_bytes() == (ROOT / folder / name).read_bytes()  # as committed
        page = json.loads((tmp_path / folder / name).read_text(encoding="utf-8"))
        links = [c for c in page["cells"] if "book-download" in c["metadata"].get("tags", [])]
        assert len(links) == 1 and page["cells"].index(links[0]) == 1  # under the title
        assert (
            f"{{download}}`{name} <../{builder.DOWNLOADS}/{folder}/{name}>`" in (links[0]["source"])
        )
    assert (tmp_path / builder.DOWNLOADS / "notebooks" / "00_start_here.ipynb").exists()
