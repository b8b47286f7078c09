"""What the studies measure of one model, on small budgets at seed 0 (the shipped checkpoints):
the code path and the shape of each measurement (the chapters' numbers come from the full
protocol, in pecourse/lab/results)."""

import json

import pytest

from pecourse.lab import evaluate as ev
from pecourse.lab import studies
from pecourse.lab.model import load_checkpoint
from pecourse.lab.results import recorded


def test_the_two_rope_base_models_straddle_the_bound():
    # The rope_base study's premise: one shipped model below Men et al.'s bound, one above.
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
    assert recorded("rope_base")["bound"] == round(bound, 1)


def test_extrapolation_leaves_a_learned_table_out_past_its_rows():
    res = studies.extrapolation_seeds(
        seeds=(0,), models=("learned", "alibi"), lengths=(64, 128), tokens=1024
    )
    rows = {r["model"]: r for r in res["rows"]}
    assert rows["learned"]["128"] is None and rows["learned"]["64"]["perplexity"] > 1
    assert "128" not in res["summary"]["learned"] and "128" in res["summary"]["alibi"]
    lo, hi = rows["alibi"]["128"]["ci95"]
    assert lo < rows["alibi"]["128"]["perplexity"] < hi


def test_loss_by_position_bands_follow_the_cuts():
    res = studies.loss_by_position(
        seeds=(0,), models=("rope",), length=96, cuts=(32, 64), tokens=960
    )
    row = res["rows"][0]
    assert set(row["bands"]) == {"0-32", "32-64", "64-96"} and len(row["curve"]) == 96
    assert row["windows"] == 10
    assert json.loads(json.dumps(res)) == res
    with pytest.raises(ValueError, match="cuts"):
        studies.loss_by_position(seeds=(0,), models=("rope",), length=64, cuts=(96,), tokens=640)


def test_position_shift_moves_sinusoidal_and_not_rope():
    # 32 windows of 64: RoPE's loss moves by float rounding only (measured: about 1e-5 nats for
    # the worst character), the sinusoidal model's by tenths of a nat
    res = studies.position_shift(seeds=(0,), shifts=(10_000,), tokens=2048)
    rows = {r["model"]: r["paired"] for r in res["rows"]}
    assert rows["rope"]["0"]["max_abs"] == 0.0  # the reference against itself
    assert rows["rope"]["10000"]["max_abs"] < 1e-4
    assert max(map(abs, rows["rope"]["10000"]["ci95"])) < 1e-6
    assert rows["sinusoidal"]["10000"]["ci95"][0] > 0.1


def test_scaling_mistakes_pair_each_mistake_with_the_correct_model():
    res = studies.scaling_mistakes(seeds=(0,), factor=2.0, longest=256, tokens=512)
    row = res["rows"][0]
    assert [t["applied"] for t in row["temperature"]] == ["never", "once", "twice"]
    once = row["temperature"][1]
    assert set(once) == {"applied", "attention_factor", "128", "256"}  # extended, longest
    assert once["128"]["loss_minus_once"] == {"mean": 0.0, "ci95": [0.0, 0.0]}
    never, twice = row["temperature"][0], row["temperature"][2]
    assert never["attention_factor"] == 1.0 < once["attention_factor"] < twice["attention_factor"]
    # a stale table after 256 characters at factor 2 runs a 64-window at 2 * 256 / 64 - 1 = 7
    assert row["stale_dynamic"]["effective_factor"] == 7.0 and "64" in row["stale_dynamic"]


def test_rope_base_reads_each_models_base_and_context():
    res = studies.rope_base(seeds=(0,), tokens=1024)
    rows = {r["model"]: r for r in res["rows"]}
    assert rows["rope_base_low"]["base"] == 100.0 and rows["rope"]["base"] == 10_000.0
    assert all("64" in r and "context_used" in r for r in rows.values())
    assert res["bound"] > 100.0


def test_needle_grid_measures_only_the_distances_that_fit():
    model = load_checkpoint("rope_passkey")
    grid = ev.needle_grid(model, (32, 64), (16, 48), key_len=2, samples=2)
    assert set(grid["32"]) == {"16"} and set(grid["64"]) == {"16", "48"}  # 48 + key + 2 > 32
    assert all(c["trials"] == 2 for cells in grid.values() for c in cells.values())


def test_multikey_splits_each_cell_by_where_the_target_lies():
    cells = ev.multikey_cells(load_checkpoint("t5_passkey"), (1, 2), (16,), samples=8)
    for k in ("1", "2"):
        got = [cells[s][k]["16"] for s in ("accuracy", "when_first", "when_nearest")]
        trials = [c["trials"] if c else 0 for c in got]
        successes = [c["successes"] if c else 0 for c in got]
        if k == "1":  # one needle is both the first and the nearest
            assert trials == [8, 8, 8] and successes[0] == successes[1] == successes[2]
        else:  # with two, the target is one or the other
            assert trials[1] + trials[2] == 8 and successes[1] + successes[2] == successes[0]
