"""``python -m pecourse.book build|check``: what ``make book`` and ``make book-check`` run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pecourse.book.builder import DEFAULT_OUT, build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pecourse.book")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the book into a folder (default build/book)")
    b.add_argument("--out", type=Path, default=DEFAULT_OUT)
    b.add_argument("--chapters", type=int, nargs="+", help="only these chapters (1-16)")
    b.add_argument("--strict", action="store_true", help="fail on any Sphinx warning")
    c = sub.add_parser("check", help="open a built book in headless Chromium, network blocked")
    c.add_argument("--out", type=Path, default=DEFAULT_OUT)
    c.add_argument("--screenshots", type=Path, default=DEFAULT_OUT.with_name("book-screens"))
    args = parser.parse_args(argv)

    if args.command == "build":
        result = build(args.out, chapters=args.chapters)
        for line in result.warnings:
            print(line, file=sys.stderr)
        print(
            f"built {len(result.docs)} pages in {result.seconds:.0f} s with "
            f"{len(result.warnings)} warnings: {result.out / 'index.html'}"
        )
        return 1 if args.strict and result.warnings else 0

    from pecourse.book.check import check_book

    report = check_book(args.out, screenshots=args.screenshots)
    print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
