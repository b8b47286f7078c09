"""Every positional scheme in the course, one module per family.

Where each family puts position (see :mod:`pecourse.attention`):

=====================  ==========================================  ======================
module                 schemes                                     place
=====================  ==========================================  ======================
``absolute``           learned table, sinusoidal                   the input
``rope``               rotary embeddings (both pairings)           queries and keys
``rope_scaling``       PI, NTK, NTK-by-parts, YaRN, dynamic, ...   queries and keys
``rope_inference``     ReRoPE, leaky ReRoPE, Self-Extend           queries/keys + scores
``xpos``               xPos (RoPE with a decay)                    queries and keys
``multidim``           2D/3D axial RoPE, M-RoPE                    queries and keys
``alibi``              ALiBi                                       the scores
``relative``           Shaw et al., T5 buckets                     the scores (and values)
``cope``               contextual positions                        the scores
``vo_rope``            VO-RoPE / RoPER                             values and outputs
``augmentation``       randomized positions, PoSE                  (the position ids)
=====================  ==========================================  ======================

NoPE uses no place at all: it is :class:`pecourse.attention.NoPE`.
"""

from __future__ import annotations

import importlib

# Public names re-exported here, resolved lazily from their family module.
_EXPORTS = {
    "sinusoidal_table": "absolute",
}


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
