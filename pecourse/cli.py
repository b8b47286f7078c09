"""The ``pecourse`` command.

Each part of the course that has commands contributes a ``register(subparsers)`` function
in its own module; this file only assembles them.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Modules that add sub-commands: each defines ``register(subparsers)``, which adds its
# parsers and sets ``func`` (called with the parsed arguments, returning an exit code).
COMMAND_MODULES = [
    "pecourse.info",
    "pecourse.flashcards.cli",
    "pecourse.exercises.cli",
    "pecourse.train",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pecourse",
        description="A course on positional encoding in transformers: "
        "environment report, flashcards, exercises, grading and training.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
