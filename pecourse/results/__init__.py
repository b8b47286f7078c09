"""The recorded results (``pecourse/results/<name>.json``), read one way.

:func:`recorded` returns a recording as the dict it was written from: an experiment of
:mod:`pecourse.experiments` (``python -m pecourse.experiments run NAME --save``), a study of
:mod:`pecourse.studies` or the base-crossing run of :mod:`pecourse.base_crossing`. ``make
results`` rewrites every one from the shipped checkpoints. Importing this module loads
neither torch nor the model.
"""

from __future__ import annotations

import json
from importlib import resources

__all__ = ["recorded", "recordings", "fmt", "order", "made_with_this_torch"]


def recordings() -> list[str]:
    """The names of the shipped recordings."""
    files = resources.files(__package__).iterdir()
    return sorted(f.name.removesuffix(".json") for f in files if f.name.endswith(".json"))


def recorded(name: str) -> dict:
    """The shipped recording ``name`` as a dict (JSON keys are strings: a length is ``"64"``).

    Refuses a name without a recording, listing the ones there are.
    """
    names = recordings()
    if name not in names:
        raise ValueError(f"name must be one of the recordings {names}; got {name!r}")
    return json.loads(resources.files(__package__).joinpath(f"{name}.json").read_text())


def made_with_this_torch(record: dict) -> bool:
    """Whether the installed torch is the release that made ``record`` (its ``versions``).

    Only then does a live recomputation draw the very samples the recording drew: another
    release can draw differently from the same seed (``torch.multinomial`` does between 2.6
    and 2.13). The build tag is set aside: 2.13.0+cu130 under Python 3.10 draws what
    2.13.0+cpu recorded. A second sample can fall outside the first one's interval; what can
    be checked is that the recording cannot tell the two apart (:func:`order` gives 0).
    """
    import torch

    def release(version: str | None) -> str | None:
        return version.split("+")[0] if isinstance(version, str) else None

    recorded_with = release(record.get("versions", {}).get("torch"))
    return recorded_with is not None and recorded_with == release(torch.__version__)


def _value(cell: dict, key: str | None) -> float:
    if key is None:
        key = next(k for k in ("perplexity", "accuracy", "loss", "effective", "mean") if k in cell)
    return cell[key]


def fmt(cell: dict, key: str | None = None, digits: int = 2) -> str:
    """A recorded number with its interval, ``"4.77 [4.70, 4.84]"``.

    ``cell``: a recorded measurement (``{"perplexity": …, "ci95": [lo, hi]}`` or with
    ``accuracy``, ``loss``, ``effective`` or ``mean``); ``key`` picks the value when the cell
    holds several.
    """
    if not isinstance(cell, dict) or "ci95" not in cell:
        raise ValueError(f"cell must be a recorded measurement with a 'ci95', got {cell!r}")
    lo, hi = cell["ci95"]
    return f"{_value(cell, key):.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def order(a: dict, b: dict) -> int:
    """``1`` if ``a``'s interval lies wholly above ``b``'s, ``-1`` if wholly below, ``0`` if
    they overlap (then the recording cannot tell the two apart at its sample size; an
    overlap does not show that they are equal)."""
    for name, cell in (("a", a), ("b", b)):
        if not isinstance(cell, dict) or "ci95" not in cell:
            raise ValueError(f"{name} must be a recorded measurement with a 'ci95', got {cell!r}")
    if a["ci95"][0] > b["ci95"][1]:
        return 1
    if a["ci95"][1] < b["ci95"][0]:
        return -1
    return 0
