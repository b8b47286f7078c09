"""The instructor's policy on the package's reference implementation.

The course package implements every function an exercise asks for (that is what the
hidden tests compare against). By default an answer may not use it: a cell that imports
``pecourse`` (``import pecourse...``, ``from pecourse... import``, ``__import__`` or
``importlib`` with a ``"pecourse..."`` name, ``sys.modules["pecourse..."]``) scores 0 on
the parts that follow it, with a reason that says so. ``pecourse grade --allow-reference``
(and ``pecourse check --allow-reference``, for self-study) lifts the rule.

This check reads the code (``ast``); it is the rule's clear message, not its only guard:
in the sandbox the package is not there to import unless the rule is lifted. It runs in
the grader's own process, so its work is bounded: linear in the cell's length (IPython
rewrites only the lines Python cannot read alone), and a cell over
:data:`MAX_CHECKED_CHARS` is not parsed at all but refused as too large to check.
"""

from __future__ import annotations

import ast

__all__ = ["reference_uses", "POLICY_REASON", "MAX_CHECKED_CHARS"]

MAX_CHECKED_CHARS = 100_000

POLICY_REASON = (
    "policy: the answer uses the course package's reference implementation ({what}); "
    "write the function yourself (an instructor can allow this with --allow-reference)"
)
_DYNAMIC = {"__import__", "import_module"}


def _python(source: str) -> str:
    """The cell as plain Python: IPython's rewriting (magics and shell escapes turned into
    calls) of each line that may hold one, or of the whole cell if it is a cell magic.
    IPython re-reads a whole cell once per magic; line by line the work stays linear."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return source
    transform = TransformerManager().transform_cell
    try:
        if source.lstrip().startswith("%%"):
            return transform(source)
        lines = source.splitlines()
        for i, line in enumerate(lines):
            body = line.lstrip()
            if any(c in body for c in "%!?") and not _parses(body):
                lines[i] = line[: len(line) - len(body)] + transform(body).rstrip("\n")
        return "\n".join(lines)
    except Exception:  # noqa: BLE001 - a cell IPython cannot read
        return source


def _parses(line: str) -> bool:
    try:
        ast.parse(line)
        return True
    except (SyntaxError, ValueError):
        return False


def _is_package(name) -> bool:
    return isinstance(name, str) and (name == "pecourse" or name.startswith("pecourse."))


def reference_uses(source: str) -> list[str]:
    """What in ``source`` reaches for the package (module names), in order; [] if nothing."""
    if len(source) > MAX_CHECKED_CHARS:
        return [f"a cell over {MAX_CHECKED_CHARS // 1000} k characters, too large to check"]
    try:
        tree = ast.parse(_python(source))
    except (SyntaxError, ValueError, RecursionError):
        return []
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _is_package(a.name)]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and _is_package(node.module):
                found.append(node.module)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            first = node.args[0] if node.args else None
            if name in _DYNAMIC and isinstance(first, ast.Constant) and _is_package(first.value):
                found.append(first.value)
        elif isinstance(node, ast.Subscript):
            key = node.slice
            if isinstance(key, ast.Constant) and _is_package(key.value):
                found.append(key.value)
    return list(dict.fromkeys(found))
