"""The fast RoPE: the rotary core's two steps (:mod:`pecourse.positions.rotary`), each made fast.

- :func:`cos_sin` keeps the tables of the positions that recur (:data:`TABLES`): every layer
  of a forward pass, and every training step at a fixed length, rotates at the same positions;
- :func:`pecourse.kernels.rope_cpu.rotate` rotates in one pass with a small C kernel.

Together they are :data:`FAST_ROPE`, the backend the model gives its rotary layers.
:data:`apply_rope` is :func:`pecourse.positions.rope.apply_rope` with ``backend=FAST_ROPE``:
the same function, so the same arguments, checks and numbers.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict

import torch
from torch import Tensor

from ..positions import rope as _rope
from ..positions import rotary
from . import rope_cpu

__all__ = ["TABLES", "cos_sin", "FAST_ROPE", "apply_rope"]


class _TableCache:
    r"""cos/sin tables kept for the positions that recur: a small LRU cache keyed on *values*.

    An entry holds copies of the ``positions`` and ``inv_freq`` it was built from and is
    returned only when both are equal in value (``torch.equal``, linear in the sequence, far
    below the rotation's cost), so a tensor changed in place can never get a stale table.
    Not used while tracing, when ``inv_freq`` requires grad (the table must then stay in
    the graph), for a per-position ``scale`` tensor (xPos: its table is its own), or for
    positions on an accelerator (comparing values there would wait on the device at every
    layer; building the small table costs less).
    """

    def __init__(self, size: int = 8):
        self.size = size
        self._entries: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, positions: Tensor, inv_freq: Tensor, scale: float, dtype) -> tuple:
        if (
            inv_freq.requires_grad
            or isinstance(scale, Tensor)
            or torch.compiler.is_compiling()
            or positions.device.type != "cpu"
        ):
            return rotary.cos_sin(positions, inv_freq, scale, dtype=dtype)
        key = (
            tuple(positions.shape),
            positions.dtype,
            positions.device,
            inv_freq.shape[0],
            inv_freq.dtype,
            inv_freq.device,
            float(scale),
            dtype,
        )
        with self._lock:
            for (k, _), entry in self._entries.items():
                pos, freq, tables = entry
                if k == key and torch.equal(pos, positions) and torch.equal(freq, inv_freq):
                    self._entries.move_to_end((k, id(entry)))
                    self.hits += 1
                    return tables
        tables = rotary.cos_sin(positions, inv_freq, scale, dtype=dtype)
        entry = (positions.clone(), inv_freq.detach().clone(), tables)
        with self._lock:
            self.misses += 1
            self._entries[(key, id(entry))] = entry
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return tables

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0


#: The cos/sin tables of :func:`cos_sin`, shared by every layer and call.
TABLES = _TableCache()


def cos_sin(
    positions: Tensor, inv_freq: Tensor, scale: float | Tensor = 1.0, *, dtype=torch.float32
) -> tuple[Tensor, Tensor]:
    """:func:`pecourse.positions.rotary.cos_sin`, served from :data:`TABLES` when it recurs."""
    return TABLES.get(positions, inv_freq, scale, dtype)


#: Cached tables and the C kernel: the rotary core's numbers, fast.
FAST_ROPE = rotary.Rotary(cos_sin, rope_cpu.rotate, "fast", rope_cpu.rotate_qk)

#: :func:`pecourse.positions.rope.apply_rope` on :data:`FAST_ROPE`.
apply_rope = functools.partial(_rope.apply_rope, backend=FAST_ROPE)
