"""``pecourse cards ...`` through pecourse.cli.main."""

import dataclasses
import io
import json
import os
import sqlite3
import subprocess
import sys
import zipfile

import pytest

from pecourse.cli import main
from pecourse.course import LEARNING_PATH
from pecourse.flashcards.deck import TITLES, load_deck
from pecourse.flashcards.render import math_spans
from pecourse.flashcards.store import ProgressStore
from pecourse.flashcards.terminal import math_to_text


def test_stats_on_a_fresh_database(data_dir, capsys):
    assert main(["cards", "stats"]) == 0
    out = capsys.readouterr().out
    assert str(data_dir / "flashcards.sqlite3") in out
    deck, rope = load_deck(), load_deck(8)
    assert f" {len(deck)} " in out and "RoPE Scaling" in out
    assert main(["cards", "stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["total"]["new"] == len(deck) and stats["concepts"]["08_rope"]["cards"] == len(rope)
    assert stats["retired"] == {}


def test_stats_report_retired_history(data_dir, capsys):
    store = ProgressStore()
    store.review("base-bound-4k", "good")  # an id retired in the rewrite, reviewed before it
    store.review("rope-definition", "good")
    assert main(["cards", "stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["retired"] == {"base-bound-4k": 1}
    assert stats["total"]["reviews"] == 1 and stats["total"]["new"] == 156
    assert main(["cards", "stats"]) == 0
    assert "retired cards with history kept (never shown): 1, 1 reviews" in capsys.readouterr().out


def _flat(text: str) -> str:
    """Text with rich's line wrapping undone."""
    return " ".join(text.split())


def test_review_in_the_terminal(data_dir, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("\n3\n\nx\n1\nq\n"))
    assert main(["cards", "review", "--concept", "3"]) == 0
    out = _flat(capsys.readouterr().out)
    alibi = load_deck(3)
    assert alibi[0].is_cloze  # the first ALiBi card is a cloze card: blank first, then filled
    question, answer = out.split("Your answer")[:2]
    assert "[…]" in question and "{{c1::" not in out
    # maths is shown as Unicode text, not LaTeX: every span of the card, converted
    spans = math_spans(alibi[0].answer())
    assert spans and all(_flat(math_to_text(m)) in answer for m in spans)
    assert not math_spans(question + answer)
    assert f"[1/{len(alibi)}]" in out and f"[2/{len(alibi)}]" in out
    assert f"0 due and {len(alibi)} new of {len(alibi)} cards" in out
    assert "Please type 1, 2, 3, 4 or q." in out and "Reviewed 2 cards;" in out
    ratings = [(r["card_id"], r["rating"]) for r in ProgressStore().reviews()]
    assert ratings == [(alibi[0].id, 3), (alibi[1].id, 1)]


def test_review_follows_the_reading_path_and_shows_what_was_typed(data_dir, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("my guess\n4\nq\n"))
    assert main(["cards", "review"]) == 0
    out = _flat(capsys.readouterr().out)
    first = load_deck(LEARNING_PATH[0])[0]
    assert f"{first.concept:02d} {TITLES[first.concept]}" in out
    assert "You wrote: my guess" in out and f"Source: {_flat(first.source)}" in out
    assert [r["card_id"] for r in ProgressStore().reviews()] == [first.id]
    monkeypatch.setattr("sys.stdin", io.StringIO("q\n"))
    assert main(["cards", "review", "--order", "syllabus"]) == 0
    assert f"01 {TITLES[1]}" in capsys.readouterr().out


def test_a_sources_maths_is_shown_as_text_in_the_terminal(data_dir, capsys, monkeypatch):
    card = dataclasses.replace(
        load_deck(9)[0], source=r"ch. 09 §2 ($\frac{2}{d}\sum_i \cos\omega_i$)"
    )
    monkeypatch.setattr("pecourse.flashcards.cli.load_deck", lambda number: [card])
    monkeypatch.setattr("sys.stdin", io.StringIO("\nq\n"))
    assert main(["cards", "review", "--concept", "9"]) == 0
    out = _flat(capsys.readouterr().out)
    shown = _flat(math_to_text(math_spans(card.source)[0]))
    assert f"Source: ch. 09 §2 ({shown})" in out and "\\frac" not in out, out


def test_review_stops_at_end_of_input(data_dir, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    assert main(["cards", "review"]) == 0
    assert "Reviewed 0 cards;" in capsys.readouterr().out


def test_review_refuses_a_limit_below_one(data_dir, capsys):
    with pytest.raises(SystemExit):
        main(["cards", "review", "--limit", "0"])
    assert "--limit must be a whole number of cards >= 1, got '0'" in capsys.readouterr().err


def _review_process(data_dir, *args):
    return subprocess.Popen(
        [sys.executable, "-m", "pecourse.cli", "cards", "review", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PECOURSE_DATA_DIR": str(data_dir), "COLUMNS": "100"},
    )


def _schedule(data_dir) -> dict:
    with sqlite3.connect(data_dir / "flashcards.sqlite3") as db:
        states = dict(db.execute("SELECT card_id, due FROM card_state"))
        log = db.execute("SELECT card_id, rating FROM review_log ORDER BY id").fetchall()
    return {"due": states, "log": log}


def test_a_review_fed_through_stdin_is_saved_in_the_schedule(data_dir):
    concept = load_deck(8)
    review = _review_process(data_dir, "--concept", "8")
    out, err = review.communicate(b"\n4\nrotate pairs\n2\n\n", timeout=120)
    assert review.returncode == 0, err.decode()
    assert "Reviewed 2 cards;" in out.decode() and "You wrote: rotate pairs" in out.decode()
    schedule = _schedule(data_dir)
    assert schedule["log"] == [(concept[0].id, 4), (concept[1].id, 2)]
    # easy schedules the first card later than hard does the second
    assert set(schedule["due"]) == {concept[0].id, concept[1].id}
    assert schedule["due"][concept[0].id] > schedule["due"][concept[1].id]
    # the next session starts where this one stopped, from the same file
    again = _review_process(data_dir, "--concept", "8")
    out, _ = again.communicate(b"q\n", timeout=120)
    assert f"[1/{len(concept) - 2}]" in out.decode()


def test_ctrl_c_keeps_every_rating_given(data_dir, monkeypatch, capsys):
    """Ctrl-C at the second card: the first card's rating is kept, the session ends with 130.

    The interrupt is raised where a learner's Ctrl-C lands, inside ``input()`` at the second
    question, in process: a signal sent to a subprocess does not reliably interrupt its read of
    a pipe when the test run itself was started as a background job (a CI script), which
    ignores SIGINT for everything it starts."""
    first, second = load_deck(LEARNING_PATH[0])[:2]
    answers = iter(["", "3"])  # show the first answer, rate it good

    def learner(prompt=""):
        print(prompt, end="")
        try:
            return next(answers)
        except StopIteration:  # the second question: the learner presses Ctrl-C
            raise KeyboardInterrupt from None

    monkeypatch.setattr("builtins.input", learner)
    assert main(["cards", "review"]) == 130
    out = capsys.readouterr().out
    assert out.count("Your answer") == 2 and "Reviewed 1 card;" in out
    assert _schedule(data_dir)["log"] == [(first.id, 3)]
    assert second.id not in _schedule(data_dir)["due"]


def test_export_and_reset(data_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("\n4\nq\n"))
    main(["cards", "review", "--concept", "8"])
    anki, deck, progress = tmp_path / "d.apkg", tmp_path / "d.json", tmp_path / "p.json"
    assert (
        main(
            [
                "cards",
                "export",
                "--anki",
                str(anki),
                "--json",
                str(deck),
                "--progress",
                str(progress),
            ]
        )
        == 0
    )
    assert zipfile.is_zipfile(anki)
    assert len(json.loads(deck.read_text())) == len(load_deck())
    exported = json.loads(progress.read_text())
    assert len(exported["reviews"]) == 1 and exported["reviews"][0]["retired"] is False
    assert main(["cards", "export"]) == 2
    assert main(["cards", "reset"]) == 1
    assert "--yes" in capsys.readouterr().err
    assert len(ProgressStore().reviews()) == 1
    assert main(["cards", "reset", "--yes"]) == 0
    assert ProgressStore().reviews() == []


def test_bad_concept_is_refused(data_dir, capsys):
    try:
        main(["cards", "review", "--concept", "17"])
    except SystemExit as exc:
        assert exc.code == 2
    assert "1-16" in capsys.readouterr().err


def test_cards_without_action_prints_help(capsys):
    assert main(["cards"]) == 0
    assert "review" in capsys.readouterr().out


def test_a_reader_that_leaves_early_gets_no_traceback(data_dir):
    # `pecourse cards stats | head -1`: here the reader has gone before the first line
    stats = subprocess.Popen(
        [sys.executable, "-m", "pecourse.cli", "cards", "stats"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PECOURSE_DATA_DIR": str(data_dir)},
    )
    stats.stdout.close()
    error = stats.stderr.read().decode()
    assert stats.wait(timeout=60) == 1
    assert error == ""
