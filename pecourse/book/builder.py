"""Build the book: stage the sources in a folder beside the output, then run Sphinx.

The staging folder (``<out>-src``) mirrors the repository: ``notebooks/`` and ``exercises/``
hold prepared copies of the committed notebooks (:mod:`pecourse.book.pages`), ``_ipynb/`` the
committed notebooks unchanged (each page links its own for download), ``flashcards/``
one page per chapter (:mod:`pecourse.book.cards`), ``source/`` one page per package file,
and ``index.md`` the syllabus. Files are rewritten only when their content changes, so a
second build re-reads only what changed (Sphinx's doctrees live in ``<out>-doctrees``).
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import logging
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from pecourse import course
from pecourse.book import assets, cards, frames, pages, tables

log = logging.getLogger(__name__)
# Folders of the checkout (:func:`pecourse.course.checkout`): Sphinx's configuration, the site.
CONFIG_DIR = Path("book")
DEFAULT_OUT = Path("build") / "book"
START_HERE = "00_start_here"
# The committed notebooks as they are, for the pages' download links; book/conf.py keeps
# Sphinx from reading this folder as pages.
DOWNLOADS = "_ipynb"
# Package files that get a source page (the trained checkpoints and the deck do not).
RESULTS = "pecourse/lab/results/"  # recordings: their pages show their rows as tables
SOURCE_GLOBS = ("pecourse/**/*.py", RESULTS + "*.json")
# How a chapter reads a recording: pecourse.lab.results.recorded("name").
RECORDED = re.compile(r"""\brecorded\(\s*["']([\w-]+)["']""")


@dataclass(frozen=True)
class BuildResult:
    out: Path  # the site: open out / "index.html"
    docs: tuple[str, ...]  # the pages built, as Sphinx docnames
    warnings: tuple[str, ...]  # Sphinx's warnings, one per line
    seconds: float


def check_chapters(chapters) -> tuple[int, ...]:
    """The chapter numbers to build (all sixteen for ``None``), validated and sorted."""
    if chapters is None:
        return tuple(c.number for c in course.CONCEPTS)
    if isinstance(chapters, (str, bytes)) or not hasattr(chapters, "__iter__"):
        raise TypeError(f"chapters must be a list of chapter numbers 1-16, got {chapters!r}")
    numbers = []
    for number in chapters:
        numbers.append(course.concept(number).number)  # ValueError names what is accepted
    if not numbers:
        raise ValueError("chapters must name at least one chapter (or be None for all)")
    return tuple(sorted(set(numbers)))


class _Stager:
    """Writes the staging folder, touching only files whose content changed."""

    def __init__(self, src: Path):
        self.src = src
        self.written: set[Path] = set()

    def write(self, relative: str, content: str | bytes) -> None:
        path = self.src / relative
        data = content.encode("utf-8") if isinstance(content, str) else content
        if not (path.exists() and path.read_bytes() == data):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        self.written.add(path)

    def remove_stale(self) -> None:
        for path in sorted(self.src.rglob("*"), reverse=True):
            if path.is_file() and path not in self.written:
                path.unlink()
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()


def _notebook_json(nb: dict) -> str:
    return json.dumps(nb, ensure_ascii=False, indent=1) + "\n"


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def stage(
    src: Path,
    chapters=None,
    root: Path | None = None,
    frames_cache: Path | None = None,
    jobs: int = 1,
) -> list[str]:
    """Write the book's sources for ``chapters`` (all for ``None``) from ``root`` (default:
    the checkout) into ``src``.

    A partial build (some chapters) keeps the start page, the chapters' exercises and
    flashcards, and only the source pages they link to and the recordings they read. With
    ``frames_cache`` (a folder), the chapters' explorers are drawn for a grid of their
    controls' values, in a kernel, and kept there (:mod:`pecourse.book.frames`; the figures
    are staged under ``_explorers/``); without, they keep their saved output; ``jobs``
    chapters are drawn at a time, each in its own kernel. Returns the docnames written.
    """
    numbers = check_chapters(chapters)
    full = chapters is None
    root, src = Path(root) if root is not None else course.checkout(), Path(src)
    concepts = [course.concept(n) for n in numbers]
    nb_dir, ex_dir, deck_dir = root / "notebooks", root / "exercises", root / "pecourse" / "cards"

    chapters_in = [c for c in concepts if (nb_dir / f"{c.slug}.ipynb").exists()]
    exercises_in = [c for c in concepts if (ex_dir / f"{c.slug}.ipynb").exists()]
    decks_in = [c for c in concepts if (deck_dir / f"{c.slug}.json").exists()]
    docs = {"index", "exercises/index", "flashcards/index", "source/index"}
    docs |= {f"notebooks/{START_HERE}"} if (nb_dir / f"{START_HERE}.ipynb").exists() else set()
    docs |= {f"notebooks/{c.slug}" for c in chapters_in}
    docs |= {f"exercises/{c.slug}" for c in exercises_in}
    docs |= {f"flashcards/{c.slug}" for c in decks_in}
    course_docs = {f"{d}/{c.slug}" for c in course.CONCEPTS for d in ("notebooks", "exercises")}
    source_files = sorted(
        {
            p.relative_to(root).as_posix()
            for pattern in SOURCE_GLOBS
            for p in root.glob(pattern)
            if "__pycache__" not in p.parts
        }
    )
    site = pages.Site(
        root=root,
        docs=docs,
        source_pages={path: f"source/{path}" for path in source_files},
        course_docs=course_docs | {f"notebooks/{START_HERE}"},
    )
    out = _Stager(src)

    # Chapters and the start page.
    names = ([START_HERE] if f"notebooks/{START_HERE}" in docs else []) + [
        c.slug for c in chapters_in
    ]
    drawn_in = _draw_all([nb_dir / f"{n}.ipynb" for n in names], frames_cache, jobs)
    for name in names:
        flashcards = f"flashcards/{name}.md" if f"flashcards/{name}" in docs else None
        drawn = drawn_in.get(nb_dir / f"{name}.ipynb", {})
        for figure in (f for d in drawn.values() for f in d.frames if isinstance(f, bytes)):
            out.write(frames.frame_file(figure), figure)  # copied into the site after Sphinx
        saved = _read_json(nb_dir / f"{name}.ipynb")
        site.linked_sources |= recordings_read(saved) & set(source_files)
        nb = pages.prepare_notebook(saved, site, "notebooks", flashcards, drawn)
        download = f"{DOWNLOADS}/notebooks/{name}.ipynb"
        out.write(download, (nb_dir / f"{name}.ipynb").read_bytes())
        nb = pages.with_download(nb, "notebooks", download, pages.CHAPTER_DOWNLOAD)
        out.write(f"notebooks/{name}.ipynb", _notebook_json(nb))
    # Exercises: the student notebooks, never the solutions.
    for c in exercises_in:
        chapter = f"notebooks/{c.slug}.ipynb" if f"notebooks/{c.slug}" in docs else None
        nb = pages.prepare_exercise(
            _read_json(ex_dir / f"{c.slug}.ipynb"), site, "exercises", c.slug, chapter
        )
        download = f"{DOWNLOADS}/exercises/{c.slug}.ipynb"
        out.write(download, (ex_dir / f"{c.slug}.ipynb").read_bytes())
        nb = pages.with_download(nb, "exercises", download, pages.EXERCISE_DOWNLOAD)
        out.write(f"exercises/{c.slug}.ipynb", _notebook_json(nb))
    out.write("exercises/index.md", _exercises_index(exercises_in))
    # Flashcards.
    counts = {}
    for c in decks_in:
        deck = cards.load_cards(deck_dir / f"{c.slug}.json")
        counts[c.number] = len(deck)
        chapter = f"../notebooks/{c.slug}.ipynb" if f"notebooks/{c.slug}" in docs else None
        title = f"{c.number:02d} · {c.title}"
        text = pages.rewrite_markdown(cards.cards_page(title, deck, chapter), site, "flashcards")
        out.write(f"flashcards/{c.slug}.md", text)
    out.write("flashcards/index.md", _flashcards_index(decks_in, counts))
    # Package source: every file for the whole book, for a partial build the linked ones and
    # the recordings its chapters read.
    shown = [p for p in source_files if full or p in site.linked_sources]
    for path in shown:
        out.write(f"source/{path}", (root / path).read_bytes())
        if path.startswith(RESULTS) and path.endswith(".json"):
            page = tables.recording_page(path, _read_json(root / path))
        else:
            page = pages.source_page(path)
        out.write(f"source/{path}.md", page)
    out.write("source/index.md", _source_index(root, shown, full))
    # Files linked as they are (images, data) travel with the pages that link them.
    for path in sorted(site.copies):
        out.write(path, (root / path).read_bytes())
    out.write("index.md", _index(root, numbers, docs, full))
    out.remove_stale()
    docs |= {f"source/{p}" for p in shown}
    log.info("staged %d pages in %s", len(docs), src)
    return sorted(docs)


def recordings_read(nb: dict) -> set[str]:
    """The recordings a notebook's code reads (``recorded("name")``), as repository paths."""
    code = "\n".join(
        "".join(cell.get("source", ""))
        for cell in nb.get("cells", [])
        if cell.get("cell_type") == "code"
    )
    return {f"{RESULTS}{name}.json" for name in RECORDED.findall(code)}


def _draw_all(
    paths: list[Path], cache: Path | None, jobs: int
) -> dict[Path, dict[int, frames.Frames]]:
    """Each notebook's explorers drawn (or read from ``cache``), ``jobs`` notebooks at a time
    (each runs in its own kernel process; threads only wait on them)."""
    if cache is None:
        return {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return dict(zip(paths, pool.map(lambda p: _frames(p, cache), paths)))


def _frames(path: Path, cache: Path) -> dict[int, frames.Frames]:
    """A chapter's explorers drawn at build time; none, with a warning, when drawing fails (a
    chapter being rewritten must not stop the book: its explorers keep their saved output)."""
    try:
        return frames.drawn(path, pages.find_explorers(_read_json(path)), cache)
    except Exception as exc:  # the chapter's own code, run in a kernel: anything can fail
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]  # not the whole cell
        log.warning("%s: explorers not drawn, saved output shown (%s)", path.name, why)
        return {}


# --- generated pages -----------------------------------------------------------------------


def path_order() -> list[course.Concept]:
    """Every chapter in the order of the suggested reading path (course.LEARNING_PATH); a
    chapter the path leaves out comes after it, by number."""
    on_path = [course.concept(n) for n in course.LEARNING_PATH]
    return on_path + [c for c in course.CONCEPTS if c.number not in course.LEARNING_PATH]


def _toctree(entries: list[str], caption: str | None = None) -> str:
    lines = ["```{toctree}", ":hidden:", ":maxdepth: 1"]
    if caption:
        lines.append(f":caption: {caption}")
    return "\n".join(lines + [""] + entries + ["```", ""])


def _index(root: Path, numbers: tuple[int, ...], docs: set[str], full: bool) -> str:
    rows = [
        "| # | Chapter | In one line | Reading time | Practice |",
        "|---|---------|-------------|--------------|----------|",
    ]
    for c in course.CONCEPTS:
        notebook = root / "notebooks" / f"{c.slug}.ipynb"
        minutes = course.reading_minutes(notebook, root)
        here = f"notebooks/{c.slug}" in docs
        title = f"[{c.title}](notebooks/{c.slug}.ipynb)" if here else c.title
        time_ = f"{minutes} min" if minutes else "in preparation"
        practice = []
        if f"exercises/{c.slug}" in docs:
            practice.append(f"[exercise](exercises/{c.slug}.ipynb)")
        if f"flashcards/{c.slug}" in docs:
            practice.append(f"[flashcards](flashcards/{c.slug}.md)")
        rows.append(
            f"| {c.number:02d} | {title} | {c.summary} | {time_} | {' · '.join(practice)} |"
        )
    path = []
    for step, number in enumerate(course.LEARNING_PATH, start=1):
        c = course.concept(number)
        label = f"{c.number:02d} · {c.title}"
        link = f"[{label}](notebooks/{c.slug}.ipynb)" if f"notebooks/{c.slug}" in docs else label
        path.append(f"{step}. {link}")
    partial = (
        ""
        if full
        else (
            ":::{admonition} A partial build\n:class: note\n\nThis book was built with chapters "
            + ", ".join(f"{n:02d}" for n in numbers)
            + " only (`make book` builds them all).\n:::\n\n"
        )
    )
    start = f"notebooks/{START_HERE}"
    start_line = (
        f"New here? Begin with **[Start here]({start}.ipynb)**: what the course covers, "
        "the four places position can enter attention, and how to use the pieces.\n\n"
        if start in docs
        else ""
    )
    # In the order of the suggested path, so that a page's previous/next links follow it.
    chapters = [f"notebooks/{c.slug}" for c in path_order() if f"notebooks/{c.slug}" in docs]
    return (
        "# Positional encoding in transformers\n\n"
        "How does a transformer know where each token is? Sixteen chapters build every major "
        "answer from scratch — learned and sinusoidal tables, relative biases, ALiBi, RoPE and "
        "its scaling family, NoPE, CoPE — with the code, the maths and the measurements side "
        "by side.\n\n" + partial + start_line + ":::{admonition} Reading offline\n:class: tip\n\n"
        "This site needs no network and no Python: figures are the ones saved with each "
        "notebook, and the explorers' controls move in the page. What an explorer draws is "
        "computed by Python, so to explore for real, clone the course and run `make lab`. "
        "Search is at the top of the sidebar (or press Ctrl+K).\n:::\n\n"
        "## Syllabus\n\n"
        "Chapters are numbered as the syllabus numbers its concepts; reading times count "
        "each chapter's prose.\n\n" + "\n".join(rows) + "\n\n"
        "## A suggested path\n\n"
        "The numbering is not a reading order. One good path starts with *why* attention "
        "needs positions, draws the map of the field, and walks from absolute schemes to "
        "relative ones, to RoPE, to the length problem and the ways around it. The sidebar "
        "lists the chapters in this order, and each page's previous and next links follow "
        "it:\n\n"
        + "\n".join(path)
        + "\n\n"
        + (_toctree([start], "Start") if start in docs else "")
        + _toctree(chapters, "Chapters, in reading order")
        + _toctree(["exercises/index", "flashcards/index"], "Practice")
        + _toctree(["source/index"], "Reference")
    )


def _exercises_index(concepts: list[course.Concept]) -> str:
    items = [f"- [{c.number:02d} · {c.title}]({c.slug}.ipynb)" for c in concepts]
    return (
        "# Exercises\n\n"
        "One exercise notebook per chapter, autograded. Do them in JupyterLab: `make lab`, "
        "open `exercises/NN_slug.ipynb`, fill in the cells that raise `NotImplementedError`, "
        "then `pecourse check exercises/NN_slug.ipynb` (the visible tests; `--all` adds the "
        "hidden tests grading runs, where the course's `solutions/` folder is there). The pages "
        "below show each exercise as you get it (the hidden tests are not published).\n\n"
        + "\n".join(items)
        + "\n\n"
        + _toctree([c.slug for c in concepts])
    )


def _flashcards_index(concepts: list[course.Concept], counts: dict[int, int]) -> str:
    items = [
        f"- [{c.number:02d} · {c.title}]({c.slug}.md) — {counts[c.number]} cards" for c in concepts
    ]
    return (
        "# Flashcards\n\n"
        f"{sum(counts.values())} cards, one page per chapter. Click a card to see its answer. "
        "To schedule reviews, use the quiz at the end of each chapter in JupyterLab, "
        "`pecourse cards review` in a terminal, or `pecourse cards export --anki deck.apkg` "
        "for Anki.\n\n" + "\n".join(items) + "\n\n" + _toctree([c.slug for c in concepts])
    )


def _source_index(root: Path, shown: list[str], full: bool) -> str:
    items = []
    for path in shown:
        summary = pages.module_summary(root / path)
        items.append(f"- [`{path}`]({path}.md)" + (f" — {summary}" if summary else ""))
    scope = (
        "Every file of the `pecourse` package, as the chapters use it."
        if full
        else "The package files that the chapters of this partial build link to."
    )
    return (
        "# Package source\n\n"
        + scope
        + " Read it with the chapters: each scheme is a pure tensor function first, "
        "then a thin module over it.\n\n"
        + ("\n".join(items) if items else "(none)")
        + "\n\n"
        + _toctree([f"{p}" for p in shown])
    )


# --- Sphinx ----------------------------------------------------------------------------------


def build(
    out: Path | None = None,
    *,
    chapters=None,
    root: Path | None = None,
    cache: Path | None = None,
    jobs: int | None = None,
    frames_cache: Path | None = None,
) -> BuildResult:
    """Build the book into ``out`` (all chapters, or only ``chapters``) and return a summary.

    ``root`` is the checkout whose notebooks, cards and source are staged; the Sphinx
    configuration, the default ``out`` and the asset ``cache`` are those of the checkout the
    command runs in (:func:`pecourse.course.checkout`); the explorers' figures are kept in
    ``frames_cache`` (default: the folder ``<out>-frames`` beside ``out``). Logs each step and
    Sphinx's progress.
    Raises ``RuntimeError`` with Sphinx's own message when the build fails; warnings are
    returned, not raised (a chapter being rewritten must not stop the book).
    """
    start = time.perf_counter()
    here = course.checkout()
    out = (here / DEFAULT_OUT if out is None else Path(out)).resolve()
    src = out.with_name(out.name + "-src")
    doctrees = out.with_name(out.name + "-doctrees")
    static = assets.ensure_assets(cache)
    frames_cache = frames_cache or out.with_name(out.name + "-frames")
    jobs = jobs or min(2, os.cpu_count() or 1)
    docs = stage(src, chapters, root, frames_cache=frames_cache, jobs=jobs)
    warnings_file = out.with_name(out.name + "-warnings.txt")
    command = [
        sys.executable, "-m", "sphinx", "-b", "html", "-N", "-c", str(here / CONFIG_DIR),
        "-d", str(doctrees), "-w", str(warnings_file), "-j", str(jobs), str(src), str(out),
    ]  # fmt: skip
    env = dict(os.environ, PECOURSE_BOOK_ASSETS=str(static))
    log.info("running Sphinx on %d pages (%d jobs)", len(docs), jobs)
    returncode, tail = _sphinx(command, env)
    if returncode != 0:
        raise RuntimeError(f"sphinx-build failed (exit {returncode}):\n{tail[-4000:]}")
    warnings = (
        warnings_file.read_text(encoding="utf-8").splitlines() if warnings_file.exists() else []
    )
    from .check import broken_maths_in
    from .search import write_pages

    log.info("writing the search's page texts")
    write_pages(out)
    _copy_figures(src / frames.FRAMES_DIR, out / frames.FRAMES_DIR)

    warnings += broken_maths_in(src)
    return BuildResult(
        out=out,
        docs=tuple(docs),
        warnings=tuple(w for w in warnings if w.strip()),
        seconds=time.perf_counter() - start,
    )


def _copy_figures(staged: Path, site: Path) -> None:
    """The explorers' figures into the site, as staged (the pages name them in HTML that Sphinx
    does not read, so Sphinx does not copy them); figures no page names any more are removed."""
    site.mkdir(parents=True, exist_ok=True)
    wanted = {p.name for p in staged.glob("*.png")} if staged.is_dir() else set()
    for old in site.glob("*.png"):
        if old.name not in wanted:
            old.unlink()
    for name in wanted:
        target = site / name
        if not target.exists():  # named by content: an existing file is the same figure
            target.write_bytes((staged / name).read_bytes())
    log.info("%d explorer figures in %s", len(wanted), site)


# Sphinx's progress lines: "reading sources... [ 40%] notebooks/08_rope".
_PROGRESS = re.compile(r"^(?P<step>[a-z][^[]*?)\.*\s*\[\s*(?P<percent>\d+)%\]")


def _sphinx(command: list[str], env: dict) -> tuple[int, str]:
    """Run Sphinx, logging each step at every quarter of its progress (every line at DEBUG);
    the exit status and the output's last lines."""
    tail, shown = collections.deque(maxlen=80), None
    with subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as sphinx:
        for line in sphinx.stdout:
            tail.append(line)
            log.debug("sphinx: %s", line.rstrip())
            step = _PROGRESS.match(line)  # logged when its step or quarter differs from the last
            if step and shown != (shown := (step["step"], int(step["percent"]) // 25)):
                log.info("sphinx: %s %s%%", step["step"], step["percent"])
    return sphinx.returncode, "".join(tail)
