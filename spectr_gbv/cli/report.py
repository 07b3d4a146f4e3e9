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
    render_table,
    resolve_instance,
)

if TYPE_CHECKING:
    from spectr_gbv.simulate.report import Report


def render(rep: Report) -> str:
    """The human-readable report."""
    from spectr_gbv.core.numbers import display_value
    from spectr_gbv.simulate.report import is_lossy_method

    inst = rep.instance
    out = [f"Instance: {inst.name}  (n={inst.n}, L={inst.L}, {'exact' if inst.exact else 'float64'})", ""]
    out.append(
        "One iteration, exact: expected accepted tokens E[tau] and validity defect (0 = lossless; * = lossy on purpose)"
    )
    headers = ["method"]
    for k in rep.ks:
        headers += [f"E[tau] K={k}", f"defect K={k}"]
    methods = list(dict.fromkeys(m for m, _ in rep.results))
    rows = []
    for m in methods:
        row = [m + (" *" if is_lossy_method(m) else "")]
        for k in rep.ks:
            r = rep.results[(m, k)]
            row += [display_value(r.expected_accepted), display_value(r.validity_defect)]
        rows.append(row)
    for label, attr in (
        ("B (CIC bound)", "cic_bound"),
        ("B_BV (lossless analogue)", "cic_bound_lossless"),
        ("OPT (LP, stateless)", "opt"),
        ("OT (LP, coupling)", "ot"),
    ):
        row = [label]
        for b in rep.bounds:
            row += [display_value(getattr(b, attr)), ""]
        rows.append(row)
    out.append(render_table(headers, rows))
    out.append(
        "greedy_bv is stateful (carries a target-law correction; its defect is the stateful one) "
        "and reads only the first draft, like sd and bv."
    )
    rounding = sorted({(m, r.tolerance) for (m, _), r in rep.results.items() if r.within_kernel_tolerance})
    for m, tol in rounding:
        out.append(
            f"{m}: its kernel comes from a float64 LP; its nonzero defect (<= {tol:g}) is LP rounding, "
            "lossless within that tolerance."
        )
    for title, claims in (
        ("Claims ledger (SpecTr-GBV, Lin et al. 2026, arXiv 2604.25925), verdicts computed now:", rep.claims),
        ("Field ledger (the literature's verifiers and claims), verdicts computed now:", rep.field_claims),
    ):
        if not claims:
            continue
        out += ["", title]
        for i, c in enumerate(claims, 1):
            out.append(f"{i}. [{c.verdict.upper()}] {c.key}: {c.statement}")
            out += [f"     - {e}" for e in c.evidence]
    if rep.multi:
        out += [
            "",
            f"Multi-iteration, exact: generating N = {rep.horizon} tokens (Markov reading of the tables beyond "
            "their depth; single-draft methods at K = 1, multi-draft ones at the largest K)",
        ]
        headers = ["method", "K", "E[target calls]", "BE = N/E[calls]"] + [
            f"E[tokens] m={m}" for m in range(1, min(rep.horizon, 4) + 1)
        ]
        rows = [
            [m.method, str(m.K), display_value(m.expected_calls), display_value(m.block_efficiency)]
            + [display_value(t) for t in m.expected_tokens[:4]]
            for m in rep.multi
        ]
        out.append(render_table(headers, rows))
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    """Execute ``report``; returns the exit status.

    The run is estimated first and refused above
    :data:`~spectr_gbv.simulate.estimate.MAX_RUN_SECONDS` (one line, exit 2); on a terminal a
    progress bar weighted by the estimates shows an ETA on stderr. Exact values print in full
    (JSON) up to :data:`~spectr_gbv.cli.common.MAX_EXACT_DIGITS` digits.
    """
    from spectr_gbv.simulate.report import build_report

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
            print(render(rep))
            print(f"\n(computed in {time.perf_counter() - t0:.1f} s)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``report`` subcommand."""
    p = sub.add_parser(
        "report",
        help="the main job: every method's exact E[tau] and validity defect, the bounds, the claims ledger",
        description="Exact table of methods x K with the bounds B, B_BV, OPT, OT beside them, then the "
        "claims ledger of the SpecTr-GBV paper and the field ledger with verdicts computed live, then the "
        "multi-iteration block efficiency of stateful vs stateless verification.",
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
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress bars on stderr (also: SPECTR_GBV_QUIET=1)")
    p.set_defaults(func=run)
