r"""``pecourse cards lint``: the deck's writing rules as a command.

The rules follow the minimum-information principle of spaced-repetition writing (one fact
per card, short answers, no sets, no cued yes/no questions), plus what this course needs
(every card has its concept and a source; every stated number is recomputed by a check).
:func:`lint_deck` returns one line per problem; :func:`deck_stats` the numbers the command
prints after them.

- **structure**: :func:`pecourse.flashcards.deck.validate_deck` (fields, ids, cloze syntax);
- **length**: the answer (a basic card's back; a cloze card's deletions and note) has at most
  ``MAX_ANSWER_WORDS`` words, unless the card's ``long`` says why it needs up to
  ``MAX_LONG_WORDS``. A formula counts by its symbols (each variable, number and named
  function or letter such as ``\ln`` or ``\theta``; operators, brackets and spacing commands
  are free), a code span as one word. Across a whole deck (``MEDIAN_MIN_CARDS`` basic cards or
  more) the median basic answer has at most ``MAX_MEDIAN_WORDS`` words: an answer is a phrase
  to recall, not an explanation;
- **negation**: no answer that is a bare negation ("None.", "Nothing:", "Not at all"); it is
  guessable from the front's shape. Ask for what is there instead;
- **enumerations**: no bulleted or numbered lists, no "name two", "list" fronts;
- **fronts**: no yes/no fronts (Does/Is/Can ...), no "Pitfall:" prefix that cues "no";
- **duplicates**: no two cards whose questions, or whose answers, are the same or at least
  ``NEAR_DUPLICATE`` alike (difflib's ratio) once normalised (case, punctuation, cloze
  markup and spacing inside math removed). This catches copies and light rewordings;
- **same fact**: no two cards whose key terms (the content words, numbers and formula
  symbols of the whole card) have a cosine similarity of ``SAME_FACT`` or more, unless the
  pair is listed in ``DISTINCT_FACTS`` with the reason the two facts differ. A term weighs 1,
  or ``GENERIC_WEIGHT`` when it names the course's subject rather than a fact (``GENERIC``:
  "position", "attention", "token", a single digit, ...). The weights are a fixed list, not
  the deck's own term frequencies, so a pair's score depends on its two cards alone: adding,
  editing or retiring a third card never moves it across the threshold. Sharing specific
  terms is how two cards on one fact look (a formula and its instance, two cards on one
  table); a paraphrase that shares no term escapes it, which stays the writer's job;
- **sources**: ``source`` starts with the card's own chapter, ``ch. NN``;
- **numbers**: every number the answer states (and the question does not), in digits or in
  words ("every fourth layer", "about half"), is covered by a check or listed in ``quoted``,
  and every quoted number is on the card;
- **question numbers**: every number the question states is a fact checked like the
  answer's (a check's ``text``, ``formula`` or ``from_text``, or ``quoted`` with its source),
  or a ``given`` of a thought experiment; a check's ``args`` do not cover it (they would
  compute the same value whatever the card says), and every given is in the question;
- **one answer**: a question admits one answer. Fronts that ask for an example or one of
  several ("for example", "one reason", "such as"), lean on a judgement the learner cannot
  share ("the classic", "the main"), or ask two questions at once fail; an open question
  ("Why ...?", "What happens ...?", "What goes wrong ...?", "What did ... find?", "What does
  ... cost?", "What can ...?") fails unless ``ONE_ANSWER`` lists the card with what pins its
  single answer (the read list);
- **history**: no card reuses a retired id.
"""

from __future__ import annotations

import difflib
import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass

from . import cloze
from .deck import Flashcard, load_deck, load_retired, validate_deck
from .numbers import magnitude_token, normalise_digits, number_tokens, tokens_of_written

# The rules of the module docstring, by name, each with a phrase of the problem it reports
# (tests/flashcards/test_lint.py breaks a real card of the deck for every one of them).
RULES: dict[str, str] = {
    "structure": "no {{c1::...}} deletion",
    "length": "answer has",
    "median": "the median basic answer",
    "negation": "bare negation",
    "enumerations": "bulleted or numbered list",
    "set fronts": "asks for a set",
    "yes/no fronts": "yes/no front",
    "duplicates": "same question as",
    "near-duplicates": "near-duplicate",
    "same fact": "share their key terms",
    "sources": "source must start with its chapter",
    "numbers": "without a check that computes it",
    "quoted numbers": "quoted numbers",
    "question numbers": "the question states",
    "given numbers": "given numbers",
    "one answer: one of several": "asks for one of several answers",
    "one answer: judgement": "leans on a judgement",
    "one answer: two questions": "asks two questions",
    "one answer: open question": "an open question",
    "history": "reuses the retired id",
}

MAX_ANSWER_WORDS = 20
MAX_LONG_WORDS = 30
MAX_MEDIAN_WORDS = 10
MEDIAN_MIN_CARDS = 50  # the median rule is about a deck, not a handful of cards
NEAR_DUPLICATE = 0.8
SAME_FACT = 0.45
MIN_COMPARED = 6  # words: short answers (a formula, two numbers) are alike by nature

_MATH = re.compile(r"\$\$.+?\$\$|\$.+?\$|`[^`]+`", re.S)
_YES_NO = re.compile(
    r"^\s*(?:pitfall:\s*)?(?:does|do|did|is|are|was|were|can|could|should|will|would|has|have)\b",
    re.I,
)
_SET_FRONT = re.compile(
    r"\b(?:name (?:two|three|four|five|all)|list (?:the|all|two|three|four))\b", re.I
)
# Numbers written as words; "one", "first" and "second" are left out, as the digits 0-2 are
# (they are structural: "one bucket each", "the first layer").
_NUMBER_WORD = re.compile(
    r"\b(?:two|three|four|five|six|seven|eight|nine|ten|twice|half|quarter|third|fourth|"
    r"fifth|sixth|seventh|eighth|tenth|hundred|thousand|million)\b",
    re.I,
)
# One answer: fronts that ask for one of several, lean on a judgement, or ask twice.
_OPEN_SET = re.compile(
    r"\b(?:for example|an example|e\.g\.|such as|one (?:reason|way|cause|example|of the)|"
    r"a reason|some|name an?)\b",
    re.I,
)
_JUDGEMENT = re.compile(
    r"\bthe (?:classic|main|key|biggest|most important|best-known|usual|typical|primary)\b(?![-–])",
    re.I,
)
_TWO_QUESTIONS = re.compile(r",\s*and (?:why|how|what|which|where|when|with what)\b", re.I)
_OPEN_QUESTION = re.compile(
    r"(?:^|[.:!?,]\s+)(?:why\b|what happens\b|what goes wrong\b|what can\b|"
    r"what did\b[^?]*\bfind\b|what does\b[^?]*\bcost\b)",
    re.I,
)
_LIST_LINE = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+", re.M)
_NEGATION = re.compile(
    r"^\W*(?:no|none|nothing|never|neither|not at all|not really)\s*(?:[.,:;!—–-]|$)", re.I
)
# A formula's symbols: a named function or letter (\ln, \theta), a single letter, a number.
_SYMBOL = re.compile(r"\\[A-Za-z]+|[A-Za-z]|\d+(?:[.,]\d+)*")
_NOT_SYMBOLS = frozenset(
    r"\left \right \big \Big \bigl \bigr \Bigl \Bigr \mathrm \text \operatorname \mathbf "
    r"\boldsymbol \frac \tfrac \dfrac \dots \ldots \cdots \cdot \times \top \le \ge \leq "
    r"\geq \lfloor \rfloor \lceil \rceil \quad \qquad".split()
)


def _span_words(span: str) -> int:
    if span.startswith("`"):
        return 1
    return max(1, sum(1 for s in _SYMBOL.findall(span) if s not in _NOT_SYMBOLS))


def answer_words(card: Flashcard) -> int:
    """Words in the answer: a formula counts by its symbols, a code span as one word."""
    text = card.answer_part()
    spans = sum(_span_words(m.group(0)) for m in _MATH.finditer(text))
    return spans + len(_MATH.sub(" ", text).split())


def _normalise(text: str) -> str:
    text = _MATH.sub(lambda m: re.sub(r"\s+", "", m.group(0)), cloze.question(text, blank=""))
    return re.sub(r"[^a-z0-9$\\^_{}]+", " ", text.lower()).strip()


def _checked_numbers(card: Flashcard) -> set[str]:
    """Numbers a check reads off the card: its text or formula, and its ``from_text``."""
    covered: set[str] = set()
    for spec in card.checks:
        for key in ("text", "formula"):
            if key in spec:
                covered |= tokens_of_written(spec[key])
        for phrase in spec.get("from_text", {}).values():
            covered |= tokens_of_written(phrase)
    return covered


def _covered_numbers(card: Flashcard) -> set[str]:
    covered = _checked_numbers(card)
    for spec in card.checks:
        arg_sets = spec.get("args", {})
        for args in arg_sets if isinstance(arg_sets, list) else [arg_sets]:
            for value in args.values():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    covered.add(f"{value:g}")
    return covered


# Number words that are names, not values: "a power of two", "the half pairing".
_NAMED_WORDS = re.compile(r"\bpowers? of two\b|\bhalf[- ]pairing\b", re.I)


def _number_words(text: str) -> set[str]:
    return {w.lower() for w in _NUMBER_WORD.findall(_NAMED_WORDS.sub(" ", text))}


def _same_number(token: str, covered: set[str]) -> bool:
    if token in covered:
        return True
    try:
        return f"{float(token):g}" in covered
    except ValueError:  # a magnitude such as 32k
        return False


def _entries(values) -> set[str]:
    return {magnitude_token(normalise_digits(v)) for v in values}


def _number_problems(card: Flashcard, where: str) -> list[str]:
    given = set(number_tokens(card.given_part()))
    quoted = _entries(card.quoted)
    covered = _covered_numbers(card) | quoted
    stated = [t for t in number_tokens(card.answer_part()) if t not in given]
    problems = []
    missing = sorted({t for t in stated if not _same_number(t, covered)})
    # Numbers written as words ("every fourth layer", "about half") need a check as well:
    # one whose text contains the word, or the word listed under 'quoted'.
    check_words = set().union(*(_number_words(spec.get("text", "")) for spec in card.checks))
    words = _number_words(card.answer_part()) - _number_words(card.given_part())
    missing += sorted(words - check_words - {q.lower() for q in card.quoted})
    if missing:
        problems.append(
            f"{where}: states {', '.join(missing)} without a check that computes it "
            "(add a check, or list a number quoted from the source under 'quoted')"
        )
    text_numbers = set(number_tokens(card.front + " " + card.back))
    text_words = _number_words(card.front + " " + card.back)
    stale = [
        q for q in card.quoted if not (_entries([q]) & text_numbers or q.lower() in text_words)
    ]
    if stale:
        problems.append(f"{where}: quoted numbers {stale} do not occur on the card")
    # The question's numbers: facts to check, unless they only set up a thought experiment.
    declared = _entries(card.given) | {g.lower() for g in card.given}
    checked = _checked_numbers(card) | quoted | declared
    check_words = set().union(*(_number_words(spec.get("text", "")) for spec in card.checks))
    for spec in card.checks:
        for phrase in spec.get("from_text", {}).values():
            check_words |= _number_words(phrase)
    asked = [t for t in number_tokens(card.given_part()) if not _same_number(t, checked)]
    asked += sorted(_number_words(card.given_part()) - check_words - checked)
    if asked:
        problems.append(
            f"{where}: the question states {', '.join(dict.fromkeys(asked))} without a check "
            "that reads it (add one, quote it from the source under 'quoted', or list a "
            "thought experiment's set-up under 'given')"
        )
    question_numbers = set(number_tokens(card.given_part())) | _number_words(card.given_part())
    stale_given = [g for g in card.given if not (declared & question_numbers and
                   (_entries([g]) | {g.lower()}) & question_numbers)]  # fmt: skip
    if stale_given:
        problems.append(f"{where}: given numbers {stale_given} are not in the question")
    return problems


def lint_deck(cards: list[Flashcard] | None = None, retired: dict | None = None) -> list[str]:
    """Every rule of the module docstring; one line per problem (empty when the deck is clean)."""
    cards = load_deck() if cards is None else cards
    retired = load_retired() if retired is None else retired
    problems = list(validate_deck(cards))
    fronts: dict[str, str] = {}
    answers: dict[str, str] = {}
    for card in cards:
        where = f"card {card.id!r} (concept {card.concept})"
        words = answer_words(card)
        limit = MAX_LONG_WORDS if card.long else MAX_ANSWER_WORDS
        if words > limit:
            why = f"(its 'long' reason allows {MAX_LONG_WORDS})" if card.long else ""
            problems.append(f"{where}: answer has {words} words, more than {limit} {why}".rstrip())
        if _NEGATION.match(card.answer_part()):
            problems.append(f"{where}: the answer is a bare negation (ask for what is there)")
        for name in ("front", "back"):
            if _LIST_LINE.search(getattr(card, name)):
                problems.append(f"{where}: a bulleted or numbered list in {name} (split the card)")
        if _SET_FRONT.search(card.front):
            problems.append(f"{where}: the front asks for a set ('name two', 'list ...')")
        if not card.is_cloze and _YES_NO.match(card.front):
            problems.append(f"{where}: a yes/no front (ask what, why or what breaks instead)")
        problems += _one_answer_problems(card, where)
        if not re.match(rf"ch\. {card.concept:02d}\b", card.source):
            problems.append(
                f"{where}: source must start with its chapter, 'ch. {card.concept:02d}'"
            )
        if card.id in retired:
            problems.append(f"{where}: reuses the retired id {card.id!r}")
        question, answer = _normalise(card.question()), _normalise(card.answer_part())
        if question in fronts:
            problems.append(f"{where}: same question as {fronts[question]!r}")
        fronts.setdefault(question, card.id)
        if answer and answer in answers:
            problems.append(f"{where}: same answer as {answers[answer]!r}")
        answers.setdefault(answer, card.id)
        problems += _number_problems(card, where)
    basic = [answer_words(c) for c in cards if not c.is_cloze]
    if len(basic) >= MEDIAN_MIN_CARDS and statistics.median(basic) > MAX_MEDIAN_WORDS:
        problems.append(
            f"the median basic answer has {statistics.median(basic):g} words, more than "
            f"{MAX_MEDIAN_WORDS}: shorten the longest answers"
        )
    problems += _near_duplicates(cards)
    problems += _same_facts(cards)
    return problems


def _one_answer_problems(card: Flashcard, where: str) -> list[str]:
    if card.is_cloze:  # the text around a deletion pins it
        return []
    front = _MATH.sub(" ", card.front)
    problems = []
    if _OPEN_SET.search(front):
        problems.append(f"{where}: the front asks for one of several answers (ask for the one)")
    if _JUDGEMENT.search(front):
        problems.append(
            f"{where}: the front leans on a judgement ('the classic', 'the main') a learner "
            "cannot share (name what is asked)"
        )
    if front.count("?") > 1 or _TWO_QUESTIONS.search(front):
        problems.append(f"{where}: the front asks two questions (split the card)")
    if _OPEN_QUESTION.search(front) and card.id not in ONE_ANSWER:
        problems.append(
            f"{where}: an open question ('why', 'what happens', 'what did ... find') admits "
            "several answers; narrow it, or add the card to lint.ONE_ANSWER with what pins its "
            "single answer"
        )
    return problems


# Open questions that were read and admit one answer, with what pins it. A card that is
# reworded out of the open shape drops out of this list's use (a test fails on stale ids).
ONE_ANSWER: dict[str, str] = {
    "learned-abs-bert-late-rows": "BERT's 128/512 schedule (appendix A.2) is the one cause",
    "perm-equivariance-proof": "a two-step identity: the row-wise softmax and P^T P = I",
    "perm-whole-stack": "the other sublayers act per token: the one reason",
    "perm-encoder-depth": "each layer sees a set: the symmetry argument",
    "alibi-no-parameters": "Press et al. §3 give one reason: learned slopes did not extrapolate",
    "alibi-row-constant": "softmax ignores a per-row constant: the one reason",
    "alibi-key-index-unmasked": "the bias's sign on later keys: the one failure",
    "ctx-perplexity-misleads": "most tokens are locally predictable: the one reason",
    "pe-relative-not-extrapolation": "what is encoded vs which offsets were trained",
    "rope-bf16-angles": "bf16's 8 significant bits: the one cause",
    "sin-forgotten-sqrt-d": "the set-up fixes the outcome: the two norms' scales",
    "sin-vs-learned": "Vaswani et al. §3.5 give one reason: hoped-for extrapolation",
    "sin-projection-breaks": "the content-position cross terms: the one reason",
    "cope-motivation": "token offsets vary with sentence lengths: the one reason",
    "cope-mask": "positions would count later tokens: the one reason",
    "irope-span-limited": "the RoPE layers' unseen offsets: the one reason",
    "irope-temperature": "attention flattening over more keys (Nakanishi 2025)",
    "irope-chunks-only-nope": "chunked attention never crosses a chunk edge",
    "extrap-rope-large-scores": "the front names what is asked: the scores' size (Chen et al. §2.2)",
    "randpos-sorted": "distances flip sign: the one failure",
    "pose-continuity": "short distances stay as at test time (Zhu et al. §3)",
    "dynamic-ntk-stale-cache": "the scenario fixes the consequence: stretched frequencies",
    "nope-theorem1": "the theorem's statement: absolute position",
    "nope-counter-bf16": "bf16's resolution against the neighbours' gap",
    "nope-bos-free-variance": "Chi et al. 2023's one mechanism: the running mean's variance",
}

# Pairs above SAME_FACT that were read and test different facts (siblings on one topic),
# with why. A pair that is merged or reworded drops out of this list's use on its own.
DISTINCT_FACTS: dict[frozenset, str] = {
    frozenset(pair): why
    for *pair, why in [
        ("base-llama3-500k", "base-missing-theta", "Llama 3's base vs the loaders' fallback"),
        ("nope-theorem1", "nope-theorem2-relative", "Theorem 1 (absolute) vs Theorem 2 (relative)"),
        ("alibi-slope-formula", "alibi-non-power-of-two", "power-of-two formula vs the other n"),
        ("sin-linear-shift", "sin-dot-product", "the shift matrix M(Δ) vs the dot product's sum"),
        ("mrope-axial-2d", "rope-definition", "1D RoPE's angle vs axial RoPE's split by axis"),
        ("mrope-rope-mixed", "rope-definition", "1D RoPE's angle vs two learned frequencies"),
        ("pe-place-scores", "pe-t5-vs-alibi", "where three schemes put position vs what T5 learns"),
        ("pe-place-scores", "cope-logits", "the map's 'into the scores' vs CoPE's term q·e[p]"),
        ("pe-t5-vs-alibi", "extrap-alibi-meets", "T5's learned buckets vs ALiBi's fixed line"),
        ("nope-resembles-t5", "nope-theorem2-relative", "what trained NoPE did vs what it can do"),
        (
            "t5-last-bucket-start",
            "t5-bucket-layout",
            "the last bucket's start vs the exact/log split",
        ),
    ]
}

_STOP = frozenset(
    """a an the of to in on at by for from with and or but not no is are was were be been being
    it its this that these those as into than then so such what which who whom whose why how when
    where does do did can could should would will has have had their there they them we you one
    each every any all only also just more most less much many very about after before over under
    between per same other another while if up down out own""".split()
)


def _key_terms(card: Flashcard) -> list[str]:
    """Content words, numbers and formula symbols of the whole card (question and answer)."""
    text = f"{card.answer() if card.is_cloze else card.front + ' ' + card.back}"
    # A LaTeX command is a term (\\theta, \\ln), unless it only typesets (\\tfrac, \\dots).
    text = re.sub(r"\\[A-Za-z]+", lambda m: " " if m[0] in _NOT_SYMBOLS else f" {m[0][1:]} ", text)
    text = text.lower()
    terms = []
    for word in re.findall(r"[a-z][a-z0-9_\-]*|\d+(?:[.,]\d+)*", text):
        word = word.replace(",", "")
        if word in _STOP or (len(word) < 3 and not word[0].isdigit()):
            continue
        if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]  # plural: "keys" and "key" are one term
        terms.append(word)
    return terms


# Words that name the course's subject, not a fact: two cards that share only these share
# no fact. Fixed here (they are the terms most cards of the deck use), so that no card's
# arrival changes another pair's score.
GENERIC = frozenset(
    """position positional token rope length model attention key query layer pair score head
    offset training trained learned encoding context table row value distance scheme
    transformer use exactly past alone must keep longer time first count sum top""".split()
)
GENERIC_WEIGHT = 0.25


def _generic(term: str) -> bool:
    return term in GENERIC or (len(term) == 1 and term.isdigit())  # a digit: "pair 2", "1 bucket"


def _term_vector(card: Flashcard) -> dict[str, float]:
    counts = Counter(_key_terms(card))
    vector = {
        term: (1 + math.log(k)) * (GENERIC_WEIGHT if _generic(term) else 1.0)
        for term, k in counts.items()
    }
    norm = math.sqrt(sum(w * w for w in vector.values())) or 1.0
    return {term: w / norm for term, w in vector.items()}


def same_fact_score(a: Flashcard, b: Flashcard) -> float:
    """Cosine similarity of two cards' weighted key-term vectors: a function of the two alone."""
    va, vb = _term_vector(a), _term_vector(b)
    return sum(va[t] * vb[t] for t in va.keys() & vb.keys())


def same_fact_scores(cards: list[Flashcard]) -> list[tuple[float, str, str]]:
    """:func:`same_fact_score` of every pair, highest first."""
    vectors = [_term_vector(c) for c in cards]
    scores = []
    for a in range(len(cards)):
        for b in range(a + 1, len(cards)):
            shared = vectors[a].keys() & vectors[b].keys()
            score = sum(vectors[a][t] * vectors[b][t] for t in shared)
            scores.append((score, cards[a].id, cards[b].id))
    return sorted(scores, reverse=True)


def _same_facts(cards: list[Flashcard]) -> list[str]:
    return [
        f"cards {a!r} and {b!r}: they share their key terms ({score:.2f} ≥ {SAME_FACT}); merge "
        "them if they test one fact, or add the pair to lint.DISTINCT_FACTS with the difference"
        for score, a, b in same_fact_scores(cards)
        if score >= SAME_FACT and frozenset((a, b)) not in DISTINCT_FACTS
    ]


def _near_duplicates(cards: list[Flashcard]) -> list[str]:
    # Compare word sequences (not characters): faster, and a reworded card shares words.
    texts = [(_normalise(c.question()).split(), _normalise(c.answer_part()).split()) for c in cards]
    found = []
    for k, part in enumerate(("question", "answer")):
        for a in range(len(cards)):
            x = texts[a][k]
            if len(x) < MIN_COMPARED:
                continue
            matcher = difflib.SequenceMatcher(None, autojunk=False)
            matcher.set_seq2(x)  # the expensive side, analysed once
            for b in range(a + 1, len(cards)):
                y = texts[b][k]
                if len(y) < MIN_COMPARED or x == y:
                    continue
                matcher.set_seq1(y)
                if (
                    matcher.real_quick_ratio() >= NEAR_DUPLICATE
                    and matcher.quick_ratio() >= NEAR_DUPLICATE
                    and matcher.ratio() >= NEAR_DUPLICATE
                ):
                    found.append(
                        f"cards {cards[a].id!r} and {cards[b].id!r}: near-duplicate {part}s "
                        f"({matcher.ratio():.0%} alike once normalised)"
                    )
    return found


@dataclass(frozen=True)
class DeckStats:
    cards: int
    cloze: int
    median_answer_words: float
    median_basic_answer_words: float
    max_answer_words: int
    checked: int
    long: int

    def lines(self) -> list[str]:
        return [
            f"cards: {self.cards} ({self.cloze} cloze)",
            f"answer words: median {self.median_answer_words:g} (basic cards "
            f"{self.median_basic_answer_words:g}), max {self.max_answer_words}",
            f"cards with number or formula checks: {self.checked}; long answers: {self.long}",
        ]


def deck_stats(cards: list[Flashcard] | None = None) -> DeckStats:
    cards = load_deck() if cards is None else cards
    counts = [answer_words(c) for c in cards]
    return DeckStats(
        cards=len(cards),
        cloze=sum(c.is_cloze for c in cards),
        median_answer_words=statistics.median(counts),
        median_basic_answer_words=statistics.median(
            [n for n, c in zip(counts, cards) if not c.is_cloze] or [0]
        ),
        max_answer_words=max(counts),
        checked=sum(bool(c.checks) for c in cards),
        long=sum(bool(c.long) for c in cards),
    )
