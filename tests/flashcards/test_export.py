"""Exports: Anki packages with stable ids, and jupytercards JSON."""

import html
import json
import sqlite3
import zipfile

import pytest

from pecourse.flashcards import cloze
from pecourse.flashcards.deck import load_deck
from pecourse.flashcards.export import (
    ANKI_CLOZE_MODEL_ID,
    ANKI_MODEL_ID,
    anki_deck_id,
    anki_guid,
    export_anki,
    export_json,
)


def _notes(apkg, tmp_path):
    with zipfile.ZipFile(apkg) as z:
        z.extract("collection.anki2", tmp_path / apkg.stem)
    conn = sqlite3.connect(tmp_path / apkg.stem / "collection.anki2")
    notes = conn.execute("SELECT guid, mid, flds FROM notes").fetchall()
    decks, models = conn.execute("SELECT decks, models FROM col").fetchone()
    cards = conn.execute("SELECT nid, ord FROM cards").fetchall()
    conn.close()
    return notes, json.loads(decks), json.loads(models), cards


def test_anki_export_has_stable_guids_and_ids(tmp_path):
    first = export_anki(tmp_path / "one.apkg")
    second = export_anki(tmp_path / "two.apkg")
    notes1, decks1, models, anki_cards = _notes(first, tmp_path)
    notes2, decks2, _, _ = _notes(second, tmp_path)
    assert len(notes1) == len(load_deck())
    guids = sorted(n[0] for n in notes1)
    assert guids == sorted(n[0] for n in notes2)
    assert len(set(guids)) == len(notes1)
    assert {n[1] for n in notes1} == {ANKI_MODEL_ID, ANKI_CLOZE_MODEL_ID}
    assert len(anki_cards) == len(notes1)  # one Anki card per note: every cloze note uses c1 only
    assert set(decks1) == set(decks2) and {str(anki_deck_id(c)) for c in range(1, 17)} <= set(
        decks1
    )
    # Math is converted to Anki's MathJax delimiters.
    fields = " ".join(n[2] for n in notes1)
    assert r"\(" in fields and "$" not in fields.replace("\\$", "")


def test_anki_export_of_one_concept(tmp_path):
    notes, _, _, _ = _notes(export_anki(tmp_path / "alibi.apkg", concept=3), tmp_path)
    assert len(notes) == len(load_deck(3))


def test_cloze_cards_become_anki_cloze_notes(tmp_path):
    deck = load_deck()
    notes, _, models, _ = _notes(export_anki(tmp_path / "all.apkg"), tmp_path)
    model = models[str(ANKI_CLOZE_MODEL_ID)]
    assert model["type"] == 1  # Anki's cloze note type
    assert [f["name"] for f in model["flds"]] == ["Text", "Extra", "Topic", "Id"]
    assert "{{cloze:Text}}" in model["tmpls"][0]["qfmt"]
    by_guid = {guid: (mid, flds.split("\x1f")) for guid, mid, flds in notes}
    clozes = [c for c in deck if c.is_cloze]
    assert len(clozes) >= 30
    for card in clozes:
        mid, fields = by_guid[anki_guid(card)]
        assert mid == ANKI_CLOZE_MODEL_ID and fields[3] == card.id
        assert "{{c1::" in fields[0] and "$" not in fields[0]  # math in \( \) for Anki
    basic = next(c for c in deck if not c.is_cloze)
    assert by_guid[anki_guid(basic)][0] == ANKI_MODEL_ID


def test_json_export_is_a_jupytercards_deck(tmp_path):
    path = export_json(tmp_path / "deck.json")
    data = json.loads(path.read_text())
    assert len(data) == 157 and all({"front", "back", "topic", "id"} <= set(c) for c in data)
    cards = {c.id: c for c in load_deck()}
    for entry in data:  # cloze cards arrive as question/answer pairs, without markup
        card = cards[entry["id"]]
        assert entry["front"] == card.question() and entry["back"] == card.answer()
        assert "{{c1::" not in entry["front"] + entry["back"]
        if card.is_cloze:
            assert all(hidden in entry["back"] for hidden in cloze.deletions(card.front))
    dynamic = pytest.importorskip("jupytercards.dynamic")
    cards, _local, _url = dynamic._parse_ref(str(path))
    assert len(cards) == 157


def test_every_export_carries_the_cards_sources(tmp_path):
    deck = load_deck()
    assert all(card.source.strip() for card in deck)  # the deck's rule; the exports keep it
    entries = json.loads(export_json(tmp_path / "deck.json").read_text())
    assert [e["source"] for e in entries] == [card.source for card in deck]
    notes, _, _, _ = _notes(export_anki(tmp_path / "all.apkg"), tmp_path)
    answers = {guid: flds.split("\x1f")[1] for guid, _mid, flds in notes}
    plain = [card for card in deck if not set("`*$") & set(card.source)]
    assert len(plain) > 100
    for card in plain:  # under the answer (a cloze note's Extra), after everything else
        answer = answers[anki_guid(card)]
        assert answer.endswith(f"<p>Source: {html.escape(card.source, quote=False)}</p></div>")
