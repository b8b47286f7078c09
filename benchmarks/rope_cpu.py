"""CPU RoPE, side by side in one run: the public fast call ``pecourse.kernels.apply_rope``
(positions in, cached cos/sin table, C kernel) and the bare kernel vs transformers' eager
``apply_rotary_pos_emb``, vs ``torch.compile`` of it, vs the package's readable reference,
vs a same-size copy (the memory-bandwidth limit). Forward, and forward + backward.

    .venv/bin/python benchmarks/rope_cpu.py [--quick] [--threads N] [--rounds R]

Queries and keys ``[4, 8, 2048, 64]`` float32, positions repeated from call to call (as in
every layer of a forward pass). Targets for ``pecourse.kernels.apply_rope``: forward >= 0.8x
the speed of a copy and >= 5x transformers' eager code; forward + backward >= 0.6x a copy.
transformers is given its cos/sin tables ready-made (its rotary module builds them once per
forward); ``apply_rope`` is given positions and finds its table in the cache. The cost of a
call that must build the table (the first call for new positions) is a separate row.
Ratios are medians of per-round ratios, each round timing every variant once, so a busy
machine slows all of them alike. Results go to ``benchmarks/results/rope_cpu.json``.
"""

from __future__ import annotations

import argparse
import warnings

import _common
import timing
import torch

from pecourse import kernels
from pecourse.kernels import rope_cpu
from pecourse.kernels.rope import TABLES
from pecourse.positions import rope as rope_mod
from pecourse.positions.rotary import rotate_pairs

MAIN = "pecourse.kernels.apply_rope"
FIRST_CALL = "apply_rope, table built (first call)"


def _variants(q, k, cos, sin, *, backward: bool):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    hf_cos = torch.cat((cos, cos), -1)[None]  # transformers' duplicated [1, seq, dim] tables
    hf_sin = torch.cat((sin, sin), -1)[None]
    hf_compiled = torch.compile(apply_rotary_pos_emb, dynamic=False)

    def fast(a, b, pairing="half"):
        return rope_cpu.rotate(a, cos, sin, pairing=pairing), rope_cpu.rotate(
            b, cos, sin, pairing=pairing
        )

    def reference(a, b):
        return rotate_pairs(a, cos, sin), rotate_pairs(b, cos, sin)

    positions = torch.arange(q.shape[2])

    def public(a, b):
        return kernels.apply_rope(a, positions), kernels.apply_rope(b, positions)

    def first_call(a, b):
        TABLES.clear()  # new positions: the table is built (then reused for b)
        return public(a, b)

    public(q, k)  # the one table build; every later call of `public` finds it
    forwards = {
        MAIN: public,
        FIRST_CALL: first_call,
        "pecourse fast (half)": lambda a, b: fast(a, b),
        "pecourse fast (interleaved)": lambda a, b: fast(a, b, "interleaved"),
        "pecourse reference": reference,
        "transformers eager": lambda a, b: apply_rotary_pos_emb(a, b, hf_cos, hf_sin),
        "transformers torch.compile": lambda a, b: hf_compiled(a, b, hf_cos, hf_sin),
    }
    if not backward:
        fns = {"copy (same size)": lambda: (q.clone(), k.clone())}
        fns.update({name: (lambda f=f: f(q, k)) for name, f in forwards.items()})
        return fns
    qg, kg = q.detach().requires_grad_(), k.detach().requires_grad_()
    gq, gk = torch.randn_like(q), torch.randn_like(k)
    # forward + backward moves twice the data: the copy baseline copies twice as much
    fns = {"copy (same size)": lambda: (q.clone(), k.clone(), gq.clone(), gk.clone())}
    for name, f in forwards.items():
        fns[name] = lambda f=f: torch.autograd.grad(f(qg, kg), (qg, kg), (gq, gk))
    return fns


def run(shape, *, rounds: int, min_run_time: float, threads: int) -> dict:
    b, h, s, d = shape
    g = torch.Generator().manual_seed(0)
    q = torch.randn(b, h, s, d, generator=g)
    k = torch.randn(b, h, s, d, generator=g)
    cos, sin = rope_mod.rope_cos_sin(torch.arange(s), rope_mod.inv_freq(d))
    nbytes = 2 * (q.nbytes + k.nbytes)  # read q, k; write both outputs
    out = {
        "shape": list(shape),
        "dtype": "float32",
        "threads": threads,
        "backend": rope_cpu.backend(),
    }
    for mode, backward in (("forward", False), ("forward+backward", True)):
        fns = _variants(q, k, cos, sin, backward=backward)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", timing.LoadWarning)
            res = timing.compare(
                fns,
                rounds=rounds,
                baseline="transformers eager",
                min_run_time=min_run_time,
                num_threads=threads,
            )
        t = res["timings"]
        per_round_vs_copy = {}
        # copy-relative speed from the same rounds: copy_median / variant_median
        for name in fns:
            per_round_vs_copy[name] = t["copy (same size)"].median / t[name].median
        rows = []
        for name in fns:
            rows.append(
                {
                    "variant": name,
                    "median_ms": t[name].median * 1e3,
                    "p20_ms": t[name].p20 * 1e3,
                    "p80_ms": t[name].p80 * 1e3,
                    "count": t[name].count,
                    "speedup_vs_transformers_eager": res["ratios"][name],
                    "speed_vs_copy": per_round_vs_copy[name],
                    "gbps": t[name].gbps(nbytes * (2 if backward else 1)),
                }
            )
        out[mode] = {
            "rows": rows,
            "load_warnings": [str(w.message) for w in caught],
        }
        print(f"\n== RoPE on CPU, q and k {list(shape)} float32, {mode}, {threads} thread(s) ==")
        print(
            _common.table(
                rows,
                [
                    ("variant", "variant", ""),
                    ("median_ms", "median ms", ".2f"),
                    ("p20_ms", "p20", ".2f"),
                    ("p80_ms", "p80", ".2f"),
                    ("speedup_vs_transformers_eager", "x vs HF eager", ".2f"),
                    ("speed_vs_copy", "x copy speed", ".2f"),
                    ("gbps", "GB/s", ".1f"),
                ],
            )
        )
        for w in caught[:1]:
            print(f"(warning: {w.message})")
    fwd = {r["variant"]: r for r in out["forward"]["rows"]}[MAIN]
    both = {r["variant"]: r for r in out["forward+backward"]["rows"]}[MAIN]
    out["targets"] = {
        "variant": MAIN,
        "speedup_vs_transformers_eager": fwd["speedup_vs_transformers_eager"],
        "speedup_target": 5.0,
        "speedup_met": fwd["speedup_vs_transformers_eager"] >= 5.0,
        "speed_vs_copy": fwd["speed_vs_copy"],
        "copy_target": 0.8,
        "copy_met": fwd["speed_vs_copy"] >= 0.8,
        "forward_backward_speed_vs_copy": both["speed_vs_copy"],
        "forward_backward_copy_target": 0.6,
        "forward_backward_copy_met": both["speed_vs_copy"] >= 0.6,
    }
    first = {r["variant"]: r for r in out["forward"]["rows"]}[FIRST_CALL]
    out["first_call_extra_ms"] = first["median_ms"] - fwd["median_ms"]
    print(f"\ntargets: {out['targets']}")
    print(f"building the table costs {out['first_call_extra_ms']:.2f} ms more on a first call")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small shape, one round (a smoke test)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    args = p.parse_args(argv)
    shape = (1, 2, 128, 64) if args.quick else (4, 8, 2048, 64)
    rounds = 1 if args.quick else args.rounds
    res = run(shape, rounds=rounds, min_run_time=0.02 if args.quick else 0.25, threads=args.threads)
    path = _common.write_results("rope_cpu" + ("_quick" if args.quick else ""), res, args.out)
    print(f"wrote {path}")
    return res


if __name__ == "__main__":
    main()
