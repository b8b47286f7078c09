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
``window``             sliding windows and chunks around a scheme  the scores (a mask)
=====================  ==========================================  ======================

NoPE uses no place at all: it is :class:`pecourse.attention.NoPE`.
"""

from __future__ import annotations

import importlib

# Public names re-exported here, resolved lazily from their family module.
_EXPORTS = {
    # the input
    "sinusoidal_table": "absolute",
    "sinusoidal_encoding": "absolute",
    "sinusoidal_shift_matrix": "absolute",
    "LearnedAbsolute": "absolute",
    "Sinusoidal": "absolute",
    # queries and keys
    "inv_freq": "rope",
    "rope_cos_sin": "rope",
    "apply_rope": "rope",
    "apply_rope_complex": "rope",
    "rotation_matrix": "rope",
    "pairing_permutation": "rope",
    "permute_qk_weight": "rope",
    "RoPE": "rope",
    "SCALINGS": "rope_scaling",
    "apply_xpos": "xpos",
    "XPos": "xpos",
    "ReRoPE": "rope_inference",
    "LeakyReRoPE": "rope_inference",
    "SelfExtend": "rope_inference",
    "grid_positions": "multidim",
    "apply_axial_rope": "multidim",
    "AxialRoPE": "multidim",
    "apply_mrope": "multidim",
    "mrope_position_ids": "multidim",
    "MRoPE": "multidim",
    # the scores (and Shaw's values)
    "cope_positions": "cope",
    "CoPE": "cope",
    "shaw_relative_ids": "relative",
    "ShawRelative": "relative",
    "t5_bucket": "relative",
    "t5_bias": "relative",
    "T5RelativeBias": "relative",
    "alibi_slopes": ("alibi", "slopes"),
    "alibi_bias": "alibi",
    "ALiBi": "alibi",
    # values and outputs
    "vo_rope_values": "vo_rope",
    "vo_rope_output": "vo_rope",
    "VORoPE": "vo_rope",
    # position ids for training
    "randomized_positions": "augmentation",
    "pose_position_ids": "augmentation",
}


def __getattr__(name):
    if name in _EXPORTS:
        module, attr = (
            _EXPORTS[name] if isinstance(_EXPORTS[name], tuple) else (_EXPORTS[name], name)
        )
        return getattr(importlib.import_module(f".{module}", __name__), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))
