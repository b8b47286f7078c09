"""The training loop: loss goes down, runs are reproducible, DDP works, checkpoints match."""

import json
import os
import subprocess
import sys

import pytest
import torch

from pecourse.lab.model import ModelConfig, checkpoint_info, load_checkpoint
from pecourse.lab.train import RECIPES, TrainConfig, train, train_recipe

SMALL = dict(d_model=32, n_layers=2, n_heads=4, train_len=32)


def _run(plan="rope", **kw):
    cfg = TrainConfig(
        **{"steps": 30, "batch_size": 8, "warmup": 5, "threads": 1, "log_every": 1, **kw}
    )
    return train(ModelConfig(plan=plan, **SMALL), cfg, progress=False, evaluate=False)


def test_a_few_steps_lower_the_loss_and_are_reproducible():
    _, a = _run()
    _, b = _run()
    first = sum(l for _, l in a["loss_curve"][:5]) / 5
    last = sum(l for _, l in a["loss_curve"][-5:]) / 5
    assert last < first - 0.3
    assert a["loss_curve"] == b["loss_curve"]


@pytest.mark.parametrize("augment", ["randomized", "pose"])
def test_position_augmentation_trains(augment, monkeypatch):
    """The drawn ids reach the model: past the window, below augment_len, in order."""
    from pecourse.lab.model import TinyGPT

    seen, forward = [], TinyGPT.forward

    def spy(self, idx, positions=None, targets=None):
        seen.append(positions)
        return forward(self, idx, positions, targets)

    monkeypatch.setattr(TinyGPT, "forward", spy)
    _, rec = _run(augment=augment, augment_len=256, steps=5)
    assert len(rec["loss_curve"]) == 5
    drawn = torch.stack(seen)  # [steps, batch, seq]
    assert drawn.shape == (5, 8, SMALL["train_len"])
    assert SMALL["train_len"] <= int(drawn.max()) < 256
    assert bool((drawn.diff(dim=-1) > 0).all())  # distinct ids, kept in order


def test_task_training_and_continued_training_with_scaled_rope(tmp_path, monkeypatch):
    model, rec = _run(data="counting", steps=5)
    assert rec["train"]["data"] == "counting"
    from pecourse.lab import model as model_mod

    model_mod.save_checkpoint(model, tmp_path / "base", **rec)
    monkeypatch.setattr(model_mod, "checkpoint_dir", lambda: tmp_path)
    cfg = ModelConfig(
        plan="rope",
        position_options={"rope": {"scaling": "linear", "factor": 2.0}},
        **{**SMALL, "train_len": 64},
    )
    scaled, rec2 = train(
        cfg,
        TrainConfig(steps=2, batch_size=2, threads=1, init_from="base"),
        progress=False,
        evaluate=False,
    )
    assert scaled.blocks[0].attn.scheme.scaling == "linear"
    torch.testing.assert_close(scaled.tok_emb.weight, model.tok_emb.weight, atol=0.05, rtol=0)


def test_bad_train_options_are_named():
    with pytest.raises(ValueError, match="data"):
        TrainConfig(data="wikipedia")
    with pytest.raises(ValueError, match="augment_len"):
        _run(augment="pose", augment_len=8, steps=1)
    with pytest.raises(ValueError, match="name"):
        train_recipe("gpt-5")


def test_cli_train_writes_a_checkpoint(tmp_path):
    from pecourse.cli import main

    out = tmp_path / "m"
    code = main(
        [
            "train",
            "--plan",
            "alibi",
            "--d-model",
            "32",
            "--layers",
            "1",
            "--train-len",
            "16",
            "--steps",
            "3",
            "--threads",
            "1",
            "--no-progress",
            "--no-eval",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    info = json.loads((tmp_path / "m.json").read_text())
    assert info["steps"] == 3 and info["config"]["plan"] == "alibi"
    load_checkpoint(out)


@pytest.mark.slow
def test_ddp_two_processes(tmp_path):
    out = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--standalone",
        "-m",
        "pecourse.lab.train",
        "--plan",
        "rope",
        "--d-model",
        "32",
        "--layers",
        "1",
        "--train-len",
        "16",
        "--steps",
        "3",
        "--batch-size",
        "4",
        "--threads",
        "1",
        "--no-progress",
        "--no-eval",
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads((tmp_path / "ddp.json").read_text())
    assert info["world_size"] == 2 and info["steps"] == 3
    load_checkpoint(out)


def test_retraining_nope_retraces_its_shipped_loss_curve():
    """The recipe still produces the shipped model: its first 100 of 800 steps (the 50 of
    warm-up and 50 of the decay, logged at 0, 20, ..., 80; an eighth of the cost of the whole
    run) land on the shipped loss curve."""
    shipped = checkpoint_info("nope")
    assert RECIPES["nope"]["train"]["steps"] == shipped["steps"]
    threads = shipped["train"]["threads"]  # same thread count: same float reductions
    _, rec = train_recipe("nope", out_dir=False, progress=False, threads=threads, stop_after=100)
    curve = dict(map(tuple, shipped["loss_curve"]))
    steps = [step for step, _ in rec["loss_curve"]]
    assert steps == list(range(0, 100, shipped["train"]["log_every"]))
    for step, loss in rec["loss_curve"]:  # bit-identical on the machine that trained it; a
        assert abs(loss - curve[step]) < 0.05, (step, loss, curve[step])  # CPU may round apart
    assert curve[steps[-1]] < curve[0] - 1.0  # a stretch where the model learns, not a flat one


def test_stop_after_is_checked_and_saves_nothing(tmp_path):
    with pytest.raises(ValueError, match="stop_after"):
        train(ModelConfig(), TrainConfig(steps=3), stop_after=4)
    _, rec = train_recipe("nope", out_dir=str(tmp_path), progress=False, steps=3, stop_after=2)
    assert [step for step, _ in rec["loss_curve"]] == [0] and "metrics" not in rec
    assert list(tmp_path.iterdir()) == []


def test_text_with_a_start_marker():
    from pecourse.lab.data import BOS, VOCAB, text_batch
    from pecourse.lab.train import _batch

    x, y, answer = _batch(
        TrainConfig(data="text+bos", batch_size=3), 16, torch.Generator().manual_seed(0)
    )
    text, _ = text_batch(3, 16, seed=torch.Generator().manual_seed(0))
    assert (x[:, 0] == VOCAB.index(BOS)).all() and answer is None
    assert torch.equal(x[:, 1:], text[:, :-1]) and torch.equal(y, text)  # same characters predicted
    _, rec = _run(data="text+bos", steps=3)
    assert len(rec["loss_curve"]) == 3
