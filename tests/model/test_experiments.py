"""Experiments measured on the shipped checkpoints: numbers only, under one protocol."""

import json

import pytest

from pecourse.lab import evaluate as ev
from pecourse.lab import experiments as ex
from pecourse.lab.results import recorded, recordings


def test_the_two_rope_base_models_straddle_the_bound():
    # The experiment's premise: one shipped model below Men et al.'s bound, one above.
    import torch

    from pecourse.derivations import rope_base_lower_bound
    from pecourse.lab.model import checkpoint_info

    cfg = checkpoint_info("rope")["config"]
    head_dim, length = cfg["d_model"] // cfg["n_heads"], cfg["train_len"]
    bound = rope_base_lower_bound(length, head_dim)
    i = torch.arange(0, head_dim, 2, dtype=torch.float64)
    m = torch.arange(0, length + 1, dtype=torch.float64)[:, None]
    assert torch.cos(m * bound ** (-i / head_dim)).sum(-1).min() >= 0
    low = checkpoint_info("rope_base_low")["config"]["position_options"]["rope"]["base"]
    high = cfg["position_options"].get("rope", {}).get("base", 10000.0)
    assert low < bound < high


# Each experiment end to end on a small budget: every model, the code path and the shape of
# the recording (the chapters' numbers come from the full protocol, in pecourse/lab/results).
SMALL = {
    "extrapolation": dict(lengths=(64, 128), tokens=512),
    "loss_by_position": dict(tokens=512),
    "position_shift": dict(shifts=(0, 100), tokens=512),
    "effective_context": dict(distances=(8, 96), lengths=(64, 256), samples=4, tokens=512),
    "needle_grid": dict(lengths=(64, 128), distances=(16, 96), samples=4),
    "multikey": dict(keys=(1, 2), distances=(16, 96), samples=4),
    "rope_scaling": dict(lengths=(64, 512), tokens=1024, samples=4, distances=(48,)),
    "augmentation": dict(lengths=(64, 256), tokens=512),
    "rope_base": dict(distances=(8, 56), samples=4, tokens=512),
}


def test_every_experiment_has_a_small_budget():
    assert set(SMALL) == set(ex.EXPERIMENTS)


def _keys(obj, prefix=""):
    """Every key path of a nested dict (lists of dicts by position)."""
    out = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.add(prefix + str(k))
            out |= _keys(v, prefix + str(k) + ".")
    elif isinstance(obj, list) and obj and isinstance(obj[0], dict):
        for i, v in enumerate(obj):
            out |= _keys(v, f"{prefix}{i}.")
    return out


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_experiment_runs_and_returns_numbers_only(name):
    """On a small budget a fresh run has the recording's models and a subset of its keys
    (fewer lengths, distances or samples); it is plain JSON with no prose."""
    res = ex.EXPERIMENTS[name](**SMALL[name])
    assert json.loads(json.dumps(res)) == res and "text" not in res
    record = recorded(name)
    assert [r.get("model") for r in res["rows"]] == [r.get("model") for r in record["rows"]]
    fresh, kept = _keys({k: res[k] for k in ("rows", "seeds", "checkpoints")}), _keys(record)
    assert fresh <= kept, sorted(fresh - kept)[:5]
    for key in ("protocol", "seeds", "eval_tokens", "checkpoints", "cpu_seconds", "versions"):
        assert key in res and key in record


def test_extrapolation_reports_learned_as_unavailable_with_the_reason():
    res = ex.extrapolation(lengths=(64, 128), names=("learned", "alibi"), tokens=256)
    rows = {r["model"]: r for r in res["rows"]}
    assert rows["learned"]["128"] is None and rows["learned"]["64"]["perplexity"] > 1
    assert "max_positions=64" in res["unavailable"]["learned"]
    lo, hi = rows["alibi"]["128"]["ci95"]
    assert lo < rows["alibi"]["128"]["perplexity"] < hi


def test_rope_scaling_uses_the_lengths_it_is_given():
    # It used to read the column 256 whatever the lengths; now the bands follow the factor.
    res = ex.rope_scaling(factor=2.0, lengths=(64, 96), tokens=192, samples=2, distances=(8,))
    assert res["protocol"]["extended_window"] == 128
    assert set(res["rows"][0]["bands"]) == {"0-64", "64-96"}
    assert all("256" not in r for r in res["rows"])


def test_recorded_refuses_an_unknown_name():
    assert set(ex.EXPERIMENTS) <= set(recordings())
    with pytest.raises(ValueError, match="recordings"):
        recorded("no_such_experiment")


def test_experiments_record_into_a_folder(tmp_path):
    res = ex.rope_base(distances=(8,), samples=2, tokens=128)
    path = ex.record(res, tmp_path)
    assert json.loads(path.read_text()) == res
    with pytest.raises(ValueError, match="result"):
        ex.record({"name": "nope"}, tmp_path)
    assert ev.PROTOCOL["eval_tokens"] == recorded("extrapolation")["eval_tokens"]


def test_fmt_and_order_read_intervals():
    from pecourse.lab.results import fmt, order

    a = {"perplexity": 4.771, "ci95": [4.70, 4.84]}
    b = {"perplexity": 5.2, "ci95": [4.9, 5.5]}
    c = {"perplexity": 4.8, "ci95": [4.75, 4.95]}
    assert fmt(a) == "4.77 [4.70, 4.84]"
    assert fmt({"accuracy": 0.5, "ci95": [0.44, 0.56]}, digits=3) == "0.500 [0.440, 0.560]"
    assert order(b, a) == 1 and order(a, b) == -1 and order(a, c) == 0
    with pytest.raises(ValueError, match="ci95"):
        fmt({"perplexity": 4.0})
    with pytest.raises(ValueError, match="b must be"):
        order(a, 3)


def test_needle_grid_measures_only_the_distances_that_fit():
    res = ex.needle_grid(names=("rope",), lengths=(32, 64), distances=(16, 48), samples=2)
    grid = res["rows"][0]["grid"]
    assert set(grid["32"]) == {"16"} and set(grid["64"]) == {"16", "48"}  # 48 + key + 2 > 32
    assert all(c["trials"] == 2 for cells in grid.values() for c in cells.values())


def test_multikey_splits_each_cell_by_where_the_target_lies():
    res = ex.multikey(names=("t5",), keys=(1, 2), distances=(16,), samples=8)
    row = res["rows"][0]
    assert row["retrieval_model"] == "t5_passkey" and res["checkpoints"].keys() == {"t5_passkey"}
    for k in ("1", "2"):
        cells = [row[s][k]["16"] for s in ("accuracy", "when_first", "when_nearest")]
        trials = [c["trials"] if c else 0 for c in cells]
        successes = [c["successes"] if c else 0 for c in cells]
        if k == "1":  # one needle is both the first and the nearest
            assert trials == [8, 8, 8] and successes[0] == successes[1] == successes[2]
        else:  # with two, the target is one or the other
            assert trials[1] + trials[2] == 8 and successes[1] + successes[2] == successes[0]


def test_position_shift_moves_sinusoidal_and_not_rope():
    # 32 windows of 64: RoPE's loss moves by float rounding only (measured: about 1e-5 nats for
    # the worst character), the sinusoidal model's by tenths of a nat
    res = ex.position_shift(shifts=(0, 10_000), tokens=2048)
    rows = {r["model"]: r["paired"]["10000"] for r in res["rows"]}
    assert rows["rope"]["max_abs"] < 1e-4 and max(map(abs, rows["rope"]["ci95"])) < 1e-6
    assert rows["sinusoidal"]["ci95"][0] > 0.1
    with pytest.raises(ValueError, match="shifts must start with 0"):
        ex.position_shift(shifts=(100,), tokens=128)
