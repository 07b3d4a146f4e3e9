"""``spectr-gbv simulate``: exact one-iteration (and optional multi-iteration) results per method and K.

``--methods`` takes registered names and ``module:attribute`` names of a user's own rules
(:func:`~spectr_gbv.reference.user_rules.resolve_rule`; the current directory is importable).
Each user rule gets one line (:meth:`~spectr_gbv.reference.user_rules.RuleInfo.describe`:
its lossless claim, its structure, a note) before the table. A plain function whose random
draws cannot be enumerated (:class:`~spectr_gbv.reference.user_rules.NotEnumerableError`) is
sampled instead (:func:`~spectr_gbv.simulate.monte_carlo.monte_carlo`, ``--fallback-samples``
iterations): its row says ``sampled, not exact`` and gives the confidence interval and the
G-test, and a line below the table states the sample size, the confidence and the test's power.
"""

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
    from spectr_gbv.reference.user_rules import RuleInfo

#: Monte Carlo iterations of a user's function whose draws cannot be enumerated (default of
#: ``--fallback-samples``).
FALLBACK_SAMPLES = 20_000


def parse_methods(text: str) -> tuple[list[str], list[RuleInfo]]:
    """The names of ``--methods`` and the :class:`RuleInfo` of each user rule among them.

    Parameters
    ----------
    text : str
        Comma-separated registered names and ``module:attribute`` names.

    Returns
    -------
    names : list of str
        As given, in order.
    rules : list of RuleInfo
        One per distinct name that is not a registered method, in order.

    Raises
    ------
    UsageError
        An empty list, an unknown name, a module that cannot be imported, a missing attribute,
        or an object that is not a rule; one line naming the method.
    """
    from spectr_gbv.reference.registry import check_method
    from spectr_gbv.reference.user_rules import resolve_rule

    names = [m.strip() for m in text.split(",") if m.strip()]
    if not names:
        raise UsageError("--methods is empty")
    rules = []
    for name in dict.fromkeys(names):
        try:
            if ":" not in name:
                check_method(name)  # the registry's one line for an unknown name
            info, verifier = resolve_rule(name)
        except (TypeError, ValueError) as exc:
            msg = " ".join(str(exc).split())
            raise UsageError(msg if repr(name) in msg else f"method {name!r}: {msg}") from exc
        if verifier is not None:
            rules.append(info)
    return names, rules


def _print_rules(rules: list[RuleInfo]) -> None:
    """One line per user rule (``Rule mymod:rule_b: function, claims lossless, ...``)."""
    for info in rules:
        print(f"Rule {info.describe()}")


def run_monte_carlo(
    args: argparse.Namespace, inst: Instance, methods: list[str], ks: list[int], rules: list[RuleInfo] | None = None
) -> int:
    """``simulate --samples N``: sampled E[tau] with a CI and a G-test of the output law."""
    rules = rules or []
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
    _print_rules(rules)
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
    from spectr_gbv.reference.user_rules import NotEnumerableError
    from spectr_gbv.simulate.estimate import MAX_RUN_SECONDS, StageEstimate, check_estimate, run_estimate
    from spectr_gbv.simulate.methods import method_step, simulate_method
    from spectr_gbv.simulate.monte_carlo import monte_carlo
    from spectr_gbv.simulate.multi import multi_iteration

    if args.seed is not None and args.samples is None:
        raise UsageError("--seed only applies with --samples (Monte Carlo)")
    if args.fallback_samples < 100:
        raise UsageError(f"--fallback-samples must be >= 100, got {args.fallback_samples}")
    inst = resolve_instance(args)
    ks = parse_ks(args.K, max_k=8)
    if args.samples is not None:
        if args.samples < 100:
            raise UsageError(f"--samples must be >= 100, got {args.samples}")
        if args.horizon:
            raise UsageError("--horizon applies to exact simulation only; drop it or drop --samples")
        methods, rules = parse_methods(args.methods)
        return run_monte_carlo(args, inst, methods, ks, rules)
    methods, rules = parse_methods(args.methods)
    sampled: dict[str, str] = {}  # user functions whose draws cannot be enumerated -> why
    try:
        pairs = [(m, k) for m in methods for k in ks]
        users = {info.name for info in rules}
        known = [p for p in pairs if p[0] not in users]
        by_pair = dict(zip(known, run_estimate(inst, known), strict=True))
        for m, k in pairs:  # a function that cannot be enumerated shows it while its kernels are timed
            if m in users and (m, k) not in by_pair:
                try:
                    by_pair[(m, k)] = run_estimate(inst, [(m, k)])[0]
                except NotEnumerableError as exc:
                    sampled.setdefault(m, str(exc))
                    by_pair[(m, k)] = StageEstimate(f"{m} K={k}", 0.0, "sampled, not estimated")
        estimates = [by_pair[p] for p in pairs]
        exact_pairs = [(m, k) for m, k in pairs if m not in sampled]
        if args.horizon:
            estimates += run_estimate(inst, [], exact_pairs, args.horizon)
        check_estimate(estimates, MAX_RUN_SECONDS, "lower --K / --horizon or name fewer --methods")
        weights = [max(e.seconds, 1.0) for e in estimates]
        w_one = weights[: len(pairs)]
        w_multi = dict(zip(exact_pairs, weights[len(pairs) :], strict=False))
        results = []
        with progress(round(sum(weights)), "simulate", unit="s est.") as bar:
            for (m, k), w1 in zip(pairs, w_one, strict=True):
                bar.set_postfix_str(f"{m} K={k}")
                r = mi = None
                if m not in sampled:
                    try:
                        r = simulate_method(inst, m, k)
                    except NotEnumerableError as exc:  # a branch the timed kernels did not reach
                        sampled.setdefault(m, str(exc))
                if r is None:
                    r = monte_carlo(inst, m, k, args.fallback_samples, seed=0)
                bar.update(w1)
                if args.horizon and m not in sampled:
                    mi = multi_iteration(inst, method_step(inst, m, k), method=m, num_drafts=k, horizon=args.horizon)
                    bar.update(w_multi.get((m, k), 1.0))
                results.append((m, k, r, mi))
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    with exact_output("lower --horizon or --K, or use a float64 instance"):
        return _print_exact(args, inst, results, rules, sampled)


def _sampled_json(m: str, k: int, r: Any, why: str) -> dict[str, Any]:
    """The JSON row of a sampled user function (``"exact": false``; the Monte Carlo's numbers)."""
    return {
        "method": m,
        "K": k,
        "exact": False,
        "why_sampled": why,
        "samples": r.num_iterations,
        "expected_accepted": r.expected_accepted,
        "ci": [r.ci_low, r.ci_high],
        "confidence": r.confidence,
        "validity_defect": None,
        "lossless": None,
        "g_statistic": r.g_statistic,
        "p_value": r.p_value,
        "alpha": r.alpha,
        "lossless_rejected": r.lossless_rejected,
        "power_tv_0.01": r.power_tv,
    }


def _print_exact(
    args: argparse.Namespace,
    inst: Instance,
    results: list[tuple[str, int, Any, Any]],
    rules: list[RuleInfo] | None = None,
    sampled: dict[str, str] | None = None,
) -> int:
    """Print the rows of ``simulate`` (JSON or a table), sampled user functions marked; returns 0."""
    from spectr_gbv.core.numbers import display_value, json_value

    rules, sampled = rules or [], sampled or {}
    rows = []
    for m, k, r, mi in results:
        if m in sampled:
            rows.append(_sampled_json(m, k, r, sampled[m]))
            continue
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
        if m in sampled:
            cells = [
                m,
                str(k),
                f"{r.expected_accepted:.4f} [{r.ci_low:.4f}, {r.ci_high:.4f}] sampled, not exact",
                f"G-test p = {r.p_value:.3g}",
                "NO (rejected)" if r.lossless_rejected else "not rejected",
            ]
        else:
            cells = [
                m,
                str(k),
                display_value(r.expected_accepted),
                display_value(r.validity_defect),
                r.lossless_label,
            ]
        if args.horizon:
            cells.append(display_value(mi.block_efficiency) if mi is not None else "-")
        table.append(cells)
    _print_rules(rules)
    print(f"Instance: {inst.name}  (n={inst.n}, L={inst.L}, {'exact' if inst.exact else 'float64'})")
    print(render_table(headers, table))
    for m, why in sampled.items():
        r = next(r for name, _, r, _ in results if name == m)
        print(
            f"{m}: sampled, not exact ({why}): {r.num_iterations} Monte Carlo iterations per K, "
            f"E[tau] with its {r.confidence:.0%} confidence interval; G-test of the first {r.tested_length} "
            f"completed tokens against p at alpha = {r.alpha:g} (power {r.power_tv:.3f} against a TV error "
            f"of 0.01; about {r.iterations_for_power} iterations give 0.99)"
            + ("; no multi-iteration value" if args.horizon else "")
        )
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``simulate`` subcommand."""
    p = sub.add_parser(
        "simulate",
        help="exact E[tau], validity defect and (with --horizon) multi-iteration BE per method and K",
    )
    add_instance_args(p)
    p.add_argument(
        "--methods",
        default="sd,bv,mdbv",
        help="comma-separated registered names or module:attribute naming your own rule (a Verifier subclass or "
        "instance, or a function rule(drafts, draft_probs, target_probs, rng) -> tokens) (default sd,bv,mdbv)",
    )
    p.add_argument("--K", default="1,2", help="numbers of drafts, e.g. 1,2 or 1-4 (default 1,2)")
    p.add_argument("--horizon", type=int, default=0, help="tokens N for multi-iteration BE (default: off)")
    p.add_argument(
        "--samples",
        type=int,
        default=None,
        help="Monte Carlo with this many iterations instead of exact enumeration",
    )
    p.add_argument("--seed", type=int, default=None, help="seed of the Monte Carlo sampler (default 0)")
    p.add_argument(
        "--fallback-samples",
        type=int,
        default=FALLBACK_SAMPLES,
        help="Monte Carlo iterations of a user's function whose random draws cannot be enumerated "
        f"(default {FALLBACK_SAMPLES})",
    )
    p.add_argument("--json", action="store_true", help="print JSON rows")
    p.add_argument("--quiet", action="store_true", help="no progress bars on stderr (also: SPECTR_GBV_QUIET=1)")
    p.set_defaults(func=run)
