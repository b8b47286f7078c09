"""The recorded results (``pecourse/lab/results/<name>.json``): one schema, one writer, one reader.

Every recording — a study of :mod:`pecourse.lab.studies` or the base-crossing run of :mod:`pecourse.lab.base_crossing` — is a
JSON object with the fields of :data:`SCHEMA`. :func:`write` validates a recording and
writes it (all or nothing); :func:`recorded` reads one and validates it again, so a
recording that drifted from the schema fails where it is read, not three cells later.
``make results`` rewrites every one. Importing this module loads neither torch nor the model.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from importlib import resources
from pathlib import Path

__all__ = [
    "SCHEMA",
    "OPTIONAL",
    "validate",
    "write",
    "results_dir",
    "recorded",
    "recordings",
    "fmt",
    "order",
    "made_with_this_torch",
]

_NUMBER = (int, float)

#: The fields every recording has: name -> (JSON type, what it holds).
SCHEMA: dict[str, tuple] = {
    "name": (str, "the recording's name; its file is pecourse/lab/results/<name>.json"),
    "protocol": (dict, "how it was measured: the evaluation protocol and the study's settings"),
    "seeds": (list, "the training seeds of the models it measured"),
    "checkpoints": (dict, "sha256 of every shipped checkpoint it read ({} if it trains its own)"),
    "rows": (list, "the raw numbers: one object per (model, seed) or setting, intervals as ci95"),
    "cpu_seconds": (_NUMBER, "CPU seconds of the run that wrote it"),
    "versions": (dict, "the python and torch that wrote it"),
}

#: The fields a recording may have besides: name -> (JSON type, what it holds).
OPTIONAL: dict[str, tuple] = {
    "summary": (dict, "the reading over seeds that a chapter's prose asserts"),
    "context_used": (
        dict,
        "model -> pecourse.lab.evaluate.context_used at its training length, where text is scored",
    ),
    "eval_tokens": (int, "held-out characters scored per model"),
    "unavailable": (dict, "model -> why a cell is missing (a learned table's last row)"),
    "bound": (_NUMBER, "the RoPE base bound of Men et al. 2024 for the models' head size"),
    "retrieval": (list, "retrieval with RoPE scaling, beside the perplexity rows"),
    "stale_dynamic": (dict, "dynamic NTK with a cache computed for the wrong length"),
    "temperature": (list, "YaRN with and without its attention temperature"),
    "reference": (dict, "the model or setting the rows are compared with"),
    "step0": (dict, "the measurement before any training"),
    "bases": (list, "the RoPE bases trained"),
    "ranking": (dict, "an ordering a chapter reads: at which setting, and of which models"),
}


def _check_intervals(value, where: str) -> None:
    """Every ``ci95`` inside ``value`` is ``[lo, hi]`` of numbers with ``lo <= hi``."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "ci95":
                ok = (
                    isinstance(item, list)
                    and len(item) == 2
                    and all(isinstance(v, _NUMBER) and math.isfinite(v) for v in item)
                    and item[0] <= item[1]
                )
                if not ok:
                    raise ValueError(f"{where}.ci95 must be [lo, hi] with lo <= hi, got {item!r}")
            else:
                _check_intervals(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_intervals(item, f"{where}[{i}]")


def validate(record) -> dict:
    """Check ``record`` against :data:`SCHEMA` and :data:`OPTIONAL`; return it unchanged.

    Refuses a missing field, a field of the wrong type, a field the schema does not know,
    rows that are not objects, seeds that are not integers, versions without ``torch``, and
    any interval (``ci95``) that is not ``[lo, hi]`` with ``lo <= hi``; the error names the
    recording and the field.
    """
    if not isinstance(record, dict):
        raise TypeError(f"record must be a recording (a dict), got {type(record).__name__}")
    name = record.get("name", "<unnamed>")
    missing = [k for k in SCHEMA if k not in record]
    if missing:
        raise ValueError(f"recording {name!r} lacks the fields {missing}")
    unknown = sorted(set(record) - set(SCHEMA) - set(OPTIONAL))
    if unknown:
        raise ValueError(
            f"recording {name!r} has fields the schema does not know: {unknown}; "
            f"accepted: {sorted(SCHEMA)} and optional {sorted(OPTIONAL)}"
        )
    for key, value in record.items():
        kind = (SCHEMA.get(key) or OPTIONAL[key])[0]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise TypeError(
                f"recording {name!r}: field {key!r} must be {getattr(kind, '__name__', kind)}, "
                f"got {type(value).__name__}"
            )
    if not record["rows"] or not all(isinstance(r, dict) for r in record["rows"]):
        raise ValueError(f"recording {name!r}: rows must be a non-empty list of objects")
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in record["seeds"]):
        raise ValueError(f"recording {name!r}: seeds must be integers, got {record['seeds']!r}")
    if "torch" not in record["versions"]:
        raise ValueError(f"recording {name!r}: versions must name the torch that wrote it")
    _check_intervals(record, name)
    return record


def results_dir() -> Path:
    """The folder of the shipped recordings (``pecourse/lab/results``), where ``make results``
    writes them: a folder on disk, as an editable or wheel install has it."""
    return Path(str(resources.files(__package__))).resolve()


def write(record: dict, folder=None) -> Path:
    """Validate ``record`` and write it to ``folder/<name>.json`` (default :func:`results_dir`).

    The file is written to a temporary name and moved into place, so an interrupted write
    leaves the previous recording whole. Returns the path.
    """
    validate(record)
    out = Path(folder) if folder is not None else results_dir()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{record['name']}.json"
    fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{record['name']}.", suffix=".json")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(record, indent=1) + "\n")
        # mkstemp makes the file private; a recording is as readable as the one it replaces
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def recordings() -> list[str]:
    """The names of the shipped recordings."""
    files = resources.files(__package__).iterdir()
    return sorted(
        f.name.removesuffix(".json")
        for f in files
        if f.name.endswith(".json") and not f.name.startswith(".")
    )


def recorded(name: str) -> dict:
    """The shipped recording ``name`` as a dict (JSON keys are strings: a length is ``"64"``),
    validated against the schema (:func:`validate`).

    Refuses a name without a recording, listing the ones there are.
    """
    names = recordings()
    if name not in names:
        raise ValueError(f"name must be one of the recordings {names}; got {name!r}")
    text = resources.files(__package__).joinpath(f"{name}.json").read_text()
    return validate(json.loads(text))


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
