"""The instructor's policy on the package's reference implementation.

The course package implements every function an exercise asks for (that is what the
hidden tests compare against). By default an answer may not use it: a cell that imports
``pecourse`` (``import pecourse...``, ``from pecourse... import``, ``__import__`` or
``importlib`` with a ``"pecourse..."`` name, ``sys.modules["pecourse..."]``) scores 0 on
the parts that follow it, with a reason that says so. ``pecourse grade --allow-reference``
(and ``pecourse check --allow-reference``, for self-study) lifts the rule.

This check reads the code (``ast``); it is the rule's clear message, not its only guard:
in the sandbox the package is not there to import unless the rule is lifted.
"""

from __future__ import annotations

import ast

__all__ = ["reference_uses", "POLICY_REASON"]

POLICY_REASON = (
    "policy: the answer uses the course package's reference implementation ({what}); "
    "write the function yourself (an instructor can allow this with --allow-reference)"
)
_DYNAMIC = {"__import__", "import_module"}


def _python(source: str) -> str:
    """The cell as plain Python (IPython magics and shell escapes turned into calls)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - IPython missing or a cell it cannot read
        return source


def _is_package(name) -> bool:
    return isinstance(name, str) and (name == "pecourse" or name.startswith("pecourse."))


def reference_uses(source: str) -> list[str]:
    """What in ``source`` reaches for the package (module names), in order; [] if nothing."""
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
