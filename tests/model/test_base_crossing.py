"""The one-head retrieval test behind chapter 16's "does retrieval break at the crossing?"."""

import json
from importlib.resources import files

import pytest
import torch

from pecourse.lab import base_crossing as bc


def test_batch_has_one_matching_key_at_the_stated_distance():
    task = bc.retrieval_batch(64, generator=torch.Generator().manual_seed(0))
    assert task.keys.shape == task.payloads.shape == (64, 63)
    for row in range(64):
        keys = task.keys[row]
        assert len(set(keys.tolist())) == 63  # distinct, so exactly one key matches the query
        source = 63 - int(task.distance[row])
        assert int((keys == task.query_key[row]).nonzero()) == source
        assert task.target[row] == task.payloads[row, source]
    assert 1 <= int(task.distance.min()) and int(task.distance.max()) <= 63


def test_batch_refuses_too_few_keys():
    with pytest.raises(ValueError, match="num_keys"):
        bc.retrieval_batch(4, length=64, num_keys=10)


def test_scores_depend_on_the_distance_not_on_where_the_pair_sits():
    # RoPE inside the head: the same key, the same distance from the query, scores the same at
    # any absolute place in the sequence (every key slot holds that one key here).
    torch.manual_seed(0)
    model = bc.OneHeadRetriever(300.0)
    keys = torch.full((1, 63), 5)
    scores = model.scores(keys, torch.tensor([5]))[0]  # distance 63 - j for slot j
    reference = bc.OneHeadRetriever(300.0)
    reference.load_state_dict(model.state_dict())
    short = reference.scores(torch.full((1, 10), 5), torch.tensor([5]))[0]  # a 10-key sequence
    torch.testing.assert_close(scores[-10:], short)


def test_training_is_deterministic_per_seed():
    # The recording must be reproducible: the seed fixes initialisation and data, and matters.
    a_model, a = bc.train_retriever(10_000.0, 0, steps=5)
    _, b = bc.train_retriever(10_000.0, 0, steps=5)
    _, c = bc.train_retriever(10_000.0, 1, steps=5)
    assert a == b and a != c
    accuracy, count = bc.accuracy_by_distance(a_model, samples=256)
    assert torch.isnan(accuracy[0]) and int(count.sum()) == 256


def test_recording_matches_the_code_that_writes_it():
    recording = json.loads(
        files("pecourse.lab").joinpath("results", "rope_base_crossing.json").read_text()
    )
    assert recording["bases"] == list(bc.BASES) and recording["seeds"] == list(bc.SEEDS)
    assert len(recording["rows"]) == len(bc.BASES) * len(bc.SEEDS)
    for row in recording["rows"]:
        assert (
            row["accuracy"][0] is None and len(row["accuracy"]) == recording["protocol"]["length"]
        )
        assert sum(row["count"]) == recording["protocol"]["eval_samples"]
        assert all(0.0 <= a <= 1.0 for a in row["accuracy"][1:])


@pytest.mark.slow
def test_one_recorded_run_is_reproduced():
    # Retrains one (base, seed) of the recording with the recorded protocol: 300 steps, about
    # 30 s of CPU (the backward pass dominates), hence slow; it still runs in make test.
    recording = json.loads(
        files("pecourse.lab").joinpath("results", "rope_base_crossing.json").read_text()
    )
    row = next(r for r in recording["rows"] if r["base"] == 300.0 and r["seed"] == 0)
    model, _ = bc.train_retriever(300.0, 0, steps=recording["protocol"]["steps"])
    accuracy, _ = bc.accuracy_by_distance(model)
    recorded = torch.tensor(row["accuracy"][1:], dtype=torch.float64)
    assert (accuracy[1:] - recorded).abs().mean() < 0.02


def test_matching_advantage_is_the_pair_weighted_cosine_sum():
    """With W_K = W_Q the sine terms cancel (the non-matching pairs come in both orders), so the
    head's advantage at m is exactly Σ_i w_i cos(m θ_i): Men et al.'s B_m with trained weights."""
    import math

    import torch

    from pecourse.lab.base_crossing import OneHeadRetriever, matching_advantage

    torch.manual_seed(0)
    model = OneHeadRetriever(100.0)
    model.w_k.weight.data = model.w_q.weight.data.clone()
    out = matching_advantage(model, length=40)
    w = torch.tensor(out["pair_weights"], dtype=torch.float64)
    theta = 100.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    m = torch.arange(40, dtype=torch.float64)[:, None]
    want = (w * torch.cos(m * theta)).sum(-1)
    torch.testing.assert_close(
        torch.tensor(out["advantage"], dtype=torch.float64), want, atol=1e-5, rtol=1e-4
    )
    assert math.isclose(out["advantage"][0], float(w.sum()), rel_tol=1e-5)
    # and an untied head is not: its sine terms move the curve
    model.w_k.weight.data += 0.5 * torch.randn(16, 16)
    out = matching_advantage(model, length=40)
    w = torch.tensor(out["pair_weights"], dtype=torch.float64)
    assert (
        torch.tensor(out["advantage"], dtype=torch.float64) - (w * torch.cos(m * theta)).sum(-1)
    ).abs().max() > 1e-3
