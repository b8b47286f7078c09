"""`pecourse cards lint --numbers`: where its time goes, and the two changes that cut it.

Side by side in interleaved rounds, CPU seconds (user + system, all threads) and wall seconds:

- **scan**: the check of ``base-smallest-admissible-4k`` (every base on a grid of 50 below
  Men et al.'s ``b* ≈ 2.7e4`` must fail ``B_m >= 0`` for some ``m <= 4096``, head_dim 128)
  as a full scan (every base at every distance, what the check did before) vs
  :func:`pecourse.flashcards.checks._min_decay` (a base is first tried at the distances where
  its neighbour failed); one thread; the verdicts are compared, not only the times;
- **deck**: every card's checks (``run_checks``) with torch's default threads vs one thread
  (what the command now sets);
- **command**: the whole command in a subprocess, once per round (imports of torch and
  transformers' modelling modules included; they are most of what is left).

The ratios are what to read on a shared machine (see ``timing.py``); ``--quick`` runs one
round of the scan on a shorter context, as a smoke test.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

import _common
import timing
import torch

from pecourse.flashcards import checks
from pecourse.flashcards.deck import load_deck


def _cpu(who: int = resource.RUSAGE_SELF) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _timed(fn) -> tuple[float, float, object]:
    cpu, wall = _cpu(), time.perf_counter()
    out = fn()
    return _cpu() - cpu, time.perf_counter() - wall, out


def full_scan(bases: torch.Tensor, context_length: int, head_dim: int) -> torch.Tensor:
    """The baseline: ``min_m B_m`` of every base at every distance, in chunks of 64 bases."""
    m = torch.arange(1, context_length + 1, dtype=torch.float64)[:, None]
    exponent = -2 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim
    return torch.cat(
        [
            torch.cos(m[None] * (chunk[:, None] ** exponent)[:, None, :]).sum(-1).amin(-1)
            for chunk in bases.split(64)
        ]
    )


def _command() -> tuple[float, float]:
    before, wall = _cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pecourse.cli import main; "
            "sys.exit(main(['cards', 'lint', '--numbers']))",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the command failed:\n{done.stdout}\n{done.stderr}")
    return _cpu(resource.RUSAGE_CHILDREN) - before, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one round of the scan, L = 1024")
    args = parser.parse_args()
    length = 1024 if args.quick else 4096
    rounds = 1 if args.quick else args.rounds
    b_star = checks._package_bound(length, 128)
    bases = torch.arange(50.0, b_star - 25, 50.0, dtype=torch.float64)
    cards = load_deck()
    default_threads = torch.get_num_threads()
    runs: dict[str, list[tuple[float, float]]] = {}
    for _ in range(rounds):
        torch.set_num_threads(1)
        cpu, wall, slow = _timed(lambda: full_scan(bases, length, 128))
        runs.setdefault("scan: full (before)", []).append((cpu, wall))
        cpu, wall, fast = _timed(lambda: checks._min_decay(bases, length, 128))
        runs.setdefault("scan: _min_decay", []).append((cpu, wall))
        if not torch.equal(slow >= 0, fast >= 0):
            raise SystemExit("the two scans disagree on a verdict")
        if args.quick:
            continue
        for threads in (default_threads, 1):
            torch.set_num_threads(threads)
            cpu, wall, _ = _timed(lambda: [p for c in cards for p in checks.run_checks(c)])
            runs.setdefault(f"deck checks: {threads} thread(s)", []).append((cpu, wall))
        runs.setdefault("command: lint --numbers", []).append(_command())
    rows = [
        {
            "variant": name,
            "cpu_s": statistics.median(c for c, _ in times),
            "wall_s": statistics.median(w for _, w in times),
        }
        for name, times in runs.items()
    ]
    print(f"{len(bases)} bases below b* = {b_star:.0f} at L = {length}; {len(cards)} cards")
    print(_common.table(rows, [("variant", "variant", ""), ("cpu_s", "CPU s (median)", ".2f"),
                               ("wall_s", "wall s (median)", ".2f")]))  # fmt: skip
    by = {r["variant"]: r for r in rows}
    ratios = {"scan": by["scan: full (before)"]["cpu_s"] / by["scan: _min_decay"]["cpu_s"]}
    if not args.quick:
        many, one = (by[f"deck checks: {t} thread(s)"] for t in (default_threads, 1))
        ratios["deck threads (cpu)"] = many["cpu_s"] / one["cpu_s"]
        ratios["deck threads (wall)"] = many["wall_s"] / one["wall_s"]
    for name, ratio in ratios.items():
        print(f"{name}: {ratio:.1f}x less")
    print(f"load average at the end: {timing.cpu_load()}")
    if not args.quick:
        path = _common.write_results("cards_lint", {"rounds": rounds, "rows": rows,
                                                    "ratios": ratios})  # fmt: skip
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
