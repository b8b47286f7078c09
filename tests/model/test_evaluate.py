"""Evaluation: window losses at several lengths, needles, effective context, RoPE scaling at
test time."""

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
    for n in (16, 64):  # an untrained model predicts close to uniformly over 83 symbols
        assert 60 < math.exp(ev.window_losses(rope_model, n, tokens=512).mean()) < 110
    sliding = ev.window_losses(rope_model, 64, mode="sliding", stride=16, tokens=512)
    assert sliding.shape == (32, 16) and torch.isfinite(sliding).all()


def test_learned_table_refuses_longer_evaluation():
    model = TinyGPT(ModelConfig(plan="learned", **SMALL)).eval()
    ev.window_losses(model, 32, tokens=256)
    with pytest.raises(ValueError, match="max_positions=32"):
        ev.window_losses(model, 64, tokens=256)


def test_needle_outcomes_and_effective_context(rope_model):
    got = ev.needle_outcomes(rope_model, [8, 16], samples=4)
    assert set(got) == {8, 16} and all(v.shape == (4,) for v in got.values())
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
        ev.window_losses("rope", 64)
