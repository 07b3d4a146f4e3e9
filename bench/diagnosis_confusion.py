"""Confusion table of the harness's diagnoses: planted bug class vs the part of the verifier the report names.

Runs :func:`spectr_gbv.validate.validate` once, at ``--budget quick`` (default battery, probes
and adversarial search, seed 0), on every mutant of ``MUTANTS`` and every ``*_MUTANTS`` registry
of :mod:`spectr_gbv.testing.mutants` (in the interface each declares), and tabulates:

* **planted**: the class of the bug as planted (:data:`PLANTED`; a mutant's ``locus`` attribute
  where it has one): ``acceptance`` (which tokens pass the test), ``draft_order`` (the order the
  drafts are tried in), ``draft_law`` (the verifier is fed another q than the drafts' law),
  ``residual`` (the token drawn at the stop), ``uniform_reuse``, or a robustness tag;
* **diagnosed**: the locus most of the report's failed law checks name
  (:func:`spectr_gbv.validate.checks.diagnosis.locus_of` of each check's tag and detail; ties go
  to the smallest failure), else the tag of its smallest failure, ``passed`` when it passed.

Usage::

    python bench/diagnosis_confusion.py [--budget quick] [--seed 0] [--only NAME,...] [--out FILE.json]

Prints one line per mutant, then the confusion table as markdown (docs/validate.md, "Diagnoses").
Progress goes to stderr.
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

from spectr_gbv.core.progress import progress  # noqa: E402
from spectr_gbv.validate import validate  # noqa: E402
from spectr_gbv.validate.checks.diagnosis import locus_of  # noqa: E402

#: The class each public or coverage mutant was planted in (its bug's locus in the code).
PLANTED: dict[str, str] = {
    "always_accept": "acceptance",
    "softmax_residual": "residual",
    "greedy_draft_softmax_q": "draft_law",
    "topk_draft_raw_q": "draft_law",
    "temperature_draft_only": "draft_law",
    "zero_residual_oov": "nan_or_out_of_vocab",
    "accepts_placeholder": "accepts_placeholder",
    "zero_coin_accepts": "zero_probability_token",
    "target_sample_or_ratio": "acceptance",
    "hardcoded_zero_uniform": "acceptance",
    "reused_uniform": "uniform_reuse",
    "rrs_two_residual_slots": "residual",  # at K = 4 trial 4 also tests against the stale R_2
    "rrs_lagged_target": "acceptance",
    "tiled_cdf_drops_carry": "residual",
    "multipath_tie_mismatch": "acceptance",  # the acceptance ratio uses a q_skew of another selection rule
    "crashes_on_token_zero": "raises",
    "crashes_on_zero_residual": "raises",
    "uint8_id_lookup": "acceptance",
    "int16_id_buffer": "acceptance",
}
#: Law checks whose diagnosis locates the bug.
LAW_CHECKS = ("end_to_end_law", "positional_law", "exact_defect", "adversarial_search")


def mutants() -> list[tuple[str, str, Any]]:
    """(registry, name, function) for every mutant of every ``*_MUTANTS`` registry, in registry order."""
    import spectr_gbv.testing.mutants as M  # noqa: PLC0415

    registries = {
        k: v for k, v in vars(M).items() if (k == "MUTANTS" or k.endswith("_MUTANTS")) and isinstance(v, dict)
    }
    try:  # registered by its own module when the package does not list it yet
        from spectr_gbv.testing.mutants import robustness_bugs  # noqa: PLC0415

        registries.setdefault("ROBUSTNESS_MUTANTS", getattr(robustness_bugs, "ROBUSTNESS_MUTANTS", {}))
    except ImportError:
        pass
    return [(reg, name, fn) for reg, table in registries.items() for name, fn in table.items()]


def planted(name: str, fn: Any) -> str:
    """The planted class: :data:`PLANTED`, else the mutant's ``locus``, else its expected tag's locus."""
    if name in PLANTED:
        return PLANTED[name]
    if fn.bug == "ok":  # planted lossless (a coin-free verifier): the harness must pass it
        return "passed"
    return getattr(fn, "locus", None) or locus_of(fn.bug, "")


def diagnosed(report: Any) -> str:
    """The locus most failed law checks name (ties: the smallest failure's), else the smallest failure's tag."""
    if report.passed and report.exit_code == 0:
        return "passed"
    law = [c for c in report.failures if c.name.split("[")[0] in LAW_CHECKS]
    if law:
        counts = Counter(locus_of(c.diagnosis, c.detail) for c in law)
        top = max(counts.values())
        small = report.smallest_failure
        first = locus_of(small.diagnosis, small.detail) if small is not None else ""
        return first if counts.get(first) == top else sorted(k for k, v in counts.items() if v == top)[0]
    small = report.smallest_failure
    return small.diagnosis if small is not None else "passed"


def main(argv: list[str] | None = None) -> int:
    """Run the mutants, print one line each and the confusion table; optionally save JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", default="quick", choices=("quick", "standard", "thorough"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated mutant names")
    ap.add_argument("--out", default="", help="JSON file for the rows")
    args = ap.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    todo = [m for m in mutants() if not only or m[1] in only]
    rows = []
    with progress(len(todo), "mutants", unit="mutant") as bar:
        for reg, name, fn in todo:
            t0 = time.perf_counter()
            rep = validate(fn, interface=fn.interface, budget=args.budget, seed=args.seed, quiet=True)
            row = {
                "registry": reg,
                "mutant": name,
                "interface": fn.interface,
                "planted": planted(name, fn),
                "diagnosed": diagnosed(rep),
                "exit_code": rep.exit_code,
                "tags": sorted({c.diagnosis for c in rep.failures}),
                "seconds": round(time.perf_counter() - t0, 1),
            }
            rows.append(row)
            print(
                f"{reg:18} {name:28} {row['planted']:22} -> {row['diagnosed']:22} "
                f"exit {row['exit_code']} {row['seconds']:6.1f} s  {','.join(row['tags'])}",
                flush=True,
            )
            bar.update(1)
    classes = sorted({r["planted"] for r in rows})
    found = sorted({r["diagnosed"] for r in rows})
    table = Counter((r["planted"], r["diagnosed"]) for r in rows)
    print()
    print("| planted \\ diagnosed | " + " | ".join(f"`{d}`" for d in found) + " |")
    print("|---|" + "---|" * len(found))
    for p in classes:
        cells = [str(table[(p, d)]) if table[(p, d)] else "" for d in found]
        print(f"| `{p}` | " + " | ".join(cells) + " |")
    agree = sum(r["planted"] == r["diagnosed"] for r in rows)
    print(f"\n{agree} of {len(rows)} mutants diagnosed in their planted class (budget {args.budget}, seed {args.seed})")
    if args.out:
        Path(args.out).write_text(json.dumps({"budget": args.budget, "seed": args.seed, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
