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
    assert stats.cards == len(CARDS) and stats.cloze == sum(c.is_cloze for c in CARDS) >= 30
    assert stats.median_basic_answer_words <= lint.MAX_MEDIAN_WORDS
    assert stats.max_answer_words <= lint.MAX_ANSWER_WORDS
    assert stats.checked >= 35
    assert any("cloze" in line for line in stats.lines())


def _card(**fields):
    base = dict(id="x", concept=3, front="Which?", back="That.", topic="t", source="ch. 03 §1")
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
        ({"front": "What is one reason RoPE fails?"}, "asks for one of several answers"),
        ({"front": "Which scheme, for example, is relative?"}, "asks for one of several"),
        ({"front": "What is the classic dynamic-NTK bug?"}, "leans on a judgement"),
        ({"front": "Which hurts, and why?"}, "asks two questions"),
        ({"front": "What hurts? Why?"}, "asks two questions"),
        ({"front": "Why does RoPE fail?"}, "an open question"),
        ({"front": "In bf16, why does it fail?"}, "an open question"),
        ({"front": "What did Anil et al. find?"}, "an open question"),
        ({"front": "What does CoPE cost?"}, "an open question"),
        ({"front": "A model of 1,024 rows: which?"}, "the question states 1024"),
        ({"front": "Which?", "given": ("7",)}, "given numbers ['7']"),
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
    assert "the question states half" in _problems(_card(front="Which half?", back="The second."))
    assert _problems(_card(front="Which half?", back="The second half.", given=("half",))) == ""
    checked = _card(back="Every fourth layer.", checks=({"fn": "f", "text": "fourth layer"},))
    assert "states fourth" not in _problems(checked)


def test_numbers_in_the_question_are_checked_quoted_or_declared_given():
    card = _card(front="head_dim 128, base 10,000: which?", back="The 128-wide head at 10,000.")
    assert "the question states 128, 10000" in _problems(card)
    assert _problems(dataclasses.replace(card, given=("128", "10000"))) == ""
    assert _problems(dataclasses.replace(card, quoted=("128", "10,000"))) == ""
    # a check's args compute whatever the card says, so they do not cover the question
    by_args = dataclasses.replace(card, checks=({"fn": "f", "args": {"d": 128, "b": 10000}},))
    assert "the question states 128, 10000" in _problems(by_args)
    read = {"fn": "f", "args": {}, "from_text": {"d": "head_dim 128", "b": "base 10,000"}}
    assert _problems(dataclasses.replace(card, checks=(read,))) == ""
    assert "given numbers ['64']" in _problems(dataclasses.replace(card, given=("128", "64")))


def test_magnitudes_are_numbers_and_names_are_not():
    assert "the question states 32k" in _problems(_card(front="At 32K tokens, what?"))
    assert _problems(_card(front="At 32K tokens, what?", quoted=("32K",))) == ""
    assert _problems(_card(front="Which of Llama-2-7B or GPT-NeoX-20B saw WMT'14?")) == ""
    assert _problems(_card(front="Which table has $2k+1$ rows?")) == ""  # a product, not 2,000


def test_duplicates_and_near_duplicates():
    a = _card(id="a", front="What does ALiBi add to the attention scores of head h?",
              back="A bias of minus the slope times the distance, fixed per head.")  # fmt: skip
    same = dataclasses.replace(a, id="b", concept=3)
    reworded = dataclasses.replace(
        a, id="c", front="What does ALiBi add to the attention scores of each head?"
    )
    assert "same question as 'a'" in _problems(a, [same])
    assert "near-duplicate questions" in _problems(a, [reworded])
    other = _card(id="d", front="How many parameters does ALiBi learn?", back="Zero.")
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
    # specific terms; they were merged by hand.)
    old = Flashcard.from_dict(entry["card"])
    problems = lint_deck([*CARDS, old], retired={})
    pair = {old.id, entry["duplicate_of"]}
    assert any("share their key terms" in p and all(repr(i) in p for i in pair) for p in problems)


def test_distinct_fact_pairs_name_current_cards_that_the_rule_would_flag():
    scores = {frozenset((a, b)): s for s, a, b in lint.same_fact_scores(CARDS)}
    for pair in lint.DISTINCT_FACTS:
        assert pair <= set(BY_ID), f"stale DISTINCT_FACTS entry {sorted(pair)}"
        assert scores[pair] >= lint.SAME_FACT, f"{sorted(pair)} no longer needs an exception"


# Cards the deck does not hold: one made of the words most cards use, one specific fact, and
# one that shares rare terms with two cards of the deck (RoPE's angle, T5's buckets).
NEWCOMERS = [
    _card(id="new-generic", front="What does a token's position set in a model's attention?",
          back="The score of each query and key pair, by their distance, at training length."),
    _card(id="new-specific", front="Which base does Llama 3 use?", back="500,000.",
          quoted=("500000",)),
    _card(id="new-overlap", concept=8, front=r"How far does pair $i$ turn per position?",
          back=r"By $\theta_i = b^{-2i/d}$; T5 instead uses 32 buckets up to `max_distance`."),
]  # fmt: skip


@pytest.mark.parametrize("newcomer", NEWCOMERS, ids=lambda c: c.id)
def test_adding_a_card_moves_no_other_pair(newcomer):
    # Issue 29: with tf-idf weights, one new card changed every term's rarity and moved pairs
    # it has nothing to do with across SAME_FACT. A pair's score is now its two cards' alone.
    def flagged(cards):
        problems = lint_deck(cards, retired={})
        return {p for p in problems if "share their key terms" in p and repr(newcomer.id) not in p}

    before = {frozenset((a, b)): s for s, a, b in lint.same_fact_scores(CARDS)}
    after = {frozenset((a, b)): s for s, a, b in lint.same_fact_scores([*CARDS, newcomer])}
    assert {pair: after[pair] for pair in before} == before
    assert flagged([*CARDS, newcomer]) == flagged(CARDS) == set()


def test_same_fact_score_is_a_cosine_of_the_two_cards():
    a = BY_ID["alibi-slope-formula"]
    assert lint.same_fact_score(a, a) == pytest.approx(1.0)
    assert lint.same_fact_score(a, BY_ID["alibi-non-power-of-two"]) == pytest.approx(
        lint.same_fact_score(BY_ID["alibi-non-power-of-two"], a)
    )
    # The course's own words weigh little: sharing only them is not sharing a fact.
    generic = _card(id="g", front="Which position does the token take?", back="Its row.")
    also = _card(id="h", front="How is the position of a token used?", back="As a row.")
    assert lint.same_fact_score(generic, also) < lint.SAME_FACT
    specific = _card(id="s", front="Why is YaRN's temperature 0.1 ln s + 1?", back="A fit.")
    again = _card(id="t", front="Which fit gives YaRN's temperature?", back="0.1 ln s + 1.")
    assert lint.same_fact_score(specific, again) >= lint.SAME_FACT


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


def test_cli_lint_help_states_the_limits_the_lint_enforces(capsys):
    # The help once said 25 words after the limit became 20: it reads the numbers it states.
    with pytest.raises(SystemExit):
        main(["cards", "lint", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"at most {lint.MAX_ANSWER_WORDS} words" in text
    assert f"median basic answer of at most {lint.MAX_MEDIAN_WORDS}" in text
    assert "bare negations" in text and "one answer per question" in text


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


def test_one_answer_list_names_current_open_questions():
    # Every listed card exists and is an open question the rule would flag without the entry
    # (a reworded card drops out of the list instead of leaving a stale exception).
    for card_id, why in lint.ONE_ANSWER.items():
        assert card_id in BY_ID, f"stale ONE_ANSWER entry {card_id}"
        assert why.strip()
        unlisted = lint._one_answer_problems(BY_ID[card_id], card_id)
        assert lint._OPEN_QUESTION.search(BY_ID[card_id].front), card_id
        assert unlisted == [], unlisted  # listed: clean
    card = BY_ID["cope-mask"]
    assert lint._one_answer_problems(dataclasses.replace(card, id="cope-mask-2"), "x")


def _broken(card_id, **changes):
    return [dataclasses.replace(c, **changes) if c.id == card_id else c for c in CARDS]


# For every lint rule, a real card of the deck broken the way the rule names: the lint must
# report it (and the unbroken deck is clean, test_the_deck_is_clean).
DECK_MUTATIONS = {
    "structure": ("alibi-formula", {"front": "ALiBi adds a bias."}),
    "length": ("base-llama3-500k", {"back": "500,000. " + "word " * 20}),
    "median": ("*", None),
    "negation": ("rope-qk-not-v", {"back": "None."}),
    "enumerations": ("rope-qk-not-v", {"back": "- the values\n- nothing else"}),
    "set fronts": ("pe-llm-family", {"front": "Name two models that use RoPE."}),
    "yes/no fronts": ("pe-llm-family", {"front": "Do Llama, Mistral and Qwen use RoPE?"}),
    "duplicates": ("pe-llm-family", {"front": BY_ID["base-llama3-500k"].front}),
    "near-duplicates": ("pe-undefined-past-length",
                        {"front": BY_ID["pe-llm-family"].front.replace("Which", "Which one")}),
    "same fact": ("pe-t5-vs-alibi", {"front": BY_ID["t5-bias"].front, "back": BY_ID["t5-bias"].back
                                     + " Learned."}),
    "sources": ("base-llama3-500k", {"source": "ch. 08 §4"}),
    "numbers": ("base-llama3-500k", {"quoted": ()}),
    "quoted numbers": ("base-llama3-500k", {"back": "600,000."}),
    "question numbers": ("randpos-results", {"quoted": ("12.0",)}),
    "given numbers": ("rope-shift-vs-stretch", {"given": ("64", "10000", "512")}),
    "one answer: one of several": ("pe-llm-family", {"front": "Which scheme does one of the Llama models use?"}),
    "one answer: judgement": ("dynamic-ntk-stale-cache",
                              {"front": "What is the classic dynamic-NTK bug?"}),
    "one answer: two questions": ("pose-cost", {"front": "How far did PoSE extend LLaMA, and with what window?"}),
    "one answer: open question": ("ctx-niah-too-easy",
                                  {"front": "Why is a perfect needle-in-a-haystack score weak evidence?"}),
    "history": ("base-llama3-500k", {"id": "ctx-ruler"}),
}  # fmt: skip


def test_every_rule_has_a_deck_mutation():
    assert set(DECK_MUTATIONS) == set(lint.RULES)


@pytest.mark.parametrize("rule", sorted(lint.RULES))
def test_each_rule_fails_on_a_broken_deck_card(rule):
    card_id, changes = DECK_MUTATIONS[rule]
    if card_id == "*":  # the median rule is about the whole deck: lengthen every basic answer
        deck = [c if c.is_cloze else dataclasses.replace(c, back=c.back + " and so on and on")
                for c in CARDS]  # fmt: skip
    else:
        deck = _broken(card_id, **changes)
    problems = lint_deck(deck)
    assert any(lint.RULES[rule] in p for p in problems), (rule, problems[:5])
