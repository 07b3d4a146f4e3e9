"""Time the generation referee's default budget on transformers' assisted generation; its overhead ratio.

The target (docs/validate.md, "Whole generation loops"): ``spectr-gbv validate hf-assisted
--interface generation`` at the default budget (``standard``) finishes within 3 minutes on a
2-core CPU. Runs, one after the other in this one process, each a fresh ``python -m
spectr_gbv.cli.main validate ADAPTER --interface generation --json`` subprocess (so imports
and model building are counted):

* ``default``: the CLI's defaults (2 worker processes on 2 cores);
* ``one_worker``: ``--workers 1``, where the referee's overhead is unambiguous: the wall time
  minus the seconds spent inside the system's own generate calls (the report's
  ``seconds_in_generate``, measured in the worker around each call).

For each run it prints the wall time, generate calls, ``seconds_in_generate`` and the ratio
``(wall - inside) / inside`` (referee overhead per second inside ``generate``; with two workers
``inside`` is summed over both, so the ratio there can be negative and only the one-worker ratio
is the overhead). Usage::

    python bench/generation_referee_speed.py [--adapter hf-assisted] [--budget standard] [--out FILE.json]

Nothing else should run on the machine meanwhile (timings).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS: dict[str, tuple[str, ...]] = {"default": (), "one_worker": ("--workers", "1")}


def run_once(adapter: str, budget: str, extra: tuple[str, ...]) -> dict[str, object]:
    """One referee run in a subprocess: wall seconds, calls, seconds inside generate, verdict."""
    cmd = [sys.executable, "-m", "spectr_gbv.cli.main", "validate", adapter, "--interface", "generation"]
    cmd += ["--budget", budget, "--json", "--quiet", *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    report = json.loads(proc.stdout)
    settings = report["settings"]
    inside = float(settings["seconds_in_generate"])
    return {
        "command": " ".join(["spectr-gbv", *cmd[3:]]),
        "wall_s": round(wall, 2),
        "generate_calls": settings["verifier_calls"],
        "seconds_in_generate": inside,
        "overhead_ratio": round((wall - inside) / inside, 3),
        "passed": report["passed"],
    }


def main(argv: list[str] | None = None) -> int:
    """Run every configuration of :data:`RUNS`, print a table, optionally write JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--adapter", default="hf-assisted", help="adapter name or module:function (default hf-assisted)")
    ap.add_argument("--budget", default="standard", choices=("quick", "standard", "thorough"))
    ap.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    args = ap.parse_args(argv)
    rows = {}
    for name, extra in RUNS.items():
        print(f"running {name} ...", file=sys.stderr, flush=True)
        rows[name] = run_once(args.adapter, args.budget, extra)
    print(f"{'run':<12} {'wall s':>8} {'calls':>8} {'inside s':>9} {'overhead':>9}  verdict")
    for name, r in rows.items():
        verdict = "PASSED" if r["passed"] else "FAILED"
        print(
            f"{name:<12} {r['wall_s']:>8.1f} {r['generate_calls']:>8,} {r['seconds_in_generate']:>9.1f} "
            f"{r['overhead_ratio']:>9.3f}  {verdict}"
        )
    if args.out is not None:
        args.out.write_text(json.dumps({"adapter": args.adapter, "budget": args.budget, "runs": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
