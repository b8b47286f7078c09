"""Exports: Anki packages with stable ids, and jupytercards JSON."""

import json
import sqlite3
import zipfile

import pytest

from pecourse.flashcards.deck import load_deck
from pecourse.flashcards.export import ANKI_MODEL_ID, anki_deck_id, export_anki, export_json


def _notes(apkg, tmp_path):
    with zipfile.ZipFile(apkg) as z:
        z.extract("collection.anki2", tmp_path / apkg.stem)
    conn = sqlite3.connect(tmp_path / apkg.stem / "collection.anki2")
    notes = conn.execute("SELECT guid, mid, flds FROM notes").fetchall()
    decks = conn.execute("SELECT decks FROM col").fetchone()[0]
    conn.close()
    return notes, json.loads(decks)


def test_anki_export_has_stable_guids_and_ids(tmp_path):
    first = export_anki(tmp_path / "one.apkg")
    second = export_anki(tmp_path / "two.apkg")
    notes1, decks1 = _notes(first, tmp_path)
    notes2, decks2 = _notes(second, tmp_path)
    assert len(notes1) == 157
    guids = sorted(n[0] for n in notes1)
    assert guids == sorted(n[0] for n in notes2)
    assert len(set(guids)) == 157
    assert {n[1] for n in notes1} == {ANKI_MODEL_ID}
    assert set(decks1) == set(decks2) and {str(anki_deck_id(c)) for c in range(1, 17)} <= set(
        decks1
    )
    # Math is converted to Anki's MathJax delimiters.
    fields = " ".join(n[2] for n in notes1)
    assert r"\(" in fields and "$" not in fields.replace("\\$", "")


def test_anki_export_of_one_concept(tmp_path):
    notes, _ = _notes(export_anki(tmp_path / "alibi.apkg", concept=3), tmp_path)
    assert len(notes) == len(load_deck(3))


def test_json_export_is_a_jupytercards_deck(tmp_path):
    path = export_json(tmp_path / "deck.json")
    data = json.loads(path.read_text())
    assert len(data) == 157 and all({"front", "back", "topic", "id"} <= set(c) for c in data)
    dynamic = pytest.importorskip("jupytercards.dynamic")
    cards, _local, _url = dynamic._parse_ref(str(path))
    assert len(cards) == 157
