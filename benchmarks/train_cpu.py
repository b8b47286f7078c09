"""The course's training step on the CPU, side by side in one run: ``pecourse.lab.train``'s step
(forward, loss, backward, gradient clipping, AdamW) for a shipped recipe vs the same model
under ``torch.compile`` vs torch's own ``nn.TransformerEncoder`` of the same size.

    .venv/bin/python benchmarks/train_cpu.py [--quick] [--recipe rope] [--threads 2] [--rounds R]
        [--repeats 3]

Every variant runs :func:`pecourse.lab.train.train_step` (forward, loss, backward, clipping,
optimiser step) on the same batches (drawn once from the recipe's data, then cycled) with
AdamW of the same hyper-parameters and parameter groups; they differ in the network and in
the AdamW implementation:

- ``pecourse train step``: the step as :func:`pecourse.lab.train.train` runs the recipe: the
  eager model and the course's optimiser (:func:`pecourse.lab.train.make_optimizer`, fused
  AdamW);
- ``pecourse train step, compiled``: the same with ``compile="yes"``: the model under
  ``torch.compile``, checked against the eager model on this machine first
  (:func:`pecourse.lab.train.prepare_network`);
- ``torch.compile(TinyGPT)``: the same model wrapped by ``torch.compile`` with torch's
  default AdamW, as a user would write it;
- ``nn.TransformerEncoder``: torch's layers of the same size (``d_model``, heads, layers,
  feed-forward width ``mlp_ratio * d_model``, GELU, pre-LayerNorm, no dropout, causal mask
  passed with ``is_causal=True``) between the same token embedding, final LayerNorm and tied
  output layer, with torch's default AdamW. It has no position encoding at all (NoPE), so
  it does less work than a RoPE model.

Speed is tokens per second (``batch_size * train_len`` tokens a step) on ``--threads``
threads (two by default: the course machine's cores). Ratios are medians of per-round
ratios, each round timing every variant once, so a busy machine slows all of them alike;
the spread (p20/p80 of the step times) is reported with them. The whole side-by-side
comparison is repeated ``--repeats`` times in the one process (the models compiled once),
and each repeat's ratio is recorded: on a shared machine one comparison can land in a
quiet or a busy minute. Compilation happens before the timed rounds; its one-off cost is
reported separately (``first_step_s``; the compiled baseline's includes its check against
the eager model, as the course's does).

Target (issue 26): the course's training loop at least as fast as the faster baseline, in
every repeat, for a run of the recipe's own length and for a long run (``RUN_LONG`` steps).
A run's time is its one-off cost plus its steps at the median step time; the course's loop
is what ``train()`` runs by default (``compile="auto"``): eager below
``COMPILE_AFTER_STEPS`` steps, compiled from there. The eager step's own ratio to the
compiled baseline is reported beside it (``speedup_per_repeat``).
Results go to ``benchmarks/results/train_cpu.json``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import tempfile
import time
import warnings
from dataclasses import replace

# A fresh inductor cache, so the one-off cost of compiling is what a fresh clone pays (set
# TORCHINDUCTOR_CACHE_DIR to reuse a cache instead).
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="train_cpu_inductor_"))

import _common  # noqa: E402
import timing  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from pecourse.lab import train as train_mod  # noqa: E402
from pecourse.lab.model import ModelConfig, TinyGPT  # noqa: E402
from pecourse.lab.train import (  # noqa: E402
    COMPILE_AFTER_STEPS,
    RECIPES,
    TrainConfig,
    make_optimizer,
    train_step,
    wants_compile,
)

MAIN = "pecourse train step"
COURSE_COMPILED = "pecourse train step, compiled"
COMPILED = "torch.compile(TinyGPT)"
ENCODER = "nn.TransformerEncoder"
BASELINES = (COMPILED, ENCODER)
#: A run long enough that the course's loop compiles (``compile="auto"``).
RUN_LONG = 2 * COMPILE_AFTER_STEPS


class EncoderLM(nn.Module):
    """torch's ``nn.TransformerEncoder`` as a causal character model the size of ``config``:
    the same embedding, final LayerNorm, tied output layer and loss as :class:`TinyGPT`."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        layer = nn.TransformerEncoderLayer(
            config.d_model,
            config.n_heads,
            dim_feedforward=config.mlp_ratio * config.d_model,
            dropout=0.0,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(
            layer, config.n_layers, norm=nn.LayerNorm(config.d_model), enable_nested_tensor=False
        )
        mask = nn.Transformer.generate_square_subsequent_mask(config.train_len)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, idx, positions=None, targets=None):
        x = self.encoder(self.tok_emb(idx), mask=self.mask, is_causal=True)
        logits = x @ self.tok_emb.weight.T
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
        return logits, loss


def torch_adamw(model: nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """The course's AdamW (same groups and hyper-parameters) in torch's default
    implementation, as a baseline written with plain torch would have it."""
    groups = make_optimizer(model, cfg).param_groups
    return torch.optim.AdamW(
        [{"params": g["params"], "weight_decay": g["weight_decay"]} for g in groups],
        lr=cfg.lr,
        betas=(0.9, 0.95),
    )


def _stepper(net, opt, cfg: TrainConfig, batches):
    """A no-argument function running one training step on the next batch (as the loop does,
    it reads the loss, which waits for the step to finish)."""
    pool = itertools.cycle(batches)

    def step():
        x, y, answer, positions = next(pool)
        return train_step(net, opt, cfg, x, y, answer, positions).item()

    return step


def _agreement(compiled, eager, batch) -> float:
    """Largest difference between the compiled and the eager model's loss and gradients on
    one batch, from the same weights: the compiled baseline is only timed if it is right."""
    x, y, _, positions = batch
    grads = []
    for net, model in ((compiled, compiled), (eager, eager)):
        model.zero_grad(set_to_none=True)
        _, loss = net(x, positions, y)
        loss.backward()
        grads.append([loss.detach()] + [p.grad.clone() for p in model.parameters()])
        model.zero_grad(set_to_none=True)
    return max(float((a - b).abs().max()) for a, b in zip(*grads))


def _cpu_time_rounds(fns: dict, *, rounds: int, steps: int) -> dict:
    """The CPU time a step takes (``time.process_time``: this process's threads, all of
    them), each round running every variant ``steps`` times in turn. On a machine shared
    with other jobs, wall time also counts the time the step waited for a core; CPU time
    does not, so at one thread it is what the step costs (at two, it also counts what one
    thread spends waiting for the other). Returns the median per variant and, per round,
    the ratio of the course's step to the faster baseline (median, p20, p80, every round)."""
    per_round = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.process_time()
            for _ in range(steps):
                fn()
            per_round[name].append((time.process_time() - start) / steps)
    ratios = sorted(
        min(per_round[b][i] for b in BASELINES) / per_round[MAIN][i] for i in range(rounds)
    )

    def q(xs, f):
        return xs[min(len(xs) - 1, round(f * (len(xs) - 1)))]

    return {
        "steps_per_round": steps,
        "rounds": rounds,
        "median_ms": {n: round(q(sorted(t), 0.5) * 1e3, 3) for n, t in per_round.items()},
        "speedup_vs_faster_baseline": {
            "median": q(ratios, 0.5),
            "p20": q(ratios, 0.2),
            "p80": q(ratios, 0.8),
            "per_round": ratios,
        },
    }


def run(
    recipe: str, *, rounds: int, min_run_time: float, threads: int, quick: bool, repeats: int = 1
) -> dict:
    model_options = dict(RECIPES[recipe]["model"])
    train_options = {**RECIPES[recipe]["train"], "threads": threads, "init_from": None}
    if quick:
        model_options.update(d_model=16, n_layers=1, n_heads=2, train_len=16)
        train_options.update(batch_size=2)
    mc = ModelConfig.from_dict(model_options)
    cfg = TrainConfig.from_dict(train_options)
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    batches = [
        (*train_mod._batch(cfg, mc.train_len, g), train_mod._positions(cfg, mc.train_len, g))
        for _ in range(8)
    ]
    tokens = cfg.batch_size * mc.train_len

    torch.manual_seed(0)
    models = {
        MAIN: TinyGPT(mc),
        COURSE_COMPILED: TinyGPT(mc),
        COMPILED: TinyGPT(mc),
        ENCODER: EncoderLM(mc),
    }
    for name in (COURSE_COMPILED, COMPILED):
        models[name].load_state_dict(models[MAIN].state_dict())  # same start
    for m in models.values():
        m.train()
    # The course's compiled model first, on a cold inductor cache: its check and first step
    # are what compiling costs a run (the baseline, compiled next, reuses what this compile cached).
    first_step_s, fns = {}, {}
    start = time.perf_counter()
    course_net, compiled = train_mod.prepare_network(
        models[COURSE_COMPILED], replace(cfg, compile="yes"), batches[0]
    )
    if not compiled:
        raise RuntimeError("the course's compiled model failed its check on this machine")
    fns[COURSE_COMPILED] = _stepper(
        course_net, make_optimizer(models[COURSE_COMPILED], cfg), cfg, batches
    )
    fns[COURSE_COMPILED]()
    first_step_s[COURSE_COMPILED] = time.perf_counter() - start
    start = time.perf_counter()
    compiled_baseline = torch.compile(models[COMPILED])
    # checked like the course's: both models still hold the same weights
    compile_error = _agreement(compiled_baseline, models[MAIN], batches[0])
    if not compile_error < 1e-4:
        raise RuntimeError(f"torch.compile(TinyGPT) disagrees with eager by {compile_error:.3g}")
    checked_s = time.perf_counter() - start  # on the cache the course's compile filled
    setups = {
        MAIN: (models[MAIN], make_optimizer(models[MAIN], cfg)),
        COMPILED: (compiled_baseline, torch_adamw(models[COMPILED], cfg)),
        ENCODER: (models[ENCODER], torch_adamw(models[ENCODER], cfg)),
    }
    for name, (net, opt) in setups.items():
        fns[name] = _stepper(net, opt, cfg, batches)
        start = time.perf_counter()
        fns[name]()
        first_step_s[name] = time.perf_counter() - start
    first_step_s[COMPILED] += checked_s
    fns = {name: fns[name] for name in (MAIN, COURSE_COMPILED, COMPILED, ENCODER)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", timing.LoadWarning)
        results = [
            timing.compare(
                fns, rounds=rounds, baseline=MAIN, min_run_time=min_run_time, num_threads=threads
            )
            for _ in range(repeats)
        ]
    # Each repeat's ratio of the course's step to the baseline it leads by the least.
    repeat_speedups = [min(res["ratios"][name] ** -1 for name in BASELINES) for res in results]
    cpu = _cpu_time_rounds(fns, rounds=rounds * repeats, steps=2 if quick else 10)
    # The table: every repeat's step times together, ratios as medians over all rounds.
    res = {
        "timings": {
            name: timing.Timing(
                [x for r in results for x in r["timings"][name].times],
                label=name,
                runs=sum(r["timings"][name].runs for r in results),
            )
            for name in fns
        },
        "ratios": {
            name: sorted(r["ratios"][name] for r in results)[len(results) // 2] for name in fns
        },
    }
    t = res["timings"]
    rows = []
    for name in fns:
        rows.append(
            {
                "variant": name,
                "tokens_per_s": tokens / t[name].median,
                "median_ms": t[name].median * 1e3,
                "p20_ms": t[name].p20 * 1e3,
                "p80_ms": t[name].p80 * 1e3,
                "best_ms": t[name].min * 1e3,
                "count": t[name].count,
                "main_speedup": res["ratios"][name] ** -1,  # main's speed / this one's
                "first_step_s": first_step_s[name],
            }
        )
    print(
        f"\n== training step on CPU, recipe {recipe!r} ({mc.plan}, d_model {mc.d_model}, "
        f"{mc.n_layers} layers, {mc.n_heads} heads, {cfg.batch_size} x {mc.train_len} tokens), "
        f"{threads} thread(s) =="
    )
    print(
        _common.table(
            rows,
            [
                ("variant", "variant", ""),
                ("tokens_per_s", "tokens/s", ".0f"),
                ("median_ms", "median ms", ".2f"),
                ("p20_ms", "p20", ".2f"),
                ("p80_ms", "p80", ".2f"),
                ("best_ms", "best", ".2f"),
                ("main_speedup", "pecourse x", ".2f"),
                ("first_step_s", "first step s", ".1f"),
            ],
        )
    )
    for w in caught[:1]:
        print(f"(warning: {w.message})")
    by = {r["variant"]: r for r in rows}
    # The baseline the course's step leads by the least, in the per-round ratios (on a quiet
    # machine the one with the higher tokens/s; on a busy one the ratios are the safer read).
    faster = min(BASELINES, key=lambda n: by[n]["main_speedup"])
    speedup = by[faster]["main_speedup"]
    targets = {
        "variant": MAIN,
        "faster_baseline": faster,
        "speedup_vs_faster_baseline": speedup,
        # each repeat's own side-by-side ratio against whichever baseline was faster in it
        "speedup_per_repeat": repeat_speedups,
        # the fastest step of each: what a quiet machine would show (a check on the medians)
        "best_step_speedup_vs_faster_baseline": by[faster]["best_ms"] / by[MAIN]["best_ms"],
        "speedup_target": 1.0,
    }
    # Whole runs: what a learner waits for. The course's loop compiles only where a run repays
    # it (compile="auto"); the compiled baseline always compiles. Both compile the same model
    # and check it against eager, so both pay the cold compile measured for the course's (the
    # baseline's own, on the cache that compile had just filled, would understate it).
    once = {**first_step_s, COMPILED: first_step_s[COURSE_COMPILED]}
    runs = {}
    for steps in (cfg.steps, RUN_LONG):
        loop = COURSE_COMPILED if wants_compile(replace(cfg, steps=steps)) else MAIN
        per_repeat = []
        for r in results:
            secs = {n: once[n] + steps * r["timings"][n].median for n in fns}
            per_repeat.append(min(secs[b] for b in BASELINES) / secs[loop])
        runs[str(steps)] = {
            "course_loop_runs": loop,
            "seconds": {n: once[n] + steps * by[n]["median_ms"] / 1e3 for n in fns},
            "speedup_vs_faster_baseline_per_repeat": per_repeat,
        }
    targets["runs"] = runs
    targets["speedup_met"] = all(
        min(v["speedup_vs_faster_baseline_per_repeat"]) >= 1.0 for v in runs.values()
    )
    targets["speedup_met_per_step_eager"] = min(repeat_speedups) >= 1.0
    print(f"\ntargets: {targets}")
    print(f"CPU time a step (ms, median over rounds): {cpu['median_ms']}")
    print(f"CPU-time ratio vs the faster baseline: {cpu['speedup_vs_faster_baseline']}")
    # What compiling costs once and saves a step: how many steps repay it (this run's cache)
    saved = by[MAIN]["median_ms"] - by[COURSE_COMPILED]["median_ms"]
    cost = by[COURSE_COMPILED]["first_step_s"] - by[MAIN]["first_step_s"]
    break_even = cost / (saved / 1e3) if saved > 0 else None
    print(
        f"compiling cost {cost:.1f} s once and saves {saved:.2f} ms a step: "
        + (f"repaid after {break_even:.0f} steps" if break_even else "never repaid")
    )
    return {
        "recipe": recipe,
        "model": mc.to_dict(),
        "batch_size": cfg.batch_size,
        "tokens_per_step": tokens,
        "threads": threads,
        "rounds": rounds,
        "repeats": repeats,
        "rows": rows,
        "compiled_vs_eager_max_abs_error": compile_error,
        "compile_cost_s": cost,
        "compile_saves_ms_per_step": saved,
        "compile_break_even_steps": break_even,
        "load_warnings": [str(w.message) for w in caught],
        "targets": targets,
        "cpu_time": cpu,
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a tiny model, one round (a smoke test)")
    p.add_argument("--recipe", default="rope", choices=sorted(RECIPES))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--repeats", type=int, default=3, help="side-by-side comparisons in a row")
    p.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    args = p.parse_args(argv)
    rounds = 1 if args.quick else args.rounds
    res = run(
        args.recipe,
        rounds=rounds,
        min_run_time=0.02 if args.quick else 0.5,
        threads=args.threads,
        quick=args.quick,
        repeats=1 if args.quick else args.repeats,
    )
    path = _common.write_results("train_cpu" + ("_quick" if args.quick else ""), res, args.out)
    print(f"wrote {path}")
    return res


if __name__ == "__main__":
    main()
