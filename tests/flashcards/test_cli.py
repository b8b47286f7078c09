"""``pecourse cards ...`` through pecourse.cli.main."""

import io
import json
import os
import subprocess
import sys
import zipfile

from pecourse.cli import main
from pecourse.flashcards.deck import load_deck
from pecourse.flashcards.store import ProgressStore


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


def test_review_in_the_terminal(data_dir, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("\n3\n\nx\n1\nq\n"))
    assert main(["cards", "review", "--concept", "3"]) == 0
    out = capsys.readouterr().out
    alibi = load_deck(3)
    assert alibi[0].is_cloze  # the first ALiBi card is a cloze card: blank first, then filled
    assert alibi[0].question() in out and alibi[0].answer() in out and alibi[1].question() in out
    before_answer = out.split(alibi[0].answer())[0]
    assert "[…]" in before_answer and "{{c1::" not in out
    assert "Please type 1, 2, 3, 4 or q." in out and "Reviewed 2 cards." in out
    ratings = [(r["card_id"], r["rating"]) for r in ProgressStore().reviews()]
    assert ratings == [(alibi[0].id, 3), (alibi[1].id, 1)]


def test_review_stops_at_end_of_input(data_dir, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    assert main(["cards", "review"]) == 0
    assert "Reviewed 0 cards." in capsys.readouterr().out


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
