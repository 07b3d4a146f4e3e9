"""``spectr-gbv simulate``: exact one-iteration (and optional multi-iteration) results per method and K."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

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
    from spectr_gbv.core.instance import Instance


def run_monte_carlo(args: argparse.Namespace, inst: Instance, methods: list[str], ks: list[int]) -> int:
    """``simulate --samples N``: sampled E[tau] with a CI and a G-test of the output law."""
    from spectr_gbv.simulate.monte_carlo import monte_carlo

    results = []
    try:
        for m in methods:
            for k in ks:
                results.append(monte_carlo(inst, m, k, args.samples, seed=0 if args.seed is None else args.seed))
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    rows = [
        {
            "method": r.method,
            "K": r.K,
            "samples": r.num_iterations,
            "expected_accepted": r.expected_accepted,
            "ci": [r.ci_low, r.ci_high],
            "confidence": r.confidence,
            "g_statistic": r.g_statistic,
            "p_value": r.p_value,
            "alpha": r.alpha,
            "lossless_rejected": r.lossless_rejected,
            "power_tv_0.01": r.power_tv,
            "iterations_for_power_0.99": r.iterations_for_power,
        }
        for r in results
    ]
    if args.json:
        print_json(rows)
        return 0
    print(f"Instance: {inst.name}  (n={inst.n}, L={inst.L}); Monte Carlo, {args.samples} iterations each")
    headers = ["method", "K", "E[tau] (99% CI)", "G-test p-value", "lossless rejected", "power vs TV 0.01"]
    table = [
        [
            r.method,
            str(r.K),
            f"{r.expected_accepted:.4f} [{r.ci_low:.4f}, {r.ci_high:.4f}]",
            f"{r.p_value:.3g}",
            "YES" if r.lossless_rejected else "no",
            f"{r.power_tv:.3f}",
        ]
        for r in results
    ]
    print(render_table(headers, table))
    first = results[0]
    print(f"(G-test of the first {first.tested_length} completed tokens against p, alpha = {first.alpha:g})")
    weak = [r for r in results if not r.lossless_rejected and r.power_tv < 0.8]
    if weak:
        print(
            f"Note: 'no' means not rejected, not proven lossless: at power {weak[0].power_tv:.3f} the test is "
            f"inconclusive for errors as small as TV 0.01; about {weak[0].iterations_for_power} iterations "
            "give power 0.99."
        )
    return 0


def run(args: argparse.Namespace) -> int:
    """Execute ``simulate``; returns the exit status.

    The exact run is estimated first and refused above
    :data:`~spectr_gbv.simulate.estimate.MAX_RUN_SECONDS` (one line, exit 2); on a terminal a
    progress bar weighted by the estimates shows an ETA on stderr. Exact values print in full
    (JSON) up to :data:`~spectr_gbv.cli.common.MAX_EXACT_DIGITS` digits.
    """
    from spectr_gbv.core.progress import progress
    from spectr_gbv.simulate.estimate import MAX_RUN_SECONDS, check_estimate, run_estimate
    from spectr_gbv.simulate.methods import check_method, method_step, simulate_method
    from spectr_gbv.simulate.multi import multi_iteration

    if args.seed is not None and args.samples is None:
        raise UsageError("--seed only applies with --samples (Monte Carlo)")
    inst = resolve_instance(args)
    ks = parse_ks(args.K, max_k=8)
    if args.samples is not None:
        if args.samples < 100:
            raise UsageError(f"--samples must be >= 100, got {args.samples}")
        if args.horizon:
            raise UsageError("--horizon applies to exact simulation only; drop it or drop --samples")
        try:
            methods = [check_method(m.strip()) for m in args.methods.split(",") if m.strip()]
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        return run_monte_carlo(args, inst, methods, ks)
    try:
        methods = [check_method(m.strip()) for m in args.methods.split(",") if m.strip()]
        if not methods:
            raise ValueError("--methods is empty")
        pairs = [(m, k) for m in methods for k in ks]
        estimates = run_estimate(inst, pairs, pairs, args.horizon)
        check_estimate(estimates, MAX_RUN_SECONDS, "lower --K / --horizon or name fewer --methods")
        weights = [max(e.seconds, 1.0) for e in estimates]
        w_one, w_multi = weights[: len(pairs)], weights[len(pairs) :] or [0.0] * len(pairs)
        results = []
        with progress(round(sum(weights)), "simulate", unit="s est.") as bar:
            for (m, k), w1, w2 in zip(pairs, w_one, w_multi, strict=True):
                bar.set_postfix_str(f"{m} K={k}")
                r = simulate_method(inst, m, k)
                bar.update(w1)
                mi = None
                if args.horizon:
                    mi = multi_iteration(inst, method_step(inst, m, k), method=m, num_drafts=k, horizon=args.horizon)
                    bar.update(w2)
                results.append((m, k, r, mi))
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    with exact_output("lower --horizon or --K, or use a float64 instance"):
        return _print_exact(args, inst, results)


def _print_exact(args: argparse.Namespace, inst: Instance, results: list[tuple[str, int, Any, Any]]) -> int:
    """Print the exact rows of ``simulate`` (JSON or a table); returns 0."""
    from spectr_gbv.core.numbers import display_value, json_value

    rows = []
    for m, k, r, mi in results:
        row = {
            "method": m,
            "K": k,
            "expected_accepted": json_value(r.expected_accepted),
            "validity_defect": json_value(r.validity_defect),
            "lossless": r.lossless,
            "tolerance": r.tolerance,
        }
        if mi is not None:
            row["horizon"] = args.horizon
            row["expected_calls"] = json_value(mi.expected_calls)
            row["block_efficiency"] = json_value(mi.block_efficiency)
        rows.append(row)
    if args.json:
        print_json(rows)
        return 0
    headers = ["method", "K", "E[tau]", "validity defect", "lossless"]
    if args.horizon:
        headers += [f"BE over N={args.horizon}"]
    table = []
    for m, k, r, mi in results:
        cells = [
            m,
            str(k),
            display_value(r.expected_accepted),
            display_value(r.validity_defect),
            r.lossless_label,
        ]
        if mi is not None:
            cells.append(display_value(mi.block_efficiency))
        table.append(cells)
    print(f"Instance: {inst.name}  (n={inst.n}, L={inst.L}, {'exact' if inst.exact else 'float64'})")
    print(render_table(headers, table))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``simulate`` subcommand."""
    p = sub.add_parser(
        "simulate",
        help="exact E[tau], validity defect and (with --horizon) multi-iteration BE per method and K",
    )
    add_instance_args(p)
    p.add_argument("--methods", default="sd,bv,mdbv", help="comma-separated stable method names (default sd,bv,mdbv)")
    p.add_argument("--K", default="1,2", help="numbers of drafts, e.g. 1,2 or 1-4 (default 1,2)")
    p.add_argument("--horizon", type=int, default=0, help="tokens N for multi-iteration BE (default: off)")
    p.add_argument(
        "--samples",
        type=int,
        default=None,
        help="Monte Carlo with this many iterations instead of exact enumeration",
    )
    p.add_argument("--seed", type=int, default=None, help="seed of the Monte Carlo sampler (default 0)")
    p.add_argument("--json", action="store_true", help="print JSON rows")
    p.add_argument("--quiet", action="store_true", help="no progress bars on stderr (also: SPECTR_GBV_QUIET=1)")
    p.set_defaults(func=run)
