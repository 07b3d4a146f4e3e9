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
from spectr_gbv.validate.checks.diagnosis import (
    CANDIDATES_MULTI,
    CANDIDATES_SINGLE,
    LOCI,
    ORDER_CANDIDATES,
    accepted_length_law,
    ordered_length_law,
)
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


def _narrow(law: dict[tuple[int, ...], Any], vocab: Any) -> dict[tuple[int, ...], Any]:
    """A law in a wide vocabulary's ids read back in the small instance's tokens.

    Raises
    ------
    ExactUnavailable
        An output holds an id outside the instance's support (the statistical level's
        structural checks judge it).
    """
    if vocab is None:
        return law
    out = {}
    for o, v in law.items():
        small = tuple(int(t) for t in vocab.narrow_ids(np.array(o, dtype=np.int64)))
        if any(t < 0 for t in small):
            raise ExactUnavailable(f"outcome_law gave output {o}, an id outside the instance's support")
        out[small] = out.get(small, 0) + v
    return out


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def outcome_tv(a: Mapping[tuple[int, ...], Any], b: Mapping[tuple[int, ...], Any]) -> Any:
    """Total-variation distance of two outcome laws (``{outcome tuple: probability}``; exact for Fractions)."""
    keys = set(a) | set(b)
    return sum(abs(a.get(k, 0) - b.get(k, 0)) for k in keys) / 2


def stopping_tv(a: Mapping[tuple[int, ...], Any], b: Mapping[tuple[int, ...], Any], L: int) -> float:
    """Total-variation distance of the laws of the output length (1..L+1) under two outcome laws (float)."""
    la = np.zeros(L + 1)
    lb = np.zeros(L + 1)
    for o, v in a.items():
        la[len(o) - 1] += float(v)
    for o, v in b.items():
        lb[len(o) - 1] += float(v)
    return float(np.abs(la - lb).sum() / 2)


def differs_reason(reference: str, acceptance: bool, num_drafts: int) -> str:
    """Why a ``reference_law_exact`` check failed (the acceptance rule, else the token at the stop)."""
    return differs_wording(reference, acceptance, not acceptance, num_drafts=num_drafts)


def declared_law(
    law_fn: Callable[..., Any],
    bi: BatteryInstance,
    adapter: Adapter,
    reference: str | None,
    kernels_out: list[Any] | None = None,
) -> tuple[dict[tuple[int, ...], Any], bool, dict[str, Any] | None]:
    """Average the declared law over every ordered K-tuple of drafts.

    An instance seen through a wide vocabulary (``bi.vocab``) is handed to ``outcome_law`` in
    its ids and width, in float64 (rows of V Fractions would make every call slow); the law is
    read back in the small instance's tokens.

    Parameters
    ----------
    kernels_out : list, optional
        Filled with ``(drafts [K, L] int64, weight, law given those drafts)`` per ordered tuple.

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
    state = {"exact": inst.exact and bi.vocab is None}  # wide rows: float64 (Fractions of width V are slow)

    vocab = bi.vocab

    def shown(rows: np.ndarray) -> np.ndarray:
        return rows if vocab is None else vocab.widen_rows(rows)

    def one(row: tuple[int, ...]) -> dict[tuple[int, ...], Any]:
        idx = list(row)
        d = table.tokens[idx] if vocab is None else vocab.widen_ids(table.tokens[idx])
        if state["exact"]:
            try:
                law = law_fn(d, shown(table.draft_rows[idx]), shown(table.target_rows[idx]))
                return _narrow(_check_law(law, d, bi.V, True), vocab)
            except ExactUnavailable:
                raise
            except Exception:  # noqa: BLE001 - retry in float64 below
                state["exact"] = False
        try:
            raw = law_fn(d, shown(ftable.draft_rows[idx]), shown(ftable.target_rows[idx]))
        except Exception as exc:  # noqa: BLE001
            raise ExactUnavailable(f"outcome_law raised {type(exc).__name__}: {exc}".splitlines()[0]) from exc
        return _narrow(_check_law(raw, d, bi.V, False), vocab)

    def job() -> tuple[dict[tuple[int, ...], Any], dict[str, Any] | None, bool, list[Any]]:
        law: dict[tuple[int, ...], Any] = {}
        worst: dict[str, Any] | None = None
        kernels: list[Any] = []
        for row in itertools.product(range(m), repeat=K):
            adapter.guard.tick()
            kern = one(row)
            exact = state["exact"]
            w = (
                math.prod((table.probs[i] for i in row), start=Fraction(1))
                if exact
                else float(np.prod([float(ftable.probs[i]) for i in row]))
            )
            kernels.append((row, w, kern))
            for o, v in kern.items():
                law[o] = law.get(o, 0) + w * v
            if ref is not None:
                idx = list(row)
                src = table if exact else ftable
                rlaw = ref.outcome_law(src.tokens[idx], src.draft_rows[idx], src.target_rows[idx])
                tv = outcome_tv(kern, rlaw)
                if worst is None or tv > worst["tv"]:
                    worst = {
                        "drafts": table.tokens[idx].tolist(),
                        "tv": tv,
                        "stop_tv": stopping_tv(kern, rlaw, L),
                    }
        return law, worst, state["exact"], kernels  # state too: the job may run in a forked worker

    law, worst, state["exact"], kernels = adapter.guard.run(job)
    if not state["exact"]:
        law = {o: float(v) for o, v in law.items()}
    if kernels_out is not None:
        kernels_out[:] = [(table.tokens[list(row)], w, kern) for row, w, kern in kernels]
    return law, state["exact"], worst


#: Largest number of sequences V^(L+1) :func:`explain_defect` looks through.
MAX_EXPLAIN_CELLS = 4096


def explain_defect(bi: BatteryInstance, law: Mapping[tuple[int, ...], Any], kernels: list[Any], exact: bool) -> str:
    """Where a declared law's validity defect is largest: the sequence, its probabilities, the draft tuple.

    The defect is the TV distance between "output, then fresh p" and p on V^(L+1) (THEORY.md
    section 2); the sequence y of largest ``|P(y) - p(y)|`` is named with both probabilities
    (Fractions when ``exact``), then the draft tuple d whose kernel moves it most in that
    direction, ``w(d) (P(y | d) - p(y))``, with ``P(y | d)``.

    Parameters
    ----------
    bi : BatteryInstance
    law : mapping of output tuple to probability
        The averaged law (the small instance's tokens).
    kernels : list of (ndarray [K, L], weight, law given those drafts)
        As :func:`declared_law` fills ``kernels_out``.
    exact : bool
        The law and weights are Fractions.

    Returns
    -------
    str
        One sentence (empty when V^(L+1) exceeds :data:`MAX_EXPLAIN_CELLS`).
    """
    inst = bi.instance
    n, L = inst.n, inst.L
    if n ** (L + 1) > MAX_EXPLAIN_CELLS:
        return ""
    target = inst.target if exact else inst.target.to_float()

    def completed(kern: Mapping[tuple[int, ...], Any], y: tuple[int, ...]) -> Any:
        return sum(
            (v * target.prob(y[len(o) :], given=o) for o, v in kern.items() if y[: len(o)] == tuple(o)),
            start=Fraction(0) if exact else 0.0,
        )

    best: tuple[Any, tuple[int, ...], Any, Any] | None = None
    for y in itertools.product(range(n), repeat=L + 1):
        got, want = completed(law, y), target.prob(y)
        if best is None or abs(got - want) > best[0]:
            best = (abs(got - want), y, got, want)
    assert best is not None
    _, y, got, want = best
    sign = 1 if got > want else -1
    vocab = bi.vocab

    def shown(t: Any) -> list[Any]:
        return np.asarray(t).tolist() if vocab is None else vocab.widen_ids(np.asarray(t)).tolist()

    text = f"the sequence {shown(y)} gets probability {got} from 'output, then fresh p' against the target's {want}"
    if kernels:
        d, w, kern = max(kernels, key=lambda k: sign * k[1] * (completed(k[2], y) - want))
        text += (
            f"; the draft tuple {shown(d)} (probability {w}) moves it most: given those drafts it gets "
            f"{completed(kern, y)}"
        )
    return text


def exact_locus(bi: BatteryInstance, law: Mapping[tuple[int, ...], Any], reference: str | None) -> str:
    """Which part of a lossy declared law is wrong, from its exact accepted-length law (a phrase of ``LOCI``).

    The law of tau equal (to 1e-9) to a lossless candidate's (the named reference, else each
    known one) points at the token drawn at the stop; equal to a candidate's run on drafts in
    decreasing p/q, at the draft order; otherwise at the acceptance rule.
    """
    tau = np.zeros(bi.instance.L + 1)
    for o, v in law.items():
        tau[len(o) - 1] += float(v)
    ref_ok = reference is not None and reference_verifier(reference).lossless
    methods = (reference,) if ref_ok else (CANDIDATES_SINGLE if bi.K == 1 else CANDIDATES_MULTI)
    for method in methods:
        other = accepted_length_law(bi, method)
        if other is not None and np.abs(other - tau).max() <= 1e-9:
            return f"{LOCI['residual']}: the accepted-length law equals {method!r}'s exactly"
    if bi.K > 1:
        for method in (m for m in ORDER_CANDIDATES if not reference or m == reference.split(":")[0]):
            other = ordered_length_law(bi, method)
            if other is not None and np.abs(other - tau).max() <= 1e-9:
                return f"{LOCI['draft_order']}: the accepted-length law equals {method!r}'s on drafts in decreasing p/q"
    return f"{LOCI['acceptance']}: the accepted-length law differs from every lossless candidate's"


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
        kernels: list[Any] = []
        try:
            law, exact, worst = declared_law(law_fn, bi, adapter, reference, kernels)
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
                detail=f"validity defect of the declared outcome_law {kind} on the battery instance {bi.label!r}: "
                f"{defect}"
                + (
                    ""
                    if ok
                    else f" > 0: not lossless. {_cap(exact_locus(bi, law, reference))}; "
                    + explain_defect(bi, law, kernels, exact)
                ),
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
                        + ("" if same else "; " + differs_reason(reference, worst["stop_tv"] > max(tol, 1e-12), bi.K))
                    ),
                    diagnosis=diag,
                )
            )
    return checks, laws


__all__ = [
    "BISECTION_TOL",
    "CHAIN_TOL",
    "FLOAT_TOL",
    "MAX_EXPLAIN_CELLS",
    "MAX_TUPLES",
    "ExactUnavailable",
    "declared_law",
    "differs_reason",
    "exact_locus",
    "explain_defect",
    "find_outcome_law",
    "outcome_law_checks",
    "outcome_tv",
    "stopping_tv",
]
