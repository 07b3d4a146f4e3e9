"""Time ``spectr-gbv validate`` on verifiers of a fixed cost, against the harness of an earlier commit.

The target (docs/validate.md, "Speed"): a verifier that costs 1 ms per single-row call, or a
batched one that costs 1 ms per 64 rows, gets a ``standard`` verdict in at most 5 minutes on a
2-core CPU. The verifiers are :mod:`bench.validate_speed_verifiers` (textbook speculative
sampling in torch, padded with a busy wait to the cost). Runs, one after the other in this one
process (each a fresh ``python -m spectr_gbv.cli.main validate`` subprocess; wall time, CPU time
of the subprocess and its children, verifier calls and verdict read from the JSON report):

* ``old/single``: the harness at ``--old`` (default the last commit before this harness:
  74509a7), checked out with ``git worktree`` into a temporary folder, ``--interface generic``
  (it has no torch flavour; the verifier also takes a numpy Generator);
* ``new/single``: this checkout, ``--interface generic_torch``;
* ``new/batched``: this checkout, ``--interface batched_torch``;
* ``old/batched``: the same batched computation through the old harness's ``chain`` interface
  (its only batched one: ``[B, L]`` rows and supplied uniforms), see :func:`chain_wrapper`.

Ratios old/new are printed for each pair. Usage::

    python bench/validate_speed.py [--budget standard] [--old 74509a7] [--only new/single,...] [--out FILE.json]

A ``standard`` run of the old harness on the 1 ms verifier takes about half an hour; ``--budget
quick`` gives the same comparison in minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from process_timing import run_timed

ROOT = Path(__file__).resolve().parents[1]
RUNS: dict[str, tuple[str, str, str]] = {
    # name: (tree, verifier, interface)
    "old/single": ("old", "bench.validate_speed_verifiers:single_row", "generic"),
    "new/single": ("new", "bench.validate_speed_verifiers:single_row", "generic_torch"),
    "old/batched": ("old", "bench.validate_speed_verifiers:chain_batched", "chain"),
    "new/batched": ("new", "bench.validate_speed_verifiers:batched", "batched_torch"),
}


def _worktree(commit: str, where: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), commit], check=True)
    return where


def _run(tree: Path, verifier: str, interface: str, budget: str) -> dict[str, object]:
    """One validate run as a subprocess: wall and CPU seconds, calls, verdict."""
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{ROOT}", OMP_NUM_THREADS="1", SPECTR_GBV_QUIET="1")
    cmd = [sys.executable, "-m", "spectr_gbv.cli.main", "validate", verifier, "--interface", interface]
    cmd += ["--budget", budget, "--json", "--time-limit", "600"]
    timed = run_timed(cmd, cwd=tree, env=env)
    proc, wall, cpu = timed.proc, timed.wall_s, timed.cpu_s
    try:
        rep = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"exit": proc.returncode, "wall_s": wall, "cpu_s": cpu, "error": proc.stderr[-400:]}
    return {
        "exit": proc.returncode,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "verifier_calls": rep["settings"].get("verifier_calls"),
        "rows": sum(rep["settings"].get("samples_per_instance", {}).values()),
        "passed": rep["passed"],
        "tv_detected": rep["settings"].get("tv_detected"),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the timings; print one line per run and the old/new ratios; exit 0."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", default="standard", choices=("quick", "standard", "thorough"))
    ap.add_argument("--old", default="74509a7", help="commit of the harness to compare with")
    ap.add_argument("--only", default=",".join(RUNS), help="comma-separated run names")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        old = None
        if any(RUNS[n][0] == "old" for n in names):
            old = _worktree(args.old, Path(tmp) / "old")
        try:
            for name in names:
                tree, verifier, interface = RUNS[name]
                results[name] = _run(old if tree == "old" else ROOT, verifier, interface, args.budget)
                print(f"{name:12s} {json.dumps(results[name])}", flush=True)
        finally:
            if old is not None:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=False)
    for kind in ("single", "batched"):
        a, b = results.get(f"old/{kind}"), results.get(f"new/{kind}")
        if a and b and b.get("wall_s"):
            print(f"ratio old/new {kind}: wall {a['wall_s'] / b['wall_s']:.2f}x, cpu {a['cpu_s'] / b['cpu_s']:.2f}x")
    if args.out:
        Path(args.out).write_text(json.dumps({"budget": args.budget, "old": args.old, "runs": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
