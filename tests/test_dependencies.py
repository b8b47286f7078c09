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
    ["pecourse.cards_check_imports", "pecourse.exercises.grade", "pecourse.exercises.check"],
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
