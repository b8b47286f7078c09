"""Experiments run from the shipped checkpoints and say what they show."""

import json
import time
from pathlib import Path

import pytest

from pecourse import experiments as ex


def test_the_two_rope_base_models_straddle_the_bound():
    # The experiment's premise: one shipped model below Men et al.'s bound, one above.
    import torch

    from pecourse.derivations import rope_base_lower_bound
    from pecourse.model import checkpoint_info

    cfg = checkpoint_info("rope")["config"]
    head_dim, length = cfg["d_model"] // cfg["n_heads"], cfg["train_len"]
    bound = rope_base_lower_bound(length, head_dim)
    i = torch.arange(0, head_dim, 2, dtype=torch.float64)
    m = torch.arange(0, length + 1, dtype=torch.float64)[:, None]
    assert torch.cos(m * bound ** (-i / head_dim)).sum(-1).min() >= 0
    low = checkpoint_info("rope_base_low")["config"]["position_options"]["rope"]["base"]
    high = cfg["position_options"].get("rope", {}).get("base", 10000.0)
    assert low < bound < high


def test_extrapolation_table_and_learned_is_unavailable():
    start = time.time()
    res = ex.extrapolation()
    elapsed = time.time() - start
    rows = {r["model"]: r for r in res.rows}
    assert set(rows) == set(ex.EXTRAPOLATION_SET)
    assert rows["learned"][128] is None and rows["learned"][64] is not None
    assert "max_positions=64" in res.text
    assert rows["alibi"][512] < 1.2 * rows["alibi"][64]  # ALiBi extrapolates
    assert rows["sinusoidal"][512] > 1.5 * rows["sinusoidal"][64]  # sinusoidal does not
    assert res.figure is not None and "n/a" in res.table()
    assert elapsed < 120  # well under 30 s on two idle cores


# Each experiment end to end on a small budget: every model, the code path and the report
# (the chapters' numbers come from the full budgets, recorded in pecourse/results).
SMALL = {
    "loss_by_position": dict(tokens=512),
    "effective_context": dict(distances=(8, 96), lengths=(64, 256), samples=4),
    "rope_scaling": dict(lengths=(64, 256), tokens=512, samples=4),
    "augmentation": dict(lengths=(64, 256), tokens=512),
    "rope_base": dict(distances=(8, 56), samples=4),
    "cope_tasks": dict(lengths=(64, 128), samples=8),
    "nope_irope": dict(lengths=(64, 256), tokens=512),
}


def test_every_experiment_has_a_small_budget():
    assert set(SMALL) == set(ex.EXPERIMENTS) - {"extrapolation"}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_experiment_runs(name):
    """On a small budget, a fresh run has the recording's rows (models) and a subset of its
    columns (fewer lengths, distances or samples)."""
    res = ex.EXPERIMENTS[name](**SMALL[name])
    assert res.rows and res.text and res.figure is not None
    assert res.to_dict()["name"] == name
    record = ex.recorded(name)
    assert [r.get("model") for r in res.rows] == [r.get("model") for r in record.rows]
    for fresh, recorded in zip(res.rows, record.rows):
        assert set(fresh) <= set(recorded), set(fresh) - set(recorded)


def test_recordings_load_one_way_with_integer_lengths():
    from pecourse.results import recorded, recordings

    assert set(ex.EXPERIMENTS) <= set(recordings())  # studies keep recordings there too
    for name in ex.EXPERIMENTS:
        res = recorded(name)
        assert res.name == name and res.rows and res.text
        raw = json.loads((Path(ex.__file__).parent / "results" / f"{name}.json").read_text())
        assert json.loads(json.dumps(res.to_dict())) == raw  # nothing lost or added
    lengths = [k for k in recorded("extrapolation").rows[0] if k != "model"]
    assert lengths == [64, 128, 256, 512]  # ints, as a fresh run's columns
    with pytest.raises(ValueError, match="recorded experiments"):
        recorded("no_such_experiment")
