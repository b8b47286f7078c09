"""Every number and formula a card states is recomputed from the package.

The checks live in ``pecourse.flashcards.checks``; this file runs each card's checks, makes
sure a card cannot state a number without one, and shows that a check fails when the card's
number, formula or function is wrong (nothing is skipped: a missing package function is a
failing check).
"""

import dataclasses
import inspect
import math
import re

import pytest

from pecourse.flashcards import checks as checks_module
from pecourse.flashcards.checks import CHECKS, run_check, run_checks
from pecourse.flashcards.deck import Flashcard, load_deck
from pecourse.flashcards.lint import _number_problems
from pecourse.flashcards.numbers import (
    formula_to_sympy,
    normalise_digits,
    number_tokens,
    tokens_of_written,
    written_value,
)

CARDS = load_deck()
CHECKED = [c for c in CARDS if c.checks]
BY_ID = {c.id: c for c in CARDS}


@pytest.mark.parametrize("card", CHECKED, ids=lambda c: c.id)
def test_card_numbers_match_the_package(card):
    assert run_checks(card) == []


def test_the_deck_states_no_number_without_a_check():
    problems = [p for c in CARDS for p in _number_problems(c, c.id)]
    assert problems == []
    assert len(CHECKED) >= 35  # numbers and formulas are common; a check per card that has one


def test_numeric_card_without_a_check_is_caught():
    card = BY_ID["t5-last-bucket-start"]
    bare = dataclasses.replace(card, checks=())
    problems = _number_problems(bare, bare.id)
    assert problems and "91" in problems[0] and "113" in problems[0]
    quoted = dataclasses.replace(bare, quoted=("91", "113", "99"))
    assert any("99" in p for p in _number_problems(quoted, quoted.id))  # quoted but absent


def _package_reaching(name, seen=None):
    """True when CHECKS[name] imports the package (or sympy, torch, transformers), directly or
    through another registered check or a helper function of the checks module."""
    seen = set() if seen is None else seen
    seen.add(name)
    source = inspect.getsource(_FUNCTIONS[name])
    if re.search(r"^\s*(from|import) (pecourse|sympy|torch|transformers)\b", source, re.M):
        return True
    called = {n for n in _FUNCTIONS if n not in seen and re.search(rf"\b{n}\(", source)}
    return any(_package_reaching(n, seen) for n in called)


# The checks and the module's own helpers (``_min_decay``), by name.
_FUNCTIONS = {
    name: getattr(fn, "__wrapped__", fn)
    for name, fn in vars(checks_module).items()
    if callable(fn) and getattr(fn, "__module__", None) == checks_module.__name__
}


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_every_check_function_computes_from_the_package(name):
    assert _package_reaching(name), f"{name} does not compute from pecourse/sympy/torch"


def test_every_card_check_uses_a_registered_function():
    used = {spec["fn"] for c in CHECKED for spec in c.checks}
    assert used <= set(CHECKS)
    assert not set(CHECKS) - used, f"registered but unused: {sorted(set(CHECKS) - used)}"


def _with_text(card, old, new):
    checks = [dict(s, **{k: s[k].replace(old, new) for k in ("text", "formula") if k in s})
              for s in card.checks]  # fmt: skip
    return dataclasses.replace(
        card, front=card.front.replace(old, new), back=card.back.replace(old, new), checks=checks
    )


@pytest.mark.parametrize(
    "card_id, old, new",
    [
        ("t5-last-bucket-start", "91", "128"),  # the old card's wrong belief
        ("t5-last-bucket-start", "113", "128"),
        ("t5-bucket-layout", "8", "9"),
        ("learned-abs-gpt2-rows", "1024", "2048"),
        ("irope-temperature-formula", "8,190", "8,191"),
        ("alibi-slope-formula", "2^{-8h/n}", "2^{-h/n}"),
        ("ntk-aware-base", r"s^{d/(d-2)}", r"s^{(d-2)/d}"),  # the tempting exponent
        ("sin-dot-product", r"\cos(\Delta\,\omega_i)", r"\sin(\Delta\,\omega_i)"),
        ("nope-bos-counter", "1/(t+1)", "1/t"),
        ("rope-xpos", "(n-m)/B", "(n+m)/B"),  # the key scaled like its query
        ("rope-xpos", "(n-m)/B", "n/B"),  # only the query scaled
        ("base-men-fit", "1.628", "1.3"),
        ("learned-abs-roberta-514", "514", "512"),  # rows = tokens: the padding offset forgotten
        ("cope-cost-memory", r"L \times L", "L"),
    ],
)
def test_a_wrong_number_or_formula_fails(card_id, old, new):
    card = BY_ID[card_id]
    assert old in card.front + card.back
    assert run_checks(_with_text(card, old, new)), f"{old} -> {new} went unnoticed"


def test_the_xpos_check_measures_the_idea_not_the_formula(monkeypatch):
    # The check reads the factor off scores, so a package whose xPos scales the key like the
    # query (a scale that does not cancel to the offset n - m) fails it, though the card's
    # formula is unchanged: rotary-embedding-torch's xPos disagrees.
    from pecourse.positions import xpos
    from pecourse.positions.rope import apply_rope

    card = BY_ID["rope-xpos"]
    assert run_checks(card) == []

    def misconceived(q, k, q_positions, k_positions, *, scale_base=512.0, pairing="half", **kw):
        q, k = (
            apply_rope(q, q_positions, pairing=pairing),
            apply_rope(k, k_positions, pairing=pairing),
        )
        d = q.shape[-1]  # the check pairs interleaved: pair i is coordinates (2i, 2i + 1)

        def scale(p):
            s = xpos.xpos_scale(p, d, scale_base=scale_base).repeat_interleave(2, -1)
            return s.to(q.dtype)

        return q * scale(q_positions), k * scale(k_positions)  # no reciprocal for the key

    monkeypatch.setattr(xpos, "apply_xpos", misconceived)
    problems = run_checks(card)
    assert problems and all("rotary-embedding-torch" in p for p in problems), problems


def test_the_old_base_bound_card_would_fail():
    # The retired base-bound-4k said "about 4e4"; the bound is 2.7e4 and 4e4 itself fails.
    card = BY_ID["base-smallest-admissible-4k"]
    assert run_checks(_with_text(card, r"2.7\times 10^4", r"4\times 10^4"))


def test_missing_or_broken_functions_fail_instead_of_skipping(monkeypatch):
    card = BY_ID["t5-last-bucket-start"]
    spec = dict(card.checks[0], fn="no_such_check")
    assert "no such check function" in run_check(card, spec)[0]

    def broken(**kwargs):
        raise ImportError("pecourse.positions.relative has no t5_bucket")

    monkeypatch.setitem(CHECKS, "t5_last_bucket_start", broken)
    problems = run_checks(card)
    assert len(problems) == 2 and all("ImportError" in p for p in problems)


def test_check_text_must_be_on_the_card():
    card = BY_ID["t5-last-bucket-start"]
    spec = dict(card.checks[0], text="16")
    assert "does not occur" in run_check(card, spec)[0]
    assert "exactly one of" in run_check(card, {"fn": "t5_last_bucket_start", "args": {}})[0]


def test_written_values_and_their_tolerance():
    assert written_value("54{,}400", sig=3) == (54400.0, 50.0)
    assert written_value(r"54\,400") == (54400.0, 0.5)
    assert written_value("1.139") == (1.139, pytest.approx(0.0005))
    value, tol = written_value(r"2.7\times 10^4")
    assert value == 27000 and tol == pytest.approx(500)
    assert written_value("2^{-3.5}")[0] == 2**-3.5
    assert written_value(r"\tfrac1{256}")[0] == 1 / 256
    assert written_value(r"12.0\%") == (pytest.approx(0.12), pytest.approx(0.0005))
    with pytest.raises(ValueError, match="cannot read"):
        written_value("about forty")


def test_formulas_are_read_as_printed():
    b, s, d = (formula_to_sympy(x) for x in ("b", "s", "d"))
    assert formula_to_sympy(r"b' = b\,s^{d/(d-2)}") == b * s ** (d / (d - 2))
    ln_form = formula_to_sympy(r"\Delta = \ln(n-1) + \ln\frac{p}{1-p}")
    assert float(ln_form.subs({"n": 513, "p": 0.5})) == pytest.approx(math.log(512))
    floor = formula_to_sympy(r"\lfloor (i+1)/8192 \rfloor")
    assert int(floor.subs("i", 8190)) == 0 and int(floor.subs("i", 8191)) == 1
    assert str(formula_to_sympy(r"W\Delta r + \Delta c")) == "Delta_c + Delta_r*W"


def test_number_tokens_skip_names_citations_and_indices():
    text = r"GPT-2 in bf16, Llama 3.1, chapter 14 (2023), §3.4, $x_{2i+1}$: 54{,}400 and 1,024 rows"
    assert number_tokens(text) == ["54400", "1024"]
    assert tokens_of_written(r"\tfrac1{256}") == {"256"}


def test_check_module_documents_both_kinds():
    doc = checks_module.__doc__
    assert "**number**" in doc and "**formula**" in doc
    assert isinstance(CARDS[0], Flashcard)


def test_predicate_checks_can_fail():
    # A predicate check reads no number off the card, so a text mutation cannot fail it: show
    # instead that each one rejects a wrong claim of the same shape.
    assert CHECKS["smollm3_nope_every"]("fourth") and not CHECKS["smollm3_nope_every"]("third")
    assert not CHECKS["rope_slowest_just_under"](2, 10000.0)  # one pair: its wavelength is 2π
    card = BY_ID["mrope-sections"]
    as_coordinates = dict(card.checks[0], args={"head_dim": 128, "sections": [32, 48, 48]})
    assert run_check(card, as_coordinates)
    assert CHECKS["meta_to_half_permutation"](8, 2)  # True only if the unpermuted load fails
    assert CHECKS["llama4_nope_every"]("fourth") and not CHECKS["llama4_nope_every"]("third")
    assert CHECKS["cohere2_block"]("three", "one") and not CHECKS["cohere2_block"]("two", "one")
    assert not CHECKS["neox_rotary_fraction"]("half")
    assert not CHECKS["qwen2vl_frames_per_temporal_patch"]("three")
    assert not CHECKS["causal_layers_until_order"]("three")  # two layers, not three


# -- every check can fail: each one mutated on its own card ---------------------------------


def _bump_first_digit(number: str) -> str:
    """The same number with its first digit changed (8,192 -> 9,192; 0.45 -> 1.45; 200 ->
    300), beyond any tolerance its digits promise."""
    i = next(k for k, ch in enumerate(number) if ch.isdigit())
    digit = int(number[i])
    return number[:i] + str(digit + 1 if digit < 9 else digit - 1) + number[i + 1 :]


def _mutate(card, old, new):
    """Replace ``old`` by ``new`` everywhere on the card: its text, its checks' text and
    formula, and the phrases its checks read numbers from."""

    def spec_of(s):
        s = dict(s, **{k: s[k].replace(old, new) for k in ("text", "formula") if k in s})
        if "from_text" in s:
            s["from_text"] = {k: v.replace(old, new) for k, v in s["from_text"].items()}
        return s

    return dataclasses.replace(card, front=card.front.replace(old, new),
                               back=card.back.replace(old, new),
                               checks=tuple(spec_of(s) for s in card.checks))  # fmt: skip


_LAST_NUMBER = re.compile(r"\d[\d,{}.]*\d|\d")
# Cards whose checks scan every base below the bound (checks.rope_base_lower_bound,
# rope_base_fails): each mutation of one takes 7-16 s on two loaded cores.
SCANS = {"base-smallest-admissible-4k": pytest.mark.slow}


def _number_mutations():
    """(card, what, old, new) for every number a check reads: its text (unless the check is a
    predicate: see test_every_predicate_check_rejects_a_wrong_claim) and its from_text."""
    out = []
    for card in CHECKED:
        for spec in card.checks:
            phrases = list(spec.get("from_text", {}).values())
            if "text" in spec and spec["fn"] not in PREDICATES:
                phrases.append(spec["text"])
            for phrase in phrases:
                found = _LAST_NUMBER.findall(phrase)
                if found:
                    number = found[-1]
                    mutated = phrase[::-1].replace(number[::-1], _bump_first_digit(number)[::-1],
                                                   1)[::-1]  # fmt: skip
                    out.append(pytest.param(card, phrase, mutated,
                                            id=f"{card.id}:{spec['fn']}:{phrase}",
                                            marks=SCANS.get(card.id, ())))  # fmt: skip
    return out


def _formula_mutations():
    """(card, old, new) for every formula check: the right-hand side multiplied by 3/2."""
    out = []
    for card in CHECKED:
        for spec in card.checks:
            if "formula" in spec:
                formula = spec["formula"]
                head, eq, rhs = formula.rpartition("=")
                prefix = r"\sum_i " if rhs.lstrip().startswith(r"\sum_i") else ""
                body = rhs.lstrip()[len(prefix) :] if prefix else rhs
                new = f"{head}{eq} {prefix}1.5\\,({body})" if eq else f"{prefix}1.5\\,({body})"
                out.append(pytest.param(card, formula, new, id=f"{card.id}:{spec['fn']}"))
    return out


PREDICATES = {
    name for name in CHECKS
    if inspect.signature(CHECKS[name]).return_annotation in (bool, "bool")
}  # fmt: skip


@pytest.mark.parametrize("card, old, new", _number_mutations())
def test_every_checked_number_fails_when_mutated(card, old, new):
    # A wrong number on the card (in the answer, or in the question a check reads it from)
    # makes one of the card's checks fail.
    assert run_checks(_mutate(card, old, new)), f"{old!r} -> {new!r} went unnoticed"


@pytest.mark.parametrize("card, old, new", _formula_mutations())
def test_every_checked_formula_fails_when_mutated(card, old, new):
    assert run_checks(_mutate(card, old, new)), f"{old!r} -> {new!r} went unnoticed"


# A wrong claim of the same shape for each predicate check the deck uses: the card's words
# cannot be bumped like digits, so the test states the tempting wrong claim.
WRONG_CLAIMS = {
    "alibi_slopes_non_power_of_two": {"num_heads": 12, "pick": "each"},
    "mrope_sections_count_pairs": {"head_dim": 128, "sections": [32, 48, 48]},
    "rope_slowest_just_under": {"head_dim": 2, "base": 10000.0},
    "meta_to_half_permutation": {"head_dim": 8, "num_heads": 2, "first": "odd"},
    "sinusoid_wavelength_range": {"dim": 64, "base": 1000.0},
    "llama4_nope_every": {"interval_word": "third"},
    "cohere2_block": {"sliding_word": "two", "full_word": "one"},
    "neox_rotary_fraction": {"fraction_word": "half"},
    "qwen2vl_frames_per_temporal_patch": {"count_word": "three"},
    "causal_layers_until_order": {"count_word": "three"},
    "smollm3_nope_every": {"interval_word": "third"},
    "rope_base_fails": {"context_length": 4096, "head_dim": 128, "base": 26952.34},
    "nope_share_in_hybrids": {"share": "a majority"},
}


def test_every_predicate_check_has_a_wrong_claim():
    used = {spec["fn"] for c in CHECKED for spec in c.checks} & PREDICATES
    assert used == set(WRONG_CLAIMS)


@pytest.mark.parametrize("name", sorted(WRONG_CLAIMS))
def test_every_predicate_check_rejects_a_wrong_claim(name):
    try:
        verdict = CHECKS[name](**WRONG_CLAIMS[name])
    except RuntimeError:  # transformers refuses the claim outright (run_check: a problem)
        verdict = False
    assert verdict is False


def _quoted_mutations():
    out = []
    for card in CARDS:
        for q in card.quoted:
            digits = _LAST_NUMBER.findall(normalise_digits(q))
            if not digits:
                continue  # a quoted word ('half'): the stale-quote test below covers words
            written = next((w for w in _written_forms(card, q)), None)
            assert written, f"{card.id}: quoted {q!r} not found as written"
            out.append(pytest.param(card, written, _bump_first_digit(written),
                                    id=f"{card.id}:{q}"))  # fmt: skip
    return out


def _written_forms(card, quoted):
    """How a quoted number is written on the card (500000 -> '500,000')."""
    text = card.front + " " + card.back
    for m in re.finditer(r"\d[\d,{}.\\]*\d[kKMB]?|\d[kKMB]?", text):
        if normalise_digits(m.group(0)).lower() == normalise_digits(quoted).lower():
            yield m.group(0)


@pytest.mark.parametrize("card, old, new", _quoted_mutations())
def test_every_quoted_number_is_tied_to_its_card(card, old, new):
    # A quoted number is checked against its cited source by a reader; the lint ties it to
    # the card, so changing the number on the card (not the quote) fails.
    assert _number_problems(_mutate(card, old, new), card.id), f"{old} -> {new} went unnoticed"


@pytest.mark.parametrize(("length", "head_dim"), [(256, 64), (1024, 128)])
def test_the_base_scan_gives_the_full_scans_verdicts(length, head_dim):
    # _min_decay skips work (a base is tried first where its neighbour failed); a full scan,
    # every base at every distance, must give the same verdicts and the same passing values.
    import torch

    b_star = checks_module._package_bound(length, head_dim)
    bases = torch.tensor(
        [*torch.arange(50.0, 1.5 * b_star, 37.0).tolist(), b_star], dtype=torch.float64
    )
    m = torch.arange(1, length + 1, dtype=torch.float64)[:, None]
    exponent = -2 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim
    full = torch.stack([torch.cos(m * b**exponent).sum(-1).min() for b in bases])
    fast = checks_module._min_decay(bases, length, head_dim)
    assert torch.equal(full >= 0, fast >= 0) and (full < 0).any() and (full >= 0).any()
    assert torch.allclose(fast[full >= 0], full[full >= 0])
    assert bool(fast[-1] >= -1e-9)  # b* itself passes
