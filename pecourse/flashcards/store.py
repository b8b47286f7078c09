"""Review progress in a local SQLite database, scheduled by FSRS.

The database lives at ``pecourse.paths.data_dir() / "flashcards.sqlite3"``
(``PECOURSE_DATA_DIR`` overrides the directory). Design points:

- WAL journal and a busy timeout, so two notebooks (or a notebook and the terminal) can
  review at once: readers never block, writers wait their turn instead of failing.
- One review is one short ``BEGIN IMMEDIATE`` transaction that reads the card's state,
  applies FSRS and writes the new state and the review-log row together. A process killed
  halfway leaves the previous state and log untouched (SQLite rolls the transaction back).
- A file that SQLite cannot read is never overwritten: it is renamed aside with a UTC
  timestamp and a :class:`CorruptDatabaseWarning` names both paths.
- Retired cards (ids that left the deck, ``pecourse/cards/retired.json``) keep their state
  and review log: nothing here deletes by "not in the deck". Queues and counts are built
  from the deck's ids, so a retired card is never shown; :meth:`ProgressStore.retired` lists
  the history kept for them, and exports mark them.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import fsrs

from pecourse.paths import data_dir

DB_NAME = "flashcards.sqlite3"
SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 30.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS card_state (
    card_id TEXT PRIMARY KEY,          -- the deck's stable slug
    state INTEGER NOT NULL,            -- fsrs.State: 1 learning, 2 review, 3 relearning
    due TEXT NOT NULL,                 -- ISO 8601, UTC
    last_review TEXT,
    reps INTEGER NOT NULL,             -- reviews so far (equals its review_log rows)
    fsrs TEXT NOT NULL                 -- fsrs.Card.to_dict() as JSON
);
CREATE TABLE IF NOT EXISTS review_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    card_id TEXT NOT NULL,
    rating INTEGER NOT NULL,           -- fsrs.Rating: 1 again, 2 hard, 3 good, 4 easy
    reviewed_at TEXT NOT NULL,
    duration_ms INTEGER,
    due_after TEXT NOT NULL,
    fsrs_log TEXT NOT NULL             -- fsrs.ReviewLog.to_dict() as JSON
);
CREATE INDEX IF NOT EXISTS review_log_card ON review_log (card_id);
CREATE INDEX IF NOT EXISTS card_state_due ON card_state (due);
"""


class CorruptDatabaseWarning(UserWarning):
    """The progress database could not be read and was moved aside."""


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def check_utc(when: datetime, name: str = "now") -> datetime:
    """FSRS needs timezone-aware UTC datetimes; anything else is refused."""
    if not isinstance(when, datetime):
        raise TypeError(f"{name} must be a datetime, got {type(when).__name__}")
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(
            f"{name} must be timezone-aware (UTC), got the naive datetime {when!r}; "
            "use datetime.now(timezone.utc)"
        )
    return when.astimezone(timezone.utc)


def fsrs_card_id(slug: str) -> int:
    """A stable integer id for FSRS, derived from the card's slug (fits in 53 bits)."""
    return int.from_bytes(hashlib.sha256(slug.encode()).digest()[:6], "big")


def make_scheduler(enable_fuzzing: bool = True) -> fsrs.Scheduler:
    """The FSRS scheduler with its default parameters (90 % desired retention)."""
    return fsrs.Scheduler(enable_fuzzing=enable_fuzzing)


def to_rating(rating: Any) -> fsrs.Rating:
    """Accept an ``fsrs.Rating``, 1-4, or a name (again/hard/good/easy)."""
    if isinstance(rating, fsrs.Rating):
        return rating
    if isinstance(rating, str):
        try:
            return fsrs.Rating[rating.strip().capitalize()]
        except KeyError:
            pass
    elif isinstance(rating, int) and not isinstance(rating, bool) and 1 <= rating <= 4:
        return fsrs.Rating(rating)
    raise ValueError(
        f"rating must be 1-4, an fsrs.Rating or one of again/hard/good/easy, got {rating!r}"
    )


@dataclass(frozen=True)
class Stats:
    """Counts for a set of cards at a moment."""

    total: int
    due: int  # reviewed before and due now
    new: int  # never reviewed
    learned: int  # reviewed and not due yet
    reviews: int  # review-log rows for these cards
    next_due: datetime | None  # earliest due time among reviewed cards not due yet


class ProgressStore:
    """Card states and the review log for one learner.

    ``path`` defaults to ``data_dir() / "flashcards.sqlite3"``. Every method opens a short
    connection of its own, so a store object is safe to keep in a notebook for days and
    to use from several processes at once.
    """

    def __init__(self, path: str | os.PathLike | None = None, *, timeout: float = BUSY_TIMEOUT_S):
        self.path = Path(path) if path is not None else data_dir() / DB_NAME
        self.timeout = timeout
        self.moved_aside: Path | None = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._initialise()

    def __repr__(self) -> str:
        return f"ProgressStore({str(self.path)!r})"

    # -- connections -------------------------------------------------------------------
    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection of the block's own (autocommit: transactions are explicit), closed
        when the block ends."""
        conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            conn.execute("PRAGMA synchronous = FULL")
            yield conn
        finally:
            conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed when the block ends, rolled back
        when it raises (a Ctrl-C included), so a write is whole or absent."""
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _initialise(self) -> None:
        try:
            self._create_schema()
        except sqlite3.OperationalError:
            # Locked, busy, unreadable directory...: the file may be fine. Never move a
            # healthy database aside because another process holds it.
            raise
        except sqlite3.DatabaseError as exc:  # not a database, malformed, failed check
            self._move_aside(exc)
            self._create_schema()

    def _create_schema(self) -> None:
        with self._connect() as conn:
            if self.path.exists() and self.path.stat().st_size > 0:
                row = conn.execute("PRAGMA quick_check").fetchone()
                if row is None or row[0] != "ok":
                    raise sqlite3.DatabaseError(f"quick_check failed: {row}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":  # e.g. a filesystem without shared memory
                warnings.warn(
                    f"SQLite would not use WAL for {self.path} (got {mode}); "
                    "concurrent reviews will wait longer",
                    stacklevel=3,
                )
            try:
                conn.executescript(
                    "BEGIN IMMEDIATE;"
                    + _SCHEMA
                    + "INSERT OR IGNORE INTO meta (key, value) "
                    + f"VALUES ('schema_version', '{SCHEMA_VERSION}');"
                    + "COMMIT;"
                )
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            version = conn.execute(
                "SELECT value FROM meta WHERE key = 'schema_version'"
            ).fetchone()[0]
            if int(version) > SCHEMA_VERSION:
                raise RuntimeError(
                    f"{self.path} was written by a newer pecourse (schema {version}, "
                    f"this one reads {SCHEMA_VERSION}); upgrade pecourse"
                )

    def _move_aside(self, exc: Exception) -> None:
        stamp = utc_now().strftime("%Y%m%dT%H%M%S%fZ")
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        os.replace(self.path, target)
        for suffix in ("-wal", "-shm", "-journal"):
            side = self.path.with_name(self.path.name + suffix)
            if side.exists():
                os.replace(side, target.with_name(target.name + suffix))
        self.moved_aside = target
        warnings.warn(
            f"The flashcard progress database {self.path} could not be read ({exc}). "
            f"It was moved aside to {target} and a new, empty database was started "
            f"at {self.path}; nothing was deleted.",
            CorruptDatabaseWarning,
            stacklevel=4,
        )

    # -- reading -----------------------------------------------------------------------
    def card_state(self, card_id: str) -> fsrs.Card | None:
        """The FSRS state of a card, or None if it was never reviewed."""
        with self._connect() as conn:
            row = conn.execute(
                "SELECT fsrs FROM card_state WHERE card_id = ?", (card_id,)
            ).fetchone()
        return fsrs.Card.from_dict(json.loads(row[0])) if row else None

    def states(self) -> dict[str, fsrs.Card]:
        """Every reviewed card's FSRS state, by slug."""
        with self._connect() as conn:
            rows = conn.execute("SELECT card_id, fsrs FROM card_state").fetchall()
        return {cid: fsrs.Card.from_dict(json.loads(blob)) for cid, blob in rows}

    def reviews(self, card_id: str | None = None) -> list[dict[str, Any]]:
        """Review-log rows (oldest first), for one card or all."""
        with self._connect() as conn:
            conn.row_factory = sqlite3.Row
            query = (
                "SELECT id, card_id, rating, reviewed_at, duration_ms, due_after FROM review_log"
            )
            args: tuple = ()
            if card_id is not None:
                query += " WHERE card_id = ?"
                args = (card_id,)
            rows = conn.execute(query + " ORDER BY id", args).fetchall()
        return [dict(r) for r in rows]

    def stats(self, card_ids: Iterable[str], now: datetime | None = None) -> Stats:
        """Due / new / learned counts for these cards at ``now``."""
        now = check_utc(now or utc_now())
        ids = list(card_ids)
        states = self.states()
        due = new = learned = 0
        next_due = None
        for cid in ids:
            card = states.get(cid)
            if card is None:
                new += 1
            elif card.due <= now:
                due += 1
            else:
                learned += 1
                next_due = card.due if next_due is None else min(next_due, card.due)
        wanted = set(ids)
        reviews = sum(1 for r in self.reviews() if r["card_id"] in wanted)
        return Stats(len(ids), due, new, learned, reviews, next_due)

    def queue(self, card_ids: Iterable[str], now: datetime | None = None) -> list[str]:
        """Cards to study at ``now``: due ones (most overdue first), then new ones in deck order."""
        now = check_utc(now or utc_now())
        states = self.states()
        ids = list(card_ids)
        due = sorted(
            (cid for cid in ids if cid in states and states[cid].due <= now),
            key=lambda cid: states[cid].due,
        )
        return due + [cid for cid in ids if cid not in states]

    def retired(self, deck_ids: Iterable[str]) -> dict[str, int]:
        """Reviewed cards that are no longer in the deck: ``{card_id: reviews logged}``.

        Their rows stay for history (a learner's log is never rewritten when the deck
        changes); :meth:`queue` and :meth:`stats` never include them.
        """
        deck = set(deck_ids)
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT card_id, COUNT(*) FROM review_log GROUP BY card_id ORDER BY card_id"
            ).fetchall()
            states = {r[0] for r in conn.execute("SELECT card_id FROM card_state")}
        out = {cid: n for cid, n in rows if cid not in deck}
        out.update({cid: 0 for cid in states - deck - set(out)})
        return out

    # -- writing -----------------------------------------------------------------------
    def review(
        self,
        card_id: str,
        rating: Any,
        *,
        now: datetime | None = None,
        scheduler: fsrs.Scheduler | None = None,
        duration_ms: int | None = None,
    ) -> fsrs.Card:
        """Record one review and return the card's new FSRS state.

        Read, schedule and write happen in one ``BEGIN IMMEDIATE`` transaction, so two
        processes rating the same card both count, in some order, and neither is lost.
        """
        rating = to_rating(rating)
        now = check_utc(now or utc_now())
        scheduler = scheduler or make_scheduler()
        with self._write() as conn:
            row = conn.execute(
                "SELECT fsrs, reps FROM card_state WHERE card_id = ?", (card_id,)
            ).fetchone()
            if row:
                card, reps = fsrs.Card.from_dict(json.loads(row[0])), row[1]
            else:
                card, reps = fsrs.Card(card_id=fsrs_card_id(card_id), due=now), 0
            card, log = scheduler.review_card(
                card, rating, review_datetime=now, review_duration=duration_ms
            )
            self._write_state(conn, card_id, card, reps + 1)
            self._write_log(conn, card_id, card, log, now, duration_ms)
        return card

    def _write_state(self, conn, card_id: str, card: fsrs.Card, reps: int) -> None:
        conn.execute(
            "INSERT INTO card_state (card_id, state, due, last_review, reps, fsrs) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (card_id) DO UPDATE SET "
            "state = excluded.state, due = excluded.due, last_review = excluded.last_review, "
            "reps = excluded.reps, fsrs = excluded.fsrs",
            (
                card_id,
                int(card.state),
                card.due.isoformat(),
                card.last_review.isoformat() if card.last_review else None,
                reps,
                json.dumps(card.to_dict()),
            ),
        )

    def _write_log(self, conn, card_id, card, log, now, duration_ms) -> None:
        conn.execute(
            "INSERT INTO review_log (card_id, rating, reviewed_at, duration_ms, due_after, "
            "fsrs_log) VALUES (?, ?, ?, ?, ?, ?)",
            (
                card_id,
                int(log.rating),
                now.isoformat(),
                duration_ms,
                card.due.isoformat(),
                json.dumps(log.to_dict()),
            ),
        )

    def reset(self, card_ids: Iterable[str] | None = None) -> int:
        """Forget progress (all of it, or for these cards); returns the states removed."""
        with self._write() as conn:
            if card_ids is None:
                removed = conn.execute("DELETE FROM card_state").rowcount
                conn.execute("DELETE FROM review_log")
            else:
                removed = 0
                for cid in card_ids:
                    removed += conn.execute(
                        "DELETE FROM card_state WHERE card_id = ?", (cid,)
                    ).rowcount
                    conn.execute("DELETE FROM review_log WHERE card_id = ?", (cid,))
        return removed

    def export_progress(self, deck_ids: Iterable[str] | None = None) -> dict[str, Any]:
        """Everything in the database as JSON-ready data (states and the full log).

        With ``deck_ids``, each card and review also says whether its card is ``retired``
        (reviewed once, no longer in the deck).
        """
        deck = None if deck_ids is None else set(deck_ids)
        with self._connect() as conn:
            conn.execute("BEGIN")  # one consistent snapshot of both tables
            states = conn.execute(
                "SELECT card_id, reps, fsrs FROM card_state ORDER BY card_id"
            ).fetchall()
            logs = conn.execute(
                "SELECT card_id, rating, reviewed_at, duration_ms, due_after FROM review_log "
                "ORDER BY id"
            ).fetchall()
            conn.execute("COMMIT")
        return {
            "format": "pecourse-flashcards-progress",
            "schema_version": SCHEMA_VERSION,
            "exported_at": utc_now().isoformat(),
            "database": str(self.path),
            "cards": [
                {"id": cid, "reps": reps, "fsrs": json.loads(blob)}
                | ({} if deck is None else {"retired": cid not in deck})
                for cid, reps, blob in states
            ],
            "reviews": [
                {
                    "id": cid,
                    "rating": rating,
                    "reviewed_at": at,
                    "duration_ms": ms,
                    "due_after": due,
                }
                | ({} if deck is None else {"retired": cid not in deck})
                for cid, rating, at, ms, due in logs
            ],
        }

    def export_json(self, path: str | os.PathLike, deck_ids: Iterable[str] | None = None) -> Path:
        path = Path(path)
        data = self.export_progress(deck_ids)
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        return path

    def check_consistency(self) -> list[str]:
        """Problems found (integrity, and each state's reps equal to its log rows)."""
        with self._connect() as conn:
            problems = [r[0] for r in conn.execute("PRAGMA integrity_check") if r[0] != "ok"]
            rows = conn.execute(
                "SELECT s.card_id, s.reps, (SELECT COUNT(*) FROM review_log l "
                "WHERE l.card_id = s.card_id) FROM card_state s"
            ).fetchall()
            problems += [
                f"{cid}: reps {reps} but {n} log rows" for cid, reps, n in rows if reps != n
            ]
            orphans = conn.execute(
                "SELECT COUNT(*) FROM review_log l WHERE NOT EXISTS "
                "(SELECT 1 FROM card_state s WHERE s.card_id = l.card_id)"
            ).fetchone()[0]
            if orphans:
                problems.append(f"{orphans} log rows without a card state")
        return problems
