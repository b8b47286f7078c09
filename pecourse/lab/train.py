r"""A seeded, deterministic training loop for :class:`pecourse.lab.model.TinyGPT`.

One function, :func:`train`, does everything the course's checkpoints need:

* language modelling on the Bible text, optionally mixed with passkey sequences so that the
  model learns to retrieve (``data="text+passkey"``), or a synthetic task alone
  (``data="counting"``, …, scored only on the answer tokens);
* position augmentation: ``augment="randomized"`` (Ruoss et al. 2023, arXiv:2305.16843) or
  ``augment="pose"`` (Zhu et al. 2024, arXiv:2309.10400), both drawing position ids that
  span ``augment_len`` while the window stays ``train_len`` tokens long;
* continued training from a checkpoint (``init_from``), e.g. with a scaled RoPE at a longer
  length: position interpolation then a short fine-tune (Chen et al. 2023,
  arXiv:2306.15595) or YaRN (Peng et al. 2023, arXiv:2309.00071);
* AdamW, linear warm-up then cosine decay, gradient clipping; a tqdm bar;
* DDP when launched by ``torchrun`` (gloo on CPU): each rank draws its own batches, rank 0
  writes the checkpoint.

A checkpoint is a ``.safetensors`` file plus a ``.json`` with the config, the training
options, the loss curve and the final metrics. :data:`RECIPES` lists the shipped
checkpoints; ``pecourse train --all`` (or ``python -m pecourse.lab.train --all``)
rebuilds every one of them from scratch.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, fields

import torch
from torch import nn
from torch.nn import functional as F

from .._validate import check_choice, check_float, check_int
from ..seed import seed_everything
from .data import TASKS, passkey_batch, task_batch, text_batch
from .model import ModelConfig, TinyGPT, checkpoint_dir, load_checkpoint, save_checkpoint

__all__ = [
    "TrainConfig",
    "train",
    "train_step",
    "make_optimizer",
    "prepare_network",
    "wants_compile",
    "bos_window",
    "RECIPES",
    "train_recipe",
    "register",
    "main",
]

DATA = ("text", "text+passkey", "text+bos", *TASKS)
AUGMENT = ("none", "randomized", "pose")
COMPILE = ("auto", "no", "yes")
#: ``compile="auto"`` compiles a run of at least this many steps. On two quiet cores
#: ``benchmarks/train_cpu.py`` measured a cold compile (with its check) at 28 s, repaid by
#: the compiled step's 2.1 ms after about 13,000 steps; on a busy machine a cold compile
#: has taken 56-371 s, so the threshold leaves a wide margin.
COMPILE_AFTER_STEPS = 50_000


@dataclass
class TrainConfig:
    """Options of one training run (JSON-serialisable; stored in the checkpoint).

    ``batch_size`` is per process (under DDP each rank draws its own batch). ``data`` is
    ``"text"``, ``"text+passkey"`` (a ``passkey_fraction`` of each batch replaced by passkey
    sequences, whose answers get an extra loss of weight ``answer_weight``), ``"text+bos"``
    (every window starts with the marker :data:`pecourse.lab.data.BOS`) or a task of
    :data:`pecourse.lab.data.TASKS` (loss on the answers only; ``task_options`` go to its
    generator). ``augment`` draws position ids spanning ``augment_len``. ``init_from``
    names a checkpoint (or path) to continue from. ``threads`` is torch's intra-op thread
    count; results are bit-identical only for the same count. ``compile="yes"`` runs the
    model under ``torch.compile``, once it has matched the eager model on this machine
    (:func:`prepare_network`); compiled and eager steps agree to float rounding, not bit for
    bit. ``"auto"`` (the default) compiles only a run long enough to repay the compile
    (:data:`COMPILE_AFTER_STEPS`): no shipped recipe is, so they train eagerly and
    bit-identically.
    """

    steps: int = 800
    batch_size: int = 16
    lr: float = 3e-3
    warmup: int = 50
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    seed: int = 0
    data: str = "text"
    passkey_fraction: float = 0.5
    answer_weight: float = 1.0
    task_options: dict = field(default_factory=dict)
    augment: str = "none"
    augment_len: int = 0
    init_from: str | None = None
    log_every: int = 20
    threads: int = 1
    compile: str = "auto"

    def __post_init__(self):
        check_int("steps", self.steps, minimum=0)
        check_int("batch_size", self.batch_size, minimum=1)
        check_float("lr", self.lr, minimum=0.0, strict_minimum=True)
        check_int("warmup", self.warmup, minimum=0)
        check_int("seed", self.seed, minimum=0)
        check_choice("data", self.data, DATA)
        check_float("passkey_fraction", self.passkey_fraction, minimum=0.0, maximum=1.0)
        check_choice("augment", self.augment, AUGMENT)
        check_int("augment_len", self.augment_len, minimum=0)
        check_int("log_every", self.log_every, minimum=1)
        check_int("threads", self.threads, minimum=1)
        check_choice("compile", self.compile, COMPILE)

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(
                f"train options have unknown fields {unknown}; accepted: {sorted(known)}"
            )
        return cls(**d)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up to ``lr``, then cosine decay to ``min_lr_ratio · lr``."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t)))


def _batch(cfg: TrainConfig, length: int, g: torch.Generator):
    """``(inputs, targets, answer)`` for one step.

    ``targets`` are ``-100`` where nothing is scored; ``answer`` (or ``None``) marks the
    passkey answers in a text+passkey mix, which get an extra loss term of weight
    ``answer_weight``: four answer characters in a window of text are too weak a signal
    for a tiny model to discover retrieval (induction heads) in a few hundred steps.
    """
    if cfg.data == "text":
        return (*text_batch(cfg.batch_size, length, seed=g), None)
    if cfg.data == "text+bos":  # chapter 15: every window starts with a marker token
        x, _ = text_batch(cfg.batch_size, length, seed=g)
        return bos_window(x), x, None
    if cfg.data == "text+passkey":
        x, y = text_batch(cfg.batch_size, length, seed=g)
        answer = torch.zeros_like(x, dtype=torch.bool)
        n = int(round(cfg.passkey_fraction * cfg.batch_size))
        if n:
            pk = passkey_batch(n, length, seed=g, **cfg.task_options)
            x[:n], y[:n], answer[:n] = pk.inputs, pk.targets, pk.answer  # LM loss on the text too
        return x, y, answer
    tb = task_batch(cfg.data, cfg.batch_size, length, seed=g, **cfg.task_options)
    return tb.inputs, tb.masked_targets(), None


def bos_window(text: torch.Tensor) -> torch.Tensor:
    """Inputs for ``data="text+bos"``: :data:`pecourse.lab.data.BOS`, then ``text`` without its last
    character. Its targets are ``text`` itself, so the characters predicted are the same as
    without the marker; only the first prediction (from the marker alone) is new."""
    from .data import BOS, VOCAB

    marker = torch.full_like(text[:, :1], VOCAB.index(BOS))
    return torch.cat([marker, text[:, :-1]], dim=1)


def _positions(cfg: TrainConfig, length: int, g: torch.Generator):
    """Position ids for one step: ``None`` (0..L-1) unless augmenting."""
    if cfg.augment == "none":
        return None
    from ..positions.augmentation import pose_position_ids, randomized_positions

    if cfg.augment_len < length:
        raise ValueError(f"augment_len must be >= train_len ({length}), got {cfg.augment_len}")
    if cfg.augment == "randomized":
        return randomized_positions(length, cfg.augment_len, generator=g, batch=cfg.batch_size)
    return torch.stack(
        [pose_position_ids(length, cfg.augment_len, generator=g) for _ in range(cfg.batch_size)]
    )


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW (betas 0.9, 0.95) with weight decay on the weight matrices only: embeddings,
    LayerNorms and biases are not decayed (nanoGPT's grouping)."""
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "emb" not in n]
    other = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "emb" not in n)]
    # fused: one kernel updates every tensor (torch's default on the CPU is a Python loop
    # over them, a sizeable share of a step for a model this small); same update, rounded
    # in a different order.
    fused = all(p.device.type in ("cpu", "cuda") for p in decay + other)
    return torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": cfg.weight_decay},
            {"params": other, "weight_decay": 0.0},
        ],
        lr=cfg.lr,
        betas=(0.9, 0.95),
        fused=fused or None,
    )


def wants_compile(cfg: TrainConfig, *, world_size: int = 1) -> bool:
    """Whether :func:`train` compiles the model for this run (before the check on this
    machine, which may still refuse it): as ``cfg.compile`` says (``"auto"``: when the run
    has :data:`COMPILE_AFTER_STEPS` steps or more), but never under DDP."""
    long_run = cfg.steps >= COMPILE_AFTER_STEPS
    return world_size == 1 and (cfg.compile == "yes" or cfg.compile == "auto" and long_run)


def prepare_network(model: nn.Module, cfg: TrainConfig, sample=None, *, world_size: int = 1):
    """The network :func:`train` runs its steps through, and whether it is compiled.

    Under DDP (``world_size > 1``) the model wrapped by DDP; with ``cfg.compile="yes"``,
    ``torch.compile(model)`` once it has agreed with the eager model on ``sample`` (a batch
    ``(inputs, targets, answer, positions)``): the same loss and gradients from the same
    weights, to float32 rounding. Inductor writes C++ for the CPU in hand, so the check runs
    on the machine that trains, once per configuration and process
    (:func:`pecourse.kernels.verify.trusted`); where it fails, a ``CompiledPathWarning`` says
    so and the eager model trains. The check leaves the model's weights and gradients as
    they were. Returns ``(network, compiled)``.
    """
    if world_size > 1:
        return nn.parallel.DistributedDataParallel(model), False
    if not wants_compile(cfg, world_size=world_size):
        return model, False
    if sample is None:
        raise ValueError("sample must be a batch (inputs, targets, answer, positions) to compile")
    from ..kernels import verify

    compiled = torch.compile(model)
    x, y, _, positions = sample

    def loss_and_grads(net):
        model.zero_grad(set_to_none=True)
        _, loss = net(x, positions, y)
        loss.backward()
        out = (loss.detach(), *(p.grad.clone() for p in model.parameters()))
        model.zero_grad(set_to_none=True)
        return out

    key = (
        json.dumps(model.config.to_dict(), sort_keys=True),
        tuple(x.shape),
        None if positions is None else tuple(positions.shape),
        torch.get_num_threads(),
        model.training,
    )
    ok = verify.trusted(
        "train.compiled_model",
        key,
        lambda: (loss_and_grads(compiled), loss_and_grads(model)),
        lambda: (
            f"TinyGPT {model.config.plan} d_model={model.config.d_model}, batch {tuple(x.shape)}"
        ),
    )
    return (compiled, True) if ok else (model, False)


def train_step(net, opt, cfg: TrainConfig, x, y, answer=None, positions=None) -> torch.Tensor:
    """One step of :func:`train`: forward, loss, backward, gradient clipping, AdamW.

    ``net(x, positions, y)`` returns ``(logits, loss)`` (a :class:`TinyGPT`, or the same
    model wrapped by DDP); ``answer`` marks the passkey answers that get the extra loss
    term. Returns the loss, still a tensor (reading it is a sync the caller may skip).
    """
    logits, loss = net(x, positions, y)
    if answer is not None and answer.any() and cfg.answer_weight:
        loss = loss + cfg.answer_weight * F.cross_entropy(logits[answer], y[answer])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(net.parameters(), cfg.grad_clip)
    opt.step()
    return loss


def _distributed() -> tuple[int, int]:
    """``(rank, world_size)``; initialises gloo when launched by torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not torch.distributed.is_initialized():
        torch.distributed.init_process_group("gloo")
    rank = torch.distributed.get_rank() if world > 1 else 0
    return rank, world


def train(
    model_config: ModelConfig,
    train_config: TrainConfig | None = None,
    *,
    out=None,
    progress: bool = True,
    evaluate: bool = True,
    stop_after: int | None = None,
):
    """Train a fresh (or ``init_from``) model; return ``(model, record)``.

    ``record`` holds the steps, the loss curve (``[step, loss]`` every ``log_every``
    steps), the wall time and, with ``evaluate``, final metrics (validation loss at
    ``train_len``, and passkey accuracy when passkeys were in the mix). With ``out`` (a
    path without suffix) rank 0 writes the checkpoint. Deterministic for a given seed,
    thread count, world size and whether the model ran compiled (``record["compiled"]``).

    ``stop_after`` runs only the first steps of the run ``train_config`` describes (the
    learning-rate schedule still spans ``steps``), so a test can check that a recipe still
    retraces its shipped loss curve without paying for the whole run; it saves nothing.
    """
    cfg = train_config or TrainConfig()
    if stop_after is not None:
        check_int("stop_after", stop_after, minimum=1, maximum=cfg.steps)
        out, evaluate = None, False
    threads_before = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        return _train(
            model_config, cfg, out=out, progress=progress, evaluate=evaluate, stop_after=stop_after
        )
    finally:
        torch.set_num_threads(threads_before)  # leave a notebook's kernel as it was


def _train(
    model_config: ModelConfig,
    cfg: TrainConfig,
    *,
    out,
    progress: bool,
    evaluate: bool,
    stop_after: int | None = None,
):
    from tqdm.auto import tqdm

    rank, world = _distributed()
    seed_everything(cfg.seed)
    model = TinyGPT(model_config)
    if cfg.init_from:
        base = load_checkpoint(cfg.init_from)
        model.load_state_dict(base.state_dict())  # same shapes; the plan may scale RoPE
    model.train()
    g = torch.Generator().manual_seed(cfg.seed * 1000 + rank + 1)  # each rank its own data
    sample = None
    if wants_compile(cfg, world_size=world):
        # The compile check's batch comes from a generator of its own: the run's batches
        # are the same whether it compiles or not.
        probe = torch.Generator().manual_seed(cfg.seed * 1000 + rank + 1)
        sample = (
            *_batch(cfg, model_config.train_len, probe),
            _positions(cfg, model_config.train_len, probe),
        )
    net, compiled = prepare_network(model, cfg, sample, world_size=world)
    opt = make_optimizer(model, cfg)
    curve, start, smooth = [], time.time(), None
    bar = tqdm(
        range(cfg.steps if stop_after is None else stop_after),
        desc=f"train {model_config.plan}",
        disable=not progress or rank != 0,
    )
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        x, y, answer = _batch(cfg, model_config.train_len, g)
        positions = _positions(cfg, model_config.train_len, g)
        value = train_step(net, opt, cfg, x, y, answer, positions).item()
        smooth = value if smooth is None else 0.9 * smooth + 0.1 * value
        if step % cfg.log_every == 0 or step == cfg.steps - 1:
            curve.append([step, round(value, 4)])
            bar.set_postfix(loss=f"{smooth:.3f}")
    model.eval()
    record = {
        "steps": cfg.steps,
        "train": asdict(cfg),
        "world_size": world,
        "compiled": compiled,
        "loss_curve": curve,
        "seconds": round(time.time() - start, 1),
    }
    if evaluate and rank == 0:
        record["metrics"] = final_metrics(model, cfg)
    if out is not None and rank == 0:
        save_checkpoint(model, out, **record)
    if world > 1:
        torch.distributed.barrier()
    return model, record


def final_metrics(model: TinyGPT, cfg: TrainConfig) -> dict:
    """Small, fixed evaluations stored with a checkpoint (and checked by the slow test)."""
    from . import evaluate as ev

    n = model.config.train_len
    m = {}
    if cfg.data in ("text", "text+passkey"):
        m["val_loss"] = round(float(ev.window_losses(model, n, tokens=8192).mean()), 4)
    if cfg.data in ("text+passkey", "passkey"):
        key_len = cfg.task_options.get("key_len", 4)
        got = ev.needle_outcomes(model, [n // 2], length=n, samples=64, key_len=key_len)
        m["passkey_accuracy"] = round(float(got[n // 2].double().mean()), 4)
    if cfg.data in TASKS and cfg.data != "passkey":
        m["task_accuracy"] = round(ev.task_accuracy(model, cfg.data, n, **cfg.task_options), 4)
    return m


# --- the shipped checkpoints --------------------------------------------------------

_SMALL = dict(d_model=64, n_layers=4, n_heads=4, train_len=64)
_TEXT = dict(data="text", steps=800)
_PASSKEY = dict(data="passkey", steps=1000, task_options={"key_len": 2})
#: Continued training (``init_from``): 100 steps, a lower peak learning rate, a short warm-up.
_FINETUNE = dict(steps=100, lr=1e-3, warmup=10)
_PASSKEY_FINETUNE = {**_PASSKEY, **_FINETUNE}


def _linear(factor: float) -> dict:
    """``position_options`` for RoPE with position interpolation by ``factor`` (a new dict)."""
    return {"rope": {"scaling": "linear", "factor": factor}}


def _recipe(plan, model=None, **train):
    return {"model": {**_SMALL, "plan": plan, **(model or {})}, "train": {**_TEXT, **train}}


#: Shipped checkpoint name -> {"model": ModelConfig kwargs, "train": TrainConfig kwargs}.
#: Order matters: a recipe with ``init_from`` comes after the checkpoint it starts from.
RECIPES: dict[str, dict] = {
    # The extrapolation set (Press et al. 2022): train at 64, evaluate at 64..512.
    "learned": _recipe("learned"),
    "sinusoidal": _recipe("sinusoidal"),
    "rope": _recipe("rope"),
    "t5": _recipe("t5"),
    "alibi": _recipe("alibi"),
    "nope": _recipe("nope"),
    "irope": _recipe("rope,rope,rope,nope"),
    # The long-window text regime: twice as wide, 256-character windows, 2500 steps (10M
    # characters against 0.8M; about 10 minutes on two threads). It gains from 64 and 128
    # characters of context at every seed (studies.context_use); the 64-character models
    # gain from 16 (rope) or 8 (alibi) at most.
    "rope_long": _recipe("rope", {"d_model": 128, "train_len": 256}, steps=2500),
    # Retrieval: the same architectures trained on passkeys alone (2-digit keys), for the
    # needle-by-distance measurements; text with passkeys mixed in did not teach retrieval
    # to a model this small in 2000 steps.
    "rope_passkey": _recipe("rope", **_PASSKEY),
    # ALiBi's bias pulls three of its four heads towards the last few tokens; at 1000 steps
    # it had not found the needle even nearby, so it gets longer to learn retrieval.
    "alibi_passkey": _recipe("alibi", **{**_PASSKEY, "steps": 2500}),
    "t5_passkey": _recipe("t5", **_PASSKEY),
    "rope_base_low_passkey": _recipe(
        "rope", {"position_options": {"rope": {"base": 100.0}}}, **_PASSKEY
    ),
    # RoPE base below / above the bound of Men et al. 2024 for this head size and length.
    "rope_base_low": _recipe("rope", {"position_options": {"rope": {"base": 100.0}}}),
    # Continued training at 4x the length with position interpolation (Chen et al. 2023).
    "rope_pi_finetune": _recipe(
        "rope",
        {"train_len": 256, "position_options": _linear(4.0)},
        init_from="rope",
        **_FINETUNE,
        batch_size=4,
    ),
    # The same with YaRN (Peng et al. 2023); betas for a 16-dim head (studies.YARN_BETAS).
    "rope_yarn_finetune": _recipe(
        "rope",
        {
            "train_len": 256,
            "position_options": {
                "rope": {
                    "scaling": "yarn",
                    "factor": 4.0,
                    "original_max_position": 64,
                    "beta_fast": 8.0,
                    "beta_slow": 1.0,
                }
            },
        },
        init_from="rope",
        **_FINETUNE,
        batch_size=4,
    ),
    # PoSE as published (Zhu et al. 2024): the same continuation of `rope` with PI at factor 4,
    # but on 64-character windows whose ids are PoSE-skipped over 0..255 instead of windows of
    # 256 consecutive characters; 16 windows a step, the same characters as rope_pi_finetune.
    "rope_pose_pi_finetune": _recipe(
        "rope",
        {"position_options": _linear(4.0)},
        init_from="rope",
        **_FINETUNE,
        batch_size=16,
        augment="pose",
        augment_len=256,
    ),
    # The passkey model extended the same two ways: full-length PI fine-tuning on 256-character
    # passkey sequences, and PoSE + PI on 64-character ones; 16 sequences (16 keys) a step each.
    "rope_passkey_pi_finetune": _recipe(
        "rope",
        {"train_len": 256, "position_options": _linear(4.0)},
        **_PASSKEY_FINETUNE,
        init_from="rope_passkey",
    ),
    "rope_passkey_pose_pi_finetune": _recipe(
        "rope",
        {"position_options": _linear(4.0)},
        **_PASSKEY_FINETUNE,
        init_from="rope_passkey",
        augment="pose",
        augment_len=256,
    ),
    # The controls of the extension recipes above: the same continuation with one thing taken
    # away. No scaling at all on the 256-character windows (Chen et al. 2023's baseline of
    # plain fine-tuning, against PI + fine-tune), and PI on 64-character windows with plain
    # ids 0..63 (against PoSE + PI: the same windows and budget without PoSE's skipped ids).
    "rope_finetune": _recipe(
        "rope",
        {"train_len": 256},
        init_from="rope",
        **_FINETUNE,
        batch_size=4,
    ),
    "rope_pi_finetune_64": _recipe(
        "rope",
        {"position_options": _linear(4.0)},
        init_from="rope",
        **_FINETUNE,
        batch_size=16,
    ),
    "rope_passkey_finetune": _recipe(
        "rope",
        {"train_len": 256},
        **_PASSKEY_FINETUNE,
        init_from="rope_passkey",
    ),
    "rope_passkey_pi_finetune_64": _recipe(
        "rope",
        {"position_options": _linear(4.0)},
        **_PASSKEY_FINETUNE,
        init_from="rope_passkey",
    ),
    # Position augmentation: a window of 64 tokens whose ids span 0..511.
    "rope_randomized": _recipe("rope", augment="randomized", augment_len=512),
    "rope_pose": _recipe("rope", augment="pose", augment_len=512),
    # CoPE vs RoPE on the CoPE paper's counting and selective-copy tasks.
    "cope_counting": _recipe("cope", data="counting", steps=600),
    "rope_counting": _recipe("rope", data="counting", steps=600),
    "cope_selective_copy": _recipe("cope", data="selective_copy", steps=600),
    "rope_selective_copy": _recipe("rope", data="selective_copy", steps=600),
}


#: Recipes that only studies train, at every seed (no checkpoint is shipped): the controls
#: of the shipped recipes' comparisons, each the recipe it controls with one thing changed.
STUDY_RECIPES: dict[str, dict] = {
    # The extrapolation set under one embedding setup (chapter 06): every scheme with the
    # sinusoidal model's √d scale and init, and the sinusoidal model without them.
    **{
        f"{n}_sqrt_d": _recipe(n, {"embed_scale": "sqrt_d"})
        for n in ("learned", "rope", "t5", "alibi", "nope")
    },
    "sinusoidal_unscaled": _recipe("sinusoidal", {"embed_scale": "none"}),
    # Chapter 11: the passkey model's RoPE layers restricted to 8-key windows, continued on
    # its task for its own budget: all four layers windowed; layers 0-2 windowed and layer 3
    # a global NoPE layer (Command A's layout); and the control, layer 3 a global RoPE layer.
    **{
        f"rope_passkey_{arm}": _recipe(
            "rope",
            {"plan": plan, "position_options": {"swa_rope": {"window": 8}}},
            **{**_PASSKEY, **_FINETUNE, "steps": 1000},
            init_from="rope_passkey",
        )
        for arm, plan in (
            ("swa", "swa_rope"),
            ("swa_nope", "swa_rope,swa_rope,swa_rope,nope"),
            ("swa_rope", "swa_rope,swa_rope,swa_rope,rope"),
        )
    },
    # Chapter 10: RoPE on selective copy with more than six times CoPE's 600 steps.
    "rope_selective_copy_4000": _recipe("rope", data="selective_copy", steps=4000),
    # Chapter 15: NoPE with a start marker at the head of every training window (the anchor of
    # Kazemnejad et al.'s Theorem 1 construction), against the shipped NoPE and RoPE.
    "nope_bos": _recipe("nope", data="text+bos"),
    # Chapter 15: the counting recipe with NoPE and ALiBi; NoPE with four times the budget (at
    # 600 steps it has not learned the task at the training length), and RoPE with the same.
    "nope_counting": _recipe("nope", data="counting", steps=600),
    "alibi_counting": _recipe("alibi", data="counting", steps=600),
    "nope_counting_long": _recipe("nope", data="counting", steps=2400),
    "rope_counting_long": _recipe("rope", data="counting", steps=2400),
}


def recipe(name: str) -> dict:
    """The recipe called ``name``: a shipped one (:data:`RECIPES`) or a study's own
    (:data:`STUDY_RECIPES`)."""
    check_choice("recipe", name, (*RECIPES, *STUDY_RECIPES))
    return RECIPES.get(name) or STUDY_RECIPES[name]


def train_recipe(
    name: str, *, out_dir=None, progress: bool = True, stop_after: int | None = None, **overrides
):
    """Train the shipped checkpoint ``name`` from scratch (a key of :data:`RECIPES`).

    Writes ``out_dir/name.safetensors`` and ``.json`` (default: the shipped folder;
    ``out_dir=False`` writes nothing). A recipe that continues another (``init_from``)
    starts from the copy in ``out_dir`` when there is one, so a retrain into a fresh
    folder is self-contained.
    """
    check_choice("name", name, tuple(RECIPES))
    recipe = RECIPES[name]
    mc = ModelConfig.from_dict(recipe["model"])
    tc = TrainConfig.from_dict({**recipe["train"], **overrides})
    if out_dir and tc.init_from and os.path.exists(os.path.join(out_dir, f"{tc.init_from}.json")):
        tc.init_from = os.path.join(out_dir, tc.init_from)
    out = None if out_dir is False else os.path.join(out_dir or checkpoint_dir(), name)
    return train(mc, tc, out=out, progress=progress, stop_after=stop_after)


# --- command line -------------------------------------------------------------------


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--all", action="store_true", help="retrain every shipped checkpoint")
    p.add_argument("--recipe", choices=sorted(RECIPES), help="retrain one shipped checkpoint")
    p.add_argument("--plan", default="rope", help="position plan, e.g. rope or rope,rope,rope,nope")
    p.add_argument("--options", default="{}", help="position_options as JSON")
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--train-len", type=int, default=64)
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--data", choices=DATA, default=None)
    p.add_argument("--augment", choices=AUGMENT, default=None)
    p.add_argument("--augment-len", type=int, default=None)
    p.add_argument("--init-from", default=None)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument(
        "--compile",
        choices=COMPILE,
        default=None,
        help="torch.compile the model, checked against eager first (default: auto, "
        f"which compiles runs of {COMPILE_AFTER_STEPS:,} steps or more)",
    )
    p.add_argument(
        "--out", default=None, help="checkpoint path without suffix (or a folder with --all)"
    )
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--no-eval", action="store_true", help="skip the final metrics")


def _run(args) -> int:
    overrides = {
        k: v
        for k, v in dict(
            steps=args.steps,
            batch_size=args.batch_size,
            lr=args.lr,
            seed=args.seed,
            data=args.data,
            augment=args.augment,
            augment_len=args.augment_len,
            init_from=args.init_from,
            threads=args.threads,
            compile=args.compile,
        ).items()
        if v is not None
    }
    progress = not args.no_progress
    if args.all or args.recipe:
        names = list(RECIPES) if args.all else [args.recipe]
        for name in names:
            _, rec = train_recipe(name, out_dir=args.out, progress=progress, **overrides)
            print(name, json.dumps(rec.get("metrics", {})), f"{rec['seconds']}s", flush=True)
        return 0
    mc = ModelConfig(
        d_model=args.d_model,
        n_layers=args.layers,
        n_heads=args.heads,
        train_len=args.train_len,
        plan=args.plan,
        position_options=json.loads(args.options),
    )
    _, rec = train(
        mc, TrainConfig(**overrides), out=args.out, progress=progress, evaluate=not args.no_eval
    )
    if int(os.environ.get("RANK", "0")) == 0:
        print(
            json.dumps(
                {k: rec[k] for k in ("steps", "seconds", "world_size")}
                | {
                    "metrics": rec.get("metrics", {}),
                    "final_loss": rec["loss_curve"][-1][1] if rec["loss_curve"] else None,
                }
            ),
            flush=True,
        )
    return 0


def register(subparsers) -> None:
    """Add ``pecourse train`` to the command line."""
    p = subparsers.add_parser(
        "train",
        help="train the tiny model (one run, one shipped recipe, or --all)",
        description="Train pecourse's tiny transformer. Runs under torchrun for DDP (gloo).",
    )
    _add_arguments(p)
    p.set_defaults(func=_run)


def main(argv=None) -> int:
    """``python -m pecourse.lab.train …`` (what torchrun launches)."""
    parser = argparse.ArgumentParser(prog="python -m pecourse.lab.train")
    _add_arguments(parser)
    code = _run(parser.parse_args(argv))
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return code


if __name__ == "__main__":
    raise SystemExit(main())
