"""``spectr-gbv bound``: the bounds of one instance per K (closed forms exact, LPs in float64)."""

from __future__ import annotations

import argparse

from spectr_gbv.cli.common import UsageError, parse_ks, print_json, render_table, resolve_instance


def run(args: argparse.Namespace) -> int:
    """Execute ``bound``; returns the exit status."""
    from spectr_gbv.core.numbers import display_value, json_value
    from spectr_gbv.theory.bounds import cic_limit, draft_covers_target
    from spectr_gbv.theory.lp import LPTooLargeError
    from spectr_gbv.theory.table import bound_table

    inst = resolve_instance(args)
    ks = parse_ks(args.K)
    try:
        rows = bound_table(inst, ks, with_lp=not args.no_lp)
    except LPTooLargeError as exc:
        raise UsageError(f"instance too large for the LPs: {exc}") from exc
    limit = cic_limit(inst.target, inst.draft, inst.L)
    covers = draft_covers_target(inst.target, inst.draft, inst.L)
    if args.json:
        print_json(
            {
                "instance": inst.name,
                "n": inst.n,
                "L": inst.L,
                "exact": inst.exact,
                "limit": json_value(limit),
                "draft_covers_target": covers,
                "rows": [r.to_json() for r in rows],
            }
        )
        return 0
    kind = "exact" if inst.exact else "float64"
    print(f"Instance: {inst.name}  (n={inst.n}, L={inst.L}, {kind})")
    print("Expected accepted tokens E[tau] per iteration (add 1 for block efficiency).")
    headers = ["K", "B (CIC)", "B_BV", "SD", "BV", "prefix relax.", "OPT (LP)", "OT (LP)"]
    table = [
        [
            str(r.K),
            display_value(r.cic_bound),
            display_value(r.cic_bound_lossless),
            display_value(r.sd),
            display_value(r.bv),
            display_value(r.prefix_relaxation),
            display_value(r.opt),
            display_value(r.ot),
        ]
        for r in rows
    ]
    print(render_table(headers, table))
    cover = "q covers supp p on V^L" if covers else "q does not cover supp p on V^L, so the limit is below L"
    print(f"K -> infinity limit of B, B_BV, PR: {display_value(limit)}  (L = {inst.L}; {cover})")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``bound`` subcommand."""
    from spectr_gbv.cli.common import add_instance_args

    p = sub.add_parser(
        "bound",
        help="CIC bound B(K), lossless analogue B_BV(K), SD, BV, prefix relaxation, OPT(K), OT(K)",
        description="Print the bounds of an instance per K. Exact fractions when the instance is exact; "
        "OPT and OT are linear programs (scipy HiGHS, float64).",
    )
    add_instance_args(p)
    p.add_argument("--K", default="1,2,3", help="numbers of drafts, e.g. 1,2,3 or 1-8 (default 1,2,3)")
    p.add_argument("--no-lp", action="store_true", help="skip the OPT/OT linear programs")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress bars on stderr (also: SPECTR_GBV_QUIET=1)")
    p.set_defaults(func=run)
