"""``pecourse info``: what this environment has, in one screen.

A learner pastes this report into a question; an instructor checks a classroom machine
with it. It never fails because something optional is missing: it says so instead.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import logging
import os
import platform
import sys

from . import __version__
from .paths import ENV_VAR, data_dir

#: Packages whose versions matter to the course, in the order the report lists them.
KEY_PACKAGES = (
    "torch",
    "numpy",
    "matplotlib",
    "sympy",
    "ipywidgets",
    "jupyterlab",
    "fsrs",
    "transformers",
    "triton",
    "nbgrader",
)


def _version(name: str) -> str:
    if name == "torch":  # its own version names the build (2.13.0+cpu, 2.6.0+cu124)
        try:
            import torch
        except ImportError:
            return "not installed"
        return torch.__version__
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "not installed"


def cpu_name() -> str:
    """The processor's model name (from /proc/cpuinfo where it exists)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _devices() -> list[tuple[str, str]]:
    import torch

    rows = [("CPU", f"{cpu_name()}, {os.cpu_count()} cores")]
    rows.append(("torch threads", str(torch.get_num_threads())))
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            rows.append((f"GPU {i}", torch.cuda.get_device_name(i)))
    else:
        # Nothing in the chapters needs a GPU; only benchmarks/gpu_all.py does (say so, and no more).
        rows.append(("GPU", "none (CUDA not available); every chapter runs on the CPU"))
    return rows


def _triton_status() -> str:
    if importlib.util.find_spec("triton") is None:
        return "not importable (kernels fall back to PyTorch)"
    interpret = os.environ.get("TRITON_INTERPRET") == "1"
    return "importable" + (" (interpreter mode: TRITON_INTERPRET=1)" if interpret else "")


def _c_kernel_status() -> str:
    """Is the C RoPE kernel built, and does it agree with the reference on this CPU?"""
    from .kernels import rope_cpu

    if rope_cpu.backend() != "c":
        return f"not in use, the PyTorch reference answers ({rope_cpu.build_error()})"
    failed = [c for c in rope_cpu.check_all() if not c.trusted]
    if not failed:
        return "in use; agrees with the reference here for every dtype, pairing and direction"
    names = "; ".join(f"{c.config}: {c.detail}" for c in failed)
    return f"in use, but the reference answers where it disagreed here: {names}"


def _compiled_checks(probe_flex: bool) -> list[tuple[str, str]]:
    """One row per compiled-path check made in this process (kernels.verify)."""
    from .kernels import verify

    if probe_flex:
        from .kernels import flex

        flex.check_common_configurations()
    rows = []
    for c in verify.status():
        verdict = "trusted" if c.trusted else "FELL BACK to the reference"
        rows.append((f"  {c.path}", f"{verdict}: {c.config} ({c.detail})"))
    if not any(c.path == "flex_attention" for c in verify.status()):
        rows.append(
            (
                "  flex_attention",
                "checked against eager on first use of each configuration; "
                "`pecourse info --check-flex` compiles and checks the common ones (a minute)",
            )
        )
    return rows


def report(*, probe_flex: bool = False) -> list[tuple[str, str]]:
    """The report as (label, value) rows.

    The compiled paths (C kernel, Triton, FlexAttention) are listed with the verdict of
    their check against the reference on this machine; ``probe_flex`` compiles and checks
    FlexAttention's common configurations first (slow: about a minute on two cores).
    """
    rows = [
        ("pecourse", __version__),
        ("Python", f"{platform.python_version()} ({sys.executable})"),
        ("platform", platform.platform()),
    ]
    rows += [(name, _version(name)) for name in KEY_PACKAGES]
    rows += _devices()
    rows.append(("Triton", _triton_status()))
    rows.append(("C RoPE kernel", _c_kernel_status()))
    rows.append(("compiled paths", "each checked against its reference on this machine"))
    rows += _compiled_checks(probe_flex)
    where = data_dir(create=False)
    source = f"set by {ENV_VAR}" if os.environ.get(ENV_VAR) else f"default; override with {ENV_VAR}"
    rows.append(("learner data", f"{where} ({source})"))
    return rows


def format_report(rows: list[tuple[str, str]]) -> str:
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)


def _run(args) -> int:
    logging.basicConfig(level=logging.INFO, format="pecourse info: %(message)s")
    print(format_report(report(probe_flex=args.check_flex)))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "info",
        help="versions, devices, compiled kernels and their checks, where learner data is stored",
    )
    parser.add_argument(
        "--check-flex",
        action="store_true",
        help="compile FlexAttention for its common configurations and check each against "
        "eager on this machine (about a minute)",
    )
    parser.set_defaults(func=_run)
