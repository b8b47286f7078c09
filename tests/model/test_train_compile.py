"""The compiled training path: it trains what the eager one trains, it is used only once it
has agreed with the eager model on this machine, and it falls back where it does not."""

import pytest
import torch

from pecourse.kernels import verify
from pecourse.kernels.verify import CompiledPathWarning
from pecourse.lab import train as train_mod
from pecourse.lab.model import ModelConfig, TinyGPT
from pecourse.lab.train import RECIPES, TrainConfig, prepare_network, train, wants_compile

SMALL = dict(d_model=32, n_layers=2, n_heads=4, train_len=32)
PATH = "train.compiled_model"


@pytest.fixture(autouse=True)
def _fresh_verdicts():
    verify.forget(PATH)
    yield
    verify.forget(PATH)


def _run(compile, plan="rope", **kw):
    cfg = TrainConfig(
        **{"steps": 6, "batch_size": 4, "warmup": 2, "threads": 1, "log_every": 1, **kw},
        compile=compile,
    )
    return train(ModelConfig(plan=plan, **SMALL), cfg, progress=False, evaluate=False)


def test_the_compile_option_is_checked_and_by_default_compiles_only_long_runs():
    with pytest.raises(ValueError, match="compile"):
        TrainConfig(compile="maybe")
    assert wants_compile(TrainConfig(steps=1, compile="yes"))
    long = train_mod.COMPILE_AFTER_STEPS
    assert wants_compile(TrainConfig(steps=long)) and not wants_compile(TrainConfig(steps=long - 1))
    assert not wants_compile(TrainConfig(steps=10**9, compile="no"))  # however long the run
    assert not wants_compile(TrainConfig(compile="yes"), world_size=2)  # DDP: eager
    assert not wants_compile(TrainConfig(steps=long), world_size=2)
    for name, recipe in RECIPES.items():  # the shipped recipes train eagerly
        assert not wants_compile(TrainConfig.from_dict(recipe["train"])), name


@pytest.mark.slow
def test_a_compiled_run_trains_what_the_eager_run_trains():
    """Same seed, same batches: the compiled run's losses and weights are the eager run's to
    float rounding (a compile takes ~10-30 s on two cores)."""
    compiled_model, compiled = _run("yes")
    eager_model, eager = _run("no")
    assert compiled["compiled"] is True and eager["compiled"] is False
    assert [s for s, _ in compiled["loss_curve"]] == [s for s, _ in eager["loss_curve"]]
    for (_, a), (_, b) in zip(compiled["loss_curve"], eager["loss_curve"], strict=True):
        assert abs(a - b) < 1e-3
    assert eager["loss_curve"][-1][1] < eager["loss_curve"][0][1]  # it did train
    for (name, a), (_, b) in zip(
        compiled_model.state_dict().items(), eager_model.state_dict().items(), strict=True
    ):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4, msg=name)
    assert verify.status(PATH)[-1].trusted


class _WrongNetwork(torch.nn.Module):
    """Stands in for a miscompiled model: the right shapes, a wrong loss."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, idx, positions=None, targets=None):
        logits, loss = self.model(idx, positions, targets)
        return logits, loss * 1.5


def test_a_compiled_model_that_disagrees_is_not_used(monkeypatch):
    """The check compares against the eager model before the compiled one trains: a wrong
    compiled model gives a warning and the run trains eagerly, exactly as with compile="no"."""
    monkeypatch.setattr(train_mod.torch, "compile", _WrongNetwork)
    with pytest.warns(CompiledPathWarning, match="train.compiled_model"):
        _, rec = _run("yes")
    _, eager = _run("no")
    assert rec["compiled"] is False
    assert rec["loss_curve"] == eager["loss_curve"]
    assert not verify.status(PATH)[-1].trusted


def test_a_compiled_model_that_raises_is_not_used(monkeypatch):
    def broken(model):
        def fail(*args, **kwargs):
            raise RuntimeError("inductor failed")

        return fail

    monkeypatch.setattr(train_mod.torch, "compile", broken)
    with pytest.warns(CompiledPathWarning, match="inductor failed"):
        _, rec = _run("yes", steps=2)
    assert rec["compiled"] is False


def test_the_check_leaves_weights_and_gradients_as_they_were(monkeypatch):
    monkeypatch.setattr(train_mod.torch, "compile", lambda model: model)  # trusted, no compile
    torch.manual_seed(0)
    model = TinyGPT(ModelConfig(**SMALL)).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    cfg = TrainConfig(compile="yes", batch_size=2)
    x = torch.randint(0, model.config.vocab_size, (2, SMALL["train_len"]))
    with pytest.raises(ValueError, match="sample"):
        prepare_network(model, cfg)
    net, compiled = prepare_network(model, cfg, (x, x, None, None))
    assert compiled and net is model
    assert all(p.grad is None for p in model.parameters())
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_the_command_line_passes_compile_on(monkeypatch, capsys):
    seen = []

    def fake_train(model_config, train_config, **kwargs):
        seen.append(train_config)
        return None, {"steps": 0, "seconds": 0.0, "world_size": 1, "loss_curve": []}

    monkeypatch.setattr(train_mod, "train", fake_train)
    assert train_mod.main(["--steps", "1", "--compile", "yes", "--no-progress"]) == 0
    assert seen[-1].compile == "yes"
    assert train_mod.main(["--steps", "1", "--no-progress"]) == 0
    assert seen[-1].compile == "auto"  # the default: eager for a run this short
    with pytest.raises(SystemExit):
        train_mod.main(["--compile", "maybe"])
    assert "--compile" in capsys.readouterr().err
