"""TinyGPT: plans, the fused attention path, checkpoints and clear errors."""

import json

import pytest
import torch

from pecourse.lab.data import VOCAB_SIZE
from pecourse.lab.model import (
    SCHEMES,
    ModelConfig,
    TinyGPT,
    build_scheme,
    input_schemes,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
)

SMALL = dict(d_model=32, n_layers=2, n_heads=4, train_len=32)


@pytest.mark.parametrize(
    "plan", ["nope", "learned", "sinusoidal", "rope", "alibi", "t5", "xpos", "cope", "shaw"]
)
def test_every_scheme_builds_and_fused_path_matches_step_by_step(plan):
    torch.manual_seed(0)
    model = TinyGPT(ModelConfig(plan=plan, **SMALL))
    for p in model.parameters():  # make every part matter (CoPE's table starts at zero)
        torch.nn.init.normal_(p, std=0.2)
    x = torch.randint(0, 80, (2, 24))
    pos = torch.randint(0, 32, (2, 24)).sort(-1).values
    fused = model(x, pos)[0]
    plain = model.set_fused(False)(x, pos)[0]
    torch.testing.assert_close(fused, plain, atol=1e-5, rtol=1e-5)


def test_plan_places_schemes_per_layer():
    model = TinyGPT(ModelConfig(plan="rope,rope,rope,nope", **{**SMALL, "n_layers": 4}))
    names = [type(b.attn.scheme).__name__ for b in model.blocks]
    assert names == ["RoPE", "RoPE", "RoPE", "NoPE"]
    learned = TinyGPT(ModelConfig(plan="learned", **SMALL))
    assert type(learned.input_scheme).__name__ == "LearnedAbsolute"
    assert all(type(b.attn.scheme).__name__ == "NoPE" for b in learned.blocks)


def test_an_input_scheme_is_known_by_its_places_not_its_name(monkeypatch):
    # A newly registered input scheme is applied once at the embedding, as "learned" is; if
    # the model knew input schemes by name it would sit unused inside the attention layers.
    monkeypatch.setitem(SCHEMES, "table", SCHEMES["learned"])
    assert set(input_schemes()) == {"learned", "sinusoidal", "table"}
    model = TinyGPT(ModelConfig(plan="table", **SMALL))
    assert type(model.input_scheme).__name__ == "LearnedAbsolute"
    assert all(type(b.attn.scheme).__name__ == "NoPE" for b in model.blocks)
    with pytest.raises(ValueError, match="input scheme"):
        ModelConfig(plan="table,rope", **SMALL)


def test_position_options_reach_the_scheme():
    cfg = ModelConfig(plan="rope", position_options={"rope": {"base": 500.0}}, **SMALL)
    assert TinyGPT(cfg).blocks[0].attn.scheme.base == 500.0
    assert (
        build_scheme("rope", d_model=32, num_heads=4, scaling="linear", factor=2.0).scaling
        == "linear"
    )


def test_unknown_scheme_and_bad_plans_are_named():
    with pytest.raises(ValueError, match="scheme must be one of"):
        build_scheme("rotary")
    with pytest.raises(ValueError, match="plan"):
        ModelConfig(plan="rope,banana", **SMALL)
    with pytest.raises(ValueError, match="n_layers"):
        ModelConfig(plan="rope,nope,rope", **SMALL)
    with pytest.raises(ValueError, match="input scheme"):
        ModelConfig(plan="learned,rope", **SMALL)
    with pytest.raises(TypeError, match="position_options for scheme 'alibi'"):
        TinyGPT(ModelConfig(plan="alibi", position_options={"alibi": {"base": 3}}, **SMALL))


def test_sequence_longer_than_learned_table_is_refused():
    model = TinyGPT(ModelConfig(plan="learned", **SMALL))
    model(torch.zeros(1, 32, dtype=torch.long))
    with pytest.raises(ValueError, match="max_positions=32"):
        model(torch.zeros(1, 33, dtype=torch.long))


def test_config_json_round_trip():
    cfg = ModelConfig(plan="rope", position_options={"rope": {"base": 100.0}}, **SMALL)
    assert ModelConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ValueError, match="unknown fields"):
        ModelConfig.from_dict({**cfg.to_dict(), "dropout": 0.1})


def test_checkpoint_round_trips_exactly(tmp_path):
    torch.manual_seed(1)
    model = TinyGPT(ModelConfig(plan="t5", **SMALL)).eval()
    save_checkpoint(model, tmp_path / "m", steps=3, metrics={"val_loss": 1.0})
    loaded = load_checkpoint(tmp_path / "m")
    for (k, a), (k2, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert k == k2 and torch.equal(a, b)
    x = torch.randint(0, 80, (2, 16))
    assert torch.equal(model(x)[0], loaded(x)[0])
    assert loaded.checkpoint["steps"] == 3


def test_corrupt_checkpoint_is_a_clear_error(tmp_path):
    model = TinyGPT(ModelConfig(plan="nope", **SMALL))
    st = save_checkpoint(model, tmp_path / "m")
    st.write_bytes(st.read_bytes()[:100])
    with pytest.raises(ValueError, match="corrupt"):
        load_checkpoint(tmp_path / "m")
    (tmp_path / "m.json").write_text("{not json")
    with pytest.raises(ValueError, match="corrupt"):
        load_checkpoint(tmp_path / "m")


def test_unknown_checkpoint_name_lists_the_shipped_ones():
    with pytest.raises(ValueError, match="name must be one of the shipped checkpoints"):
        load_checkpoint("gpt-5")
    with pytest.raises(FileNotFoundError):
        load_checkpoint("/nonexistent/model.safetensors")


def test_shipped_checkpoints_load_offline(monkeypatch):
    import socket

    def no_network(*a, **k):
        raise AssertionError("load_checkpoint tried to use the network")

    monkeypatch.setattr(socket, "socket", no_network)
    names = list_checkpoints()
    for required in ("learned", "sinusoidal", "rope", "t5", "alibi", "nope"):
        assert required in names
    for name in names:
        model = load_checkpoint(name)
        assert model.config.train_len >= 64 and not model.training
        logits, _ = model(torch.zeros(1, 8, dtype=torch.long))
        assert logits.shape == (1, 8, model.config.vocab_size) and torch.isfinite(logits).all()


def test_scheme_table_is_complete():
    for name in ("learned", "sinusoidal", "rope", "t5", "alibi", "xpos", "nope", "cope"):
        assert name in SCHEMES


@pytest.mark.parametrize("plan", [p for p in SCHEMES if p != "xpos"])
def test_a_forward_pass_reads_no_values_to_validate(plan):
    """On the meta device tensors have shapes but no values: a forward pass that ran a check
    reading values (a host sync on a GPU) would fail here. (xPos is the exception: its centre
    and its overflow guard are computed from the positions' values.)"""
    spans = {"swa_rope": {"window": 4}, "chunk_rope": {"chunk": 4}}  # plans that need a size
    options = {plan: spans[plan]} if plan in spans else {}
    cfg = ModelConfig(
        d_model=16, n_layers=2, n_heads=2, train_len=8, plan=plan, position_options=options
    )
    net = TinyGPT(cfg).to("meta")
    idx = torch.zeros(2, 8, dtype=torch.long, device="meta")
    logits, loss = net(idx, targets=idx)
    assert logits.shape == (2, 8, cfg.vocab_size) and loss.device.type == "meta"


@pytest.mark.parametrize("d_model", [64, 256])
def test_scaled_token_vectors_are_as_long_as_sinusoidal_position_vectors(d_model):
    """The model scales token vectors by √d before adding the sinusoidal table; initialised
    with std d^(-1/2) (the √d convention) a scaled token vector has norm ≈ √d and a position
    vector √(d/2): comparable. The GPT-2 std 0.02 gave 0.02·d (1.3 at d = 64, a quarter of
    the position vector's 5.7): position drowned the token. Measured on what forward() hands
    to the input scheme, on a fresh model."""
    torch.manual_seed(0)
    cfg = ModelConfig(d_model=d_model, n_layers=1, n_heads=4, train_len=64, plan="sinusoidal")
    net = TinyGPT(cfg)
    seen = {}
    embed = net.input_scheme.embed

    def spy(hidden, positions):
        seen["token"] = hidden.norm(dim=-1).mean().item()
        seen["position"] = embed(torch.zeros_like(hidden), positions).norm(dim=-1).mean().item()
        return embed(hidden, positions)

    net.input_scheme.embed = spy
    net(torch.arange(cfg.vocab_size)[None] % cfg.vocab_size)
    assert seen["position"] == pytest.approx((d_model / 2) ** 0.5, rel=1e-4)
    assert 1.0 <= seen["token"] / seen["position"] <= 2.0, seen  # ≈ √2 (0.23 with std 0.02)
    # an unscaled input scheme keeps the GPT-2 initialisation
    learned = TinyGPT(ModelConfig(d_model=d_model, n_layers=1, n_heads=4, plan="learned"))
    assert learned.tok_emb.weight.std().item() == pytest.approx(0.02, rel=0.1)


@pytest.mark.parametrize("bad", [-1, VOCAB_SIZE])
def test_token_ids_outside_the_vocabulary_are_refused(bad):
    """One id out of range anywhere in the batch is refused, naming idx and the range; the
    ids at both ends of the range are accepted."""
    model = TinyGPT(ModelConfig(n_layers=1))
    ok = torch.tensor([[0, VOCAB_SIZE - 1, 5], [1, 2, 3]])
    assert model(ok)[0].shape == (2, 3, VOCAB_SIZE)
    wrong = ok.clone()
    wrong[1, 2] = bad
    with pytest.raises(ValueError, match=rf"idx must hold token ids in 0\.\.{VOCAB_SIZE - 1}"):
        model(wrong)
