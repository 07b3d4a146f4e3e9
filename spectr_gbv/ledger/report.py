"""The main report: exact E[tau] and validity defect of every method per K, the bounds beside them,
the claims ledger and the multi-iteration comparison of stateful and stateless verification.

:func:`build_report` computes everything (the CLI only formats it). Values are exact when the
instance is exact; LP optima are float64.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from spectr_gbv.core.instance import Instance
from spectr_gbv.core.methods import MethodSpec, is_registered, method_spec, methods_where
from spectr_gbv.core.numbers import Scalar, json_value
from spectr_gbv.core.progress import progress
from spectr_gbv.ledger.claims import LP_TOL, Claim, claims_ledger
from spectr_gbv.ledger.field_claims import field_ledger
from spectr_gbv.reference.registry import STABLE_METHOD_NAMES
from spectr_gbv.simulate.estimate import MAX_RUN_SECONDS, check_estimate, run_estimate
from spectr_gbv.simulate.exact import ExactResult
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
        The field ledger (:mod:`~spectr_gbv.ledger.field_claims`; empty when not selected).
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

    def summary(self) -> list[KSummary]:
        """Best lossless verifier per K, its distance to OPT(K) (:func:`~spectr_gbv.ledger.report.summarize`)."""
        return summarize(self.results, self.bounds)

    def to_json(self) -> dict[str, Any]:
        """JSON object: instance, rows (per method and K), bounds, claims, field_claims, multi_iteration, summary."""
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
            "summary": [s.to_json() for s in self.summary()],
        }


@dataclass(frozen=True)
class Standing:
    """One method's place in the report's closing summary.

    Attributes
    ----------
    method : str
        The first method, in table order, with the best value of its group.
    expected_accepted : Fraction or float
        Its E[tau] (exact on an exact instance).
    stateless : bool
        False for a stateful rule (``greedy_bv``), which OPT(K) does not bound.
    ties : tuple of str
        The other methods of the group with the same E[tau] (exactly, on an exact instance).
    gap : float or None
        OPT(K) - E[tau] (negative above OPT: a stateful rule); None without OPT.
    fraction : float or None
        E[tau] / OPT(K); None without OPT or when OPT(K) = 0.
    """

    method: str
    expected_accepted: Scalar
    stateless: bool
    ties: tuple[str, ...]
    gap: float | None
    fraction: float | None

    @property
    def at_opt(self) -> bool:
        """E[tau] equals OPT(K) within :data:`~spectr_gbv.ledger.claims.LP_TOL` (OPT is a float64 LP)."""
        return self.gap is not None and abs(self.gap) <= LP_TOL

    def to_json(self) -> dict[str, Any]:
        """JSON object: method, expected_accepted (``"a/b"`` if exact), stateless, ties, gap_to_opt, fraction_of_opt."""
        return {
            "method": self.method,
            "expected_accepted": json_value(self.expected_accepted),
            "stateless": self.stateless,
            "ties": list(self.ties),
            "gap_to_opt": self.gap,
            "fraction_of_opt": self.fraction,
        }


@dataclass(frozen=True)
class KSummary:
    """The best lossless verifiers at one K of a report (:func:`~spectr_gbv.ledger.report.summarize`).

    Attributes
    ----------
    K : int
    opt : float or None
        OPT(K), the best stateless lossless verifier (LP, float64); None when not computed.
    best : Standing or None
        The best lossless method, an instance-solved oracle (``lp_oracle``) included.
    best_deployable : Standing or None
        The best lossless method that is not solved for this instance (no ``lp_oracle``).
    best_stateless : Standing or None
        The best stateless one of those (differs from ``best_deployable`` when a stateful rule
        leads).
    oracles : tuple of str
        The instance-solved methods left out of ``best_deployable`` (``lp_oracle``).
    excluded : tuple of str
        The rows left out: lossy on purpose, or a nonzero defect on this instance.
    """

    K: int
    opt: float | None
    best: Standing | None
    best_deployable: Standing | None
    best_stateless: Standing | None
    oracles: tuple[str, ...]
    excluded: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """JSON object; the Standings as objects (null when the group is empty)."""

        def one(s: Standing | None) -> dict[str, Any] | None:
            return None if s is None else s.to_json()

        return {
            "K": self.K,
            "opt": self.opt,
            "best": one(self.best),
            "best_without_oracle": one(self.best_deployable),
            "best_stateless_without_oracle": one(self.best_stateless),
            "oracles": list(self.oracles),
            "excluded": list(self.excluded),
        }


def _standing(
    group: list[tuple[str, ExactResult]], specs: dict[str, MethodSpec | None], opt: float | None
) -> Standing | None:
    """The best of ``group`` (first in table order among exact ties; 1e-12 on floats), or None if empty."""
    if not group:
        return None
    values = [r.expected_accepted for _, r in group]
    if all(isinstance(v, Fraction) for v in values):
        top = max(values)
        same = [m for m, r in group if r.expected_accepted == top]
    else:
        top_f = max(float(v) for v in values)
        same = [m for m, r in group if top_f - float(r.expected_accepted) <= 1e-12]
    value = dict(group)[same[0]].expected_accepted
    spec = specs[same[0]]
    return Standing(
        method=same[0],
        expected_accepted=value,
        stateless=spec is None or not spec.stateful,
        ties=tuple(same[1:]),
        gap=None if opt is None else opt - float(value),
        fraction=float(value) / opt if opt else None,
    )


def summarize(results: dict[tuple[str, int], ExactResult], bounds: Sequence[BoundRow]) -> list[KSummary]:
    """The best lossless verifier per K and its distance to OPT(K): the report's closing summary.

    Lossless means registered lossless and ``ExactResult.lossless`` on this instance (validity
    defect exactly 0 on an exact instance, within the result's tolerance otherwise). Ties are
    exact on an exact instance (within 1e-12 on a float64 one); the first method in table order
    names the group.

    Parameters
    ----------
    results : dict of (method, K) to ExactResult
        The report's table.
    bounds : sequence of BoundRow
        One per K of the table (OPT(K) from its ``opt``).

    Returns
    -------
    list of KSummary, one per row of ``bounds``.
    """
    out = []
    for row in bounds:
        k, opt = row.K, row.opt
        here = [(m, r) for (m, kk), r in results.items() if kk == k]
        keep = [(m, r) for m, r in here if r.lossless and not is_lossy_method(m)]
        kept = {m for m, _ in keep}
        excluded = tuple(m for m, _ in here if m not in kept)
        specs = {m: method_spec(m) if is_registered(m) else None for m, _ in here}
        oracles = tuple(m for m, _ in keep if specs[m] is not None and specs[m].needs_instance)
        deployable = [(m, r) for m, r in keep if m not in oracles]
        stateless = [(m, r) for m, r in deployable if specs[m] is None or not specs[m].stateful]

        out.append(
            KSummary(
                K=k,
                opt=opt,
                best=_standing(keep, specs, opt),
                best_deployable=_standing(deployable, specs, opt),
                best_stateless=_standing(stateless, specs, opt),
                oracles=oracles,
                excluded=excluded,
            )
        )
    return out


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
