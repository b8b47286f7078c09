"""Progress storage: FSRS scheduling, transactions, concurrency, crashes, corruption."""

import json
import multiprocessing
import sqlite3
import warnings
from datetime import datetime, timedelta, timezone

import fsrs
import pytest

from pecourse.flashcards.store import (
    CorruptDatabaseWarning,
    ProgressStore,
    fsrs_card_id,
    to_rating,
)

from . import _workers
from .conftest import T0


def test_default_path_is_under_the_data_dir(data_dir):
    store = ProgressStore()
    assert store.path == data_dir / "flashcards.sqlite3"
    assert store.path.exists()


def test_wal_mode_and_tables(store):
    conn = sqlite3.connect(store.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"card_state", "review_log", "meta"} <= tables


def test_review_schedules_with_fsrs_and_logs(store, scheduler):
    card = store.review("rope-definition", "good", now=T0, scheduler=scheduler)
    # A new card rated Good goes to the second learning step (10 minutes by default).
    assert card.state == fsrs.State.Learning
    assert card.due == T0 + timedelta(minutes=10)
    assert card.card_id == fsrs_card_id("rope-definition")
    # The same result as calling FSRS directly.
    expected, _ = scheduler.review_card(
        fsrs.Card(card_id=card.card_id, due=T0), fsrs.Rating.Good, review_datetime=T0
    )
    assert card.to_dict() == expected.to_dict()
    later = store.review(
        "rope-definition", fsrs.Rating.Good, now=T0 + timedelta(minutes=11), scheduler=scheduler
    )
    assert later.state == fsrs.State.Review and later.due > T0 + timedelta(days=1)
    assert store.card_state("rope-definition").to_dict() == later.to_dict()
    log = store.reviews("rope-definition")
    assert [r["rating"] for r in log] == [3, 3]
    assert log[0]["reviewed_at"] == T0.isoformat()
    assert store.check_consistency() == []


def test_stats_and_queue(store, scheduler):
    ids = ["a", "b", "c"]
    store.review("a", "easy", now=T0, scheduler=scheduler)
    store.review("b", "again", now=T0, scheduler=scheduler)
    s = store.stats(ids, T0)
    assert (s.total, s.due, s.new, s.learned, s.reviews) == (3, 0, 1, 2, 2)
    assert s.next_due == T0 + timedelta(minutes=1)  # Again: the first learning step
    assert store.queue(ids, T0) == ["c"]
    later = T0 + timedelta(days=60)
    assert store.queue(ids, later) == ["b", "a", "c"]  # most overdue first, new last
    assert store.stats(ids, later).due == 2


def test_refuses_naive_datetimes_and_bad_ratings(store):
    with pytest.raises(ValueError, match="timezone-aware"):
        store.review("a", 3, now=datetime(2026, 1, 1))
    for bad in (0, 5, "great", True):
        with pytest.raises(ValueError, match="rating"):
            to_rating(bad)
    assert store.reviews() == []


def test_non_utc_times_are_converted(store, scheduler):
    cet = timezone(timedelta(hours=1))
    card = store.review("a", 3, now=datetime(2026, 3, 1, 10, 0, tzinfo=cet), scheduler=scheduler)
    assert card.last_review == T0


def test_reset_all_and_some(store, scheduler):
    for cid in ("a", "b"):
        store.review(cid, 3, now=T0, scheduler=scheduler)
    assert store.reset(["a"]) == 1
    assert set(store.states()) == {"b"} and {r["card_id"] for r in store.reviews()} == {"b"}
    assert store.reset() == 1
    assert store.states() == {} and store.reviews() == []


def test_export_progress_json(store, scheduler, tmp_path):
    store.review("a", 3, now=T0, scheduler=scheduler)
    path = store.export_json(tmp_path / "progress.json")
    data = json.loads(path.read_text())
    assert data["format"] == "pecourse-flashcards-progress"
    assert data["cards"][0]["id"] == "a" and data["cards"][0]["reps"] == 1
    assert fsrs.Card.from_dict(data["cards"][0]["fsrs"]).due == T0 + timedelta(minutes=10)
    assert data["reviews"][0]["rating"] == 3


def test_two_processes_reviewing_at_once_lose_nothing(store):
    ctx = multiprocessing.get_context("spawn")
    cards, n = ["a", "b", "c"], 25
    procs = [
        ctx.Process(target=_workers.review_many, args=(str(store.path), cards, n, w))
        for w in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len(store.reviews()) == 2 * n
    reps = {cid: 0 for cid in cards}
    for row in store.reviews():
        reps[row["card_id"]] += 1
    conn = sqlite3.connect(store.path)
    assert dict(conn.execute("SELECT card_id, reps FROM card_state")) == reps
    assert store.check_consistency() == []


def test_process_killed_mid_review_leaves_database_consistent(store, scheduler):
    before = store.review("a", 3, now=T0, scheduler=scheduler)
    ctx = multiprocessing.get_context("spawn")
    p = ctx.Process(target=_workers.die_mid_review, args=(str(store.path), "a"))
    p.start()
    p.join(60)
    assert p.exitcode == 17  # it died inside the transaction
    reopened = ProgressStore(store.path)
    assert reopened.check_consistency() == []
    assert reopened.card_state("a").to_dict() == before.to_dict()  # the half-write is gone
    assert len(reopened.reviews()) == 1
    # And the database still takes reviews.
    reopened.review("a", 3, now=T0 + timedelta(days=3), scheduler=scheduler)
    assert len(reopened.reviews()) == 2


def test_exception_mid_review_rolls_back(store, scheduler, monkeypatch):
    store.review("a", 3, now=T0, scheduler=scheduler)

    def boom(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(store, "_write_log", boom)
    with pytest.raises(RuntimeError, match="disk on fire"):
        store.review("a", 4, now=T0 + timedelta(days=1), scheduler=scheduler)
    assert store.card_state("a").last_review == T0
    assert store.check_consistency() == []


def test_corrupt_database_is_moved_aside_with_a_message(tmp_path):
    path = tmp_path / "flashcards.sqlite3"
    garbage = b"this is not an SQLite database\n" * 200
    path.write_bytes(garbage)
    with pytest.warns(CorruptDatabaseWarning) as record:
        store = ProgressStore(path)
    message = str(record[0].message)
    aside = store.moved_aside
    assert aside is not None and aside.name.startswith("flashcards.sqlite3.corrupt-")
    assert str(path) in message and str(aside) in message
    assert aside.read_bytes() == garbage  # kept, not overwritten
    assert store.states() == {} and store.check_consistency() == []


def test_truncated_database_is_moved_aside(tmp_path, scheduler):
    path = tmp_path / "flashcards.sqlite3"
    store = ProgressStore(path)
    for k in range(30):
        store.review(f"card-{k}", 3, now=T0, scheduler=scheduler)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = path.read_bytes()
    path.write_bytes(data[:100] + b"\xff" * 2000 + data[2100:])  # clobber the schema page
    with pytest.warns(CorruptDatabaseWarning):
        fresh = ProgressStore(path)
    assert fresh.moved_aside.exists()


def test_healthy_database_gives_no_warning(tmp_path):
    ProgressStore(tmp_path / "ok.sqlite3")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ProgressStore(tmp_path / "ok.sqlite3")


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "new.sqlite3"
    ProgressStore(path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(RuntimeError, match="newer pecourse"):
        ProgressStore(path)


def test_locked_database_is_not_moved_aside(tmp_path, scheduler):
    path = tmp_path / "busy.sqlite3"
    ProgressStore(path).review("a", 3, now=T0, scheduler=scheduler)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            ProgressStore(path, timeout=0.2)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert [p.name for p in tmp_path.iterdir() if "corrupt" in p.name] == []
    assert len(ProgressStore(path).reviews()) == 1


def test_retired_ids_keep_their_history_and_are_never_shown(store, scheduler):
    from pecourse.flashcards import quiz
    from pecourse.flashcards.deck import load_deck, load_retired

    old = "base-bound-4k"  # reviewed before the rewrite retired it (its fact was wrong)
    assert old in load_retired()
    deck16 = [c.id for c in load_deck(16)]
    deck_ids = [c.id for c in load_deck()]
    store.review(old, "good", now=T0, scheduler=scheduler)
    store.review(old, "again", now=T0 + timedelta(days=1), scheduler=scheduler)
    store.review(deck16[0], "good", now=T0, scheduler=scheduler)
    later = T0 + timedelta(days=30)  # everything reviewed is due by now

    # Never shown: not in a queue, not counted, not the quiz's card, even when due.
    assert old not in store.queue(deck_ids, later)
    assert store.queue(deck16, later)[0] == deck16[0]
    stats = store.stats(deck_ids, later)
    assert stats.due == 1 and stats.new == len(deck_ids) - 1 and stats.reviews == 1
    q = quiz(16, store=store, clock=lambda: later, scheduler=scheduler)
    assert old not in q.cards and q.current.id == deck16[0]

    # Kept for history: state, log, exports and consistency all still hold it.
    assert store.retired(deck_ids) == {old: 2}
    assert [r["rating"] for r in store.reviews(old)] == [3, 1]
    exported = store.export_progress(deck_ids)
    assert {c["id"]: c["retired"] for c in exported["cards"]} == {old: True, deck16[0]: False}
    assert [r["retired"] for r in exported["reviews"]] == [True, True, False]
    store.reset(deck16)  # resetting a chapter touches only the deck's ids
    assert store.retired(deck_ids) == {old: 2} and store.card_state(old) is not None
    assert store.check_consistency() == []
