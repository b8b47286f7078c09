"""Fast paths for the course's position schemes: CPU RoPE, a fused Triton RoPE, FlexAttention.

The modules here are *optimisations* of maths that lives, in readable form, in
:mod:`pecourse.positions`. Each one is checked against that reference in ``tests/kernels``.

- :mod:`pecourse.kernels.rope_cpu` — one-pass RoPE on the CPU (a small C kernel compiled on
  first use, with a pure-PyTorch fallback); what :func:`pecourse.positions.rope.apply_rope`
  uses by default.
- :mod:`pecourse.kernels.rope_triton` — queries and keys rotated in one Triton launch, forward
  and backward, as the custom op ``torch.ops.pecourse.rope_qk``. Importing it imports Triton:
  on a machine without a GPU set ``TRITON_INTERPRET=1`` *before* importing it to run the
  kernel in Triton's interpreter (slow, for tests).
- :mod:`pecourse.kernels.flex` — attention with ALiBi / T5 / causal / sliding-window biases
  through FlexAttention, without the ``L x L`` bias tensor.

Nothing is imported eagerly: ``import pecourse.kernels`` is free.
"""

from __future__ import annotations

__all__: list[str] = []
