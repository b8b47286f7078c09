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
# Which module registers each command: a command imports only its own module, so that
# `pecourse cards review` starts without importing torch (a test checks this table against
# what the modules register).
COMMANDS = {
    "info": "pecourse.info",
    "cards": "pecourse.flashcards.cli",
    "exercises": "pecourse.exercises.cli",
    "check": "pecourse.exercises.cli",
    "grade": "pecourse.exercises.cli",
    "train": "pecourse.train",
}


def build_parser(modules=COMMAND_MODULES) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pecourse",
        description="A course on positional encoding in transformers: "
        "environment report, flashcards, exercises, grading and training.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in modules:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    first = argv[0] if argv else None
    if first is not None and not first.startswith("-") and first not in COMMANDS:
        # refused before any command module is imported; argparse words it and exits 2
        refuse = argparse.ArgumentParser(prog="pecourse")
        refuse.add_argument("COMMAND", choices=list(COMMANDS))
        refuse.parse_args([first])
    parser = build_parser([COMMANDS[first]] if first in COMMANDS else COMMAND_MODULES)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
