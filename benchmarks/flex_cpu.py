"""Attention with an ALiBi bias on the CPU, side by side in one run: FlexAttention (compiled,
bias computed inside the kernel, causal block mask) vs SDPA with a materialised
``[heads, L, L]`` bias+mask vs the package's math attention with the ALiBi scheme (and,
for scale, SDPA with no bias at all). Forward only (FlexAttention has
no CPU backward).

    .venv/bin/python benchmarks/flex_cpu.py [--quick] [--threads N] [--rounds R]

Default ``B=1, H=8, L=2048, D=64`` float32, causal (with a block mask) and bidirectional
(the symmetric ``-m|i-j|`` bias, no mask: every tile computed). The target: FlexAttention within 1.2x
of SDPA with the materialised mask, with no ``L x L`` tensor. Also prints the bytes of
position information each needs. Results go to ``benchmarks/results/flex_cpu.json``.
"""

from __future__ import annotations

import argparse
import warnings

import _common
import timing
import torch
import torch.nn.functional as F

from pecourse.attention import attention
from pecourse.kernels import flex
from pecourse.positions.alibi import ALiBi


def run(shape, *, rounds: int, min_run_time: float, threads: int, causal: bool = True) -> dict:
    b, h, s, d = shape
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, generator=g) for _ in range(3))
    from torch.nn.attention.flex_attention import flex_attention as _flex

    compiled = torch.compile(_flex, dynamic=False)
    mask = flex.mask_for(s, s, causal=causal)
    bias = flex.materialised_alibi_mask(h, s, s, causal=causal)
    scheme = ALiBi(h, causal=causal)

    # correctness first: the three agree
    with torch.no_grad():
        out_flex = flex.flex_attention_alibi(q, k, v, causal=causal, mask=mask, compiled=compiled)
        out_sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        err = (out_flex - out_sdpa).abs().max().item()
        if s <= 1024:
            ref = attention(q, k, v, scheme, causal=causal)
            err = max(err, (out_flex - ref).abs().max().item())
    fns = {
        "SDPA + materialised ALiBi mask": lambda: F.scaled_dot_product_attention(
            q, k, v, attn_mask=bias
        ),
        "FlexAttention ALiBi (compiled)": lambda: flex.flex_attention_alibi(
            q, k, v, causal=causal, mask=mask, compiled=compiled
        ),
        "math attention + ALiBi scheme": lambda: attention(q, k, v, scheme, causal=causal),
        "SDPA, no bias (for scale)": lambda: F.scaled_dot_product_attention(
            q, k, v, is_causal=causal
        ),
    }
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", timing.LoadWarning)
        res = timing.compare(
            fns,
            rounds=rounds,
            baseline="SDPA + materialised ALiBi mask",
            min_run_time=min_run_time,
            num_threads=threads,
        )
    mem = flex.memory_report(h, s, causal=causal)
    position_bytes = {
        "SDPA + materialised ALiBi mask": mem["materialised_bias_bytes"],
        "FlexAttention ALiBi (compiled)": mem["flex_block_mask_bytes"] + mem["flex_alibi_bytes"],
        "math attention + ALiBi scheme": mem["materialised_bias_bytes"],
        "SDPA, no bias (for scale)": 0,
    }
    flops = 4 * b * h * s * s * d / (2 if causal else 1)  # two matmuls (causal: half)
    rows = []
    for name, t in res["timings"].items():
        rows.append(
            {
                "variant": name,
                "median_ms": t.median * 1e3,
                "p20_ms": t.p20 * 1e3,
                "p80_ms": t.p80 * 1e3,
                "count": t.count,
                "time_vs_sdpa_mask": 1.0 / res["ratios"][name],
                "gflops": t.tflops(flops) * 1e3,
                "position_bytes": position_bytes[name],
            }
        )
    kind = "causal" if causal else "bidirectional (no mask)"
    print(f"\n== ALiBi attention on CPU, {list(shape)} float32, {kind}, {threads} thread(s) ==")
    print(
        _common.table(
            rows,
            [
                ("variant", "variant", ""),
                ("median_ms", "median ms", ".1f"),
                ("p20_ms", "p20", ".1f"),
                ("p80_ms", "p80", ".1f"),
                ("time_vs_sdpa_mask", "time / SDPA+mask", ".2f"),
                ("gflops", "GFLOP/s", ".1f"),
                ("position_bytes", "position bytes", ",d"),
            ],
        )
    )
    for w in caught[:1]:
        print(f"(warning: {w.message})")
    flex_ratio = rows[1]["time_vs_sdpa_mask"]
    out = {
        "shape": list(shape),
        "dtype": "float32",
        "causal": causal,
        "threads": threads,
        "max_abs_difference": err,
        "rows": rows,
        "memory": mem,
        "load_warnings": [str(w.message) for w in caught],
        "targets": {
            "flex_time_over_sdpa_mask": flex_ratio,
            "target": 1.2,
            "met": flex_ratio <= 1.2,
            "flex_has_no_LxL_tensor": mem["flex_block_mask_bytes"] < s * s,
        },
    }
    print(f"max |flex - sdpa| = {err:.2e}; memory: {mem}")
    print(f"target (flex time / SDPA+mask time <= 1.2): {out['targets']}")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small shape, one round (a smoke test)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--length", type=int, default=2048)
    p.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    args = p.parse_args(argv)
    shape = (1, 2, 256, 32) if args.quick else (1, 8, args.length, 64)
    res = {
        kind: run(
            shape,
            rounds=1 if args.quick else args.rounds,
            min_run_time=0.02 if args.quick else 0.5,
            threads=args.threads,
            causal=kind == "causal",
        )
        for kind in ("causal", "bidirectional")
    }
    path = _common.write_results("flex_cpu" + ("_quick" if args.quick else ""), res, args.out)
    print(f"wrote {path}")
    return res


if __name__ == "__main__":
    main()
