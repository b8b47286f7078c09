"""Assertions for the exercises' hidden tests: each failure says which property failed
(type, dtype, shape, how many values and where), what came back, and one hint — never the
expected values, which a lookup table could otherwise collect over a few resubmissions.

Used in the ``### BEGIN HIDDEN TESTS`` regions of ``solutions/``; they run wherever the
tests run (the grader's judge, ``pecourse check``, nbgrader's kernel).
"""

from __future__ import annotations

import math

__all__ = ["expect_tensor", "expect_number", "expect_raises"]


def _fail(what: str, message: str, hint: str):
    raise AssertionError(f"{what}: {message}" + (f"; hint: {hint}" if hint else ""))


def _order(error: float) -> str:
    """The power of ten of ``error``: how far off, without the value it was off from."""
    if not math.isfinite(error) or error <= 0:
        return "inf or NaN"
    return f"{10.0 ** math.floor(math.log10(error)):g}"


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
        names = [str(d).removeprefix("torch.") for d in (dtype, got.dtype)]
        _fail(what, "expected dtype {}, got {}".format(*names), hint)
    if tuple(got.shape) != tuple(expected.shape):
        _fail(what, f"expected shape {tuple(expected.shape)}, got {tuple(got.shape)}", hint)
    if got.numel() == 0:
        return
    exact = not (expected.is_floating_point() or expected.is_complex())
    g, e = got.detach().to(torch.float64), expected.detach().to(torch.float64)
    if exact and got.is_floating_point() and not torch.equal(g, g.round()):
        _fail(what, "expected whole numbers, got fractional values", hint)
    same = (g == e) | (g.isnan() & e.isnan())
    wrong = ~same if exact else ~(((g - e).abs() <= atol + rtol * e.abs()) | same)
    if bool(wrong.any()):
        index = tuple(int(i) for i in torch.nonzero(wrong)[0])
        at = f"the first at index {list(index)}: " if got.dim() else ""
        error = "" if exact else f"; the largest error is of order {_order(_largest(g, e, wrong))}"
        _fail(
            what,
            f"{int(wrong.sum())} of {got.numel()} values differ from those expected ({at}got "
            f"{got[index].item()!r}){error}",
            hint,
        )


def _largest(g, e, wrong) -> float:
    return float((g - e).abs()[wrong].nan_to_num(nan=float("inf")).max())


def expect_number(
    got, expected, what: str, hint: str = "", *, kind=float, rel=1e-9, abs_tol=1e-12
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
        _fail(what, f"got {got!r}, off by an amount of order {_order(abs(got - expected))}", hint)


def expect_raises(function, error, what: str, hint: str = "", match: str | None = None) -> None:
    """``function()`` must raise ``error`` (whose message contains ``match``, if given)."""
    try:
        function()
    except error as exc:
        if match is not None and match not in str(exc):
            mention = f"the {error.__name__} should mention {match!r}; it says {str(exc)!r}"
            _fail(what, mention, hint)
        return
    _fail(what, f"expected {error.__name__}, nothing was raised", hint)
