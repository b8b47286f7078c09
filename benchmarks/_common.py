"""Shared helpers for the benchmark scripts: tables, JSON results with the machine's name."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing the package
    sys.path.insert(0, str(ROOT))

from timing import describe_machine  # noqa: E402  (benchmarks/timing.py)

RESULTS = ROOT / "benchmarks" / "results"


def table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """Format ``rows`` as a fixed-width table; ``columns`` are ``(key, header, format)``."""
    cells = [[h for _, h, _ in columns]]
    for row in rows:
        cells.append(
            [
                (format(row[k], f) if row.get(k) is not None else "-") if f else str(row.get(k))
                for k, _, f in columns
            ]
        )
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = [
        "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
        for r in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_results(name: str, payload: dict, out_dir: Path | None = None) -> Path:
    """Write ``payload`` plus the machine description to ``results/<name>.json``."""
    out_dir = Path(out_dir) if out_dir is not None else RESULTS
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    doc = {
        "benchmark": name,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": describe_machine(),
        **payload,
    }
    path.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    return path
