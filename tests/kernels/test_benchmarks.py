"""The benchmark scripts' CPU-safe parts: gpu_all.py's smoke mode and its refusal without a
GPU, and the table helper. (The timed runs themselves are not tests.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _run(args, tmp_path, **env):
    full_env = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, str(BENCH / "gpu_all.py"), *args, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
    )


@pytest.mark.slow
def test_gpu_all_smoke_runs_the_same_code_on_cpu(tmp_path):
    pytest.importorskip("triton")
    out = _run(["--smoke", "--no-compile", "--no-flex"], tmp_path, TRITON_INTERPRET="1")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    doc = json.loads((tmp_path / "gpu_all_smoke.json").read_text())
    assert doc["smoke"] and not doc["errors"]
    assert doc["machine"]["torch"] == torch.__version__
    assert doc["rope"]["backend"] == "triton-interpreter"
    assert doc["copy"]["gbps"] > 0
    for case in doc["rope"]["cases"]:
        assert case["max_abs_error_vs_reference"] <= 2e-2
        names = [r["variant"] for r in case["rows"]]
        assert "triton fused fwd" in names and "triton fused bwd (rotation by -theta)" in names
        assert all(r["p20_us"] <= r["median_us"] <= r["p80_us"] for r in case["rows"])
    assert "fused RoPE" in out.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without a GPU")
def test_gpu_all_refuses_cleanly_without_a_gpu(tmp_path):
    out = _run([], tmp_path)
    assert out.returncode == 2
    assert "needs a CUDA GPU" in out.stdout and "--smoke" in out.stdout
    assert "Traceback" not in out.stderr


def test_table_helper():
    sys.path.insert(0, str(BENCH))
    try:
        import _common
    finally:
        sys.path.remove(str(BENCH))
    text = _common.table(
        [{"name": "a", "x": 1.5}, {"name": "bb", "x": None}],
        [("name", "name", ""), ("x", "value", ".2f")],
    )
    lines = text.splitlines()
    assert lines[0].split() == ["name", "value"] and lines[2].split() == ["a", "1.50"]
    assert lines[3].split() == ["bb", "-"]
