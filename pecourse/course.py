"""The course's map: the sixteen concepts of the syllabus, their files, and reading times;
and ``pecourse start``, which copies the chapters and exercises into a learner's folder.

Everything that names a concept (notebooks, exercises, flashcard files) uses the slugs
defined here, so the numbering of the syllabus is the single source of truth.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importlib.resources.abc from Python 3.11 on
    from importlib.abc import Traversable

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


#: The checkout's folders a learner works in. A wheel carries them inside the package, under
#: ``course_files/`` (pyproject.toml maps them there), so that ``pecourse start`` can copy them
#: out where there is no checkout.
LEARNER_FOLDERS = ("notebooks", "exercises")


def packaged_course() -> Traversable | None:
    """The package's own copy of ``notebooks/`` and ``exercises/`` (a folder holding both), or
    None where the package has none: an editable install in a checkout reads the checkout."""
    copy = resources.files("pecourse").joinpath("course_files")
    return copy if copy.is_dir() else None


def course_root(start: str | Path | None = None) -> Path | Traversable:
    """A folder holding the course's ``notebooks/`` and ``exercises/``: the checkout holding
    ``start`` (default: the working directory), else the installed package's copy. Raises
    :class:`NotACheckoutError` where there is neither."""
    try:
        return checkout(start)
    except NotACheckoutError:
        copy = packaged_course()
        if copy is None:
            raise
        return copy


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


# One concept per two lines: number, slug, title; then the line that sums it up.
# fmt: off
CONCEPTS: tuple[Concept, ...] = (
    Concept(1, "01_learned_absolute_positions", "Learned Absolute Positions",
            "A trainable table indexed by slot number, and the hard ceiling it builds in."),
    Concept(2, "02_why_attention_needs_positions", "Why Attention Needs Positions",
            "Self-attention is permutation-equivariant: order must be injected as data."),
    Concept(3, "03_alibi", "ALiBi: Attention with Linear Biases",
            "A per-head linear penalty on distance: no parameters, train short, test long."),
    Concept(4, "04_effective_vs_nominal_context", "Effective vs Nominal Context Length",
            "The advertised window and the length a model really uses are different numbers."),
    Concept(5, "05_multidimensional_rope", "Multidimensional RoPE for Images and Video",
            "Split the head dimension into axes so one rotation encodes time, height and width."),
    Concept(6, "06_positional_encodings", "Positional Encodings",
            "The map of the field: absolute and relative, learned and designed, four places."),
    Concept(7, "07_relative_position_representations", "Relative Position Representations",
            "Shaw et al.'s clipped distances and T5's buckets: attention that sees i - j."),
    Concept(8, "08_rope", "Rotary Position Embeddings (RoPE)",
            "Rotate queries and keys so their dot product depends only on the distance."),
    Concept(9, "09_sinusoidal_positional_encodings", "Sinusoidal Positional Encodings",
            "The original fixed sin/cos signal, its shift matrix, and where it degrades."),
    Concept(10, "10_contextual_position_encoding", "Contextual Position Encoding",
            "CoPE counts only the tokens the model decides matter."),
    Concept(11, "11_interleaving_rope_and_nope", "Interleaving RoPE and NoPE Layers",
            "RoPE in most layers and no position at all in the rest: a per-layer choice."),
    Concept(12, "12_length_extrapolation", "Length Extrapolation",
            "What handling longer inputs means, and why perplexity alone misleads."),
    Concept(13, "13_position_augmented_training", "Position-Augmented Training",
            "Show the model large position ids inside short batches: randomized and PoSE."),
    Concept(14, "14_rope_scaling", "RoPE Scaling: NTK-aware and YaRN",
            "Stretch a 4k model to 128k by rescaling RoPE's frequencies, not its positions."),
    Concept(15, "15_nope", "The NoPE Result",
            "No positional encoding at all: the causal mask alone leaks position."),
    Concept(16, "16_rope_base_frequency", "The RoPE Base Frequency",
            "One number sets RoPE's wavelengths and bounds the context it can discriminate."),
)
# fmt: on

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
    ``path`` as given, or in ``root`` (default: :func:`course_root`) or its ``notebooks/``."""
    path = Path(path)
    if not path.exists():
        root = Path(root) if root else course_root()
        found = (root.joinpath(*path.parts), root.joinpath("notebooks", *path.parts))
        path = next((p for p in found if p.is_file()), None)
        if path is None:
            return None
    words = prose_words(json.loads(path.read_text(encoding="utf-8")))
    return max(1, math.ceil(words / WORDS_PER_MINUTE))


def syllabus_table(link_base: str = "notebooks/", root: str | Path | None = None) -> str:
    """The syllabus as a Markdown table (the README embeds exactly this).

    Links point to ``link_base + slug.ipynb``: the default suits the repository root (the
    README); a notebook inside ``notebooks/`` passes ``link_base=""``. Reading times come
    from the notebooks of ``root`` (default: :func:`course_root`).
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


#: In a learner's folder: the SHA-256 of each notebook as ``pecourse start`` last wrote it, so
#: that a later run can tell the learner's edits from the course's older version.
COPIED_FILE = ".pecourse-copied.json"
#: A copied notebook the learner changed is kept; the course's version goes beside it, as
#: ``<name>.course.ipynb``.
BESIDE_SUFFIX = ".course.ipynb"


@dataclass
class Copied:
    """What :func:`copy_course` did, each path relative to the learner's folder."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)  # the course's newer version, not edited
    unchanged: list[str] = field(default_factory=list)
    #: the learner changed these, and the course's version is the one they started from
    yours: list[str] = field(default_factory=list)
    #: (the learner's edited notebook, where the course's newer version went: None if nowhere)
    kept: list[tuple[str, str | None]] = field(default_factory=list)

    def count(self, folder: str) -> int:
        """How many of the course's notebooks ``folder`` (``notebooks``, ``exercises``) holds."""
        kept = (rel for rel, _ in self.kept)
        paths = [*self.added, *self.updated, *self.unchanged, *self.yours, *kept]
        return sum(path.startswith(f"{folder}/") for path in paths)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write(path: Path, data: bytes) -> None:
    """Write whole or not at all: an interrupted copy leaves no half-written notebook."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def copy_course(folder: str | Path, source: Path | Traversable | None = None) -> Copied:
    """Copy the course's ``notebooks/`` and ``exercises/`` from ``source`` (default:
    :func:`course_root`) into ``folder``, never over a learner's work.

    A notebook missing from ``folder`` is copied; one that is still as this function last
    wrote it (its hash is in ``folder/.pecourse-copied.json``) is replaced by the course's
    version; any other that differs from the course's is the learner's and is kept. Where the
    course's version is not the one last copied (a newer course, or a folder this function
    never wrote), it goes beside the learner's as ``<name>.course.ipynb`` (unless a file the
    learner changed holds that name too: then nowhere). Raises ``ValueError`` when ``folder``
    is a file.
    """
    folder = Path(folder).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"folder must be a folder to copy the course into, got the file {folder}")
    source = course_root() if source is None else source
    record_path = folder / COPIED_FILE
    try:
        written = json.loads(record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        written = {}  # none yet (or unreadable): every differing notebook counts as the learner's
    written = written if isinstance(written, dict) else {}

    def ours(rel: str) -> bool:  # as this function last wrote it
        return written.get(rel) == _sha((folder / rel).read_bytes())

    done = Copied()
    for name in LEARNER_FOLDERS:
        files = sorted(source.joinpath(name).iterdir(), key=lambda f: f.name)
        for item in (f for f in files if f.name.endswith(".ipynb") and f.is_file()):
            rel, data = f"{name}/{item.name}", item.read_bytes()
            target = folder / rel
            if not target.exists():
                _write(target, data)
                done.added.append(rel)
            elif target.read_bytes() == data:
                done.unchanged.append(rel)
            elif ours(rel):
                _write(target, data)
                done.updated.append(rel)
            elif written.get(rel) == _sha(data):  # edited, and the course has nothing newer
                done.yours.append(rel)
            else:
                beside = f"{name}/{item.name[: -len('.ipynb')]}{BESIDE_SUFFIX}"
                other = folder / beside
                if not other.exists() or ours(beside) or other.read_bytes() == data:
                    _write(other, data)
                    written[beside] = _sha(data)
                    done.kept.append((rel, beside))
                else:  # the learner changed that one too: said again on the next run
                    done.kept.append((rel, None))
                    continue
            written[rel] = _sha(data)
    _write(record_path, json.dumps(written, indent=1, sort_keys=True).encode())
    return done


def lab_command(folder: Path) -> tuple[list[str], dict[str, str]]:
    """The command and environment that open JupyterLab in ``folder`` on the start-here
    notebook, as ``make lab`` does: this Python's scripts first on PATH, so ``pecourse`` runs
    in JupyterLab's terminals and ``!pecourse`` cells; terminals start a plain (not a login)
    shell, which would reset PATH; ``--allow-root`` where JupyterLab otherwise refuses."""
    command = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={folder}"]
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if sys.prefix != sys.base_prefix:
        env["VIRTUAL_ENV"] = sys.prefix
    if os.name == "posix":
        shell = env.get("SHELL") or "/bin/sh"
        command.append(f"--ServerApp.terminado_settings=shell_command={shell}")
        if os.geteuid() == 0:
            command.append("--allow-root")
    return [*command, "notebooks/00_start_here.ipynb"], env


def _start(args) -> int:
    folder = Path(args.folder).expanduser().resolve()
    try:
        done = copy_course(folder)
    except ValueError as exc:
        print(f"pecourse start: {exc}", file=sys.stderr)
        return 2
    print(f"The course is in {folder}: {done.count('notebooks')} notebooks in notebooks/ "
          f"(start with 00_start_here), {done.count('exercises')} in exercises/")  # fmt: skip
    for what, paths in (("copied", done.added), ("updated", done.updated)):
        if paths:
            print(f"  {what} {len(paths)} notebook(s)")
    if done.yours:
        print(f"  kept {len(done.yours)} notebook(s) you changed as they are")
    for rel, beside in done.kept:
        where = f"the course's newer version is beside it: {beside}" if beside else "left alone"
        print(f"  kept your edited {rel} ({where})")
    if args.no_lab:
        print(f"Open it with: pecourse start {folder}   (your edits are always kept)")
        print(f"Check an exercise: cd {folder} && pecourse check exercises/08_rope.ipynb")
        return 0
    command, env = lab_command(folder)
    print("Opening JupyterLab there (Ctrl-C in this terminal stops it) ...", flush=True)
    if os.name != "posix":
        import subprocess

        return subprocess.call(command, env=env)
    os.execve(command[0], command, env)  # JupyterLab takes this process over


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "start",
        help="copy the chapters and exercises into a folder of yours and open JupyterLab there",
        description="Copy the course's chapters (notebooks/) and exercises (exercises/) into "
        "FOLDER and open JupyterLab there. Run it again to reopen the course: notebooks you "
        "changed are kept (a newer version of the course goes beside them).",
    )
    parser.add_argument("folder", metavar="FOLDER", help="where the course goes (made if missing)")
    parser.add_argument("--no-lab", action="store_true", help="copy only; do not open JupyterLab")
    parser.set_defaults(func=_start)


def main(argv: list[str] | None = None) -> int:
    """``python -m pecourse.course``: print the syllabus table, or ``--update-readme``."""
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
