"""Assertions for the exercises' hidden tests: each failure says what was expected, what
came back, and one hint.

Used in the ``### BEGIN HIDDEN TESTS`` regions of ``solutions/``; they run wherever the
tests run (the grader's judge, ``pecourse check``, nbgrader's kernel).
"""

from __future__ import annotations

import math

__all__ = ["expect_tensor", "expect_number", "expect_raises"]


def _fail(what: str, message: str, hint: str):
    raise AssertionError(f"{what}: {message}" + (f"; hint: {hint}" if hint else ""))


def _short(t) -> str:
    values = t.tolist() if t.numel() <= 12 else f"a tensor of shape {tuple(t.shape)}"
    return str(values)


def expect_tensor(
    got, expected, what: str, hint: str = "", *, dtype=None, atol: float = 1e-6, rtol: float = 1e-5
) -> None:
    """``got`` must be a tensor shaped like ``expected`` (and of ``dtype`` when given) whose
    values match: exactly for integer and bool tensors, within ``atol + rtol·|expected|``
    (compared in float64) otherwise."""
    import torch

    if not isinstance(got, torch.Tensor):
        _fail(what, f"expected a tensor, got a {type(got).__name__}", hint)
    if dtype is not None and got.dtype != dtype:
        _fail(
            what,
            f"expected dtype {str(dtype).removeprefix('torch.')}, got "
            f"{str(got.dtype).removeprefix('torch.')}",
            hint,
        )
    if tuple(got.shape) != tuple(expected.shape):
        _fail(what, f"expected shape {tuple(expected.shape)}, got {tuple(got.shape)}", hint)
    if got.numel() == 0:
        return
    exact = not (expected.is_floating_point() or expected.is_complex())
    if exact:
        if got.is_floating_point() and not torch.equal(got, got.round()):
            _fail(what, f"expected whole numbers {_short(expected)}, got {_short(got)}", hint)
        wrong = got.to(torch.int64) != expected.to(torch.int64)
    else:
        g, e = got.detach().to(torch.float64), expected.detach().to(torch.float64)
        same_inf = (g == e) | (g.isnan() & e.isnan())
        wrong = ~(((g - e).abs() <= atol + rtol * e.abs()) | same_inf)
    if bool(wrong.any()):
        index = tuple(int(i) for i in torch.nonzero(wrong)[0])
        at = f" at index {list(index)}" if got.dim() else ""
        _fail(
            what,
            f"{int(wrong.sum())} of {got.numel()} values differ; first{at}: expected "
            f"{expected[index].item()!r}, got {got[index].item()!r}"
            + (f" (expected {_short(expected)}, got {_short(got)})" if got.numel() <= 12 else ""),
            hint,
        )


def expect_number(
    got,
    expected,
    what: str,
    hint: str = "",
    *,
    kind=float,
    rel: float = 1e-9,
    abs_tol: float = 1e-12,
) -> None:
    """``got`` must be a Python ``kind`` (float or int) close to ``expected``."""
    if kind is float and not isinstance(got, float):
        _fail(
            what,
            f"expected a Python float, got a {type(got).__name__} ({got!r}); use .item()",
            hint,
        )
    if kind is int and (isinstance(got, bool) or not isinstance(got, int)):
        _fail(what, f"expected a Python int, got a {type(got).__name__} ({got!r})", hint)
    if not math.isclose(got, expected, rel_tol=rel, abs_tol=abs_tol):
        _fail(what, f"expected {expected!r}, got {got!r}", hint)


def expect_raises(function, error, what: str, hint: str = "", match: str | None = None) -> None:
    """``function()`` must raise ``error`` (whose message contains ``match``, if given)."""
    try:
        function()
    except error as exc:
        if match is not None and match not in str(exc):
            _fail(
                what, f"the {error.__name__} should mention {match!r}; it says {str(exc)!r}", hint
            )
        return
    _fail(what, f"expected {error.__name__}, nothing was raised", hint)
