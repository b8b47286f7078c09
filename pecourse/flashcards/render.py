"""A small Markdown-to-HTML renderer for card text that leaves LaTeX untouched.

Cards use a little Markdown (paragraphs, ``**bold**``, ``*italic*``, ```code```, ``- ``
lists) and LaTeX between ``$...$`` or ``$$...$$``. Math is cut out before any Markdown
rule runs (so ``x_i * y_j`` never turns into emphasis) and put back HTML-escaped, where
MathJax (HTMLMath widgets, JupyterLab, Anki) finds it.
"""

from __future__ import annotations

import html
import re

_MATH = re.compile(r"\$\$.+?\$\$|\$(?!\s).+?(?<![\s\\])\$", re.S)
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_BULLET = re.compile(r"^\s*[-*] ")
_NUMBER = re.compile(r"^\s*\d+\. ")
_ITALIC = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])")


def _protect(text: str, math_style: str) -> tuple[str, list[str]]:
    saved: list[str] = []

    def keep(match: re.Match) -> str:
        src = match.group(0)
        if math_style == "anki":  # Anki's MathJax wants \( \) and \[ \]
            src = r"\[" + src[2:-2] + r"\]" if src.startswith("$$") else r"\(" + src[1:-1] + r"\)"
        saved.append(html.escape(src, quote=False))
        return f"\x00{len(saved) - 1}\x00"

    return _MATH.sub(keep, text), saved


def _inline(text: str) -> str:
    text = html.escape(text, quote=False)
    text = _CODE.sub(r"<code>\1</code>", text)
    text = _BOLD.sub(r"<strong>\1</strong>", text)
    return _ITALIC.sub(r"<em>\1</em>", text)


def markdown_to_html(text: str, *, math_style: str = "dollar") -> str:
    """Render card Markdown to HTML; ``math_style`` is ``"dollar"`` (keep ``$``) or ``"anki"``."""
    if math_style not in ("dollar", "anki"):
        raise ValueError(f"math_style must be 'dollar' or 'anki', got {math_style!r}")
    body, saved = _protect(text, math_style)
    blocks = re.split(r"\n\s*\n", body.strip())
    out = []
    for block in blocks:
        lines = block.splitlines()
        if lines and all(_BULLET.match(ln) for ln in lines):
            items = "".join("<li>" + _inline(_BULLET.sub("", ln)) + "</li>" for ln in lines)
            out.append(f"<ul>{items}</ul>")
        elif lines and all(_NUMBER.match(ln) for ln in lines):
            items = "".join("<li>" + _inline(_NUMBER.sub("", ln)) + "</li>" for ln in lines)
            out.append(f"<ol>{items}</ol>")
        else:
            out.append("<p>" + "<br>".join(_inline(ln) for ln in lines) + "</p>")
    rendered = "\n".join(out)
    return re.sub(r"\x00(\d+)\x00", lambda m: saved[int(m.group(1))], rendered)
