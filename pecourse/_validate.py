"""Argument checks shared by the whole package.

Every public function validates its inputs with these helpers so that bad input fails
with a ``ValueError``/``TypeError`` that names the parameter, the value it got and what
would have been accepted — never a silent wrap, truncation or broadcast.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import torch

__all__ = [
    "check_int",
    "check_float",
    "check_choice",
    "check_tensor",
    "check_positions",
    "check_even",
    "check_base",
]


def check_int(name: str, value, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as an int, refusing bools, floats and out-of-range values."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_float(
    name: str,
    value,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strict_minimum: bool = False,
) -> float:
    """Return ``value`` as a finite float; ``strict_minimum`` makes the lower bound exclusive."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None:
        if strict_minimum and value <= minimum:
            raise ValueError(f"{name} must be > {minimum}, got {value}")
        if not strict_minimum and value < minimum:
            raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_choice(name: str, value, choices) -> str:
    """Refuse anything outside ``choices`` and list what is accepted."""
    if value not in choices:
        accepted = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {accepted}; got {value!r}")
    return value


def check_even(name: str, value) -> int:
    """An even positive integer (RoPE rotates pairs of dimensions)."""
    value = check_int(name, value, minimum=2)
    if value % 2:
        raise ValueError(f"{name} must be even (dimensions are rotated in pairs), got {value}")
    return value


def check_base(value, name: str = "base") -> float:
    """A frequency base above 1 (a base of 1 makes every frequency equal)."""
    return check_float(name, value, minimum=1.0, strict_minimum=True)


def check_tensor(
    name: str, value, *, ndim: int | tuple[int, ...] | None = None, floating: bool | None = None
) -> torch.Tensor:
    """A tensor with the given number of dimensions and (optionally) a float/int dtype."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if value.ndim not in allowed:
            want = " or ".join(str(a) for a in allowed)
            raise ValueError(f"{name} must have {want} dimensions, got shape {tuple(value.shape)}")
    if floating is True and not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {value.dtype}")
    if floating is False and (
        value.is_floating_point() or value.is_complex() or value.dtype == torch.bool
    ):
        raise TypeError(f"{name} must be an integer tensor, got dtype {value.dtype}")
    return value


def check_positions(
    name: str, positions, *, ndim: tuple[int, ...] = (1, 2), limit: int | None = None
) -> torch.Tensor:
    """Integer, non-negative positions shaped ``[seq]`` or ``[batch, seq]``.

    ``limit`` is an exclusive ceiling (a learned table with ``limit`` rows). The checks that
    read values run on CPU tensors only: on an accelerator they would stop the device and
    wait (a host sync) on every call.
    """
    positions = check_tensor(name, positions, ndim=ndim)
    if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(
            f"{name} must hold integer positions (torch.long/int32), got dtype {positions.dtype}"
        )
    if positions.numel() and positions.device.type == "cpu":
        low = int(positions.min())
        if low < 0:
            raise ValueError(f"{name} must be non-negative, got a minimum of {low}")
        if limit is not None:
            high = int(positions.max())
            if high >= limit:
                raise ValueError(
                    f"{name} reaches position {high}, but only positions 0..{limit - 1} exist "
                    f"(max_positions={limit}); a learned table cannot represent longer inputs"
                )
    return positions
