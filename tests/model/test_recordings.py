"""Recordings that can fail: each names the checkpoints it came from, and a slow test
recomputes a part of each under the protocol and finds it inside the recorded interval."""

import pytest
import torch

from pecourse.lab import evaluate as ev
from pecourse.lab import studies
from pecourse.lab.model import (
    checkpoint_info,
    checkpoint_sha256,
    list_checkpoints,
    load_checkpoint,
)
from pecourse.lab.results import made_with_this_torch, order, recorded, recordings

#: Recordings measured (at least partly) on shipped checkpoints: they must name them.
#: Every study but one reads seed 0 from the shipped checkpoints (grid_width_transfer trains
#: its own one-layer models).
FROM_CHECKPOINTS = set(studies.STUDIES) - {"grid_width_transfer"}


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


def test_text_recordings_score_the_whole_protocol():
    """Every study that scores text reads the protocol's 65,536 validation characters; every one
    that asks for needles asks 256 per cell."""
    for name in FROM_CHECKPOINTS:
        settings = recorded(name)["protocol"]
        if "tokens" in settings:
            assert settings["tokens"] >= ev.EVAL_TOKENS, name
        if "samples" in settings:
            assert settings["samples"] >= ev.RETRIEVAL_SAMPLES, name


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


def _seed0(rec: dict, model: str) -> dict:
    """A study's row of ``model`` at seed 0: the shipped checkpoint."""
    return next(r for r in rec["rows"] if r["model"] == model and r["seed"] == 0)


def _extrapolation_seeds():
    rec = recorded("extrapolation_seeds")
    fresh = ev.perplexity_interval(ev.window_losses(load_checkpoint("sinusoidal"), 128))
    _inside(fresh, _seed0(rec, "sinusoidal")["128"], record=rec)


def _loss_by_position():
    rec = recorded("loss_by_position")
    losses = ev.window_losses(load_checkpoint("rope"), 256)
    _inside(
        ev.band_losses(losses, [(128, 256)])["128-256"],
        _seed0(rec, "rope")["bands"]["128-256"],
        "loss",
        record=rec,
    )


def _position_shift():
    # the sinusoidal model with every id shifted by 1,000: the paired change of its loss
    rec = recorded("position_shift")
    model = load_checkpoint("sinusoidal")
    base = ev.window_losses(model, 64)
    change = ev.window_losses(model, 64, positions=torch.arange(64) + 1000) - base
    lo, hi = ev.bootstrap_interval(change.mean(1))
    fresh = {"difference": float(change.mean()), "ci95": [lo, hi]}
    _inside(fresh, _seed0(rec, "sinusoidal")["paired"]["1000"], "difference", record=rec)


def _sliding_seeds():
    rec = recorded("sliding_seeds")
    fresh = ev.perplexity_interval(ev.window_losses(load_checkpoint("t5"), 256, mode="sliding"))
    _inside(fresh, _seed0(rec, "t5")["sliding"]["256"], record=rec)


def _retrieval_seeds():
    rec = recorded("retrieval_seeds")
    model = load_checkpoint("rope_passkey")
    out = ev.needle_outcomes(model, [192], key_len=_key_len(model))
    _inside(
        ev.retrieval(out)[192],
        _seed0(rec, "rope_passkey")["retrieval"]["192"],
        "accuracy",
        record=rec,
    )


def _needle_seeds():
    # a grid cell where a longer sequence (the needle no further away) changed RoPE's answer,
    # and T5 with one distractor, the target far back: right mostly when its needle comes first
    rec = recorded("needle_seeds")
    model = load_checkpoint("rope_passkey")
    out = ev.needle_outcomes(model, [48], length=256, key_len=_key_len(model))
    kept = _seed0(rec, "rope_passkey")["grid"]["256"]["48"]
    _inside(ev.retrieval(out)[48], kept, "accuracy", record=rec)
    row = _seed0(rec, "t5_passkey")
    out = ev.multikey_outcomes(load_checkpoint("t5_passkey"), [192], keys=2)
    first = ev.multikey_ranks([192], keys=2)[192]["first"]
    _inside(ev.retrieval(out)[192], row["accuracy"]["2"]["192"], "accuracy", record=rec)
    fresh = ev.retrieval({192: out[192][first]})[192]
    _inside(fresh, row["when_first"]["2"]["192"], "accuracy", record=rec)


def _augmentation_seeds():
    from pecourse.positions.augmentation import randomized_positions

    rec = recorded("augmentation_seeds")
    row = _seed0(rec, "rope_randomized")["random_ids"]
    span, n = checkpoint_info("rope_randomized")["train"]["augment_len"], 64
    ids = randomized_positions(
        n, span, generator=torch.Generator().manual_seed(n), batch=65536 // n
    )
    fresh = ev.perplexity_interval(
        ev.window_losses(load_checkpoint("rope_randomized"), n, positions=ids)
    )
    _inside(fresh, row[str(n)], record=rec)


def _scaling_mistakes():
    # YaRN's temperature applied twice, at the extended window: its perplexity
    from pecourse.lab.studies import YARN_BETAS
    from pecourse.positions.rope_scaling import yarn_mscale

    rec = recorded("scaling_mistakes")
    twice = _seed0(rec, "rope")["temperature"][2]
    assert twice["applied"] == "twice"
    factor = rec["protocol"]["factor"]
    model = ev.scale_rope(
        load_checkpoint("rope"),
        "yarn",
        factor,
        attention_factor=yarn_mscale(factor) ** 2,
        **YARN_BETAS,
    )
    fresh = ev.perplexity_interval(ev.window_losses(model, 256))
    _inside(fresh, twice["256"], record=rec)


def _rope_base():
    rec = recorded("rope_base")
    fresh = ev.perplexity_interval(ev.window_losses(load_checkpoint("rope_base_low"), 64))
    _inside(fresh, _seed0(rec, "rope_base_low")["64"], record=rec)


def _table_extension():
    # the shipped table stretched to 128 rows by interpolation, at 128
    rec, model = recorded("table_extension"), load_checkpoint("learned")
    rows = studies._extended_tables(model.input_scheme.table.weight.detach(), (3,))
    fresh = ev.perplexity_interval(
        ev.window_losses(studies._with_table(model, rows["interpolated"]), 128)
    )
    _inside(fresh, _seed0(rec, "learned")["interpolated"]["128"], record=rec)


def _alibi_windows():
    # every head of the shipped ALiBi text model given the steepest slope, at 64
    rec, model = recorded("alibi_windows"), load_checkpoint("alibi")
    for block in model.blocks:
        s = block.attn.scheme.slopes
        block.attn.scheme.slopes = torch.full_like(s, float(s.max()))
    fresh = ev.perplexity_interval(ev.window_losses(model, 64))
    _inside(fresh, _seed0(rec, "alibi")["slope_swap"]["all steepest"], record=rec)


def _t5_far_keys():
    # the shipped T5 model with the buckets past distance 66 masked, at 512
    rec, model = recorded("t5_far_keys"), load_checkpoint("t5")
    with torch.no_grad():
        for block in model.blocks:
            block.attn.scheme.table.weight[27:] = -1e4
    fresh = ev.perplexity_interval(ev.window_losses(model, 512))
    _inside(fresh, _seed0(rec, "t5")["far keys masked"]["512"], record=rec)


RECOMPUTE = {
    "extrapolation_seeds": _extrapolation_seeds,
    "loss_by_position": _loss_by_position,
    "position_shift": _position_shift,
    "sliding_seeds": _sliding_seeds,
    "retrieval_seeds": _retrieval_seeds,
    "needle_seeds": _needle_seeds,
    "augmentation_seeds": _augmentation_seeds,
    "scaling_mistakes": _scaling_mistakes,
    "rope_base": _rope_base,
    "table_extension": _table_extension,
    "alibi_windows": _alibi_windows,
    "t5_far_keys": _t5_far_keys,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RECOMPUTE))
def test_a_recording_recomputes(name):
    """Slow (2-6 s each on a quiet core): one cell of each recording, recomputed under the full
    protocol, lies inside the recorded interval (and matches the recorded value)."""
    RECOMPUTE[name]()


def test_every_text_model_states_the_context_it_uses():
    """Issue 26's rule: a recording that scores a model trained on plain text says how much
    context that model uses (``context_used``), in every row, so no chapter reads a text model's
    perplexity as context use without the number beside it."""
    from pecourse.lab.train import recipe

    scored = 0
    for name, study in studies.STUDIES.items():
        if not isinstance(study, studies.Study):
            continue
        for row in recorded(name)["rows"]:
            if recipe(row["model"])["train"]["data"] == "text":
                scored += 1
                assert isinstance(row.get("context_used"), int), (name, row["model"], row["seed"])
                assert row["context_used"] >= 1, (name, row["model"])
    assert scored >= 100  # the text models of at least a dozen studies, three seeds each


def test_chapter_01_03_07_recordings_agree_with_the_extrapolation_table():
    """table_extension, alibi_windows and t5_far_keys score the same weights as
    extrapolation_seeds (seed 0 shipped, seeds 1-2 the shared store) under the same protocol:
    each model's perplexity at 64 (and T5's at 512) is the one recorded there, seed by seed.
    Their own readings hold together: the old rows kept give the trained perplexity at 64, the
    prior windows are the slopes' (the same at every seed), every window lies in its interval,
    and seed 0's main direction is the shipped table's."""
    table = recorded("extrapolation_seeds")
    ref = {(r["model"], r["seed"]): r for r in table["rows"]}
    ext, win, far = (recorded(n) for n in ("table_extension", "alibi_windows", "t5_far_keys"))
    for rec in (ext, win, far):
        assert rec["seeds"] == [0, 1, 2]
        for row in rec["rows"]:
            assert isinstance(row["context_used"], int) and row["context_used"] >= 1
    for row in ext["rows"]:
        ppl = ref["learned", row["seed"]]["64"]["perplexity"]
        assert row["trained"]["perplexity"] == pytest.approx(ppl, abs=2e-3)
        for label in ("random 3", "random 4", "random 5", "copied"):
            assert row[label]["64"] == row["trained"]
            assert row[label]["rise"] == pytest.approx(
                row[label]["128"]["perplexity"] / ppl, abs=2e-3
            )
    share = studies._dial_share(load_checkpoint("learned").input_scheme.table.weight.detach())
    assert _seed0(ext, "learned")["dial_share"] == pytest.approx(share, abs=1e-4)
    moved, again = _seed0(ext, "learned")["moved"], studies._rows_moved(load_checkpoint("learned"))
    assert moved["net"] == pytest.approx(again["net"], abs=2e-4)
    assert moved["corr_moved_dial"] == pytest.approx(again["corr_moved_dial"], abs=2e-4)
    table = load_checkpoint("learned").input_scheme.table.weight
    assert _seed0(ext, "learned")["similarity"] == pytest.approx(
        studies._table_similarity(table), abs=2e-4
    )
    for row in ext["rows"]:  # the rebuilt start is each run's own (another seed's is ~0)
        assert row["moved"]["start_cosine"] > 0.15
    priors = None
    for row in win["rows"]:
        assert row["slope_swap"]["as trained"]["perplexity"] == pytest.approx(
            ref["alibi", row["seed"]]["64"]["perplexity"], abs=2e-3
        )
        mine = [(h, c["prior_0.5"], c["prior_0.9"]) for h, c in row["heads"].items()]
        assert priors in (None, mine)
        priors = mine
        for cell in row["heads"].values():
            for layer in range(4):
                for w in cell[f"layer {layer}"].values():
                    assert w["ci95"][0] <= w["distance"] <= w["ci95"][1]
    assert [p[2] for p in priors] == [9, 36, 131, 189]
    for row in far["rows"]:
        for n in ("64", "512"):
            assert row[n]["perplexity"] == pytest.approx(
                ref["t5", row["seed"]][n]["perplexity"], abs=2e-3
            )
        assert row["last_trained_bucket"] == 26


def test_table_finetune_recording_continues_table_extensions_models():
    """Each seed's fine-tunes start from the same learned model table_extension measured (its
    context use at 64 is the same number), every fine-tuned model states its own context use at
    128 and its loss curve over the recorded steps, and the summary is the rows'."""
    tuned, ext = recorded("table_finetune"), recorded("table_extension")
    assert tuned["seeds"] == ext["seeds"] == [0, 1, 2]
    steps = tuned["protocol"]["train"]["steps"]
    before = {r["seed"]: r for r in ext["rows"]}
    for row in tuned["rows"]:
        assert row["context_used"] == before[row["seed"]]["context_used"]
        for label in ("random 3", "copied", "interpolated"):
            cell = row[label]
            assert isinstance(cell["context_used"], int) and cell["context_used"] >= 1
            assert cell["loss_curve"][-1][0] == steps - 1
            assert cell["128"]["tokens"] == cell["64"]["tokens"] == tuned["eval_tokens"]
    for label in ("random 3", "copied", "interpolated"):
        assert tuned["summary"]["learned"][label]["128"]["per_seed"] == [
            r[label]["128"]["perplexity"] for r in tuned["rows"]
        ]
