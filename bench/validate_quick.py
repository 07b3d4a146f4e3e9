"""Time ``validate(..., budget="quick")`` the way a user runs it: one whole process per run.

The target (docs/validate.md, "The budgets"): ``quick`` on a registered fast verifier gives its
verdict within 15 s of wall time on a 2-core CPU, the start of the process included. Runs, one
after the other, each a fresh subprocess (``SPECTR_GBV_QUIET=1``; wall time from this process,
CPU time of the subprocess and its children):

* ``sd``: the guide's snippet, ``validate(get_verifier("sd").sample, budget="quick")``;
* ``mdbv``: the same with ``get_verifier("mdbv").sample``;
* ``textbook_sd (CLI)``: ``spectr-gbv validate spectr_gbv.examples.textbook_sd:verify --budget quick``.

Each run's verdict, exit status, verifier calls and the harness's own elapsed seconds are read
from the JSON report. Usage::

    python bench/validate_quick.py [--reps 3] [--only sd,mdbv,...] [--out docs/results/validate_quick.md]

It prints the table (median over ``--reps`` runs, min and max beside it) and writes it to
``--out`` (``--out -`` writes nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path

from process_timing import run_timed

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 15.0

_PY = (
    "import sys; from spectr_gbv.reference import get_verifier; from spectr_gbv.validate import validate; "
    "r = validate(get_verifier({name!r}).sample, budget='quick'); sys.stdout.write(r.to_json()); "
    "sys.exit(r.exit_code)"
)
#: run name -> command (after the python executable)
RUNS: dict[str, list[str]] = {
    "sd": ["-c", _PY.format(name="sd")],
    "mdbv": ["-c", _PY.format(name="mdbv")],
    "textbook_sd (CLI)": [
        "-m",
        "spectr_gbv.cli.main",
        "validate",
        "spectr_gbv.examples.textbook_sd:verify",
        "--budget",
        "quick",
        "--json",
    ],
}


def run_once(args: list[str]) -> dict[str, object]:
    """One run as a subprocess: wall and CPU seconds, exit status, verdict, calls, harness seconds."""
    env = dict(os.environ, SPECTR_GBV_QUIET="1")
    timed = run_timed([sys.executable, *args], cwd=ROOT, env=env)
    proc, wall, cpu = timed.proc, timed.wall_s, timed.cpu_s
    try:
        rep = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(f"no JSON report (exit {proc.returncode}): {proc.stderr[-2000:]}") from None
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "exit": proc.returncode,
        "passed": rep.get("passed"),
        "calls": rep.get("settings", {}).get("verifier_calls"),
        "harness_s": rep.get("elapsed_s"),
        "stderr_lines": len([ln for ln in proc.stderr.splitlines() if ln.strip()]),
    }


def table(results: dict[str, list[dict[str, object]]]) -> str:
    """The printed table: median wall (min-max), CPU, harness seconds, calls, verdict, stderr lines."""
    head = f"{'run':<18} {'wall s (median)':>15} {'min-max':>11} {'CPU s':>6} {'harness s':>9} {'calls':>7}"
    head += f" {'verdict':>8} {'stderr':>6} {'<= 15 s':>7}"
    lines = [head]
    for name, runs in results.items():
        walls = [float(r["wall_s"]) for r in runs]  # type: ignore[arg-type]
        med = statistics.median(walls)
        last = runs[-1]
        verdict = "PASSED" if last["passed"] else f"exit {last['exit']}"
        lines.append(
            f"{name:<18} {med:>15.1f} {min(walls):>5.1f}-{max(walls):<5.1f} "
            f"{statistics.median(float(r['cpu_s']) for r in runs):>6.1f} "  # type: ignore[arg-type]
            f"{statistics.median(float(r['harness_s']) for r in runs):>9.1f} {last['calls']:>7,} "  # type: ignore[arg-type]
            f"{verdict:>8} {max(int(r['stderr_lines']) for r in runs):>6} {'yes' if med <= TARGET_S else 'NO':>7}"  # type: ignore[call-overload]
        )
    return "\n".join(lines)


def page(text: str, reps: int, load: tuple[float, float]) -> str:
    """docs/results/validate_quick.md (``load``: the 1-minute load average before and after the runs)."""
    when = datetime.now(UTC).strftime("%Y-%m-%d")
    return f"""# `validate` at budget quick: whole-process time

`python bench/validate_quick.py --reps {reps}` ({when}, {platform.machine()}, {os.cpu_count()} CPUs,
Python {platform.python_version()}): each run is a fresh process, so the import of the package and
the start of the worker processes are counted. Wall seconds are the median of {reps} runs (min-max
beside it); CPU seconds are those of the process and its workers; "harness s" is the report's own
`elapsed_s`; "stderr" counts the lines the run printed on stderr (0: no warning, no traceback).
The 1-minute load average was {load[0]:.1f} before the runs and {load[1]:.1f} after them (other
work shares the machine when it is above 0).

```
{text}
```

- `sd` and `mdbv`: `validate(get_verifier(NAME).sample, budget="quick")`, as in docs/guide.md.
- `textbook_sd (CLI)`: `spectr-gbv validate spectr_gbv.examples.textbook_sd:verify --budget quick`.
- What `quick` covers (docs/validate.md, "The budgets"): every battery instance with power 0.99
  against a TV error of 0.1 (`wide_vocab`: 0.3, since a reference verifier in Python spends
  about 5 ms on one iteration of 33,000-float rows), a lighter adversarial search (500 samples per
  scored instance), every probe. `standard` (TV 0.02) and `thorough` (TV 0.01) are unchanged.
- The reference verifiers validate their inputs on every call (`spectr_gbv.reference.base`,
  vectorised for float rows: about 5 ms on 33,000-float rows, 20-40 ms before); the textbook
  example does not.
- Before `quick` was sized for this (TV 0.05 on every instance, 1,731 iterations on `wide_vocab`,
  1,000 samples per scored search instance: about 98,900 calls), the harness's own `elapsed_s` was
  34.8 s for `sd`, 69.9 s for `mdbv` (248 s of wall time when first reported) and 5.3 s for the
  textbook example, in one session of this machine; most of it was `wide_vocab` (19.6 s of `sd`'s,
  38.1 s of `mdbv`'s).
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3, help="runs per verifier (median reported)")
    ap.add_argument("--only", default="", help="comma-separated run names (default: all)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "results" / "validate_quick.md"), help="page ('-': none)")
    args = ap.parse_args(argv)
    if args.reps < 1:
        ap.error(f"--reps: expected an int >= 1, got {args.reps}")
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(RUNS)
    bad = [n for n in names if n not in RUNS]
    if bad:
        ap.error(f"--only: unknown run {bad[0]!r}; valid: {', '.join(RUNS)}")
    results: dict[str, list[dict[str, object]]] = {}
    load0 = os.getloadavg()[0]
    for name in names:
        results[name] = []
        for i in range(args.reps):
            print(f"[validate_quick] {name}: run {i + 1} of {args.reps}", file=sys.stderr, flush=True)
            results[name].append(run_once(RUNS[name]))
    text = table(results)
    print(text)
    if args.out != "-":
        Path(args.out).write_text(page(text, args.reps, (load0, os.getloadavg()[0])))
        print(f"written: {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
