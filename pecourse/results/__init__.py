"""The recorded experiment results (``pecourse/results/<name>.json``), read one way.

:func:`recorded` returns what :mod:`pecourse.experiments` measured and saved
(``python -m pecourse.experiments run NAME --save``) as an :class:`ExperimentResult`, with
the column names that were integers (evaluation lengths: JSON writes ``64`` as ``"64"``)
turned back into integers, so a recording and a fresh run index the same way. Importing this
module loads neither torch nor the model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources

__all__ = ["ExperimentResult", "recorded", "recordings", "save"]


@dataclass
class ExperimentResult:
    """A table (``rows``), a plain-language reading of it (``text``) and a ``figure``."""

    name: str
    rows: list[dict]
    text: str
    figure: object = field(default=None, repr=False)

    def table(self) -> str:
        """The rows as a fixed-width text table."""
        if not self.rows:
            return "(no rows)"
        cols = list(dict.fromkeys(k for r in self.rows for k in r))
        cells = [[_fmt(r.get(c)) for c in cols] for r in self.rows]
        widths = [max(len(str(c)), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
        lines = ["  ".join(str(c).rjust(w) for c, w in zip(cols, widths))]
        lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"name": self.name, "rows": self.rows, "text": self.text}

    def __str__(self) -> str:
        return f"{self.name}\n{self.table()}\n\n{self.text}"


def _fmt(v) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:.3e}"
    return str(v)


def recordings() -> list[str]:
    """The names of the shipped recordings."""
    files = resources.files(__package__).iterdir()
    return sorted(f.name.removesuffix(".json") for f in files if f.name.endswith(".json"))


def recorded(name: str) -> ExperimentResult:
    """The shipped recording of experiment ``name`` (no figure: plot it from ``rows``).

    Refuses a name without a recording, listing the ones there are, and a study's recording
    (the same folder holds those; :func:`pecourse.studies.load` reads them).
    """
    names = recordings()
    if name not in names:
        raise ValueError(f"name must be one of the recorded experiments {names}; got {name!r}")
    data = json.loads(resources.files(__package__).joinpath(f"{name}.json").read_text())
    if not {"name", "rows", "text"} <= data.keys():  # a study's recording (pecourse.studies)
        raise ValueError(
            f"name {name!r} is a study's recording, not an experiment's table: read it with "
            f"pecourse.studies.load({name!r})"
        )
    rows = [{int(k) if k.isdigit() else k: v for k, v in row.items()} for row in data["rows"]]
    return ExperimentResult(data["name"], rows, data["text"])


def save(result: ExperimentResult, folder=None) -> str:
    """Write ``result`` as ``<folder>/<name>.json`` (default: this package's folder)."""
    from pathlib import Path

    out = Path(folder or Path(__file__).parent) / f"{result.name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result.to_dict(), indent=1, default=str) + "\n")
    return str(out)
