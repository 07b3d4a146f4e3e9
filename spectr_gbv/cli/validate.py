"""``spectr-gbv validate module:function``: the conformance harness on a third-party verifier.

Exit status: 0 when every check passes, 1 when a check fails, 2 (one line on stderr) for a
usage error: a bad import path, an unknown interface, level, budget or reference.

The verifier's module is imported as ``python -m`` would: from the installed packages, the
``PYTHONPATH``, or the current directory.
"""

from __future__ import annotations

import argparse
import os
import sys

from spectr_gbv.cli.common import UsageError
from spectr_gbv.validate import INTERFACES, load_verifier, validate
from spectr_gbv.validate.harness import BUDGETS, LEVELS


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``validate`` subcommand."""
    p = sub.add_parser(
        "validate",
        help="check a verifier (module:function) for losslessness, structure and efficiency",
        description=(
            "Run the conformance harness on a verifier: structural probes, the exact or statistical law "
            "on an instance battery, an optional comparison with a named reference algorithm, and an "
            "adversarial search. Exit 0 when every check passes, 1 when one fails, 2 for a usage error."
        ),
    )
    p.add_argument(
        "verifier",
        metavar="module:function",
        help="import path of the verifier (installed, on PYTHONPATH, or a module in the current directory)",
    )
    p.add_argument("--interface", default="generic", help=f"one of {', '.join(INTERFACES)} (default generic)")
    p.add_argument("--level", default="statistical", help=f"one of {', '.join(LEVELS)} (default statistical)")
    p.add_argument(
        "--reference", default=None, metavar="NAME", help="algorithm the verifier claims (sd, bv, mdbv, ...)"
    )
    p.add_argument("--budget", default="standard", help=f"one of {', '.join(BUDGETS)} (default standard)")
    p.add_argument("--seed", type=int, default=0, help="seed of the harness (default 0)")
    p.add_argument("--time-limit", type=float, default=10.0, metavar="S", help="seconds per verifier call (default 10)")
    p.add_argument("--no-probes", action="store_true", help="skip the fixed robustness probes")
    p.add_argument("--no-search", action="store_true", help="skip the adversarial search")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``validate``; returns 0 (all checks pass) or 1 (a check failed)."""
    if os.getcwd() not in sys.path and "" not in sys.path:  # as ``python -m``: the current directory first
        sys.path.insert(0, os.getcwd())
    try:
        verify = load_verifier(args.verifier, args.interface)
        report = validate(
            verify,
            interface=args.interface,
            level=args.level,
            reference=args.reference,
            seed=args.seed,
            budget=args.budget,
            time_limit_s=args.time_limit,
            probes=not args.no_probes,
            search=not args.no_search,
        )
    except ValueError as exc:
        raise UsageError(str(exc).splitlines()[0]) from exc
    report.verifier = args.verifier
    print(report.to_json() if args.json else report.to_text())
    return 0 if report.passed else 1
