r"""Context-extension scalings of RoPE: one registry, one signature.

A RoPE model trained on ``L`` tokens has never seen the angles ``m·θ_i`` for ``m ≥ L``.
Every method here stretches the context by a factor ``s`` by changing the frequencies
``θ_i`` (and sometimes the logit temperature), never the model. Each function in
:data:`SCALINGS` has the signature

.. code-block:: python

    fn(head_dim, base=10000.0, *, <its own keyword parameters>) -> (inv_freq, attention_factor)

where ``inv_freq`` is a float64 ``[head_dim // 2]`` tensor of scaled frequencies and
``attention_factor`` multiplies RoPE's cos and sin (transformers' ``attention_scaling``;
the logits are scaled by its square). Pass the result to
:func:`pecourse.positions.rope.apply_rope` (``inv_freq=..., attention_factor=...``). With a
partial rotary embedding, ``head_dim`` is the number of rotated dimensions.

The functions mirror transformers' ``ROPE_INIT_FUNCTIONS`` (and are tested against them),
but compute in float64. ``ntk`` and ``ntk_by_parts`` are the formulas of the posts and the
YaRN paper, which transformers folds into ``dynamic`` and ``yarn``.

Every function refuses an odd or non-positive ``head_dim`` and a ``base`` ≤ 1; those that
take a ``factor`` refuse one below 1 (that would *shrink* the context), and those that take
lengths refuse non-positive ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from .._validate import check_base, check_even, check_float, check_int
from .rotary import rope_frequencies

__all__ = [
    "SCALINGS",
    "default",
    "linear",
    "ntk",
    "ntk_by_parts",
    "yarn",
    "yarn_mscale",
    "dynamic",
    "llama3",
    "longrope",
]


def _check_common(head_dim, base) -> tuple[int, float]:
    head_dim = check_even("head_dim", head_dim)
    base = check_base(base)
    return head_dim, base


def _ntk_base(base: float, factor: float, head_dim: int) -> float:
    """NTK-aware base ``b' = b·s^(d/(d-2))``: lowest frequency / s, highest unchanged."""
    return base * factor ** (head_dim / (head_dim - 2))


def _check_factor(factor, name: str = "factor") -> float:
    factor = check_float(name, factor)
    if factor < 1.0:
        raise ValueError(
            f"{name} must be >= 1 (it is how many times longer the context becomes; a factor "
            f"below 1 would shrink it), got {factor}"
        )
    return factor


def _check_ntk_dim(head_dim: int) -> None:
    # b' = b·s^{d/(d-2)} divides by zero at d = 2.
    if head_dim < 4:
        raise ValueError(
            f"head_dim must be >= 4 for NTK-aware scaling (the exponent d/(d-2)), got {head_dim}"
        )


def default(head_dim: int, base: float = 10000.0) -> tuple[Tensor, float]:
    r"""Unscaled RoPE: ``θ_i = b^{-2i/d}`` (arXiv:2104.09864, eq. 15); attention factor 1.

    Returns ``(float64 [head_dim // 2], 1.0)``.
    """
    head_dim, base = _check_common(head_dim, base)
    return rope_frequencies(head_dim, base), 1.0


def linear(head_dim: int, base: float = 10000.0, *, factor: float) -> tuple[Tensor, float]:
    r"""Position Interpolation (Chen et al. 2023, arXiv:2306.15595, §2.3): ``θ_i' = θ_i / s``.

    Dividing every frequency by ``s`` is the same as feeding positions ``m / s``: the
    ``sL`` new positions are squeezed into the trained range ``[0, L)``. Returns
    ``(float64 [head_dim // 2], 1.0)``.
    """
    head_dim, base = _check_common(head_dim, base)
    factor = _check_factor(factor)
    return rope_frequencies(head_dim, base) / factor, 1.0  # θ_i / s


def ntk(head_dim: int, base: float = 10000.0, *, factor: float) -> tuple[Tensor, float]:
    r"""NTK-aware scaling (bloc97, 2023; YaRN paper arXiv:2309.00071, §3.1).

    Changes the base, ``b' = b · s^{d/(d-2)}``, so that ``θ_i' = θ_i · s^{-2i/(d-2)}``: the
    highest frequency (``i = 0``) is unchanged and the lowest (``i = d/2 - 1``) is divided by
    exactly ``s`` — interpolation for the slow dimensions, extrapolation for the fast.
    Returns ``(float64 [head_dim // 2], 1.0)``.
    """
    head_dim, base = _check_common(head_dim, base)
    factor = _check_factor(factor)
    _check_ntk_dim(head_dim)
    return rope_frequencies(head_dim, _ntk_base(base, factor, head_dim)), 1.0


def ntk_by_parts(
    head_dim: int,
    base: float = 10000.0,
    *,
    factor: float,
    original_max_position: int,
    alpha: float = 1.0,
    beta: float = 32.0,
) -> tuple[Tensor, float]:
    r"""NTK-by-parts interpolation (bloc97; YaRN paper arXiv:2309.00071, §3.2).

    For each pair, ``r_i = L / λ_i`` counts how many full turns it makes over the original
    context ``L`` (``λ_i = 2π/θ_i``). Pairs that turn often (``r > β``) are left alone,
    pairs that turn less than ``α`` times are interpolated like PI, and the ones between
    are blended with the ramp ``γ(r) = (r - α)/(β - α)`` (the paper's suggested values for
    the Llama family are the defaults here, ``α = 1``, ``β = 32``):

    .. math:: θ_i' = (1 - γ(r_i))\, θ_i / s + γ(r_i)\, θ_i

    This is the paper's ramp, linear in ``r``; :func:`yarn` uses transformers' (and the
    YaRN code's) ramp, linear in the pair index. Returns ``(float64 [head_dim // 2], 1.0)``.
    """
    head_dim, base = _check_common(head_dim, base)
    factor = _check_factor(factor)
    original = check_int("original_max_position", original_max_position, minimum=1)
    alpha = check_float("alpha", alpha, minimum=0.0)
    beta = check_float("beta", beta, minimum=0.0)
    if alpha >= beta:
        raise ValueError(f"alpha must be < beta, got alpha={alpha}, beta={beta}")
    theta = rope_frequencies(head_dim, base)
    r = original * theta / (2 * math.pi)  # r = L/λ, λ = 2π/θ
    gamma = ((r - alpha) / (beta - alpha)).clamp(0.0, 1.0)  # γ(r) = (r - α)/(β - α), clamped
    return (1 - gamma) * theta / factor + gamma * theta, 1.0  # θ' = (1-γ)θ/s + γθ


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    r"""YaRN's temperature ``√(1/t) = 0.1·m·ln s + 1`` (arXiv:2309.00071, §3.4), 1 for s ≤ 1.

    The paper has ``m = 1``; ``mscale`` is transformers' (DeepSeek's) generalisation. Takes
    and returns plain floats and validates nothing (it is a helper of :func:`yarn`).
    """
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _yarn_correction_dim(num_rotations: float, dim: int, base: float, original: int) -> float:
    # The pair index i whose r_i = L / λ_i equals ``num_rotations``:
    # L / (2π b^{2i/d}) = n  <=>  i = d · ln(L / (2π n)) / (2 ln b)
    return dim * math.log(original / (num_rotations * 2 * math.pi)) / (2 * math.log(base))


def yarn(
    head_dim: int,
    base: float = 10000.0,
    *,
    factor: float,
    original_max_position: int,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    mscale: float | None = None,
    mscale_all_dim: float | None = None,
    attention_factor: float | None = None,
    truncate: bool = True,
) -> tuple[Tensor, float]:
    r"""YaRN (Peng et al. 2023, arXiv:2309.00071, §3.4): NTK-by-parts plus a temperature.

    Frequencies: pairs faster than ``beta_fast`` turns over ``L`` keep ``θ_i``, pairs slower
    than ``beta_slow`` turns get ``θ_i/s``, and a ramp *linear in the pair index* between the
    two boundary indices (floored/ceiled when ``truncate``) blends them — as in the YaRN code
    and transformers. Attention factor, unless given: ``√(1/t) = 0.1·ln s + 1``; with both
    ``mscale`` and ``mscale_all_dim`` set (DeepSeek-V2/V3) it is
    ``yarn_mscale(s, mscale) / yarn_mscale(s, mscale_all_dim)``. Returns
    ``(float64 [head_dim // 2], attention_factor)``.
    """
    head_dim, base = _check_common(head_dim, base)
    factor = _check_factor(factor)
    original = check_int("original_max_position", original_max_position, minimum=1)
    beta_fast = check_float("beta_fast", beta_fast, minimum=0.0, strict_minimum=True)
    beta_slow = check_float("beta_slow", beta_slow, minimum=0.0, strict_minimum=True)
    if beta_fast <= beta_slow:
        raise ValueError(
            f"beta_fast must be > beta_slow (fast pairs turn more often), got "
            f"beta_fast={beta_fast}, beta_slow={beta_slow}"
        )
    if attention_factor is None:
        if mscale and mscale_all_dim:
            m = check_float("mscale", mscale)
            m_all = check_float("mscale_all_dim", mscale_all_dim)
            attention_factor = yarn_mscale(factor, m) / yarn_mscale(factor, m_all)
        else:
            attention_factor = yarn_mscale(factor)
    attention_factor = check_float("attention_factor", attention_factor, minimum=0.0)

    low = _yarn_correction_dim(beta_fast, head_dim, base, original)
    high = _yarn_correction_dim(beta_slow, head_dim, base, original)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001  # a ramp of zero width would divide by zero
    index = torch.arange(head_dim // 2, dtype=torch.float64)
    ramp = ((index - low) / (high - low)).clamp(0.0, 1.0)  # 0 for fast pairs, 1 for slow
    theta = rope_frequencies(head_dim, base)
    # θ' = θ/s · ramp + θ · (1 - ramp): interpolate slow pairs, extrapolate fast ones
    return theta / factor * ramp + theta * (1 - ramp), attention_factor


def dynamic(
    head_dim: int,
    base: float = 10000.0,
    *,
    factor: float,
    original_max_position: int,
    seq_len: int,
) -> tuple[Tensor, float]:
    r"""Dynamic NTK scaling (emozilla, 2023; YaRN paper arXiv:2309.00071, §3.3).

    NTK-aware scaling whose factor follows the current length ``l``:
    ``b' = b · (s·l/L - (s - 1))^{d/(d-2)}`` for ``l > L`` and ``b' = b`` for ``l ≤ L``
    (transformers' formula: the effective factor ``s·l/L - (s - 1)`` is 1 at ``l = L`` and
    grows linearly with ``l``). Call again whenever ``seq_len`` changes; a cache keyed on
    the longest length seen keeps the stretched frequencies for short inputs and is the
    "stale dynamic-NTK cache" pitfall. Returns ``(float64 [head_dim // 2], 1.0)``.
    """
    head_dim, base = _check_common(head_dim, base)
    factor = _check_factor(factor)
    _check_ntk_dim(head_dim)
    original = check_int("original_max_position", original_max_position, minimum=1)
    seq_len = check_int("seq_len", seq_len, minimum=1)
    length = max(seq_len, original)  # below L, nothing changes
    # NTK-aware with the effective factor s·l/L - (s - 1), which is 1 at l = L.
    effective = factor * length / original - (factor - 1)
    return rope_frequencies(head_dim, _ntk_base(base, effective, head_dim)), 1.0


def llama3(
    head_dim: int,
    base: float = 10000.0,
    *,
    factor: float,
    original_max_position: int,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
) -> tuple[Tensor, float]:
    r"""Llama 3.1's piecewise scaling, as in Meta's reference code (``apply_scaling`` in
    meta-llama/llama-models) and transformers' ``_compute_llama3_parameters``. The models are
    described in "The Llama 3 Herd of Models" (Meta 2024, arXiv:2407.21783).

    With wavelengths ``λ_i = 2π/θ_i`` and ``L`` the original context: pairs with
    ``λ < L/high_freq_factor`` keep ``θ_i``; pairs with ``λ > L/low_freq_factor`` get
    ``θ_i/s``; in between, ``θ_i' = (1 - g)·θ_i/s + g·θ_i`` with
    ``g = (L/λ - low_freq_factor)/(high_freq_factor - low_freq_factor)``.
    (Llama 3.1 uses ``base=500000``, ``factor=8``, ``L=8192`` and the default low/high
    factors 1 and 4; Llama 3.2 1B/3B use ``factor=32``.) Returns
    ``(float64 [head_dim // 2], 1.0)``.
    """
    head_dim, base = _check_common(head_dim, base)
    factor = _check_factor(factor)
    original = check_int("original_max_position", original_max_position, minimum=1)
    low = check_float("low_freq_factor", low_freq_factor, minimum=0.0, strict_minimum=True)
    high = check_float("high_freq_factor", high_freq_factor, minimum=0.0, strict_minimum=True)
    if low >= high:
        raise ValueError(
            f"low_freq_factor must be < high_freq_factor, got {low_freq_factor} and "
            f"{high_freq_factor}"
        )
    theta = rope_frequencies(head_dim, base)
    wavelen = 2 * math.pi / theta  # λ = 2π/θ
    g = (original / wavelen - low) / (high - low)  # smooth factor, L/λ mapped onto [0, 1]
    blended = (1 - g) * theta / factor + g * theta
    out = torch.where(wavelen > original / low, theta / factor, theta)  # slow: θ/s; fast: θ
    medium = (wavelen >= original / high) & (wavelen <= original / low)
    return torch.where(medium, blended, out), 1.0


def _check_factor_list(name: str, values, n: int) -> Tensor:
    if isinstance(values, Tensor):
        values = values.tolist()
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise TypeError(f"{name} must be a list of {n} numbers, got {type(values).__name__}")
    if len(values) != n:
        raise ValueError(
            f"{name} must have head_dim // 2 = {n} entries (one per rotated pair), got "
            f"{len(values)}"
        )
    out = torch.tensor([check_float(name, v) for v in values], dtype=torch.float64)
    if (out <= 0).any():
        raise ValueError(f"{name} must be positive everywhere, got a minimum of {out.min():g}")
    return out


def longrope(
    head_dim: int,
    base: float = 10000.0,
    *,
    short_factor: Sequence[float],
    long_factor: Sequence[float],
    original_max_position: int,
    max_position: int,
    seq_len: int | None = None,
    attention_factor: float | None = None,
) -> tuple[Tensor, float]:
    r"""LongRoPE (Ding et al. 2024, arXiv:2402.13753), as used by Phi-3.

    Each pair gets its own searched rescale factor: ``θ_i' = θ_i / λ_i`` with ``λ`` the
    ``long_factor`` list when ``seq_len > original_max_position`` and ``short_factor``
    otherwise (or when ``seq_len`` is None). The attention factor defaults to
    ``√(1 + ln s / ln L)`` with ``s = max_position / original_max_position`` (transformers'
    formula for Phi-3). Returns ``(float64 [head_dim // 2], attention_factor)``.
    """
    head_dim, base = _check_common(head_dim, base)
    original = check_int("original_max_position", original_max_position, minimum=1)
    max_position = check_int("max_position", max_position, minimum=1)
    if max_position < original:
        raise ValueError(
            f"max_position must be >= original_max_position ({original}), got {max_position}"
        )
    short = _check_factor_list("short_factor", short_factor, head_dim // 2)
    long = _check_factor_list("long_factor", long_factor, head_dim // 2)
    if seq_len is not None:
        seq_len = check_int("seq_len", seq_len, minimum=1)
    scale = max_position / original
    if attention_factor is None:
        attention_factor = (
            1.0 if scale <= 1 else math.sqrt(1 + math.log(scale) / math.log(original))
        )
    attention_factor = check_float("attention_factor", attention_factor, minimum=0.0)
    ext = long if seq_len is not None and seq_len > original else short
    return rope_frequencies(head_dim, base) / ext, attention_factor  # θ_i / λ_i


#: name -> scaling function; every one returns ``(inv_freq float64 [d/2], attention_factor)``.
SCALINGS: dict[str, Callable[..., tuple[Tensor, float]]] = {
    "default": default,
    "linear": linear,
    "ntk": ntk,
    "ntk_by_parts": ntk_by_parts,
    "yarn": yarn,
    "dynamic": dynamic,
    "llama3": llama3,
    "longrope": longrope,
}
