"""``pecourse cards``: review in the terminal, statistics, exports, lint and reset."""

from __future__ import annotations

import argparse
import json
import sys

from pecourse.course import LEARNING_PATH

from .deck import CONCEPTS, TITLES, load_deck
from .store import ProgressStore, make_scheduler, utc_now

_RATINGS = {"1": "again", "2": "hard", "3": "good", "4": "easy", "q": None}


def register(subparsers) -> None:
    cards = subparsers.add_parser(
        "cards",
        help="review the flashcards (FSRS spaced repetition), show progress, export",
        description="The course's 157 flashcards, scheduled by FSRS. Progress is kept in "
        "SQLite under the data directory (PECOURSE_DATA_DIR overrides it).",
    )
    cards.set_defaults(func=lambda args: (cards.print_help(), 0)[1])
    sub = cards.add_subparsers(dest="cards_command", metavar="ACTION")

    review = sub.add_parser("review", help="review due and new cards in the terminal")
    review.add_argument("--concept", type=_concept, help="syllabus number 1-16 (default: all)")
    review.add_argument("--limit", type=_positive, default=None, help="stop after this many cards")
    review.add_argument(
        "--order",
        choices=("path", "syllabus"),
        default="path",
        help="new cards by the suggested reading path (default) or by syllabus number",
    )
    review.set_defaults(func=cmd_review)

    stats = sub.add_parser("stats", help="due / new / learned counts per concept")
    stats.add_argument("--json", action="store_true", help="print JSON instead of a table")
    stats.set_defaults(func=cmd_stats)

    export = sub.add_parser("export", help="export the deck (Anki, JSON) or your progress")
    export.add_argument("--anki", metavar="FILE", help="write an Anki package (.apkg)")
    export.add_argument("--json", metavar="FILE", help="write the deck as jupytercards JSON")
    export.add_argument("--progress", metavar="FILE", help="write your review progress as JSON")
    export.add_argument("--concept", type=_concept, help="only this syllabus concept")
    export.set_defaults(func=cmd_export)

    lint = sub.add_parser(
        "lint",
        help="check the deck against its writing rules (length, sets, duplicates, numbers)",
        description="The deck's rules (pecourse.flashcards.lint): answers of at most 20 words "
        "(a formula counted by its symbols) and a median basic answer of at most 10, no bare "
        "negations, no lists, set or yes/no fronts, one answer per question, no duplicates or "
        "cards that share their key terms, a source for every card, every stated number "
        "(digits or words, answer or question) covered by a check or a quote; --numbers also "
        "runs the checks (recomputing every number independently).",
    )
    lint.add_argument("--numbers", action="store_true", help="also run every number check")
    lint.set_defaults(func=cmd_lint)

    reset = sub.add_parser("reset", help="forget all review progress")
    reset.add_argument("--yes", action="store_true", help="really delete the progress")
    reset.add_argument("--concept", type=_concept, help="only this syllabus concept")
    reset.set_defaults(func=cmd_reset)


def _positive(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(
            f"--limit must be a whole number of cards >= 1, got {text!r}"
        )
    return number


def _concept(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number not in CONCEPTS:
        raise argparse.ArgumentTypeError(f"--concept must be a syllabus number 1-16, got {text!r}")
    return number


def _review_order(args) -> list[int]:
    if args.concept is not None:
        return [args.concept]
    return list(LEARNING_PATH) if args.order == "path" else sorted(CONCEPTS)


def cmd_review(args) -> int:
    """Review in the terminal: the question, then the answer (the learner may type theirs
    first), then a rating that is saved at once through the store the quiz widget uses, so a
    session stopped anywhere (q, end of input, Ctrl-C) keeps every rating given."""
    from .terminal import show  # rich and pylatexenc: only this command needs them

    deck = {c.id: c for number in _review_order(args) for c in load_deck(number)}
    store = ProgressStore()
    scheduler = make_scheduler()
    start = store.stats(deck, utc_now())
    print(
        f"{start.due} due and {start.new} new of {start.total} cards "
        f"({'concept ' + str(args.concept) if args.concept else 'order: ' + args.order}); "
        f"progress is kept in {store.path}."
    )
    print(
        "Type your answer or press Enter to show it; rate 1 again, 2 hard, 3 good, 4 easy; "
        "q quits. Every rating is saved when given (Ctrl-C loses nothing)."
    )
    done, interrupted = 0, False
    try:
        while args.limit is None or done < args.limit:
            queue = store.queue(deck, utc_now())
            if not queue:
                print("Nothing to review right now.")
                break
            session = done + len(queue)
            if args.limit is not None:
                session = min(session, args.limit)
            card = deck[queue[0]]
            print(
                f"\n[{done + 1}/{session}] {card.concept:02d} {TITLES[card.concept]}: {card.topic}"
            )
            show(card.question())
            typed = input("Your answer (Enter shows it, q quits): ").strip()
            if typed.lower() == "q":
                break
            print()
            show(card.answer())
            if typed:
                print(f"You wrote: {typed}")
            if card.source:
                show(f"Source: {card.source}")  # a source may hold maths too
            while (answer := input("Rate 1-4 (q quits): ").strip().lower()) not in _RATINGS:
                print("Please type 1, 2, 3, 4 or q.")
            if answer == "q":
                break
            state = store.review(card.id, _RATINGS[answer], now=utc_now(), scheduler=scheduler)
            done += 1
            print(f"Saved ({_RATINGS[answer]}): next review {state.due:%Y-%m-%d %H:%M} UTC.")
    except EOFError:  # the input ended (Ctrl-D, or a file fed to stdin)
        print()
    except KeyboardInterrupt:
        interrupted = True
        print()
    left = store.stats(deck, utc_now())
    print(
        f"Reviewed {done} card{'s' * (done != 1)}; {left.due} due and {left.new} new remain. "
        f"Progress saved in {store.path}."
    )
    return 130 if interrupted else 0  # 128 + SIGINT, as a shell reports an interrupted command


def _counts(s) -> dict:
    """A :class:`~pecourse.flashcards.store.Stats`'s card counts, named as ``--json`` prints them."""
    return {"cards": s.total, "due": s.due, "new": s.new, "learned": s.learned}


def cmd_stats(args) -> int:
    store = ProgressStore()
    now = utc_now()
    rows = []
    for number, title in TITLES.items():
        s = store.stats([c.id for c in load_deck(number)], now)
        rows.append((number, title, s))
    deck_ids = [c.id for c in load_deck()]
    total = store.stats(deck_ids, now)
    retired = store.retired(deck_ids)
    if args.json:
        next_due = total.next_due.isoformat() if total.next_due else None
        out = {
            "database": str(store.path),
            "total": _counts(total) | {"reviews": total.reviews, "next_due": next_due},
            "retired": retired,
            "concepts": {f"{n:02d}_{CONCEPTS[n]}": _counts(s) for n, _t, s in rows},
        }
        print(json.dumps(out, indent=2))
        return 0
    print(f"Progress database: {store.path}")
    print(f"{'concept':<46} {'cards':>5} {'due':>5} {'new':>5} {'learned':>7}")
    for number, title, s in rows:
        print(f"{number:02d} {title:<43} {s.total:>5} {s.due:>5} {s.new:>5} {s.learned:>7}")
    print(f"{'all':<46} {total.total:>5} {total.due:>5} {total.new:>5} {total.learned:>7}")
    print(f"reviews logged: {total.reviews}")
    if retired:
        print(
            f"retired cards with history kept (never shown): {len(retired)}, "
            f"{sum(retired.values())} reviews"
        )
    if total.next_due is not None:
        print(f"next card due: {total.next_due:%Y-%m-%d %H:%M} UTC")
    return 0


def cmd_export(args) -> int:
    if not (args.anki or args.json or args.progress):
        print(
            "pecourse cards export: give --anki FILE, --json FILE and/or --progress FILE",
            file=sys.stderr,
        )
        return 2
    from .export import export_anki, export_json

    if args.anki:
        print(f"Anki package: {export_anki(args.anki, args.concept)}")
    if args.json:
        print(f"jupytercards JSON: {export_json(args.json, args.concept)}")
    if args.progress:
        deck_ids = [c.id for c in load_deck()]
        print(f"progress: {ProgressStore().export_json(args.progress, deck_ids)}")
    return 0


def cmd_lint(args) -> int:
    from .lint import deck_stats, lint_deck

    cards = load_deck()
    problems = lint_deck(cards)
    if args.numbers:
        import torch
        from tqdm.auto import tqdm

        from .checks import run_checks

        # The checks compute on small tensors, where a second thread only waits for work
        # (measured: half the CPU time and a third of the wall time of two threads).
        torch.set_num_threads(1)

        checked = tqdm(cards, desc="checking numbers", unit="card", leave=False, disable=None)
        problems += [p for card in checked for p in run_checks(card)]
    for line in problems:
        print(line)
    for line in deck_stats(cards).lines():
        print(line)
    if problems:
        print(f"{len(problems)} problem{'s' * (len(problems) != 1)}", file=sys.stderr)
        return 1
    print("deck lint: clean")
    return 0


def cmd_reset(args) -> int:
    store = ProgressStore()
    if not args.yes:
        print(
            f"This deletes the review progress in {store.path}. "
            "Run again with --yes to do it (export it first with "
            "`pecourse cards export --progress FILE`).",
            file=sys.stderr,
        )
        return 1
    ids = None if args.concept is None else [c.id for c in load_deck(args.concept)]
    removed = store.reset(ids)
    print(f"Reset: forgot {removed} card state{'s' * (removed != 1)} in {store.path}.")
    return 0
