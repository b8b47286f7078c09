"""Fast paths for the course's position schemes: CPU RoPE, a fused Triton RoPE, FlexAttention.

The modules here are *optimisations* of maths that lives, in readable form, in
:mod:`pecourse.positions`. Each one is checked against that reference in ``tests/kernels``.

- :mod:`pecourse.kernels.rope_cpu` — one-pass RoPE on the CPU (a small C kernel,
  ``rope_cpu.c``, compiled on first use, with the readable rotation as the fallback);
- :mod:`pecourse.kernels.rope` — the fast RoPE: cached cos/sin tables plus that kernel,
  :data:`FAST_ROPE`, the backend the model's rotary layers use.
- :mod:`pecourse.kernels.rope_triton` — queries and keys rotated in one Triton launch, forward
  and backward, as the custom op ``torch.ops.pecourse.rope_qk``, and ``TRITON_ROPE``, a
  backend any rotary scheme can take. Importing it imports Triton:
  on a machine without a GPU set ``TRITON_INTERPRET=1`` *before* importing it to run the
  kernel in Triton's interpreter (slow, for tests).
- :mod:`pecourse.kernels.flex` — attention with ALiBi / T5 / causal / sliding-window biases
  through FlexAttention, without the ``L x L`` bias tensor.

Every compiled path is checked against its reference on the machine it runs on, the first
time it meets a configuration, and falls back (with a ``CompiledPathWarning``) where it
disagrees: :mod:`pecourse.kernels.verify`; ``pecourse info`` shows the verdicts.

:data:`apply_rope` is :func:`pecourse.positions.rope.apply_rope` with ``backend=FAST_ROPE``.
This package builds on :mod:`pecourse.positions`, never the reverse (``docs/architecture.md``).

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
