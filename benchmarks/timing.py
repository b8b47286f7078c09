"""A timing harness that tells the truth: medians and spread, not one lucky number.

:func:`benchmark` times a callable and returns a :class:`Timing` (median, p20, p80, min,
count, and the raw per-repetition times), which converts a byte or FLOP count into GB/s or
TFLOP/s. Two back ends:

- **GPU** (a CUDA device): one pair of CUDA events around each repetition, and before each
  repetition a write to a buffer larger than the L2 cache (on an H200, 50 MiB of L2 would
  otherwise serve a 32 MiB tensor from cache and report impossible bandwidths). Only the
  region between the events is timed, not the flush.
- **CPU**: :class:`torch.utils.benchmark.Timer` (``num_threads=1`` by default so a shared
  machine is less noisy), ``blocked_autorange`` (or ``adaptive_autorange``). Each entry of
  ``times`` is the mean of one block of runs.

On a loaded machine, timings lie: :func:`benchmark` warns (:class:`LoadWarning`) when the
1-minute load average exceeds a fraction of the CPU count. Even then *ratios* of two
functions timed side by side in one run are meaningful where absolute numbers are not,
which is what :func:`compare` (and ``benchmarks/``) report.

:func:`describe_machine` returns the CPU model, core count, torch version and device name,
for recording next to results.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from pecourse._validate import check_choice, check_float, check_int
from pecourse.info import cpu_name

__all__ = [
    "Timing",
    "LoadWarning",
    "benchmark",
    "compare",
    "cpu_load",
    "describe_machine",
    "gpu_available",
]


class LoadWarning(RuntimeWarning):
    """The CPU was busy with other work: absolute timings are unreliable."""


def _quantile(sorted_times: list[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of an already sorted list."""
    if len(sorted_times) == 1:
        return sorted_times[0]
    pos = q * (len(sorted_times) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_times[lo] + (sorted_times[hi] - sorted_times[lo]) * (pos - lo)


@dataclass
class Timing:
    """Seconds per call of one benchmarked function, with its spread.

    ``times`` holds one entry per repetition (GPU) or per block of runs (CPU, each the
    block's mean). ``median``, ``p20``, ``p80`` and ``min`` summarise them; ``count`` is how
    many there are and ``runs`` how many calls were timed in all.
    """

    times: list[float]
    label: str = ""
    device: str = "cpu"
    runs: int = 0
    num_threads: int | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if not self.times:
            raise ValueError("times must hold at least one measurement")
        self.times = [float(t) for t in self.times]
        if not self.runs:
            self.runs = len(self.times)

    @property
    def count(self) -> int:
        return len(self.times)

    @property
    def _sorted(self) -> list[float]:
        return sorted(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def p20(self) -> float:
        return _quantile(self._sorted, 0.2)

    @property
    def p80(self) -> float:
        return _quantile(self._sorted, 0.8)

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.times)

    def gbps(self, nbytes: float, *, at: str = "median") -> float:
        """Bandwidth in GB/s (10^9 bytes/s) if each call moved ``nbytes`` bytes."""
        return float(nbytes) / self._at(at) / 1e9

    def tflops(self, flops: float, *, at: str = "median") -> float:
        """Throughput in TFLOP/s (10^12/s) if each call did ``flops`` floating-point ops."""
        return float(flops) / self._at(at) / 1e12

    def _at(self, at: str) -> float:
        check_choice("at", at, ("median", "min", "p20", "p80", "mean"))
        return getattr(self, at)

    def as_dict(self) -> dict:
        return {
            "label": self.label,
            "device": self.device,
            "median_s": self.median,
            "p20_s": self.p20,
            "p80_s": self.p80,
            "min_s": self.min,
            "count": self.count,
            "runs": self.runs,
            "num_threads": self.num_threads,
            "times_s": self.times,
            **({"meta": self.meta} if self.meta else {}),
        }

    def __str__(self) -> str:
        unit, scale = _unit(self.median)
        return (
            f"{self.label or 'timing'}: median {self.median * scale:.3f} {unit} "
            f"(p20 {self.p20 * scale:.3f}, p80 {self.p80 * scale:.3f}, min {self.min * scale:.3f}; "
            f"{self.count} measurements, {self.runs} runs, {self.device})"
        )


def _unit(seconds: float) -> tuple[str, float]:
    for unit, scale in (("s", 1.0), ("ms", 1e3), ("us", 1e6)):
        if seconds * scale >= 1:
            return unit, scale
    return "ns", 1e9


# --------------------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------------------


def cpu_load() -> tuple[float, int] | None:
    """``(1-minute load average, CPU count)``, or ``None`` where the OS has no load average."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows
        return None
    return load, os.cpu_count() or 1


def _warn_if_loaded(threshold: float, stacklevel: int = 3) -> None:
    info = cpu_load()
    if info is None:
        return
    load, cpus = info
    if load > threshold * cpus:
        warnings.warn(
            f"the CPU is loaded (1-minute load average {load:.2f} on {cpus} CPUs, above "
            f"{threshold:.0%} of them): absolute timings are unreliable; compare ratios "
            "measured side by side",
            LoadWarning,
            stacklevel=stacklevel,
        )


def gpu_available() -> tuple[bool, str]:
    """``(True, device name)`` when a CUDA GPU can be timed, else ``(False, the reason)``."""
    if not torch.cuda.is_available():
        if torch.version.cuda is None:
            return False, f"this torch build ({torch.__version__}) has no CUDA support"
        return False, "no CUDA device is visible (torch.cuda.is_available() is False)"
    return True, torch.cuda.get_device_name()


def describe_machine() -> dict:
    """What a timing depends on: CPU model, cores, torch / Python versions, the GPU if any."""
    info = {
        "cpu_model": cpu_name(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": "cpu",
        "device_name": cpu_name(),
    }
    load = cpu_load()
    if load is not None:
        info["load_average_1min"] = round(load[0], 2)
    ok, name = gpu_available()
    if ok:
        props = torch.cuda.get_device_properties(0)
        info.update(
            device="cuda",
            device_name=name,
            gpu_memory_bytes=props.total_memory,
            gpu_l2_bytes=getattr(props, "L2_cache_size", None),
            gpu_sm_count=props.multi_processor_count,
            cuda=torch.version.cuda,
        )
    try:
        import triton

        info["triton"] = triton.__version__
    except Exception:
        info["triton"] = None
    return info


# --------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------


def _l2_flush_buffer(device: torch.device) -> torch.Tensor:
    """A byte buffer at least twice the GPU's L2 (and at least 256 MiB)."""
    props = torch.cuda.get_device_properties(device)
    l2 = getattr(props, "L2_cache_size", 0) or 0
    return torch.empty(max(2 * l2, 256 * 2**20), dtype=torch.uint8, device=device)


def _benchmark_gpu(
    fn: Callable[[], object],
    device: torch.device,
    *,
    min_run_time: float,
    warmup: int,
    max_reps: int,
    flush_l2: bool,
) -> tuple[list[float], int]:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize(device)
    flush = _l2_flush_buffer(device) if flush_l2 else None

    # Estimate one call's time to decide how many repetitions fit in min_run_time.
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(3):
        fn()
    end.record()
    torch.cuda.synchronize(device)
    estimate = max(start.elapsed_time(end) / 3 / 1e3, 1e-7)
    reps = int(min(max_reps, max(5, min_run_time / estimate)))

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        if flush is not None:
            flush.zero_()  # evict fn's data from L2: each repetition starts cold
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize(device)
    return [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends)], reps


def benchmark(
    fn: Callable[[], object],
    *,
    device: str | torch.device | None = None,
    label: str = "",
    num_threads: int = 1,
    min_run_time: float = 0.2,
    method: str = "blocked",
    warmup: int = 3,
    max_reps: int = 10_000,
    flush_l2: bool = True,
    warn_if_loaded: bool = True,
    load_threshold: float = 0.75,
) -> Timing:
    """Time ``fn()`` (no arguments: close over them) and return a :class:`Timing`.

    ``device``: ``"cuda"`` times with CUDA events and an L2 flush between repetitions;
    ``"cpu"`` with :class:`torch.utils.benchmark.Timer` (``num_threads`` threads,
    ``method="blocked"`` → ``blocked_autorange``, ``"adaptive"`` → ``adaptive_autorange``).
    The default is ``"cpu"``. ``min_run_time`` is the time budget in seconds.

    Warns (:class:`LoadWarning`) when the 1-minute load average exceeds ``load_threshold``
    times the CPU count. Raises :class:`RuntimeError` naming the reason when ``device`` is a
    GPU that is not available, and refuses an unknown ``method`` or non-positive budgets.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable (close over its arguments), got {type(fn).__name__}")
    device = torch.device(device if device is not None else "cpu")
    num_threads = check_int("num_threads", num_threads, minimum=1)
    min_run_time = check_float("min_run_time", min_run_time, minimum=0.0, strict_minimum=True)
    method = check_choice("method", method, ("blocked", "adaptive"))
    warmup = check_int("warmup", warmup, minimum=0)
    max_reps = check_int("max_reps", max_reps, minimum=1)
    load_threshold = check_float("load_threshold", load_threshold, minimum=0.0)
    if warn_if_loaded:
        _warn_if_loaded(load_threshold)

    if device.type == "cuda":
        ok, reason = gpu_available()
        if not ok:
            raise RuntimeError(f"cannot time on device={str(device)!r}: {reason}")
        times, runs = _benchmark_gpu(
            fn,
            device,
            min_run_time=min_run_time,
            warmup=warmup,
            max_reps=max_reps,
            flush_l2=flush_l2,
        )
        return Timing(
            times,
            label=label,
            device=torch.cuda.get_device_name(device),
            runs=runs,
            meta={"l2_flush": flush_l2},
        )
    if device.type != "cpu":
        raise ValueError(f"device must be 'cpu' or a CUDA device, got {str(device)!r}")

    from torch.utils import benchmark as tbench

    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(num_threads)
        for _ in range(warmup):
            fn()
    finally:
        torch.set_num_threads(previous)
    timer = tbench.Timer(stmt="fn()", globals={"fn": fn}, label=label, num_threads=num_threads)
    if method == "blocked":
        m = timer.blocked_autorange(min_run_time=min_run_time)
    else:
        m = timer.adaptive_autorange(min_run_time=min_run_time, max_run_time=10 * min_run_time)
    return Timing(
        list(m.times),
        label=label,
        device="cpu",
        runs=len(m.times) * m.number_per_run,
        num_threads=num_threads,
        meta={"number_per_run": m.number_per_run},
    )


def compare(
    fns: dict[str, Callable[[], object]],
    *,
    rounds: int = 3,
    baseline: str | None = None,
    **kwargs,
) -> dict:
    """Time several functions side by side, interleaved over ``rounds``, and compare.

    Each round times every function once (in order), so slow drifts of the machine's load
    hit all of them alike. Returns ``{"timings": {name: Timing}, "ratios": {name:
    baseline_median / name_median}}`` where a ratio > 1 means faster than ``baseline``
    (default: the first function); the ratio is the median of the per-round ratios.
    ``kwargs`` go to :func:`benchmark`.
    """
    if not fns:
        raise ValueError("fns must name at least one function")
    rounds = check_int("rounds", rounds, minimum=1)
    baseline = baseline if baseline is not None else next(iter(fns))
    if baseline not in fns:
        raise ValueError(f"baseline must be one of {sorted(fns)}, got {baseline!r}")
    per_round: dict[str, list[Timing]] = {name: [] for name in fns}
    warned = False
    for _ in range(rounds):
        for name, fn in fns.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", LoadWarning)
                t = benchmark(fn, label=name, **kwargs)
            for w in caught:
                if not warned:
                    warnings.warn(w.message, w.category, stacklevel=2)
                    warned = True
            per_round[name].append(t)
    timings = {
        name: Timing(
            [x for t in ts for x in t.times],
            label=name,
            device=ts[0].device,
            runs=sum(t.runs for t in ts),
            num_threads=ts[0].num_threads,
        )
        for name, ts in per_round.items()
    }
    ratios = {
        name: statistics.median(
            per_round[baseline][i].median / per_round[name][i].median for i in range(rounds)
        )
        for name in fns
    }
    return {"timings": timings, "ratios": ratios, "baseline": baseline, "when": time.time()}
