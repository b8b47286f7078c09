r"""Trust a compiled path only after it has agreed with its reference on this machine.

Every fast path in :mod:`pecourse.kernels` is code generated *for the machine it runs on*:
gcc builds the C RoPE kernel with ``-march=native``; inductor writes C++ for FlexAttention
whose vector code depends on the CPU's instruction set (AVX2 or AVX-512); Triton compiles
for the GPU in hand. A kernel that was right where the package was written can be wrong on
the next machine, and silently so (torch 2.13's compiled CPU FlexAttention is, on an AVX2-only
CPU: see :func:`pecourse.kernels.flex.padded_length`).

So each fast path asks :func:`trusted` before it answers. The first time a path meets a
*configuration* in a process (the things that change the generated code: dtype, shapes
for a shape-specialised compile, mask and bias kind, pairing, ...), it runs a probe — the
compiled path and its reference on the same inputs — and compares the two:

- they agree: the compiled path is used for that configuration from then on;
- they differ, or the compiled path raises: a :class:`CompiledPathWarning` names the
  configuration and the error, once, and that configuration takes the reference path (the
  eager or pure-PyTorch code, slower but right) for the rest of the process.

:func:`status` lists every check made in this process; ``pecourse info`` prints it.
A probe costs one extra call of each side, once per configuration: small next to a compile.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import torch

__all__ = ["CompiledPathWarning", "Check", "trusted", "status", "forget", "tolerance"]


class CompiledPathWarning(UserWarning):
    """A compiled path disagreed with its reference here; the reference is used instead."""


@dataclass(frozen=True)
class Check:
    """One probe's verdict: ``path`` (e.g. ``"flex_attention"``), the ``config`` it was
    run for, whether the compiled path is ``trusted``, and the evidence."""

    path: str
    config: str
    trusted: bool
    max_abs_error: float | None
    detail: str


_CHECKS: dict[tuple[str, Hashable], Check] = {}
_LOCK = threading.RLock()


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """``(rtol, atol)`` for comparing a compiled result with its reference in ``dtype``.

    Loose enough for a different summation order or ``exp`` approximation, tight enough to
    catch a wrong row (the miscompiles seen so far were off by O(1) or NaN).
    """
    return {
        torch.float64: (1e-9, 1e-9),
        torch.float32: (1e-4, 1e-4),
        torch.float16: (1e-2, 1e-2),
        torch.bfloat16: (4e-2, 4e-2),
    }.get(dtype, (1e-4, 1e-4))


def _compare(got, want) -> tuple[bool, float | None, str]:
    got = got if isinstance(got, tuple | list) else (got,)
    want = want if isinstance(want, tuple | list) else (want,)
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        if g.shape != w.shape or g.dtype != w.dtype:
            return (
                False,
                None,
                f"shape/dtype {tuple(g.shape)}/{g.dtype}, expected {tuple(w.shape)}/{w.dtype}",
            )
        if g.numel() == 0:
            continue
        rtol, atol = tolerance(w.dtype)
        g64, w64 = g.detach().double().cpu(), w.detach().double().cpu()
        bad = ~torch.isclose(g64, w64, rtol=rtol, atol=atol, equal_nan=True)
        worst = max(worst, float((g64 - w64).abs().nan_to_num(float("inf")).max()))
        if bad.any():
            n = int(bad.sum())
            nan = int(torch.isnan(g64).sum()) - int(torch.isnan(w64).sum())
            extra = f", {nan} NaN the reference does not have" if nan > 0 else ""
            return (
                False,
                worst,
                f"{n} of {g.numel()} elements differ (max abs error {worst:.3g}{extra})",
            )
    return True, worst, f"agrees with the reference (max abs error {worst:.3g})"


def trusted(
    path: str,
    key: Hashable,
    probe: Callable[[], tuple[object, object]],
    describe: Callable[[], str] | str,
) -> bool:
    """Whether the compiled ``path`` may answer for configuration ``key`` in this process.

    ``probe()`` returns ``(compiled_result, reference_result)`` (tensors or tuples of
    tensors) for inputs of that configuration; it runs at most once per ``(path, key)``.
    ``describe`` names the configuration for people (the warning and ``pecourse info``).
    """
    found = _CHECKS.get((path, key))
    if found is not None:
        return found.trusted
    with _LOCK:
        found = _CHECKS.get((path, key))
        if found is not None:
            return found.trusted
        config = describe() if callable(describe) else describe
        try:
            # In the caller's grad mode: torch.compile guards on it, so a probe under no_grad
            # would compile a second graph that the caller's own call never reuses.
            got, want = probe()
            ok, err, detail = _compare(got, want)
        except Exception as exc:  # a compiled path that cannot even run is not trusted
            ok, err, detail = False, None, f"raised {type(exc).__name__}: {str(exc)[:300]}"
        _CHECKS[(path, key)] = Check(path, config, ok, err, detail)
    if not ok:
        warnings.warn(
            f"{path} for {config}: the compiled result {detail} on this machine; using the "
            "reference (eager) path for this configuration from now on",
            CompiledPathWarning,
            stacklevel=3,
        )
    return ok


def status(path: str | None = None) -> list[Check]:
    """Every check made in this process (optionally only those of ``path``), oldest first."""
    return [c for (p, _), c in list(_CHECKS.items()) if path is None or p == path]


def forget(path: str | None = None) -> None:
    """Drop the verdicts (of ``path``, or all), so the next call probes again."""
    with _LOCK:
        for k in [k for k in _CHECKS if path is None or k[0] == path]:
            del _CHECKS[k]
