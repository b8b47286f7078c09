"""The course's map: the sixteen concepts of the syllabus, their files, and reading times.

Everything that names a concept (notebooks, exercises, flashcard files) uses the slugs
defined here, so the numbering of the syllabus is the single source of truth.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

#: Words per minute used for reading times (a typical rate for technical prose).
WORDS_PER_MINUTE = 230


class NotACheckoutError(FileNotFoundError):
    """Raised where the course's folders are needed outside a checkout of the course."""


def checkout(start: str | Path | None = None) -> Path:
    """The root (``pyproject.toml`` beside ``notebooks/``) of the course checkout holding
    ``start`` (default: the working directory). The checkout's folders are not package data
    (an installed package has none), so they are found from where the command runs.
    Raises :class:`NotACheckoutError` when no folder there holds the course."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").is_file() and (folder / "notebooks").is_dir():
            return folder
    raise NotACheckoutError(
        f"{here} is not inside a checkout of the course (no folder there holds pyproject.toml "
        "beside notebooks/): run this from the course's folder (from Python: pass the folder)"
    )


@dataclass(frozen=True)
class Concept:
    number: int
    slug: str
    title: str
    summary: str

    @property
    def notebook(self) -> str:
        """Path of the lesson notebook, relative to the repository root."""
        return f"notebooks/{self.slug}.ipynb"

    @property
    def exercise(self) -> str:
        return f"exercises/{self.slug}.ipynb"


CONCEPTS: tuple[Concept, ...] = (
    Concept(
        1,
        "01_learned_absolute_positions",
        "Learned Absolute Positions",
        "A trainable table indexed by slot number, and the hard ceiling it builds in.",
    ),
    Concept(
        2,
        "02_why_attention_needs_positions",
        "Why Attention Needs Positions",
        "Self-attention is permutation-equivariant: order must be injected as data.",
    ),
    Concept(
        3,
        "03_alibi",
        "ALiBi: Attention with Linear Biases",
        "A per-head linear penalty on distance: no parameters, train short, test long.",
    ),
    Concept(
        4,
        "04_effective_vs_nominal_context",
        "Effective vs Nominal Context Length",
        "The advertised window and the length a model really uses are different numbers.",
    ),
    Concept(
        5,
        "05_multidimensional_rope",
        "Multidimensional RoPE for Images and Video",
        "Split the head dimension into axes so one rotation encodes time, height and width.",
    ),
    Concept(
        6,
        "06_positional_encodings",
        "Positional Encodings",
        "The map of the field: absolute and relative, learned and designed, four places.",
    ),
    Concept(
        7,
        "07_relative_position_representations",
        "Relative Position Representations",
        "Shaw et al.'s clipped distances and T5's buckets: attention that sees i - j.",
    ),
    Concept(
        8,
        "08_rope",
        "Rotary Position Embeddings (RoPE)",
        "Rotate queries and keys so their dot product depends only on the distance.",
    ),
    Concept(
        9,
        "09_sinusoidal_positional_encodings",
        "Sinusoidal Positional Encodings",
        "The original fixed sin/cos signal, its shift matrix, and where it degrades.",
    ),
    Concept(
        10,
        "10_contextual_position_encoding",
        "Contextual Position Encoding",
        "CoPE counts only the tokens the model decides matter.",
    ),
    Concept(
        11,
        "11_interleaving_rope_and_nope",
        "Interleaving RoPE and NoPE Layers",
        "RoPE in most layers and no position at all in the rest: a per-layer choice.",
    ),
    Concept(
        12,
        "12_length_extrapolation",
        "Length Extrapolation",
        "What handling longer inputs means, and why perplexity alone misleads.",
    ),
    Concept(
        13,
        "13_position_augmented_training",
        "Position-Augmented Training",
        "Show the model large position ids inside short batches: randomized and PoSE.",
    ),
    Concept(
        14,
        "14_rope_scaling",
        "RoPE Scaling: NTK-aware and YaRN",
        "Stretch a 4k model to 128k by rescaling RoPE's frequencies, not its positions.",
    ),
    Concept(
        15,
        "15_nope",
        "The NoPE Result",
        "No positional encoding at all: the causal mask alone leaks position.",
    ),
    Concept(
        16,
        "16_rope_base_frequency",
        "The RoPE Base Frequency",
        "One number sets RoPE's wavelengths and bounds the context it can discriminate.",
    ),
)

#: One good reading order (the syllabus numbering is not one).
LEARNING_PATH: tuple[int, ...] = (2, 6, 9, 1, 7, 8, 16, 3, 15, 11, 12, 4, 13, 14, 5, 10)

_BY_NUMBER = {c.number: c for c in CONCEPTS}


def concept(number: int) -> Concept:
    """The concept with this syllabus number (1–16)."""
    if isinstance(number, bool) or not isinstance(number, int) or number not in _BY_NUMBER:
        raise ValueError(f"concept number must be an integer from 1 to 16, got {number!r}")
    return _BY_NUMBER[number]


_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")


def prose_words(notebook: dict) -> int:
    """Words of Markdown prose in a notebook (code, LaTeX and HTML tags not counted)."""
    words = 0
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        text = "".join(cell.get("source", ""))
        text = re.sub(r"\$\$.*?\$\$|\$[^$\n]*\$", " ", text, flags=re.S)  # maths
        text = re.sub(r"```.*?```|`[^`\n]*`|<[^>]+>|\(https?://[^)]*\)", " ", text, flags=re.S)
        words += len(_WORD.findall(text))
    return words


def reading_minutes(path: str | Path, root: str | Path | None = None) -> int | None:
    """Reading time of a notebook's prose in whole minutes, or None if it does not exist:
    ``path`` as given, or in ``root`` (default: :func:`checkout`) or its ``notebooks/``."""
    path = Path(path)
    if not path.exists():
        root = Path(root or checkout())
        path = next((p for p in (root / path, root / "notebooks" / path) if p.exists()), None)
        if path is None:
            return None
    words = prose_words(json.loads(path.read_text(encoding="utf-8")))
    return max(1, math.ceil(words / WORDS_PER_MINUTE))


def syllabus_table(link_base: str = "notebooks/", root: str | Path | None = None) -> str:
    """The syllabus as a Markdown table (the README embeds exactly this).

    Links point to ``link_base + slug.ipynb``: the default suits the repository root (the
    README); a notebook inside ``notebooks/`` passes ``link_base=""``. Reading times come
    from the notebooks of ``root`` (default: :func:`checkout`).
    """
    rows = [
        "| # | Chapter | In one line | Reading time |",
        "|---|---------|-------------|--------------|",
    ]
    for c in CONCEPTS:
        minutes = reading_minutes(c.notebook, root)
        title = f"[{c.title}]({link_base}{c.slug}.ipynb)" if minutes is not None else c.title
        time = f"{minutes} min" if minutes is not None else "in preparation"
        rows.append(f"| {c.number:02d} | {title} | {c.summary} | {time} |")
    return "\n".join(rows)


def update_readme(root: str | Path | None = None) -> bool:
    """Replace the syllabus table in the checkout's README with the current one; True if it
    changed. ``root`` defaults to :func:`checkout`."""
    root = Path(root or checkout())
    path = root / "README.md"
    text = path.read_text(encoding="utf-8")
    pattern = re.compile(r"^\| # \| Chapter .*?(?=\n\n)", flags=re.S | re.M)
    if not pattern.search(text):
        raise ValueError(f"no syllabus table found in {path}")
    updated = pattern.sub(lambda _: syllabus_table(root=root), text, count=1)
    path.write_text(updated, encoding="utf-8")
    return updated != text


def main(argv: list[str] | None = None) -> int:
    """``python -m pecourse.course``: print the syllabus table, or ``--update-readme``."""
    import sys

    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv == ["--update-readme"]:
            print("README updated" if update_readme() else "README already current")
        else:
            print(syllabus_table())
    except NotACheckoutError as exc:  # the table reads the chapters, which only a checkout has
        print(f"python -m pecourse.course: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
