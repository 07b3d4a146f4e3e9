"""Detection rates of the generation referee on the planted-bug loops, and its false-alarm rate on correct loops.

Runs :func:`spectr_gbv.validate.generation.validate_generation` ``R`` times (harness seeds
``seed0 .. seed0 + R - 1``) at one budget (default ``standard``) on every loop of
:data:`~spectr_gbv.testing.mutants.generation_bugs.GENERATION_MUTANTS` and
:data:`~spectr_gbv.testing.mutants.generation_loops.GENERATION_LOOPS`, each in the interface
it declares, and tabulates per loop:

* **detected**: runs whose verdict failed, ``k/R``, with the two-sided 95% Clopper-Pearson
  interval (``scipy.stats.binomtest(...).proportion_ci(method="exact")``); for a correct loop
  this is the false-alarm count;
* **expected check**: the loop's ``caught_by`` attribute (the check name prefix that should
  reject it);
* **caught by**: the check name prefixes (``sequence_law``, ``positional_law``,
  ``draft_invariance``, ``batch_invariance``, ``runs``) of the failed checks over the R runs,
  most frequent first, with their counts.

Usage::

    python bench/generation_detection.py [--repeats 3] [--budget standard] [--seed0 0]
                                         [--only NAME,...] [--write] [--out FILE.json]

Prints the table as Markdown; ``--write`` also writes it to
``docs/results/generation_detection.md``. Progress goes to stderr (one step per run).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scipy.stats import binomtest  # noqa: E402

from spectr_gbv.core.progress import progress  # noqa: E402

#: Where ``--write`` puts the Markdown table.
RESULTS = ROOT / "docs" / "results" / "generation_detection.md"


def loops(only: set[str]) -> list[tuple[str, Any]]:
    """(name, function) of every planted-bug loop, then every correct loop (filtered by ``only``)."""
    from spectr_gbv.testing.mutants.generation_bugs import GENERATION_MUTANTS  # noqa: PLC0415
    from spectr_gbv.testing.mutants.generation_loops import GENERATION_LOOPS  # noqa: PLC0415

    rows = [*GENERATION_MUTANTS.items(), *GENERATION_LOOPS.items()]
    unknown = only - {name for name, _ in rows}
    if unknown:
        raise SystemExit(f"generation_detection: error: --only: unknown loop(s) {', '.join(sorted(unknown))}")
    return [(name, fn) for name, fn in rows if not only or name in only]


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided Clopper-Pearson interval of a binomial proportion ``k / n``."""
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


def run_one(name: str, fn: Any, repeats: int, budget: str, seed0: int, bar: Any) -> dict[str, Any]:
    """Validate ``fn`` ``repeats`` times; the row of the table (and the per-run seconds)."""
    from spectr_gbv.validate.generation import validate_generation  # noqa: PLC0415

    failed_checks: Counter[str] = Counter()
    detected, seconds = 0, []
    for r in range(repeats):
        t0 = time.perf_counter()
        report = validate_generation(fn, interface=fn.interface, budget=budget, seed=seed0 + r, quiet=True)
        seconds.append(time.perf_counter() - t0)
        if not report.passed:
            detected += 1
        failed_checks.update({c.name.split("[")[0] for c in report.failures})
        bar.update(1)
    low, high = clopper_pearson(detected, repeats)
    return {
        "loop": name,
        "bug": fn.bug,
        "interface": fn.interface,
        "source": getattr(fn, "source", ""),
        "expected": getattr(fn, "caught_by", "") or "(none: must pass)",
        "detected": detected,
        "repeats": repeats,
        "ci95": [round(low, 3), round(high, 3)],
        "caught_by": dict(failed_checks.most_common()),
        "seconds": [round(s, 1) for s in seconds],
    }


def markdown(rows: list[dict[str, Any]], budget: str, seed0: int) -> str:
    """The Markdown page: planted bugs, then the correct loops' false alarms."""
    head = "| loop | bug class | source | detected k/R | 95% CI | expected check | caught by (failed checks, R runs) |"
    rule = "|---|---|---|---|---|---|---|"

    def line(r: dict[str, Any]) -> str:
        caught = ", ".join(f"{k} ({v})" for k, v in r["caught_by"].items()) or "-"
        lo, hi = r["ci95"]
        return (
            f"| `{r['loop']}` | {r['bug']} | {r['source']} | {r['detected']}/{r['repeats']} | "
            f"[{lo:.2f}, {hi:.2f}] | {r['expected']} | {caught} |"
        )

    bugs = [r for r in rows if r["bug"] != "ok"]
    ok = [r for r in rows if r["bug"] == "ok"]
    repeats = rows[0]["repeats"] if rows else 0
    out = [
        "# Generation referee: detection rates on planted-bug loops",
        "",
        f"`spectr-gbv validate --interface generation` (`validate_generation`, budget `{budget}`) run {repeats} "
        f"times per loop, harness seeds {seed0}..{seed0 + repeats - 1}. A planted bug is detected when the "
        "verdict fails; a correct loop's failures are false alarms. Intervals are two-sided 95% "
        "Clopper-Pearson. Loops: `spectr_gbv.testing.mutants.generation_bugs` (planted bugs) and "
        "`spectr_gbv.testing.mutants.generation_loops` (correct loops).",
        "",
        "Regenerate: `python bench/generation_detection.py --repeats R --budget BUDGET --write`.",
        "",
        "## Planted bugs",
        "",
        head,
        rule,
        *(line(r) for r in bugs),
        "",
        "## Correct loops (false alarms)",
        "",
        head,
        rule,
        *(line(r) for r in ok),
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Run every loop R times, print the Markdown table; optionally write it and the rows as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="runs per loop (R, default 3)")
    ap.add_argument("--budget", default="standard", choices=("quick", "standard", "thorough"))
    ap.add_argument("--seed0", type=int, default=0, help="harness seed of the first run")
    ap.add_argument("--only", default="", help="comma-separated loop names")
    ap.add_argument("--write", action="store_true", help=f"write the table to {RESULTS.relative_to(ROOT)}")
    ap.add_argument("--out", default="", help="JSON file for the rows")
    args = ap.parse_args(argv)
    if args.repeats < 1 or args.seed0 < 0:
        ap.error("--repeats must be >= 1 and --seed0 >= 0")
    todo = loops({s.strip() for s in args.only.split(",") if s.strip()})
    rows = []
    with progress(len(todo) * args.repeats, "generation detection", unit="run") as bar:
        for name, fn in todo:
            bar.set_postfix_str(name)
            row = run_one(name, fn, args.repeats, args.budget, args.seed0, bar)
            rows.append(row)
            print(
                f"{name:26} {row['detected']}/{row['repeats']}  {json.dumps(row['caught_by'])}  "
                f"{sum(row['seconds']) / len(row['seconds']):.0f} s/run",
                file=sys.stderr,
                flush=True,
            )
    page = markdown(rows, args.budget, args.seed0)
    print(page)
    if args.write:
        RESULTS.write_text(page)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
