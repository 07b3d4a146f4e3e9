r"""Exact level: the verifier's output law computed exactly on the battery, its validity defect.

Two routes, else the harness falls back to the statistical level (and says so):

1. **outcome_law** (generic interface): a verifier that exposes ``outcome_law(drafts,
   draft_probs, target_probs) -> {output tuple: probability}`` (the callable itself, or the
   object of a bound method, e.g. ``get_verifier("mdbv").sample``) is asked for its law on
   every ordered K-tuple of drafts of positive probability, in Fractions when it accepts them
   (float64 otherwise). The averaged law gives the validity defect of THEORY.md section 2
   with :func:`~spectr_gbv.simulate.exact.validity_defect`: exactly 0 iff lossless (float64:
   at most :data:`FLOAT_TOL`). Since a verifier's ``outcome_law`` and its sampler are
   different code, the sampler is also checked against the declared law on fixed drafts
   (``sampler_matches_outcome_law``).
2. **supplied uniforms** (chain interface): the output is a piecewise-constant function of the
   uniforms ``u in [0, 1)^{L+1}``. For every draft of positive probability the harness sweeps
   each coordinate over a grid (33 points plus the cumulative sums of the p, q and residual
   rows and the ratios p/q, each +-1e-13, where standard algorithms put their breakpoints)
   from several base points, bisects every change of output to :data:`BISECTION_TOL`
   (1e-12), and evaluates the output at the centre of every cell of the product grid of
   breakpoints; a second random point in every cell must give the same output (otherwise the
   map is not piecewise constant on a product grid, and the level falls back). The law is the
   sum of cell volumes: exact up to the bisection tolerance, so the defect passes when at most
   :data:`CHAIN_TOL` (1e-6, which also absorbs float32 thresholds inside a verifier; the
   planted bugs of ECOSYSTEM.md move it by 1e-3 or more).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from spectr_gbv.simulate.exact import DraftTable, validity_defect
from spectr_gbv.validate.battery.instance import BatteryInstance
from spectr_gbv.validate.checks.reference import differs_wording
from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.reference_variants import reference_verifier
from spectr_gbv.validate.report.results import CheckResult

#: Float64 laws: a validity defect at most this counts as 0.
FLOAT_TOL = 1e-9
#: Bisection tolerance on a breakpoint of the uniforms -> output map.
BISECTION_TOL = 1e-12
#: Chain laws by bisection: a defect (or per-draft TV to the reference) at most this passes.
CHAIN_TOL = 1e-6
#: Largest number of ordered draft tuples asked of ``outcome_law`` per instance.
MAX_TUPLES = 5000
#: Largest number of product-grid cells per instance (chain route).
MAX_CELLS = 2_000_000
#: Largest number of verifier rows of the breakpoint sweep per instance (chain route).
MAX_SWEEP_ROWS = 150_000


class ExactUnavailable(Exception):
    """The exact level cannot be computed for this verifier or instance (message says why)."""


def find_outcome_law(verify: Any) -> Callable[..., Mapping[tuple[int, ...], Any]] | None:
    """``verify.outcome_law``, or that of the object of a bound method, or None."""
    for obj in (verify, getattr(verify, "__self__", None)):
        fn = getattr(obj, "outcome_law", None) if obj is not None else None
        if callable(fn):
            return fn
    return None


def _check_law(law: Any, drafts: np.ndarray, n: int, exact: bool) -> dict[tuple[int, ...], Any]:
    """Validate a declared law: outputs are a draft prefix plus one token, probabilities sum to 1."""
    if not isinstance(law, Mapping):
        raise ExactUnavailable(f"outcome_law returned a {type(law).__name__}, expected a mapping")
    K, L = drafts.shape
    out: dict[tuple[int, ...], Any] = {}
    for o, prob in law.items():
        o = tuple(int(t) for t in o)
        if not 1 <= len(o) <= L + 1 or any(not 0 <= t < n for t in o):
            raise ExactUnavailable(f"outcome_law gave output {o}: not 1..{L + 1} ids in 0..{n - 1}")
        if not any(tuple(drafts[k, : len(o) - 1]) == o[:-1] for k in range(K)):
            raise ExactUnavailable(f"outcome_law gave output {o}, whose prefix is no draft's")
        if not (isinstance(prob, Fraction | int) or math.isfinite(float(prob))) or prob < 0:
            raise ExactUnavailable(f"outcome_law gave probability {prob!r} to {o}")
        out[o] = prob if exact and isinstance(prob, Fraction | int) else float(prob)
    total = sum(out.values())
    rational = exact and all(isinstance(v, Fraction | int) for v in out.values())
    if (rational and total != 1) or abs(float(total) - 1.0) > FLOAT_TOL:
        raise ExactUnavailable(f"outcome_law probabilities sum to {float(total)!r}, not 1")
    return out


def _tv(a: Mapping[tuple[int, ...], Any], b: Mapping[tuple[int, ...], Any]) -> Any:
    keys = set(a) | set(b)
    return sum(abs(a.get(k, 0) - b.get(k, 0)) for k in keys) / 2


def _stop_tv(a: Mapping[tuple[int, ...], Any], b: Mapping[tuple[int, ...], Any], L: int) -> float:
    la = np.zeros(L + 1)
    lb = np.zeros(L + 1)
    for o, v in a.items():
        la[len(o) - 1] += float(v)
    for o, v in b.items():
        lb[len(o) - 1] += float(v)
    return float(np.abs(la - lb).sum() / 2)


def _differs(reference: str, acceptance: bool, num_drafts: int) -> str:
    """Why a ``reference_law_exact`` check failed (the acceptance rule, else the token at the stop)."""
    return differs_wording(reference, acceptance, not acceptance, num_drafts=num_drafts)


def declared_law(
    law_fn: Callable[..., Any], bi: BatteryInstance, adapter: Adapter, reference: str | None
) -> tuple[dict[tuple[int, ...], Any], bool, dict[str, Any] | None]:
    """Average the declared law over every ordered K-tuple of drafts.

    Returns
    -------
    (law, exact, worst_reference)
        ``worst_reference``: the draft tuple with the largest TV to the reference's law
        (``{"drafts", "tv", "stop_tv"}``) when ``reference`` is given.

    Raises
    ------
    ExactUnavailable
        Too many tuples, or ``outcome_law`` raised on float64 input or returned garbage.
    VerifierFailure
        The call hung (per-call limit).
    """
    inst, K, L = bi.instance, bi.K, bi.instance.L
    table = DraftTable.from_instance(inst)
    ftable = DraftTable.from_instance(inst.to_float()) if inst.exact else table
    m = len(table.tokens)
    if m**K > MAX_TUPLES:
        raise ExactUnavailable(f"{m**K} draft tuples exceed the limit {MAX_TUPLES}")
    ref = reference_verifier(reference) if reference else None
    state = {"exact": inst.exact}

    def one(row: tuple[int, ...]) -> dict[tuple[int, ...], Any]:
        idx = list(row)
        d = table.tokens[idx]
        if state["exact"]:
            try:
                return _check_law(law_fn(d, table.draft_rows[idx], table.target_rows[idx]), d, inst.n, True)
            except ExactUnavailable:
                raise
            except Exception:  # noqa: BLE001 - retry in float64 below
                state["exact"] = False
        try:
            raw = law_fn(d, ftable.draft_rows[idx], ftable.target_rows[idx])
        except Exception as exc:  # noqa: BLE001
            raise ExactUnavailable(f"outcome_law raised {type(exc).__name__}: {exc}".splitlines()[0]) from exc
        return _check_law(raw, d, inst.n, False)

    def job() -> tuple[dict[tuple[int, ...], Any], dict[str, Any] | None, bool]:
        law: dict[tuple[int, ...], Any] = {}
        worst: dict[str, Any] | None = None
        for row in itertools.product(range(m), repeat=K):
            adapter.guard.tick()
            kern = one(row)
            exact = state["exact"]
            w = (
                math.prod((table.probs[i] for i in row), start=Fraction(1))
                if exact
                else float(np.prod([float(ftable.probs[i]) for i in row]))
            )
            for o, v in kern.items():
                law[o] = law.get(o, 0) + w * v
            if ref is not None:
                idx = list(row)
                src = table if exact else ftable
                rlaw = ref.outcome_law(src.tokens[idx], src.draft_rows[idx], src.target_rows[idx])
                tv = _tv(kern, rlaw)
                if worst is None or tv > worst["tv"]:
                    worst = {
                        "drafts": table.tokens[idx].tolist(),
                        "tv": tv,
                        "stop_tv": _stop_tv(kern, rlaw, L),
                    }
        return law, worst, state["exact"]  # state too: the job may run in a forked worker

    law, worst, state["exact"] = adapter.guard.run(job)
    if not state["exact"]:
        law = {o: float(v) for o, v in law.items()}
    return law, state["exact"], worst


def outcome_law_checks(
    law_fn: Callable[..., Any], battery: list[BatteryInstance], adapter: Adapter, reference: str | None
) -> tuple[list[CheckResult], dict[str, dict[tuple[int, ...], Any]]]:
    """Exact validity defect (and reference comparison) of a declared ``outcome_law`` per instance.

    Returns
    -------
    (checks, laws)
        One ``exact_defect[kind]`` check per instance (``passed=None`` where unavailable),
        plus ``reference_law_exact[kind]`` checks when ``reference`` is given; ``laws`` maps
        each instance label to its averaged output law.
    """
    checks: list[CheckResult] = []
    laws: dict[str, dict[tuple[int, ...], Any]] = {}
    for bi in battery:
        name = f"exact_defect[{bi.label}]"
        try:
            law, exact, worst = declared_law(law_fn, bi, adapter, reference)
        except ExactUnavailable as exc:
            checks.append(
                CheckResult(name, "exact", None, instance=bi.spec(), detail=f"exact level unavailable: {exc}")
            )
            continue
        laws[bi.label] = law
        exact = exact and all(isinstance(v, Fraction | int) for v in law.values())  # a float law is checked in floats
        target = bi.instance.target if exact else bi.instance.target.to_float()
        defect = validity_defect(target, law, bi.instance.L)
        ok = defect == 0 if exact else float(defect) <= FLOAT_TOL
        kind = "in rationals" if exact else f"in float64 (tolerance {FLOAT_TOL:g})"
        checks.append(
            CheckResult(
                name,
                "exact",
                bool(ok),
                statistic=float(defect),
                instance=bi.spec(),
                detail=f"validity defect of the declared outcome_law {kind}: {defect}"
                + ("" if ok else " > 0: not lossless"),
                diagnosis="ok" if ok else "not_lossless",
            )
        )
        if worst is not None:
            tol = 0 if exact else FLOAT_TOL
            same = float(worst["tv"]) <= tol
            diag = "ok" if same else "differs_from_reference"
            checks.append(
                CheckResult(
                    f"reference_law_exact[{bi.label}]",
                    "reference",
                    same,
                    statistic=float(worst["tv"]),
                    instance=bi.spec(drafts=worst["drafts"]),
                    detail=(
                        f"largest TV between the declared law and {reference}'s over all draft tuples: "
                        f"{float(worst['tv']):.6g} (drafts {worst['drafts']}; stop-position law TV "
                        f"{worst['stop_tv']:.6g})"
                        + ("" if same else "; " + _differs(reference, worst["stop_tv"] > max(tol, 1e-12), bi.K))
                    ),
                    diagnosis=diag,
                )
            )
    return checks, laws


__all__ = [
    "BISECTION_TOL",
    "CHAIN_TOL",
    "FLOAT_TOL",
    "MAX_TUPLES",
    "ExactUnavailable",
    "declared_law",
    "find_outcome_law",
    "outcome_law_checks",
]
