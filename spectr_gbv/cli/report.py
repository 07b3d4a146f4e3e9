"""``spectr-gbv report``: the main job. Methods x K table, bounds, claims ledger, multi-iteration BE."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from spectr_gbv.cli.common import (
    UsageError,
    add_instance_args,
    exact_output,
    parse_ks,
    print_json,
    resolve_instance,
)

if TYPE_CHECKING:
    from spectr_gbv.ledger.report import Report


def render(rep: Report, *, detail: bool = False) -> str:
    """The human-readable report, every line at most 100 columns (:mod:`spectr_gbv.cli.report_text`)."""
    from spectr_gbv.cli.report_text import render as render_text

    return render_text(rep, detail=detail)


def run(args: argparse.Namespace) -> int:
    """Execute ``report``; returns the exit status.

    The run is estimated first and refused above
    :data:`~spectr_gbv.simulate.estimate.MAX_RUN_SECONDS` (one line, exit 2); on a terminal a
    progress bar weighted by the estimates shows an ETA on stderr. Exact values print in full
    (JSON) up to :data:`~spectr_gbv.cli.common.MAX_EXACT_DIGITS` digits.
    """
    from spectr_gbv.ledger.report import build_report

    inst = resolve_instance(args)
    ks = parse_ks(args.K, max_k=8)
    t0 = time.perf_counter()
    try:
        rep = build_report(inst, ks, horizon=args.horizon, ledger=args.ledger)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    with exact_output("lower --horizon or --K, or use a float64 instance"):
        if args.json:
            print_json(rep.to_json())
        else:
            print(render(rep, detail=args.detail))
            print(f"\n(computed in {time.perf_counter() - t0:.1f} s)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``report`` subcommand."""
    p = sub.add_parser(
        "report",
        help="the main job: every method's exact E[tau] and validity defect, the bounds, the claims ledger",
        description="Exact table of methods x K with the bounds B, B_BV, OPT, OT beside them, then the "
        "claims ledger of the SpecTr-GBV paper and the field ledger with verdicts computed live, then the "
        "multi-iteration block efficiency of stateful vs stateless verification, then a summary: the best "
        "lossless verifier per K and its distance to OPT(K). At most 100 columns; --detail prints everything.",
    )
    add_instance_args(p)
    p.add_argument("--K", default="1,2,3", help="numbers of drafts (default 1,2,3)")
    p.add_argument(
        "--horizon",
        type=int,
        default=6,
        help="tokens N for the multi-iteration comparison (0 skips it; default 6)",
    )
    p.add_argument(
        "--ledger",
        choices=("spectr_gbv", "field", "all"),
        default="all",
        help="claims ledgers to print: the SpecTr-GBV paper's, the field's, or both (default all)",
    )
    p.add_argument(
        "--detail",
        action="store_true",
        help="print every detail: exact fractions, every evidence line, the E[tokens] columns",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress bars on stderr (also: SPECTR_GBV_QUIET=1)")
    p.set_defaults(func=run)
