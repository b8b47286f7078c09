"""``python -m pecourse.book build|check``: what ``make book`` and ``make book-check`` run."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from pecourse.book.builder import DEFAULT_OUT, build
from pecourse.course import NotACheckoutError, checkout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pecourse.book")
    parser.add_argument("-q", "--quiet", action="store_true", help="log warnings only")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the book into a folder (default build/book)")
    b.add_argument("--out", type=Path)
    b.add_argument("--chapters", type=int, nargs="+", help="only these chapters (1-16)")
    b.add_argument("--strict", action="store_true", help="fail on any Sphinx warning")
    c = sub.add_parser("check", help="open a built book in headless Chromium, network blocked")
    c.add_argument("--out", type=Path)
    c.add_argument("--screenshots", type=Path, help="default build/book-screens")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s")
    try:
        return _run(args)
    except NotACheckoutError as exc:
        print(f"python -m pecourse.book: {exc}", file=sys.stderr)
        return 2


def _run(args) -> int:
    out = args.out or checkout() / DEFAULT_OUT
    if args.command == "build":
        result = build(out, chapters=args.chapters)
        for line in result.warnings:
            print(line, file=sys.stderr)
        print(
            f"built {len(result.docs)} pages in {result.seconds:.0f} s with "
            f"{len(result.warnings)} warnings: {result.out / 'index.html'}"
        )
        return 1 if args.strict and result.warnings else 0

    from pecourse.book.check import check_book

    report = check_book(out, screenshots=args.screenshots or out.with_name("book-screens"))
    print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
