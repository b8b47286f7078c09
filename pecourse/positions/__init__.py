"""Every positional scheme in the course, one module per family.

Where each family puts position (see :mod:`pecourse.attention`):

=====================  ==========================================  ======================
module                 schemes                                     place
=====================  ==========================================  ======================
``absolute``           learned table, sinusoidal                   the input
``rotary``             the rotary core: angle table and rotation   (used by every RoPE)
``rope``               rotary embeddings (both pairings)           queries and keys
``rope_scaling``       PI, NTK, NTK-by-parts, YaRN, dynamic, ...   queries and keys
``rope_inference``     ReRoPE, leaky ReRoPE, Self-Extend           the scores
``xpos``               xPos (RoPE with a decay)                    queries and keys
``multidim``           2D/3D axial RoPE, M-RoPE                    queries and keys
``alibi``              ALiBi                                       the scores
``relative``           Shaw et al., T5 buckets                     the scores (and values)
``distance_bias``      KERPLE (log, power), FIRE                   the scores
``cope``               contextual positions                        the scores
``vo_rope``            VO-RoPE / RoPER                             values (RoPER: + q/k)
``augmentation``       randomized positions, PoSE                  (the position ids)
``window``             sliding windows and chunks around a scheme  the scores (a mask)
=====================  ==========================================  ======================

NoPE uses no place at all: it is :class:`pecourse.attention.NoPE`. Each scheme's ``places``
is read off the hooks it overrides. Modules here import only torch, :mod:`pecourse.attention`,
:mod:`pecourse._validate` and each other — never :mod:`pecourse.kernels` or anything
downstream (``docs/architecture.md``).
"""

from __future__ import annotations

from . import rope_scaling
from .absolute import (
    LearnedAbsolute,
    Sinusoidal,
    sinusoidal_encoding,
    sinusoidal_shift_matrix,
    sinusoidal_table,
)
from .alibi import ALiBi, alibi_bias
from .alibi import slopes as alibi_slopes
from .augmentation import pose_position_ids, randomized_positions
from .cope import CoPE, cope_positions
from .distance_bias import (
    FIRE,
    KerpleLog,
    KerplePower,
    fire_bias,
    fire_distance,
    kerple_log_bias,
    kerple_power_bias,
)
from .multidim import (
    AxialRoPE,
    MRoPE,
    apply_axial_rope,
    apply_mrope,
    grid_positions,
    mrope_position_ids,
)
from .relative import (
    ShawKeysOnly,
    ShawRelative,
    T5RelativeBias,
    shaw_relative_ids,
    t5_bias,
    t5_bucket,
)
from .rope import (
    RoPE,
    apply_rope,
    apply_rope_complex,
    inv_freq,
    pairing_permutation,
    permute_qk_weight,
    rope_cos_sin,
    rotation_matrix,
)
from .rope_inference import LeakyReRoPE, ReRoPE, SelfExtend
from .rope_scaling import SCALINGS
from .rotary import cos_sin, rope_frequencies, rotate_pairs
from .vo_rope import RoPER, VORoPE, vo_rope_output, vo_rope_values
from .xpos import XPos, apply_xpos
