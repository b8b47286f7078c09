"""The ``pecourse`` command.

Each part of the course that has commands contributes a ``register(subparsers)`` function
in its own module; this file only assembles them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# Which module registers each command, and its one-line help: a command imports only its own
# module, so that `pecourse cards review` starts without importing torch, and `pecourse
# --help` imports none (a test checks this table against what the modules register).
COMMANDS = {
    "start": (
        "pecourse.course",
        "copy the chapters and exercises into a folder of yours and open JupyterLab there",
    ),
    "info": (
        "pecourse.info",
        "versions, devices, compiled kernels and their checks, where learner data is stored",
    ),
    "cards": (
        "pecourse.flashcards.cli",
        "review the flashcards (FSRS spaced repetition), show progress, export",
    ),
    "exercises": ("pecourse.exercises.cli", "build the student exercise notebooks"),
    "check": (
        "pecourse.exercises.cli",
        "run an exercise notebook and report each part as passed or failed (the visible "
        "tests; --all adds the hidden ones)",
    ),
    "grade": (
        "pecourse.exercises.cli",
        "grade a class: SUBMISSIONS/<student>/<NN_slug>.ipynb -> SQLite + CSV gradebook",
    ),
    "report": (
        "pecourse.report",
        "the class at a glance: an offline HTML report with plots and an LMS CSV from "
        "the SQLite gradebook(s)",
    ),
    "train": ("pecourse.lab.train", "train the tiny model (one run, one shipped recipe, or --all)"),
}


# Modules that add sub-commands: each defines ``register(subparsers)``, which adds its
# parsers and sets ``func`` (called with the parsed arguments, returning an exit code).
COMMAND_MODULES = list(dict.fromkeys(module for module, _ in COMMANDS.values()))


def _parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    parser = argparse.ArgumentParser(
        prog="pecourse",
        description="A course on positional encoding in transformers: "
        "environment report, flashcards, exercises, grading and training.",
    )
    return parser, parser.add_subparsers(dest="command", metavar="COMMAND")


def build_parser(modules=COMMAND_MODULES) -> argparse.ArgumentParser:
    parser, subparsers = _parser()
    for name in modules:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    first = argv[0] if argv else None
    if first in COMMANDS:
        parser = build_parser([COMMANDS[first][0]])
    else:
        # no command, --help, or an unknown word: the table answers, nothing is imported
        # (argparse words the refusal of an unknown command and exits 2)
        parser, subparsers = _parser()
        for name, (_, help_text) in COMMANDS.items():
            subparsers.add_parser(name, help=help_text)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    from .course import NotACheckoutError

    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # here, where a closed pipe is caught, rather than at exit
        return code
    except NotACheckoutError as exc:  # a command that needs the course's folders, run elsewhere
        print(f"pecourse {args.command}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader left (`pecourse cards stats | head`): no traceback, and stdout goes to
        # devnull so that the interpreter's final flush does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
