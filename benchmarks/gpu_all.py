"""Every GPU benchmark of the course in one run (an H200 takes a few minutes).

    python benchmarks/gpu_all.py                # on a machine with a CUDA GPU
    python benchmarks/gpu_all.py --smoke        # anywhere: tiny shapes, CPU, checks the script

What it measures, each kernel checked against the package's reference before it is timed
(CUDA events around each repetition, L2 flushed in between — `benchmarks/timing.py`):

1. the device's copy bandwidth (``dst.copy_(src)`` of the same bytes as q + k) — the roof;
2. the fused Triton RoPE (``pecourse.kernels.rope_triton.rope_qk``) forward and backward
   (the backward kernel is the rotation by -theta), float32 and bfloat16, MHA and GQA:
   achieved GB/s and the fraction of the copy bandwidth (target >= 85%);
3. the same work by transformers' eager ``apply_rotary_pos_emb``, by ``torch.compile`` of
   it, and by Liger-Kernel's Triton RoPE where ``liger-kernel`` imports (or pip-installs);
4. ALiBi attention: FlexAttention (bias inside the kernel, causal block mask) vs SDPA with a
   materialised ``[heads, L, L]`` mask vs the package's math attention, forward and backward,
   with the bytes of position information each needs.

Results (with the GPU's name) go to ``benchmarks/results/gpu_all.json``. ``--smoke`` runs the
same code paths on the CPU with tiny shapes (Triton under ``TRITON_INTERPRET=1`` when set,
else the PyTorch fallback) and writes ``gpu_all_smoke.json``; it exists so that the script is
tested where there is no GPU.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import time
import traceback
import warnings

import _common
import timing
import torch
import torch.nn.functional as F

from pecourse.positions import rope as rope_mod


def log(msg: str) -> None:
    print(msg, flush=True)


def _time(fn, device, min_run_time):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", timing.LoadWarning)
        return timing.benchmark(fn, device=device, min_run_time=min_run_time, warmup=3)


def _row(name, t, nbytes=None, roof=None, extra=None):
    row = {
        "variant": name,
        "median_us": t.median * 1e6,
        "p20_us": t.p20 * 1e6,
        "p80_us": t.p80 * 1e6,
        "min_us": t.min * 1e6,
        "count": t.count,
    }
    if nbytes is not None:
        row["gbps"] = t.gbps(nbytes)
        if roof:
            row["fraction_of_copy"] = row["gbps"] / roof
    row.update(extra or {})
    return row


ROPE_COLUMNS = [
    ("variant", "variant", ""),
    ("median_us", "median us", ".1f"),
    ("p20_us", "p20", ".1f"),
    ("p80_us", "p80", ".1f"),
    ("gbps", "GB/s", ".0f"),
    ("fraction_of_copy", "of copy", ".2f"),
]


# --------------------------------------------------------------------------------------
# 1. copy bandwidth
# --------------------------------------------------------------------------------------


def copy_bandwidth(nbytes: int, device, min_run_time) -> dict:
    n = nbytes // 4
    src = torch.randn(n, device=device)
    dst = torch.empty_like(src)
    t = _time(lambda: dst.copy_(src), device, min_run_time)
    return _row(f"copy {nbytes / 2**20:.0f} MiB", t, 2 * src.nbytes)


# --------------------------------------------------------------------------------------
# 2-3. RoPE
# --------------------------------------------------------------------------------------


def _liger():
    """Liger-Kernel's ``liger_rotary_pos_emb``, installing the package if needed; or a reason."""
    try:
        mod = importlib.import_module("liger_kernel.transformers.rope")
        return mod.liger_rotary_pos_emb, None
    except Exception as exc:
        first = f"{type(exc).__name__}: {exc}"
    try:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-deps", "--retries", "0"]
            + ["--timeout", "10", "liger-kernel"],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        importlib.invalidate_caches()
        mod = importlib.import_module("liger_kernel.transformers.rope")
        return mod.liger_rotary_pos_emb, None
    except Exception as exc:
        return None, f"liger-kernel unavailable ({first}; pip install failed: {exc})"


def _rope_case(device, shape, min_run_time, roof, hf_compiled, liger) -> dict:
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    from pecourse.kernels import rope_triton

    b, hq, hk, s, d, dtype = shape
    g = torch.Generator(device="cpu").manual_seed(0)
    q = torch.randn(b, hq, s, d, generator=g).to(device=device, dtype=dtype)
    k = torch.randn(b, hk, s, d, generator=g).to(device=device, dtype=dtype)
    pos = torch.arange(s, device=device)
    math = torch.float64 if dtype == torch.float64 else torch.float32
    cos, sin = rope_mod.rope_cos_sin(pos, rope_mod.inv_freq(d, device=device), dtype=math)
    hf_cos = torch.cat((cos, cos), -1)[None].to(dtype)
    hf_sin = torch.cat((sin, sin), -1)[None].to(dtype)
    nbytes = 2 * (q.nbytes + k.nbytes) + cos.nbytes + sin.nbytes
    case = {
        "shape_q": [b, hq, s, d],
        "shape_k": [b, hk, s, d],
        "dtype": str(dtype),
        "bytes_moved": nbytes,
        "rows": [],
    }
    # correctness before speed
    q_rot, k_rot = rope_triton.rope_qk(q, k, cos, sin)
    ref_q = rope_mod.apply_rope(q, pos)
    ref_k = rope_mod.apply_rope(k, pos)
    case["max_abs_error_vs_reference"] = max(
        (q_rot.float() - ref_q.float()).abs().max().item(),
        (k_rot.float() - ref_k.float()).abs().max().item(),
    )
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    assert case["max_abs_error_vs_reference"] <= tol, case
    case["roof_copy_gbps"] = roof
    rows = case["rows"]
    rows.append(
        _row(
            "triton fused fwd",
            _time(lambda: rope_triton.rope_qk(q, k, cos, sin), device, min_run_time),
            nbytes,
            roof,
        )
    )
    rows.append(
        _row(
            "triton fused bwd (rotation by -theta)",
            _time(lambda: rope_triton.rope_qk(q, k, cos, sin, inverse=True), device, min_run_time),
            nbytes,
            roof,
        )
    )
    rows.append(
        _row(
            "transformers eager fwd",
            _time(lambda: apply_rotary_pos_emb(q, k, hf_cos, hf_sin), device, min_run_time),
            nbytes,
            roof,
        )
    )
    if hf_compiled is not None:
        rows.append(
            _row(
                "transformers torch.compile fwd",
                _time(lambda: hf_compiled(q, k, hf_cos, hf_sin), device, min_run_time),
                nbytes,
                roof,
            )
        )
    if liger is not None:
        try:
            lq, lk = liger(q.clone(), k.clone(), hf_cos, hf_sin)
            torch.testing.assert_close(lq, ref_q, rtol=tol, atol=tol)
            rows.append(
                _row(
                    "liger-kernel fwd",
                    _time(lambda: liger(q, k, hf_cos, hf_sin), device, min_run_time),
                    nbytes,
                    roof,
                )
            )
        except Exception as exc:
            case["liger_error"] = f"{type(exc).__name__}: {exc}"
    # forward + backward through autograd (2x the bytes)
    qg, kg = q.detach().requires_grad_(), k.detach().requires_grad_()
    gq, gk = torch.randn_like(q), torch.randn_like(k)

    def fused_fb():
        return torch.autograd.grad(rope_triton.rope_qk(qg, kg, cos, sin), (qg, kg), (gq, gk))

    def hf_fb():
        return torch.autograd.grad(apply_rotary_pos_emb(qg, kg, hf_cos, hf_sin), (qg, kg), (gq, gk))

    rows.append(
        _row("triton fused fwd+bwd", _time(fused_fb, device, min_run_time), 2 * nbytes, roof)
    )
    rows.append(
        _row("transformers eager fwd+bwd", _time(hf_fb, device, min_run_time), 2 * nbytes, roof)
    )
    fwd = rows[0]
    case["triton_fwd_fraction_of_copy"] = fwd.get("fraction_of_copy")
    case["triton_bwd_fraction_of_copy"] = rows[1].get("fraction_of_copy")
    log(f"\n== fused RoPE, q {case['shape_q']} k {case['shape_k']} {case['dtype']} ==")
    log(_common.table(rows, ROPE_COLUMNS))
    return case


def rope_benchmarks(device, shapes, *, min_run_time, roofs, use_compile, try_liger) -> dict:
    """``roofs`` maps each shape to the copy bandwidth (GB/s) measured for its size."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    from pecourse.kernels import rope_triton

    out = {"backend": rope_triton.backend(device), "cases": []}
    liger, liger_reason = _liger() if try_liger else (None, "skipped (--no-liger)")
    out["liger"] = liger_reason or "ok"
    hf_compiled = torch.compile(apply_rotary_pos_emb, dynamic=False) if use_compile else None
    for shape in shapes:
        out["cases"].append(
            _rope_case(device, shape, min_run_time, roofs[shape], hf_compiled, liger)
        )
    return out


# --------------------------------------------------------------------------------------
# 4. ALiBi attention
# --------------------------------------------------------------------------------------


def _flex_case(device, shape, compiled, min_run_time) -> dict:
    from pecourse.attention import attention
    from pecourse.kernels import flex
    from pecourse.positions.alibi import ALiBi

    b, h, s, d, dtype = shape
    g = torch.Generator(device="cpu").manual_seed(0)
    q, k, v = (
        torch.randn(b, h, s, d, generator=g).to(device=device, dtype=dtype) for _ in range(3)
    )
    mask = flex.mask_for(s, s, device=device)
    bias = flex.materialised_alibi_mask(h, s, s, causal=True, device=device).to(dtype)
    scheme = ALiBi(h).to(device)
    flex_out = flex.flex_attention_alibi(q, k, v, mask=mask, compiled=compiled)
    sdpa_out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    err = (flex_out.float() - sdpa_out.float()).abs().max().item()
    mem = flex.memory_report(h, s, causal=True)
    fns = {
        "SDPA + materialised ALiBi mask": lambda: F.scaled_dot_product_attention(
            q, k, v, attn_mask=bias
        ),
        "FlexAttention ALiBi": lambda: flex.flex_attention_alibi(
            q, k, v, mask=mask, compiled=compiled
        ),
        "SDPA is_causal, no bias": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    }
    if s <= 4096:
        fns["math attention + ALiBi"] = lambda: attention(q, k, v, scheme, causal=True)
    rows = []
    for name, fn in fns.items():
        with torch.no_grad():
            t = _time(fn, device, min_run_time)
        rows.append(_row(name + " fwd", t))
    if device.type == "cuda":  # FlexAttention has a backward on GPUs only
        qg, kg, vg = (x.detach().requires_grad_() for x in (q, k, v))
        go = torch.randn_like(q)

        def flex_fb():
            o = flex.flex_attention_alibi(qg, kg, vg, mask=mask, compiled=compiled)
            return torch.autograd.grad(o, (qg, kg, vg), go)

        def sdpa_fb():
            o = F.scaled_dot_product_attention(qg, kg, vg, attn_mask=bias)
            return torch.autograd.grad(o, (qg, kg, vg), go)

        rows.append(
            _row("SDPA + materialised ALiBi mask fwd+bwd", _time(sdpa_fb, device, min_run_time))
        )
        rows.append(_row("FlexAttention ALiBi fwd+bwd", _time(flex_fb, device, min_run_time)))
    base = rows[0]["median_us"]
    for r in rows:
        r["time_vs_sdpa_mask_fwd"] = r["median_us"] / base
    case = {
        "shape": [b, h, s, d],
        "dtype": str(dtype),
        "max_abs_difference_flex_vs_sdpa": err,
        "memory": mem,
        "rows": rows,
    }
    log(f"\n== ALiBi attention {case['shape']} {case['dtype']} causal ==")
    log(
        _common.table(
            rows,
            [
                ("variant", "variant", ""),
                ("median_us", "median us", ".1f"),
                ("p20_us", "p20", ".1f"),
                ("p80_us", "p80", ".1f"),
                ("time_vs_sdpa_mask_fwd", "time / SDPA+mask", ".2f"),
            ],
        )
    )
    log(
        f"bias bytes: materialised {mem['materialised_bias_bytes']:,} vs flex block mask "
        f"{mem['flex_block_mask_bytes']:,} + slopes {mem['flex_alibi_bytes']}"
    )
    return case


def flex_benchmarks(device, shapes, *, min_run_time) -> dict:
    from torch.nn.attention.flex_attention import flex_attention as _flex

    compiled = torch.compile(_flex, dynamic=False)
    out = {"cases": []}
    for shape in shapes:
        out["cases"].append(_flex_case(device, shape, compiled, min_run_time))
    return out


# --------------------------------------------------------------------------------------


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU (tests)")
    p.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile variants")
    p.add_argument("--no-liger", action="store_true", help="do not try Liger-Kernel")
    p.add_argument("--no-flex", action="store_true", help="skip the attention benchmarks")
    p.add_argument("--min-run-time", type=float, default=None)
    args = p.parse_args(argv)

    ok, reason = timing.gpu_available()
    if args.smoke:
        device = torch.device("cpu")
        min_run_time = args.min_run_time or 0.01
        rope_shapes = [(1, 2, 1, 8, 16, torch.float32), (1, 4, 2, 8, 16, torch.bfloat16)]
        flex_shapes = [(1, 2, 128, 16, torch.float32)]
    elif not ok:
        log(f"gpu_all.py needs a CUDA GPU: {reason}. (Use --smoke to check the script on a CPU.)")
        sys.exit(2)
    else:
        device = torch.device("cuda")
        min_run_time = args.min_run_time or 0.3
        rope_shapes = [
            (4, 32, 32, 4096, 128, torch.bfloat16),  # Llama-2-7B-like, MHA
            (4, 32, 8, 4096, 128, torch.bfloat16),  # Llama-3-8B-like, GQA
            (4, 32, 8, 4096, 128, torch.float32),
            (4, 8, 8, 2048, 64, torch.float32),  # the CPU benchmark's shape
        ]
        flex_shapes = [(4, 16, 4096, 64, torch.bfloat16), (1, 16, 16384, 64, torch.bfloat16)]

    started = time.time()
    log(f"device: {timing.describe_machine()['device_name']} ({device})")
    result: dict = {"smoke": args.smoke, "device": str(device), "errors": {}}
    largest = max(2 * b * (hq + hk) * s * d * 4 for b, hq, hk, s, d, _ in rope_shapes)
    result["copy"] = copy_bandwidth(largest, device, min_run_time)
    log(_common.table([result["copy"]], ROPE_COLUMNS[:5]))
    roofs = {}
    for b, hq, hk, s, d, dtype in rope_shapes:  # a roof per size (same bytes as q + k)
        nb = b * (hq + hk) * s * d * torch.empty((), dtype=dtype).element_size()
        roofs[(b, hq, hk, s, d, dtype)] = copy_bandwidth(nb, device, min_run_time)["gbps"]
    try:
        rope_res = rope_benchmarks(
            device,
            rope_shapes,
            min_run_time=min_run_time,
            roofs=roofs,
            use_compile=not args.no_compile,
            try_liger=not (args.no_liger or args.smoke),
        )
        result["rope"] = rope_res
        fr = [c["triton_fwd_fraction_of_copy"] for c in rope_res["cases"]]
        result["rope_target"] = {
            "min_fwd_fraction_of_copy": min(fr),
            "target": 0.85,
            "met": min(fr) >= 0.85,
        }
    except Exception:
        result["errors"]["rope"] = traceback.format_exc()
        log(result["errors"]["rope"])
    if not args.no_flex:
        try:
            result["flex"] = flex_benchmarks(device, flex_shapes, min_run_time=min_run_time)
        except Exception:
            result["errors"]["flex"] = traceback.format_exc()
            log(result["errors"]["flex"])
    result["wall_seconds"] = time.time() - started
    name = "gpu_all_smoke" if args.smoke else "gpu_all"
    path = _common.write_results(name, result, args.out)
    log(f"\nwrote {path} in {result['wall_seconds']:.0f} s")
    if result["errors"]:
        sys.exit(1)
    return result


if __name__ == "__main__":
    main()
