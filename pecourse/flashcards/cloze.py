"""Cloze deletions: ``{{c1::answer}}`` or ``{{c1::answer::hint}}`` inside a card's text.

The syntax is Anki's, so the Anki export can hand the text to a cloze note type unchanged.
A card of this deck has a single deletion index, ``c1`` (one review item per card, one Anki
card per note), but may hide several spans with it. Deletions never nest, never contain
``}}`` (write ``} }`` inside LaTeX, as Anki's manual advises) and may wrap whole ``$...$``
math spans, never part of one.
"""

from __future__ import annotations

import re

# {{c<n>::answer}} or {{c<n>::answer::hint}}; the answer may contain single braces.
CLOZE = re.compile(r"\{\{c(\d+)::(.+?)(?:::([^{}]*?))?\}\}", re.S)
_OPEN = re.compile(r"\{\{c\d*::?")


def has_cloze(text: str) -> bool:
    return bool(CLOZE.search(text))


def deletions(text: str) -> list[str]:
    """The hidden answers, in order."""
    return [m.group(2) for m in CLOZE.finditer(text)]


def question(text: str, blank: str = "[…]") -> str:
    """The text with every deletion replaced by ``blank`` (or ``[hint]`` when one is given)."""
    return CLOZE.sub(lambda m: f"[{m.group(3)}]" if m.group(3) else blank, text)


def answer(text: str, mark: str = "**") -> str:
    """The text with every deletion filled in, wrapped in ``mark`` (Markdown bold)."""

    def fill(m: re.Match) -> str:
        inner = m.group(2)
        # Bold cannot wrap display math; a bare math span is left as it is.
        return inner if inner.startswith("$$") else f"{mark}{inner}{mark}"

    return CLOZE.sub(fill, text)


def problems(text: str) -> list[str]:
    """What is wrong with the cloze markup of ``text`` (an empty list means it is sound)."""
    found = list(CLOZE.finditer(text))
    out: list[str] = []
    if not found:
        return ["no {{c1::...}} deletion"]
    numbers = {int(m.group(1)) for m in found}
    if numbers != {1}:
        out.append(
            f"only c1 deletions are allowed (one review item per card), found c{sorted(numbers)}"
        )
    for m in found:
        inner = m.group(2)
        if not inner.strip():
            out.append("an empty deletion")
        if _OPEN.search(inner):
            out.append(f"nested deletion in {m.group(0)!r}")
        if inner.count("$") % 2:
            out.append(f"deletion {m.group(0)!r} cuts a $...$ math span in two")
    if "{{" in CLOZE.sub("", text):
        out.append("an opening {{ without a matching {{c1::...}} deletion")
    return out
