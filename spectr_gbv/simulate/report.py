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
from spectr_gbv.core.numbers import json_value
from spectr_gbv.core.progress import progress
from spectr_gbv.reference.registry import STABLE_METHOD_NAMES
from spectr_gbv.simulate.claims import Claim, claims_ledger
from spectr_gbv.simulate.exact import ExactResult
from spectr_gbv.simulate.field_claims import field_ledger
from spectr_gbv.simulate.methods import LOSSY_METHODS, method_step, simulate_method
from spectr_gbv.simulate.multi import MultiIterationResult, multi_iteration
from spectr_gbv.theory.table import BoundRow, bound_table

#: Methods in the report table, in order: every stable name (``ar`` is the baseline).
REPORT_METHODS = STABLE_METHOD_NAMES
#: Values of ``--ledger``: which claims ledgers the report builds.
LEDGERS: tuple[str, ...] = ("spectr_gbv", "field", "all")
#: Methods compared over a generation horizon (single-draft stateless vs stateful, plus MDBV).
MULTI_ITERATION_METHODS = ("sd", "bv", "greedy_bv", "mdbv", "gbv_multipath")


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
) -> Report:
    """Compute the report's table, bounds, claims ledger and multi-iteration comparison.

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

    Returns
    -------
    Report

    Raises
    ------
    ValueError
        Unknown method, bad K, unknown ``ledger``, or an instance too large to enumerate or solve.
    """
    if ledger not in LEDGERS:
        raise ValueError(f"ledger must be one of {', '.join(LEDGERS)}, got {ledger!r}")
    ks = list(ks)
    stages = len(methods) * len(ks) + 3 + (len(MULTI_ITERATION_METHODS) if horizon else 0)
    with progress(stages, "report", unit="step") as bar:
        results = {}
        for m in methods:
            for k in ks:
                results[(m, k)] = simulate_method(instance, m, k)
                bar.update()
        multi = []
        if horizon:
            for m in MULTI_ITERATION_METHODS:
                k = 1 if m in ("sd", "bv", "greedy_bv") else max(ks)
                multi.append(
                    multi_iteration(instance, method_step(instance, m, k), method=m, num_drafts=k, horizon=horizon)
                )
                bar.update()
        table = bound_table(instance, ks)
        bar.update()
        bar.set_postfix_str("claims ledger")
        claims = claims_ledger(instance, ks) if ledger in ("spectr_gbv", "all") else []
        bar.update()
        bar.set_postfix_str("field ledger")
        field_claims = field_ledger(instance, ks) if ledger in ("field", "all") else []
        bar.update()
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
