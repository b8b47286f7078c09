"""Dependencies point one way (docs/architecture.md): the schemes know nothing downstream, no
two modules import each other, and the deck and the grader stay light to import.

Every ``import`` statement of the package is read, including those inside functions: a lazy
import is still a dependency.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pecourse"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(name: str) -> set[str]:
    """The package modules ``name`` imports (``from x import submodule`` counts the submodule)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            ]
        else:
            continue
        found |= {t for t in targets if t in MODULES and t != name}
    return found


GRAPH = {name: _imports(name) for name in MODULES}


def _reachable(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in GRAPH[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_the_graph_sees_lazy_imports():
    # model imports the position modules at the top, kernels.flex imports them in functions
    assert "pecourse.positions.rope" in GRAPH["pecourse.lab.model"]
    assert "pecourse.positions.relative" in GRAPH["pecourse.kernels.flex"]


def test_positions_import_nothing_downstream():
    allowed = {"pecourse.attention", "pecourse._validate"}
    for name in (n for n in MODULES if n.startswith("pecourse.positions")):
        outside = {m for m in GRAPH[name] if not m.startswith("pecourse.positions")}
        assert outside <= allowed, f"{name} imports {sorted(outside - allowed)}"
    for name in ("pecourse.attention", "pecourse._validate"):
        assert not any(m.startswith("pecourse.positions") for m in _reachable(name)), name


def test_kernels_build_on_positions_never_the_reverse():
    kernels = {n for n in MODULES if n.startswith("pecourse.kernels")}
    assert any(GRAPH[k] & {"pecourse.positions.rotary"} for k in kernels)
    for name in (n for n in MODULES if n.startswith("pecourse.positions")):
        assert not (_reachable(name) & kernels), name


def test_no_two_modules_import_each_other():
    cycles = sorted((a, b) for a in GRAPH for b in GRAPH[a] if a < b and a in _reachable(b))
    assert not cycles, f"import cycles: {cycles}"


@pytest.mark.parametrize(
    "module",
    [
        "pecourse.cards_check_imports",
        "pecourse.exercises.grade",
        "pecourse.exercises.check",
        "pecourse.report",
    ],
)
def test_the_deck_and_the_grader_do_not_import_the_model_or_torch(module):
    """Importing the deck (and its number checks) or the grader loads neither torch nor the
    model: a learner's quiz and an instructor's grading start in well under a second."""
    code = (
        "import sys, importlib;"
        + (
            "import pecourse.flashcards, pecourse.flashcards.deck, pecourse.flashcards.checks;"
            if module == "pecourse.cards_check_imports"
            else f"importlib.import_module({module!r});"
        )
        + "heavy = sorted(m for m in sys.modules if m == 'torch' or m.startswith(("
        "'pecourse.lab.model', 'pecourse.positions', 'pecourse.kernels', 'pecourse.lab.train')));"
        "print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_the_grading_server_does_not_import_nbformat():
    """The server (``python -m pecourse.exercises._runner``) starts once per grading batch and
    reads no notebook; nbformat would add about two seconds to every start."""
    code = (
        "import sys, pecourse.exercises._runner;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('nbformat', 'jsonschema')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout


# --- the parts of docs/architecture.md, read from the document ----------------------------------


def _parts() -> tuple[dict[str, str], dict[str, set[str]]]:
    """The document's table: ``{top-level module: part}`` and ``{part: parts it may import}``."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    table = doc.split("<!-- parts:start -->")[1].split("<!-- parts:end -->")[0]
    part_of, allowed = {}, {}
    for line in table.strip().splitlines()[2:]:
        part, modules, may = (cell.strip() for cell in line.strip("|").split("|"))
        part_of |= {m.strip(" `"): part for m in modules.split(",")}
        allowed[part] = {p.strip() for p in may.split(",")}
    return part_of, allowed


def _part(module: str, part_of: dict) -> str | None:
    top = module.split(".")[1] if "." in module else None  # the package's own __init__: no part
    return None if top is None else part_of.get(top, f"<{top}: in no part>")


def test_every_module_is_in_one_part_of_the_document():
    part_of, _ = _parts()
    tops = {m.split(".")[1] for m in MODULES if "." in m}
    assert tops == set(part_of), (sorted(tops - set(part_of)), sorted(set(part_of) - tops))


def test_the_code_imports_only_across_the_lines_the_document_draws():
    part_of, allowed = _parts()
    crossing = sorted(
        (a, b)
        for a in GRAPH
        for b in GRAPH[a]
        if _part(a, part_of)
        and _part(b, part_of)
        and _part(b, part_of) not in allowed.get(_part(a, part_of), set())
    )
    assert not crossing, f"imports the document does not draw: {crossing}"


def test_every_line_the_document_draws_is_an_import_the_code_has():
    part_of, allowed = _parts()
    edges = {(_part(a, part_of), _part(b, part_of)) for a in GRAPH for b in GRAPH[a]}
    drawn = {(p, q) for p, may in allowed.items() for q in may if p != q}
    assert drawn <= edges, f"drawn but not in the code: {sorted(drawn - edges)}"
