"""Experiments run from the shipped checkpoints and say what they show."""

import time

import pytest

from pecourse import experiments as ex


def test_rope_base_bound_matches_a_direct_check():
    import torch

    bound = ex.rope_base_bound(16, 64)
    assert 1000 < bound < 10000
    i = torch.arange(0, 16, 2, dtype=torch.float64)
    m = torch.arange(0, 65, dtype=torch.float64)[:, None]
    for base, ok in ((bound * 1.05, True), (bound / 3, False)):
        b = torch.cos(m * base ** (-i / 16)).sum(-1).min()
        assert (b >= 0) == ok
    assert ex.rope_base_bound(16, 256) > bound  # longer contexts need larger bases


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


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in ex.EXPERIMENTS if n != "extrapolation"])
def test_every_experiment_runs(name):
    res = ex.EXPERIMENTS[name]()
    assert res.rows and res.text and res.figure is not None
    assert res.to_dict()["name"] == name
