"""Evaluation: perplexity by length, needles, effective context, RoPE scaling at test time."""

import math

import pytest
import torch

from pecourse.lab import evaluate as ev
from pecourse.lab.model import ModelConfig, TinyGPT

SMALL = dict(d_model=32, n_layers=2, n_heads=4, train_len=32)


@pytest.fixture(scope="module")
def rope_model():
    torch.manual_seed(0)
    return TinyGPT(ModelConfig(plan="rope", **SMALL)).eval()


def test_untrained_model_is_near_uniform(rope_model):
    ppl = ev.perplexity_by_length(rope_model, [16, 64], tokens=512)
    assert set(ppl) == {16, 64}
    for v in ppl.values():  # an untrained model predicts close to uniformly over 83 symbols
        assert 60 < v < 110
    sliding = ev.perplexity_by_length(rope_model, [64], mode="sliding", stride=16, tokens=512)
    assert math.isfinite(sliding[64])


def test_learned_table_refuses_longer_evaluation():
    model = TinyGPT(ModelConfig(plan="learned", **SMALL)).eval()
    ev.perplexity_by_length(model, [32], tokens=256)
    with pytest.raises(ValueError, match="max_positions=32"):
        ev.perplexity_by_length(model, [64], tokens=256)


def test_loss_by_position_shape(rope_model):
    losses = ev.loss_by_position(rope_model, 16, tokens=256)
    assert losses.shape == (16,) and torch.isfinite(losses).all()


def test_needle_accuracy_and_effective_context(rope_model):
    acc = ev.needle_accuracy(rope_model, [8, 16], samples=4)
    assert set(acc) == {8, 16} and all(0 <= a <= 1 for a in acc.values())
    assert ev.effective_context_length({8: 1.0, 16: 0.9, 32: 0.2, 64: 0.8}) == 16
    assert ev.effective_context_length({8: 0.1, 16: 0.9}) == 0


def test_scale_rope_changes_the_model_not_the_original(rope_model):
    x = torch.randint(0, 80, (1, 48))
    before = rope_model(x)[0]
    for method in ("linear", "ntk", "yarn", "dynamic"):
        scaled = ev.scale_rope(rope_model, method, 4.0)
        assert scaled.blocks[0].attn.scheme.scaling == method
        after = scaled(x)[0]
        if method != "dynamic":  # dynamic NTK is the identity up to the original length... 48 > 32
            assert not torch.allclose(before, after)
    assert torch.equal(rope_model(x)[0], before)
    assert rope_model.blocks[0].attn.scheme.scaling == "default"


def test_scale_rope_refusals(rope_model):
    with pytest.raises(ValueError, match="method"):
        ev.scale_rope(rope_model, "stretch", 2.0)
    with pytest.raises(ValueError, match="factor"):
        ev.scale_rope(rope_model, "linear", 0.5)
    with pytest.raises(ValueError, match="no RoPE layers"):
        ev.scale_rope(TinyGPT(ModelConfig(plan="alibi", **SMALL)), "linear", 2.0)
    with pytest.raises(TypeError, match="model"):
        ev.perplexity_by_length("rope", [64])
