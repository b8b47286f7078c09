"""The timing harness: sane CPU numbers, conversions, the load warning, GPU refusal."""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import pytest
import torch

# The harness lives with the benchmarks that use it (benchmarks/timing.py), not in the package.
_spec = importlib.util.spec_from_file_location(
    "benchmarks_timing", Path(__file__).resolve().parents[2] / "benchmarks" / "timing.py"
)
timing = sys.modules["benchmarks_timing"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(timing)


def test_cpu_branch_returns_sane_numbers():
    x = torch.randn(256, 256)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", timing.LoadWarning)
        t = timing.benchmark(lambda: x @ x, label="matmul", min_run_time=0.05)
    assert t.count > 0 and t.runs >= t.count and len(t.times) == t.count
    assert 0 < t.min <= t.p20 <= t.median <= t.p80 <= max(t.times)
    assert t.num_threads == 1 and t.device == "cpu"
    flops = 2 * 256**3
    assert t.tflops(flops) == pytest.approx(flops / t.median / 1e12)
    assert t.gbps(3 * x.nbytes, at="min") == pytest.approx(3 * x.nbytes / t.min / 1e9)
    d = t.as_dict()
    assert d["count"] == t.count and d["median_s"] == t.median and "times_s" in d
    assert "matmul" in str(t)


def test_quantiles_of_known_times():
    t = timing.Timing([5.0, 1.0, 2.0, 4.0, 3.0])
    assert (t.min, t.p20, t.median, t.p80, t.count) == (1.0, 1.8, 3.0, 4.2, 5)
    with pytest.raises(ValueError, match="at must be one of"):
        t.gbps(1, at="p99")
    with pytest.raises(ValueError, match="times"):
        timing.Timing([])


def test_warns_when_the_cpu_is_loaded(monkeypatch):
    monkeypatch.setattr(timing, "cpu_load", lambda: (7.5, 2))
    with pytest.warns(timing.LoadWarning, match="load average 7.50 on 2 CPUs"):
        timing.benchmark(lambda: None, min_run_time=0.01)
    monkeypatch.setattr(timing, "cpu_load", lambda: (0.1, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", timing.LoadWarning)
        timing.benchmark(lambda: None, min_run_time=0.01)


def test_gpu_branch_reports_unavailable_cleanly():
    ok, reason = timing.gpu_available()
    if ok:
        t = timing.benchmark(lambda: torch.ones(1, device="cuda"), device="cuda", min_run_time=0.05)
        assert t.count > 0 and t.min <= t.median
    else:
        assert reason
        with pytest.raises(RuntimeError, match="cannot time on device='cuda'"):
            timing.benchmark(lambda: None, device="cuda", warn_if_loaded=False)


def test_compare_reports_side_by_side_ratios():
    x = torch.randn(64, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", timing.LoadWarning)
        res = timing.compare(
            {"small": lambda: x + 1, "big": lambda: torch.cat([x] * 64) + 1},
            rounds=2,
            min_run_time=0.02,
        )
    assert res["baseline"] == "small" and res["ratios"]["small"] == 1.0
    assert res["ratios"]["big"] < 1.0  # 64x the work is slower than the baseline
    assert res["timings"]["big"].count >= 2


def test_refusals_name_the_parameter():
    with pytest.raises(TypeError, match="fn must be callable"):
        timing.benchmark(3)
    with pytest.raises(ValueError, match="min_run_time"):
        timing.benchmark(lambda: None, min_run_time=0)
    with pytest.raises(ValueError, match="method"):
        timing.benchmark(lambda: None, method="fast")
    with pytest.raises(ValueError, match="device must be"):
        timing.benchmark(lambda: None, device="meta", warn_if_loaded=False)
    with pytest.raises(ValueError, match="baseline"):
        timing.compare({"a": lambda: None}, baseline="b")


def test_describe_machine():
    info = timing.describe_machine()
    assert info["torch"] == torch.__version__ and info["cpu_count"] >= 1
    assert info["cpu_model"] and info["device_name"]
