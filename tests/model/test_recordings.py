"""Recordings that can fail: each names the checkpoints it came from, and a slow test
recomputes a part of each under the protocol and finds it inside the recorded interval."""

import pytest
import torch

from pecourse.lab import evaluate as ev
from pecourse.lab import experiments as ex
from pecourse.lab.model import checkpoint_sha256, list_checkpoints, load_checkpoint
from pecourse.lab.results import made_with_this_torch, order, recorded, recordings

#: Recordings measured (at least partly) on shipped checkpoints: they must name them.
FROM_CHECKPOINTS = {
    *ex.EXPERIMENTS,
    "cope_counting",
    "text_extrapolation",
    "imposed_windows",
    "windowed_passkey",
    "nope_anchor",
    "counting_length_generalisation",
    "extrapolation_seeds",
    "retrieval_seeds",
    "augmentation_seeds",
    "extension_seeds",
    "needle_seeds",
    "sliding_seeds",
    "extension_controls",
    "context_use",
}


def test_every_recording_names_the_checkpoints_it_came_from():
    """Fast: a retrained checkpoint whose recordings were not rewritten (``make results``)
    fails here."""
    assert FROM_CHECKPOINTS <= set(recordings())
    shipped = set(list_checkpoints())
    for name in recordings():
        rec = recorded(name)
        hashes = rec.get("checkpoints", {})
        if name in FROM_CHECKPOINTS:
            assert hashes, f"{name} does not record the checkpoints it came from"
            assert isinstance(rec["seeds"], list) and rec["seeds"], name
        for ckpt, digest in hashes.items():
            assert ckpt in shipped, f"{name} was measured on {ckpt}, which is not shipped"
            assert checkpoint_sha256(ckpt) == digest, (
                f"{name} was measured on another {ckpt}: run `make results`"
            )


def test_experiment_recordings_carry_the_protocol():
    for name in ex.EXPERIMENTS:
        rec = recorded(name)
        assert rec["eval_tokens"] >= 65536, name
        assert rec["protocol"]["eval_tokens"] == rec["eval_tokens"]
        assert rec["protocol"]["retrieval_samples"] >= 256, name
        assert "bootstrap" in rec["protocol"]["perplexity_interval"]


def _inside(fresh: dict, kept: dict, key="perplexity", *, record: dict):
    """With the torch that made the recording: the recorded value, inside its interval.
    Another release can draw other samples from the same seed (torch.multinomial changed
    between 2.6 and 2.13: 2.6 lays out other multi-key tasks), and a second sample may fall
    outside the first one's interval; then it must be one the recording cannot tell apart
    from its own (the two intervals overlap)."""
    if not made_with_this_torch(record):
        assert order(fresh, kept) == 0, (fresh, kept)
        return
    lo, hi = kept["ci95"]
    assert lo <= fresh[key] <= hi, (fresh, kept)
    assert fresh[key] == pytest.approx(kept[key], rel=2e-3), (fresh, kept)


def _key_len(model) -> int:
    return model.checkpoint["train"]["task_options"]["key_len"]


def _extrapolation():
    rec = recorded("extrapolation")
    rows = {r["model"]: r for r in rec["rows"]}
    fresh = ev.perplexity_interval(ev.window_losses(load_checkpoint("sinusoidal"), 128))
    _inside(fresh, rows["sinusoidal"]["128"], record=rec)


def _loss_by_position():
    rec = recorded("loss_by_position")
    rows = {r["model"]: r for r in rec["rows"]}
    losses = ev.window_losses(load_checkpoint("rope"), 256)
    _inside(
        ev.band_losses(losses, [(128, 256)])["128-256"],
        rows["rope"]["bands"]["128-256"],
        "loss",
        record=rec,
    )


def _position_shift():
    # the sinusoidal model with every id shifted by 1,000: the paired change of its loss
    rec = recorded("position_shift")
    rows = {r["model"]: r for r in rec["rows"]}
    model = load_checkpoint("sinusoidal")
    base = ev.window_losses(model, 64)
    change = ev.window_losses(model, 64, positions=torch.arange(64) + 1000) - base
    lo, hi = ev.bootstrap_interval(change.mean(1))
    fresh = {"difference": float(change.mean()), "ci95": [lo, hi]}
    _inside(fresh, rows["sinusoidal"]["paired"]["1000"], "difference", record=rec)


def _effective_context():
    rec = recorded("effective_context")
    rows = {r["model"]: r for r in rec["rows"]}
    model = load_checkpoint("rope_passkey")
    out = ev.needle_outcomes(model, [192], key_len=_key_len(model))
    _inside(
        ev.retrieval(out)[192],
        rows["rope"]["retrieval"]["192"],
        "accuracy",
        record=rec,
    )


def _needle_grid():
    # a cell where a longer sequence (the needle no further away) changed RoPE's answer
    rec = recorded("needle_grid")
    rows = {r["model"]: r for r in rec["rows"]}
    model = load_checkpoint("rope_passkey")
    out = ev.needle_outcomes(model, [48], length=256, key_len=_key_len(model))
    _inside(
        ev.retrieval(out)[48],
        rows["rope"]["grid"]["256"]["48"],
        "accuracy",
        record=rec,
    )


def _multikey():
    # T5 with one distractor, the target far back: right mostly when its needle comes first
    rec = recorded("multikey")
    rows = {r["model"]: r for r in rec["rows"]}
    model = load_checkpoint("t5_passkey")
    out = ev.multikey_outcomes(model, [192], keys=2)
    first = ev.multikey_ranks([192], keys=2)[192]["first"]
    _inside(ev.retrieval(out)[192], rows["t5"]["accuracy"]["2"]["192"], "accuracy", record=rec)
    _inside(
        ev.retrieval({192: out[192][first]})[192],
        rows["t5"]["when_first"]["2"]["192"],
        "accuracy",
        record=rec,
    )


def _rope_scaling():
    rec = recorded("rope_scaling")
    rows = {r["model"]: r for r in rec["rows"]}
    n = rec["protocol"]["extended_window"]
    fresh = ev.perplexity_interval(ev.window_losses(load_checkpoint("rope_pi_finetune"), n))
    _inside(fresh, rows["PI + fine-tune"][str(n)], record=rec)


def _augmentation():
    from pecourse.positions.augmentation import randomized_positions

    rec = recorded("augmentation")
    row = next(r for r in rec["rows"] if r["model"] == "rope_randomized" and r["ids"] == "random")
    span, n = rec["protocol"]["augment_len"], 64
    ids = randomized_positions(
        n, span, generator=torch.Generator().manual_seed(n), batch=65536 // n
    )
    fresh = ev.perplexity_interval(
        ev.window_losses(load_checkpoint("rope_randomized"), n, positions=ids)
    )
    _inside(fresh, row[str(n)], record=rec)


def _rope_base():
    rec = recorded("rope_base")
    rows = {r["model"]: r for r in rec["rows"]}
    model = load_checkpoint("rope_base_low_passkey")
    out = ev.needle_outcomes(model, [32], length=64, key_len=_key_len(model))
    _inside(
        ev.retrieval(out)[32],
        rows["rope_base_low"]["retrieval"]["32"],
        "accuracy",
        record=rec,
    )


RECOMPUTE = {
    "extrapolation": _extrapolation,
    "loss_by_position": _loss_by_position,
    "position_shift": _position_shift,
    "effective_context": _effective_context,
    "needle_grid": _needle_grid,
    "multikey": _multikey,
    "rope_scaling": _rope_scaling,
    "augmentation": _augmentation,
    "rope_base": _rope_base,
}


def test_every_experiment_has_a_recompute_check():
    assert set(RECOMPUTE) == set(ex.EXPERIMENTS)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RECOMPUTE))
def test_experiment_recording_recomputes(name):
    """Slow (2-6 s each on a quiet core): one cell of each recording, recomputed under the full
    protocol, lies inside the recorded interval (and matches the recorded value)."""
    RECOMPUTE[name]()
