"""Without a GPU and without the interpreter, the fused op falls back to the PyTorch path
(checked in a fresh process: the kernel module decides at import time)."""

from __future__ import annotations

import os
import subprocess
import sys

CODE = """
import torch
from pecourse.kernels import rope_triton as rt
from pecourse.positions.rope import apply_rope, inv_freq, rope_cos_sin
assert rt.backend("cpu") == "torch", rt.backend("cpu")
q, k = torch.randn(2, 4, 5, 16), torch.randn(2, 2, 5, 16)
pos = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])
cos, sin = rope_cos_sin(pos, inv_freq(12))
q.requires_grad_()
qr, kr = rt.rope_qk(q, k, cos, sin, pairing="interleaved")
ref = dict(pairing="interleaved", rotary_dim=12)
assert torch.equal(qr, apply_rope(q, pos, **ref)) and torch.equal(kr, apply_rope(k, pos, **ref))
qr.sum().backward()
assert q.grad is not None
print("ok")
"""


def test_fallback_without_triton_interpreter():
    env = {key: val for key, val in os.environ.items() if key != "TRITON_INTERPRET"}
    out = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-3000:]
