"""The main report: exact E[tau] and validity defect of every method per K, the bounds beside them,
the claims ledger and the multi-iteration comparison of stateful and stateless verification.

:func:`build_report` computes everything (the CLI only formats it). Values are exact when the
instance is exact; LP optima are float64.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from spectr_gbv.core.instance import Instance
from spectr_gbv.core.methods import method_spec, methods_where
from spectr_gbv.core.numbers import json_value
from spectr_gbv.core.progress import progress
from spectr_gbv.reference.registry import STABLE_METHOD_NAMES
from spectr_gbv.simulate.claims import Claim, claims_ledger
from spectr_gbv.simulate.estimate import MAX_RUN_SECONDS, check_estimate, run_estimate
from spectr_gbv.simulate.exact import ExactResult
from spectr_gbv.simulate.field_claims import field_ledger
from spectr_gbv.simulate.methods import LOSSY_METHODS, method_step, simulate_method
from spectr_gbv.simulate.multi import MultiIterationResult, multi_iteration
from spectr_gbv.theory.table import BoundRow, bound_table

#: Methods in the report table, in order: every stable name (``ar`` is the baseline).
REPORT_METHODS = STABLE_METHOD_NAMES
#: Values of ``--ledger``: which claims ledgers the report builds.
LEDGERS: tuple[str, ...] = ("spectr_gbv", "field", "all")
#: Methods compared over a generation horizon (single-draft stateless vs stateful, plus MDBV):
#: the report's choice of rows, each a name of the method table.
MULTI_ITERATION_METHODS: tuple[str, ...] = tuple(
    method_spec(m).name for m in ("sd", "bv", "greedy_bv", "mdbv", "gbv_multipath")
)
#: Single-draft methods (the table's ``drafts == "one"``): the horizon comparison runs them at
#: K = 1, as :meth:`~spectr_gbv.core.methods.MethodSpec.grid_shape` does (the others at the
#: largest K).
SINGLE_DRAFT_METHODS: tuple[str, ...] = methods_where(drafts="one")


@dataclass
class Report:
    """Everything ``spectr-gbv report`` prints.

    Attributes
    ----------
    instance : Instance
    ks : list of int
    results : dict of (method, K) to ExactResult
    bounds : list of BoundRow, one per K
    claims : list of Claim
        The SpecTr-GBV ledger (empty when not selected).
    field_claims : list of Claim
        The field ledger (:mod:`~spectr_gbv.simulate.field_claims`; empty when not selected).
    multi : list of MultiIterationResult (K = the largest K in ``ks`` for multi-draft methods)
    horizon : int
    """

    instance: Instance
    ks: list[int]
    results: dict[tuple[str, int], ExactResult]
    bounds: list[BoundRow]
    claims: list[Claim]
    field_claims: list[Claim] = field(default_factory=list)
    multi: list[MultiIterationResult] = field(default_factory=list)
    horizon: int = 0

    def to_json(self) -> dict[str, Any]:
        """JSON object: instance, rows (per method and K), bounds, claims, field_claims, multi_iteration."""
        rows = [
            {
                "method": r.method,
                "K": r.K,
                "expected_accepted": json_value(r.expected_accepted),
                "validity_defect": json_value(r.validity_defect),
                "lossless": r.lossless,
                "tolerance": r.tolerance,
            }
            for r in self.results.values()
        ]
        return {
            "instance": self.instance.name,
            "n": self.instance.n,
            "L": self.instance.L,
            "exact": self.instance.exact,
            "rows": rows,
            "bounds": [b.to_json() for b in self.bounds],
            "claims": [c.to_json() for c in self.claims],
            "field_claims": [c.to_json() for c in self.field_claims],
            "multi_iteration": [
                {
                    "method": m.method,
                    "K": m.K,
                    "horizon": m.horizon,
                    "expected_calls": json_value(m.expected_calls),
                    "block_efficiency": json_value(m.block_efficiency),
                    "expected_tokens": [json_value(t) for t in m.expected_tokens],
                }
                for m in self.multi
            ],
        }


def build_report(
    instance: Instance,
    ks: Sequence[int] = (1, 2, 3),
    *,
    methods: Sequence[str] = REPORT_METHODS,
    horizon: int = 6,
    ledger: str = "all",
    max_seconds: float = MAX_RUN_SECONDS,
) -> Report:
    """Compute the report's table, bounds, claims ledger and multi-iteration comparison.

    The run time is estimated first (:mod:`~spectr_gbv.simulate.estimate`: kernels counted,
    a few of them timed on this instance); a run estimated above ``max_seconds`` is refused
    before any long stage starts. On a terminal a progress bar weighted by the stage
    estimates, with an ETA, goes to stderr (:func:`~spectr_gbv.core.progress.progress`).

    Parameters
    ----------
    instance : Instance
    ks : sequence of int
        Numbers of drafts.
    methods : sequence of str
        Stable method names for the table.
    horizon : int
        Tokens N for the multi-iteration comparison (0 skips it).
    ledger : str
        One of :data:`LEDGERS`: the SpecTr-GBV claims, the field's claims, or both (default).
    max_seconds : float
        Refuse a run estimated above this many seconds (default
        :data:`~spectr_gbv.simulate.estimate.MAX_RUN_SECONDS`, ten minutes; ``math.inf``
        disables the check).

    Returns
    -------
    Report

    Raises
    ------
    ValueError
        Unknown method, bad K, unknown ``ledger``, or an instance too large to enumerate or solve.
    RunTooLongError
        (a ValueError) The estimated run time exceeds ``max_seconds``, e.g. ``estimated at least
        ~52 min (longest: independent_bv K=8, 65536 kernels at ~34 ms each), above the limit of
        ~10 min; lower --K / --horizon ...``.
    """
    if ledger not in LEDGERS:
        raise ValueError(f"ledger must be one of {', '.join(LEDGERS)}, got {ledger!r}")
    ks = list(ks)
    pairs = [(m, k) for m in methods for k in ks]
    multi_pairs = [(m, method_spec(m).grid_shape(max(ks), instance.L)[0]) for m in MULTI_ITERATION_METHODS]
    groups: dict[str, list[tuple[str, int]]] = {}  # the runs each ledger makes on this instance
    if ledger in ("spectr_gbv", "all"):
        groups["claims ledger"] = [("greedy_bv", 1)] + [(m, k) for k in ks for m in ("spectr_gbv_released", "mdbv")]
    if ledger in ("field", "all"):
        groups["field ledger"] = [("traversal", k) for k in sorted({*ks, 1})] + [
            (m, k) for k in ks for m in ("optimal_multidraft", "near_opt_bv")
        ]
    estimates = run_estimate(instance, pairs, multi_pairs, horizon, groups)
    check_estimate(
        estimates,
        max_seconds,
        "lower --K / --horizon, or run `spectr-gbv simulate --methods ...` on the methods you need",
    )
    # the bar advances by each stage's estimated seconds (at least 1), so its ETA is meaningful
    weights = {e.label: max(e.seconds, 1.0) for e in estimates[len(pairs) :]}  # horizon and ledgers
    w_one = [max(e.seconds, 1.0) for e in estimates[: len(pairs)]]
    w_multi = [max(e.seconds, 1.0) for e in estimates[len(pairs) : len(estimates) - len(groups)]]
    w_claims, w_field = weights.get("claims ledger", 1.0), weights.get("field ledger", 1.0)
    total = sum(w_one) + sum(w_multi) + 1 + w_claims + w_field
    with progress(round(total), "report", unit="s est.") as bar:
        results = {}
        for (m, k), w in zip(pairs, w_one, strict=True):
            bar.set_postfix_str(f"{m} K={k}")
            results[(m, k)] = simulate_method(instance, m, k)
            bar.update(w)
        multi = []
        if horizon:
            for (m, k), w in zip(multi_pairs, w_multi, strict=True):
                bar.set_postfix_str(f"multi-iteration {m} K={k}")
                multi.append(
                    multi_iteration(instance, method_step(instance, m, k), method=m, num_drafts=k, horizon=horizon)
                )
                bar.update(w)
        bar.set_postfix_str("bounds")
        table = bound_table(instance, ks)
        bar.update()
        bar.set_postfix_str("claims ledger")
        claims = claims_ledger(instance, ks) if ledger in ("spectr_gbv", "all") else []
        bar.update(w_claims)
        bar.set_postfix_str("field ledger")
        field_claims = field_ledger(instance, ks) if ledger in ("field", "all") else []
        bar.update(w_field)
    return Report(
        instance=instance,
        ks=ks,
        results=results,
        bounds=table,
        claims=claims,
        field_claims=field_claims,
        multi=multi,
        horizon=horizon,
    )


def is_lossy_method(name: str) -> bool:
    """True for the methods kept on purpose as lossy (never decoding defaults)."""
    return name in LOSSY_METHODS
