"""Fast paths for the course's position schemes; the readable maths is in :mod:`pecourse.positions`.

- :mod:`~pecourse.kernels.rope_cpu`: one-pass RoPE on the CPU (a small C kernel);
- :mod:`~pecourse.kernels.rope`: :data:`FAST_ROPE`, cached tables plus that kernel, the backend
  the model's rotary layers use; :data:`apply_rope` is
  :func:`pecourse.positions.rope.apply_rope` with ``backend=FAST_ROPE``;
- :mod:`~pecourse.kernels.rope_triton`: queries and keys rotated in one Triton launch
  (``TRITON_ROPE``); set ``TRITON_INTERPRET=1`` before importing it to run without a GPU;
- :mod:`~pecourse.kernels.flex`: ALiBi / T5 / masks through FlexAttention, without the
  ``L x L`` bias tensor.

Every compiled path is checked against its reference on the machine it runs on and falls
back with a ``CompiledPathWarning`` where it disagrees (:mod:`~pecourse.kernels.verify`).
Nothing is imported eagerly: ``import pecourse.kernels`` is free.
"""

from __future__ import annotations

import importlib

__all__ = ["apply_rope", "FAST_ROPE", "CompiledPathWarning"]

_LAZY = {"apply_rope": "rope", "FAST_ROPE": "rope", "CompiledPathWarning": "verify"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
