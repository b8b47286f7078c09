"""The evaluation protocol of pecourse.lab.evaluate: intervals, window losses, retrieval counts."""

import math
import statistics

import pytest
import torch

from pecourse.lab import evaluate as ev
from pecourse.lab.data import corpus
from pecourse.lab.model import ModelConfig, TinyGPT

SMALL = dict(d_model=32, n_layers=2, n_heads=4, train_len=32)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return TinyGPT(ModelConfig(plan="rope", **SMALL)).eval()


# --- intervals --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "k, n, lo, hi",
    # Newcombe (1998), Statistics in Medicine 17:857-872, Table II, method 3 (Wilson, no
    # continuity correction): the four worked examples of the paper.
    [
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_interval_matches_newcombes_table(k, n, lo, hi):
    got = ev.wilson_interval(k, n)
    assert got == pytest.approx((lo, hi), abs=5e-5)


def test_wilson_interval_widens_with_the_level():
    assert ev.wilson_interval(30, 100, level=0.99)[0] < ev.wilson_interval(30, 100)[0]
    assert ev.wilson_interval(30, 100, level=0.8)[1] < ev.wilson_interval(30, 100)[1]


def test_bootstrap_interval_agrees_with_the_normal_interval_on_a_large_sample():
    # For the mean of 4,000 draws the percentile bootstrap and mean +- z s / sqrt(n) agree
    # to a few percent of the half-width (the central limit theorem at work).
    x = torch.randn(4000, generator=torch.Generator().manual_seed(3), dtype=torch.float64) * 2 + 5
    values = x.tolist()
    z = statistics.NormalDist().inv_cdf(0.975)
    half = z * statistics.stdev(values) / math.sqrt(len(values))
    lo, hi = ev.bootstrap_interval(x)
    m = statistics.fmean(values)
    assert lo == pytest.approx(m - half, abs=0.1 * half)
    assert hi == pytest.approx(m + half, abs=0.1 * half)


# --- window losses and perplexity ---------------------------------------------------------------


def test_window_losses_is_the_evaluators_perplexity(model):
    losses = ev.window_losses(model, 32, tokens=512)
    assert losses.shape == (16, 32) and losses.dtype == torch.float64
    ppl = ev.perplexity_interval(losses)
    # the mean over every character of the first 512, each predicted from its own window
    text = corpus("validation")[:513]
    logits = torch.cat([model(text[i : i + 32][None])[0][0] for i in range(0, 512, 32)])
    nll = torch.nn.functional.cross_entropy(logits.double(), text[1:513])
    assert ppl["perplexity"] == pytest.approx(math.exp(float(nll)), rel=1e-4)
    lo, hi = ppl["ci95"]
    assert lo < ppl["perplexity"] < hi and ppl["windows"] == 16 and ppl["tokens"] == 512


def test_sliding_windows_score_the_same_characters_at_every_length(model):
    a = ev.window_losses(model, 16, mode="sliding", tokens=256)
    b = ev.window_losses(model, 32, mode="sliding", tokens=256)
    assert a.shape == (64, 4) and b.shape == (32, 8)  # strides L/4 = 4 and 8, 256 scored each
    # A model with no attention output predicts each character from the previous one alone,
    # so its losses are equal at both lengths exactly when the same characters are scored.
    unigram = TinyGPT(ModelConfig(plan="nope", d_model=32, n_layers=1, n_heads=4, train_len=32))
    torch.nn.init.zeros_(unigram.blocks[0].attn.o_proj.weight)
    la = ev.window_losses(unigram.eval(), 16, mode="sliding", tokens=256).flatten()
    lb = ev.window_losses(unigram.eval(), 32, mode="sliding", tokens=256).flatten()
    torch.testing.assert_close(la, lb)
    # while non-overlapping windows of a different length would not: a shifted start differs
    shifted = ev.window_losses(unigram.eval(), 16, tokens=256).flatten()
    assert not torch.allclose(la, shifted)


def test_window_losses_takes_one_id_row_per_window(model):
    n = 512 // 32
    same = torch.arange(32).expand(n, 32)
    torch.testing.assert_close(
        ev.window_losses(model, 32, tokens=512, positions=same),
        ev.window_losses(model, 32, tokens=512),
    )
    # RoPE is relative: only the first window's ids change (spread out), so only it changes
    spread = same.clone()
    spread[0] = torch.arange(32) * 3
    changed = ev.window_losses(model, 32, tokens=512, positions=spread)
    plain = ev.window_losses(model, 32, tokens=512)
    assert not torch.allclose(changed[0], plain[0])
    torch.testing.assert_close(changed[1:], plain[1:])
    with pytest.raises(ValueError, match="positions must give ids"):
        ev.window_losses(model, 32, tokens=512, positions=torch.arange(31))


def test_band_losses(model):
    losses = torch.tensor([[1.0, 2.0, 3.0, 4.0], [1.0, 4.0, 3.0, 8.0]], dtype=torch.float64)
    bands = ev.band_losses(losses, [(0, 2), (2, 4)])
    assert bands["0-2"]["loss"] == pytest.approx(2.0) and bands["2-4"]["loss"] == pytest.approx(4.5)
    lo, hi = bands["2-4"]["ci95"]
    assert 3.5 <= lo <= 4.5 <= hi <= 5.5  # two windows: band means 3.5 and 5.5
    with pytest.raises(ValueError, match="bands must lie within"):
        ev.band_losses(losses, [(0, 5)])


def test_context_losses_score_the_same_characters_with_doubling_context(model):
    out = ev.context_losses(model, tokens=1024)
    assert sorted(out) == [1, 2, 4, 8, 16]  # up to half the model's training length, 32
    assert all(v.shape == (1024,) and v.dtype == torch.float64 for v in out.values())
    # entry c is window_losses' sliding mode with windows of 2c every c
    sliding = ev.window_losses(model, 16, mode="sliding", stride=8, tokens=1024)
    torch.testing.assert_close(out[8], sliding.flatten())
    with pytest.raises(ValueError, match="length"):
        ev.context_losses(model, 1024)


def _gains(last: int, chars: int = 65536, seed: int = 0, late: float = 0.0):
    """Character losses for c = 1 .. 32: 0.2 nats lower at each doubling up to ``last`` and
    flat after it (``late`` more at 32), with per-character noise of 1 nat shared across c
    (the same characters) and 0.1 of its own."""
    g = torch.Generator().manual_seed(seed)
    shared = torch.randn(chars, generator=g, dtype=torch.float64)
    out = {}
    for i, c in enumerate((1, 2, 4, 8, 16, 32)):
        own = 0.1 * torch.randn(chars, generator=g, dtype=torch.float64)
        out[c] = 3.0 - 0.2 * min(i, (1, 2, 4, 8, 16, 32).index(last)) + shared + own
    out[32] = out[32] - late
    return out


@pytest.mark.parametrize("last", [2, 4, 16, 32])
def test_context_used_is_the_farthest_doubling_that_still_helps(last):
    out = ev.context_used(_gains(last))
    assert out["context_used"] == last
    assert set(out["loss"]) == {"1-1", "2-3", "4-7", "8-15", "16-31", "32-63"}
    assert out["tokens"] == 65536 and out["blocks"] == 256
    assert out["gain"][str(last)]["ci95"][0] > 0
    assert out["gain"][str(last)]["loss"] == pytest.approx(0.2, abs=0.01)


def test_context_used_counts_only_a_gain_beyond_the_interval():
    assert ev.context_used(_gains(1))["context_used"] == 0  # no doubling helps
    # at 65,536 characters a gain of 0.003 nats at 32 shows (about 5 standard errors);
    # one of 0.0005 (under one) does not
    assert ev.context_used(_gains(1, late=0.003))["context_used"] == 32
    assert ev.context_used(_gains(1, late=0.0005))["context_used"] == 0
    with pytest.raises(ValueError, match="same characters"):
        ev.context_used({1: torch.zeros(1024), 2: torch.zeros(1000)})
    with pytest.raises(ValueError, match="at least two context sizes"):
        ev.context_used({1: torch.zeros(1024)})


# --- retrieval and the effective length ------------------------------------------------------


def test_retrieval_counts_and_wilson(model):
    out = ev.needle_outcomes(model, [8, 16], samples=8)
    assert set(out) == {8, 16} and out[8].dtype == torch.bool and out[8].shape == (8,)
    table = ev.retrieval({8: torch.tensor([True] * 3 + [False] * 5)})
    assert table[8]["successes"] == 3 and table[8]["trials"] == 8
    assert table[8]["accuracy"] == 0.375
    assert table[8]["ci95"] == [round(x, 4) for x in ev.wilson_interval(3, 8)]
    again = ev.needle_outcomes(model, [8], samples=8)[8]
    assert torch.equal(again, out[8]) and ev.retrieval({8: again})[8]["trials"] == 8


class _Copier(TinyGPT):
    """A stand-in model whose last prediction is a rule, not a network: the value of the
    needle whose key matches the query (``"key"``), or of the first needle (``"first"``)."""

    def __init__(self, rule):
        super().__init__(ModelConfig(plan="rope", **SMALL))
        self.rule = rule

    def forward(self, idx, positions=None, targets=None):
        from pecourse.lab.data import VOCAB_SIZE, encode

        cue = int(encode("@")[0])
        logits = torch.zeros(*idx.shape, VOCAB_SIZE)
        for b, row in enumerate(idx.tolist()):
            needles = [i for i in range(len(row) - 2) if row[i] == cue]
            if self.rule == "key":
                needles = [i for i in needles if row[i + 1] == row[-1]]
            logits[b, -1, row[needles[0] + 2]] = 1.0
        return logits, None


def test_multikey_outcomes_tell_key_matching_from_copying_the_first_cue():
    key, first = _Copier("key").eval(), _Copier("first").eval()
    for keys in (1, 2, 4):
        ranks = ev.multikey_ranks([16, 48], keys=keys, samples=64)
        right = ev.multikey_outcomes(key, [16, 48], keys=keys, samples=64)
        naive = ev.multikey_outcomes(first, [16, 48], keys=keys, samples=64)
        for d in (16, 48):
            assert right[d].all()  # matching the key solves it with any number of distractors
            assert naive[d][ranks[d]["first"]].all()  # the first cue is right when it is the target
            if keys == 1:
                assert ranks[d]["first"].all() and ranks[d]["nearest"].all() and naive[d].all()
            if keys == 2:
                assert torch.equal(ranks[d]["first"], ~ranks[d]["nearest"])  # one or the other
    # with distractors, copying the first cue is right only when a distractor shares the value
    assert ev.retrieval(naive)[16]["accuracy"] < 0.3


def test_multikey_length_does_not_depend_on_the_keys(model):
    assert ev.multikey_length(16) == 64 and ev.multikey_length(192) == 208
    out = ev.multikey_outcomes(model, [16], keys=8, samples=4)
    assert out[16].shape == (4,) and out[16].dtype == torch.bool
    with pytest.raises(ValueError, match="distance=5 leaves room"):
        ev.multikey_outcomes(model, [5], keys=10, length=33, samples=2)


def _outcomes(rates, n=256):
    """Deterministic outcomes with exactly rate * n successes at each distance."""
    return {d: torch.arange(n) < round(r * n) for d, r in rates.items()}


def test_effective_length_interval_is_tight_when_the_drop_is_sharp():
    res = ev.effective_length_interval(_outcomes({8: 1.0, 16: 0.95, 32: 0.9, 64: 0.05}))
    assert res == {"effective": 32, "ci95": [32, 32], "threshold": 0.5}


def test_effective_length_interval_spans_a_distance_near_the_threshold():
    # 0.48 at 32 with 256 samples: the Wilson interval is about [0.42, 0.54], so whether 32
    # counts is a coin toss and the interval must reach both 16 and 32
    res = ev.effective_length_interval(_outcomes({8: 1.0, 16: 0.9, 32: 0.48, 64: 0.0}))
    assert res["effective"] == 16 and res["ci95"] == [16, 32]
    # and a failure at the first distance gives 0
    assert ev.effective_length_interval(_outcomes({8: 0.1, 16: 0.9}))["ci95"] == [0, 0]


def test_protocol_refusals(model):
    with pytest.raises(ValueError, match="tokens"):
        ev.window_losses(model, 64, tokens=10**6)
    with pytest.raises(ValueError, match="mode"):
        ev.window_losses(model, 32, mode="strided")
    with pytest.raises(ValueError, match="outcomes"):
        ev.effective_length_interval({})
    with pytest.raises(ValueError, match="losses must be"):
        ev.perplexity_interval(torch.zeros(3))
    assert ev.sliding_stride(512) == 128 and ev.sliding_stride(2) == 1
    assert ev.PROTOCOL["eval_tokens"] == 65536 and ev.RETRIEVAL_SAMPLES >= 256
