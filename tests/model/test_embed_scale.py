"""ModelConfig.embed_scale: one token-embedding setup imposed on any scheme (chapter 06's control)."""

import math

import pytest
import torch

from pecourse.lab.model import ModelConfig, TinyGPT


@pytest.mark.parametrize(
    "plan, setup, scaled",
    [
        ("sinusoidal", "scheme", True),  # Vaswani et al.'s convention, the scheme's own
        ("rope", "scheme", False),
        ("rope", "sqrt_d", True),
        ("learned", "sqrt_d", True),
        ("sinusoidal", "none", False),
    ],
)
def test_embed_scale_sets_the_scale_and_the_init(plan, setup, scaled):
    torch.manual_seed(0)
    model = TinyGPT(ModelConfig(plan=plan, embed_scale=setup, d_model=64))
    assert model.config.scales_embeddings() is scaled
    std = float(model.tok_emb.weight.std())
    assert std == pytest.approx(64**-0.5 if scaled else 0.02, rel=0.1)
    # the forward pass multiplies the token vectors by √d exactly when the setup says so
    idx = torch.randint(0, model.config.vocab_size, (1, 8))
    seen, embed = {}, model.input_scheme.embed

    def spy(hidden, positions):
        seen["hidden"] = hidden
        return embed(hidden, positions)

    model.input_scheme.embed = spy
    model(idx)
    factor = math.sqrt(64) if scaled else 1.0
    torch.testing.assert_close(seen["hidden"], model.tok_emb(idx) * factor)


def test_embed_scale_refuses_other_values_and_round_trips():
    with pytest.raises(ValueError, match="embed_scale"):
        ModelConfig(embed_scale="sqrt")
    cfg = ModelConfig(plan="alibi", embed_scale="sqrt_d")
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert ModelConfig.from_dict({"plan": "alibi"}).embed_scale == "scheme"  # older checkpoints
