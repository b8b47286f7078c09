"""The course's identities, proved by sympy in front of the learner.

``IDENTITIES`` maps a name to an identity object. Each has ``.statement`` and
``.explanation`` (Markdown), ``.lhs``/``.rhs`` of its main claim, ``.claims`` (everything
that is proved), ``.steps`` (``(caption, sympy expression)`` pairs to display), ``.latex()``
(renders in Jupyter through ``_repr_latex_``/``_repr_markdown_``) and ``.check()``, which is
True only when sympy proves every claim for symbolic positions and frequencies. The classes
take parameters that build broken variants (a wrong sign or exponent) whose check fails::

    from pecourse.derivations import IDENTITIES, RopeRelative
    IDENTITIES["rope_relative"].check()          # True
    RopeRelative(offset="m-n").check()           # False: R(m - n) is the wrong rotation

Importing this package is cheap: sympy (and numpy) are imported, and the symbolic objects
built, only when an identity is first used.

==========================================  ==========================================
key                                         claim
==========================================  ==========================================
``sinusoidal_shift``                        p(t + D) = M(D) p(t), M free of t
``sinusoidal_dot_product``                  p(t) . p(t + D) = sum_i cos(w_i D)
``attention_permutation_equivariance``      Attn(P X) = P Attn(X)
``causal_mask_breaks_equivariance``         with a causal mask: Attn(P X) != P Attn(X)
``rope_relative_2x2``                       <R(m)q, R(n)k> = <q, R(n-m)k>, one block
``rope_relative``                           the same, block-diagonal (two frequencies)
``rope_complex_form``                       q e^{i m theta} is the 2x2 rotation
``rope_pairing_permutation``                P R_interleaved P^T = R_half (d = 6)
``xpos_decay``                              xPos score factor zeta^(m-n); <= 1 iff causal
``vo_rope``                                 R(i)^-1 sum_j a_ij R(j) v_j = sum_j a_ij R(j-i) v_j
``alibi_toeplitz``                          ALiBi bias depends on j - i only
``t5_toeplitz``                             T5 bucket bias depends on j - i only
``shaw_toeplitz``                           Shaw's clipped bias depends on j - i only
``softmax_shift_invariance``                softmax(x + c) = softmax(x)
``bloom_alibi_equivalence``                 softmax(s + m j) = softmax(s - m|i - j|), causal
``ntk_aware_base``                          b s^(d/(d-2)): theta_0 kept, theta_last / s
``yarn``                                    ramp, PI as gamma = 0, limits, temperature^2
``axial_rope_2d``                           2D RoPE is relative in x and in y
``rope_base_bound``                         E-difference = 2 sigma^2 sum_i cos(m theta_i)
==========================================  ==========================================

Numerics for the last one: :func:`rope_base_lower_bound`, :func:`rope_base_condition`,
:func:`rope_base_admissible`, :func:`rope_base_failures`, :func:`rope_base_min_decay`,
:func:`rope_long_term_decay`, :func:`rope_base_table` and :data:`BASE_BOUND_TABLE`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

# key -> (module, class, constructor keyword arguments)
_REGISTRY = {
    "sinusoidal_shift": ("_sinusoidal", "SinusoidalShift", {}),
    "sinusoidal_dot_product": ("_sinusoidal", "SinusoidalDotProduct", {}),
    "attention_permutation_equivariance": ("_attention", "PermutationEquivariance", {}),
    "causal_mask_breaks_equivariance": ("_attention", "CausalMaskBreaksEquivariance", {}),
    "rope_relative_2x2": ("_rope", "RopeRelative", {"blocks": 1}),
    "rope_relative": ("_rope", "RopeRelative", {"blocks": 2}),
    "rope_complex_form": ("_rope", "RopeComplexForm", {}),
    "rope_pairing_permutation": ("_rope", "RopePairingPermutation", {}),
    "xpos_decay": ("_rope", "XposDecay", {}),
    "vo_rope": ("_rope", "VoRope", {}),
    "alibi_toeplitz": ("_biases", "ToeplitzBias", {"kind": "alibi"}),
    "t5_toeplitz": ("_biases", "ToeplitzBias", {"kind": "t5"}),
    "shaw_toeplitz": ("_biases", "ToeplitzBias", {"kind": "shaw"}),
    "softmax_shift_invariance": ("_attention", "SoftmaxShiftInvariance", {}),
    "bloom_alibi_equivalence": ("_attention", "BloomAlibiEquivalence", {}),
    "ntk_aware_base": ("_scaling", "NtkAwareBase", {}),
    "yarn": ("_scaling", "Yarn", {}),
    "axial_rope_2d": ("_rope", "AxialRope2D", {}),
    "rope_base_bound": ("_base_bound", "RopeBaseBound", {}),
}

# Public names resolved lazily from their module.
_EXPORTS = {
    "Identity": "_identity",
    "Claim": "_identity",
    "is_zero": "_identity",
    "SinusoidalShift": "_sinusoidal",
    "SinusoidalDotProduct": "_sinusoidal",
    "PermutationEquivariance": "_attention",
    "CausalMaskBreaksEquivariance": "_attention",
    "SoftmaxShiftInvariance": "_attention",
    "BloomAlibiEquivalence": "_attention",
    "RopeRelative": "_rope",
    "RopeComplexForm": "_rope",
    "RopePairingPermutation": "_rope",
    "pairing_permutation": "_rope",
    "rope_matrix": "_rope",
    "AxialRope2D": "_rope",
    "XposDecay": "_rope",
    "VoRope": "_rope",
    "ToeplitzBias": "_biases",
    "bias_function": "_biases",
    "NtkAwareBase": "_scaling",
    "Yarn": "_scaling",
    "yarn_ramp": "_scaling",
    "RopeBaseBound": "_base_bound",
    "rope_long_term_decay": "_base_bound",
    "rope_base_condition": "_base_bound",
    "rope_base_admissible": "_base_bound",
    "rope_base_lower_bound": "_base_bound",
    "rope_base_table": "_base_bound",
    "rope_base_min_decay": "_base_bound",
    "rope_base_failures": "_base_bound",
    "BASE_BOUND_TABLE": "_base_bound",
    "DEFAULT_CONTEXT_LENGTHS": "_base_bound",
}

__all__ = ["IDENTITIES", "check_all", *_EXPORTS]


class _Identities(Mapping):
    """Read-only mapping name -> identity; each identity is created on first access."""

    def __init__(self, registry):
        self._registry = registry
        self._cache = {}

    def __getitem__(self, key):
        if key not in self._registry:
            known = ", ".join(self._registry)
            raise KeyError(f"unknown identity {key!r}; known identities: {known}")
        if key not in self._cache:
            module, cls, kwargs = self._registry[key]
            factory = getattr(importlib.import_module(f".{module}", __name__), cls)
            identity = factory(**kwargs)
            identity.key = key
            self._cache[key] = identity
        return self._cache[key]

    def __iter__(self):
        return iter(self._registry)

    def __len__(self):
        return len(self._registry)

    def __repr__(self):
        return f"<{len(self)} identities: {', '.join(self._registry)}>"


IDENTITIES = _Identities(_REGISTRY)


def check_all() -> dict:
    """{key: identity.check()} for every registered identity (a few seconds in all)."""
    return {key: IDENTITIES[key].check() for key in IDENTITIES}


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
