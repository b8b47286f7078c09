"""``pecourse cards lint``: the deck's writing rules, each shown to catch what it names."""

import dataclasses
import json
import statistics
from pathlib import Path

import pytest

from pecourse.cli import main
from pecourse.flashcards import lint
from pecourse.flashcards.deck import Flashcard, load_deck
from pecourse.flashcards.lint import answer_words, deck_stats, lint_deck

CARDS = load_deck()
BY_ID = {c.id: c for c in CARDS}


def test_the_deck_is_clean():
    assert lint_deck(CARDS) == []


def test_stats():
    stats = deck_stats(CARDS)
    assert stats.cards == 157 and stats.cloze >= 30
    assert stats.median_basic_answer_words <= lint.MAX_MEDIAN_WORDS
    assert stats.max_answer_words <= lint.MAX_ANSWER_WORDS
    assert stats.checked >= 35
    assert any("cloze" in line for line in stats.lines())


def _card(**fields):
    base = dict(id="x", concept=3, front="Why?", back="Because.", topic="t", source="ch. 03 §1")
    return Flashcard(**{**base, **fields})


def _problems(card, others=()):
    return "\n".join(lint_deck([card, *others], retired={"old-id": {"reason": "r"}}))


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"back": " ".join(["word"] * 21)}, "answer has 21 words"),
        ({"back": " ".join(["word"] * 31), "long": "a derivation"}, "answer has 31 words"),
        ({"back": r"It is $\delta = (s - \ln(1/m))/m$ " + "word " * 13}, "answer has 21 words"),
        ({"back": "Every fourth layer."}, "states fourth without a check"),
        ({"back": "About half.", "quoted": ("half", "third")}, "quoted numbers ['third']"),
        ({"back": "None."}, "bare negation"),
        ({"back": "Nothing: rotations are orthogonal."}, "bare negation"),
        ({"back": "Not at all, it is the same."}, "bare negation"),
        ({"back": "- one\n- two"}, "bulleted or numbered list"),
        ({"back": "1. one\n2. two"}, "bulleted or numbered list"),
        ({"front": "Name two models that use ALiBi."}, "asks for a set"),
        ({"front": "Does ALiBi extrapolate?"}, "yes/no front"),
        ({"front": "Pitfall: can you raise the base for free?"}, "yes/no front"),
        ({"source": "ch. 07 §1"}, "source must start with its chapter, 'ch. 03'"),
        ({"id": "old-id"}, "reuses the retired id"),
        ({"back": "It is about 54{,}400 tokens."}, "states 54400 without a check"),
        ({"back": "Quoted 12.", "quoted": ("12", "99")}, "quoted numbers ['99']"),
        ({"type": "cloze", "front": "No deletion.", "back": ""}, "no {{c1::...}} deletion"),
    ],
)
def test_each_rule_catches_its_case(fields, message):
    assert message in _problems(_card(**fields))


def test_long_answers_need_a_reason_and_stay_bounded():
    text = " ".join(["word"] * 30)
    assert "answer has 30 words" in _problems(_card(back=text))
    assert _problems(_card(back=text, long="a derivation")) == ""


def test_number_words_are_covered_by_a_check_text_or_quoted():
    assert _problems(_card(back="About half.", quoted=("half",))) == ""
    assert _problems(_card(front="Which half?", back="The second half.")) == ""  # a given
    checked = _card(back="Every fourth layer.", checks=({"fn": "f", "text": "fourth layer"},))
    assert "states fourth" not in _problems(checked)


def test_numbers_in_the_question_are_givens():
    card = _card(front="head_dim 128, base 10,000: which?", back="The 128-wide head at 10,000.")
    assert _problems(card) == ""


def test_duplicates_and_near_duplicates():
    a = _card(id="a", front="What does ALiBi add to the attention scores of head h?",
              back="A bias of minus the slope times the distance, fixed per head.")  # fmt: skip
    same = dataclasses.replace(a, id="b", concept=3)
    reworded = dataclasses.replace(
        a, id="c", front="What does ALiBi add to the attention scores of each head?"
    )
    assert "same question as 'a'" in _problems(a, [same])
    assert "near-duplicate questions" in _problems(a, [reworded])
    other = _card(id="d", front="Why are ALiBi's slopes fixed?", back="Learned ones did not help.")
    assert _problems(a, [other]) == ""


def test_answer_words_count_formulas_by_symbols_and_code_as_one():
    card = _card(back=r"$x_i + P_t$ and `position_ids` here")
    assert answer_words(card) == 4 + 3  # x, i, P, t; the code span; two words
    assert answer_words(_card(back=r"$\tfrac{1}{2} \cdot \ln(10)/m$")) == 5  # 1, 2, ln, 10, m
    cloze_card = _card(type="cloze", front="A {{c1::two words}} text.", back="note")
    assert answer_words(cloze_card) == 3


def test_answers_that_start_with_a_negation_but_say_more_pass():
    for back in ("Nothing up to $L$; beyond it, NTK-aware scaling.", "None of the heads: ALiBi."):
        assert "bare negation" not in _problems(_card(back=back))


def test_the_median_rule_sees_a_deck_of_explanations():
    long = " ".join(["word"] * 11)
    deck = [
        _card(id=f"c{k}", front=f"Question {k} about topic {k * 7}?", back=long) for k in range(60)
    ]
    problems = lint_deck(deck, retired={})
    assert any("median basic answer has 11 words" in p for p in problems)
    assert statistics.median(answer_words(c) for c in CARDS if not c.is_cloze) <= 10


RETIRED_DUPLICATES = json.loads(
    (Path(__file__).parent / "data" / "issue29_retired_duplicates.json").read_text()
)


@pytest.mark.parametrize("entry", RETIRED_DUPLICATES, ids=lambda e: e["card"]["id"])
def test_same_fact_rule_finds_the_review_duplicates(entry):
    # Five of the fourteen near-duplicate groups of the issue-29 review, each put back next to
    # the card it duplicated: the key-term rule flags the pair. (The other nine share too few
    # rare terms; they were merged by hand.)
    old = Flashcard.from_dict(entry["card"])
    problems = lint_deck([*CARDS, old], retired={})
    pair = {old.id, entry["duplicate_of"]}
    assert any("share their key terms" in p and all(repr(i) in p for i in pair) for p in problems)


def test_distinct_fact_pairs_name_current_cards_that_the_rule_would_flag():
    scores = {frozenset((a, b)): s for s, a, b in lint.same_fact_scores(CARDS)}
    for pair in lint.DISTINCT_FACTS:
        assert pair <= set(BY_ID), f"stale DISTINCT_FACTS entry {sorted(pair)}"
        assert scores[pair] >= lint.SAME_FACT, f"{sorted(pair)} no longer needs an exception"


def test_same_fact_rule_leaves_unrelated_cards_alone():
    a = _card(id="a", front="What does ALiBi add to each score?", back="A linear distance penalty.")
    b = _card(id="b", front="Which base does Llama 3 use?", back="500,000.", quoted=("500000",))
    c = _card(id="c", front="What does CoPE count?", back="Gated tokens between key and query.")
    assert "share their key terms" not in _problems(a, [b, c])


def test_cli_lint(capsys, monkeypatch):
    assert main(["cards", "lint"]) == 0
    out = capsys.readouterr().out
    assert "deck lint: clean" in out and "cards: 157" in out and "median" in out
    broken = [dataclasses.replace(CARDS[0], back="- a\n- b"), *CARDS[1:5]]
    monkeypatch.setattr("pecourse.flashcards.cli.load_deck", lambda *a: broken)
    assert main(["cards", "lint"]) == 1
    captured = capsys.readouterr()
    assert "bulleted or numbered list" in captured.out and "problem" in captured.err


def test_cli_lint_numbers_runs_the_checks(capsys, monkeypatch):
    card = BY_ID["t5-last-bucket-start"]
    wrong = dataclasses.replace(
        card,
        front=card.front.replace("91", "90"),
        checks=tuple(dict(s, text=s["text"].replace("91", "90")) for s in card.checks),
    )
    monkeypatch.setattr("pecourse.flashcards.cli.load_deck", lambda *a: [wrong])
    assert main(["cards", "lint", "--numbers"]) == 1
    assert "the package gives 91" in capsys.readouterr().out
