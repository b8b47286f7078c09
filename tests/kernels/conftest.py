"""What this machine offers the kernels, decided once for the kernel tests.

The suite runs in several modes (DEVELOPERS.md, "Portability"): with the C kernel, and with
``PECOURSE_NO_CKERNEL=1`` and no C compiler on ``PATH``. Only that explicit mode may do
without the C kernel: anywhere else a kernel that fails to build fails the tests, it is
never skipped away.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest

NO_CKERNEL = os.environ.get("PECOURSE_NO_CKERNEL", "") not in ("", "0")

#: The C++ compiler inductor (torch.compile's CPU backend) looks for; without one, tests that
#: only need tracing compile with "aot_eager" instead.
HAS_CXX = shutil.which(os.environ.get("CXX", "g++")) is not None
COMPILE_BACKEND = "inductor" if HAS_CXX else "aot_eager"


@pytest.fixture
def c_kernel():
    """The built C kernel module; skips only in the declared no-kernel mode."""
    from pecourse.kernels import rope_cpu

    if NO_CKERNEL:
        pytest.skip("PECOURSE_NO_CKERNEL=1: this run checks the PyTorch fallback instead")
    if rope_cpu.backend() != "c":
        pytest.fail(f"the C kernel should build on this machine: {rope_cpu.build_error()}")
    return rope_cpu


def import_rope_triton():
    """Import :mod:`pecourse.kernels.rope_triton` in Triton's interpreter mode.

    Triton decides at decoration time whether kernels are interpreted, so whichever test
    module imports it first must do it with ``TRITON_INTERPRET=1`` (and only around the
    import: other modules never see the variable)."""
    previous = os.environ.get("TRITON_INTERPRET")
    if "pecourse.kernels.rope_triton" not in sys.modules:
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        from pecourse.kernels import rope_triton
    finally:
        if previous is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = previous
    return rope_triton
