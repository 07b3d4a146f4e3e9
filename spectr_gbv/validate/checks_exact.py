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

from spectr_gbv.core.instance import Instance
from spectr_gbv.simulate.exact import DraftTable, validity_defect
from spectr_gbv.validate.battery import BatteryInstance, Tables
from spectr_gbv.validate.interfaces import Adapter
from spectr_gbv.validate.reference_check import differs_wording
from spectr_gbv.validate.reference_variants import reference_verifier
from spectr_gbv.validate.report import CheckResult

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


# ---------------------------------------------------------------------------- chain bisection
def _hints(tables: Tables, draft: np.ndarray) -> np.ndarray:
    """Likely breakpoints: cumulative sums of p, q and normalised residual rows, and ratios p/q."""
    q, p = tables.rows(draft[None, :])
    q, p = q[0], p[0]
    pts = [np.cumsum(p, axis=1).ravel(), np.cumsum(q, axis=1).ravel()]
    res = np.maximum(p[:-1] - q, 0.0)
    tot = res.sum(axis=1, keepdims=True)
    pts.append(np.cumsum(np.divide(res, tot, out=np.zeros_like(res), where=tot > 0), axis=1).ravel())
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(q > 0, p[:-1] / q, 0.0)
    pts.append(np.clip(ratio, 0, 1).ravel())
    h = np.concatenate(pts)
    h = np.concatenate([h - 1e-13, h + 1e-13])
    return h[(h > 0) & (h < 1)]


class _ChainMap:
    """Batched evaluation of u -> output code for fixed drafts of a chain verifier."""

    def __init__(self, adapter: Adapter, bi: BatteryInstance, tables: Tables, drafts: np.ndarray) -> None:
        self.adapter, self.bi, self.tables = adapter, bi, tables
        self.drafts = drafts
        self.n, self.L = tables.n, tables.L
        self.q, self.p = tables.rows(drafts)
        self.calls = 0

    def __call__(self, which: np.ndarray, u: np.ndarray) -> np.ndarray:
        d = self.drafts[which][:, None, :]
        q = self.q[which][:, None]
        p = self.p[which][:, None]
        u = np.clip(u, 0.0, np.nextafter(1.0, 0.0))
        em = self.adapter.emit(d, q, p, np.random.default_rng(0), u)
        self.calls += len(which)
        if em.problems:
            b, (diag, msg) = next(iter(em.problems.items()))
            raise ExactUnavailable(f"invalid output during the sweep ({diag}: {msg})")
        base = (self.n + 1) ** (self.L + 1)
        code = em.lengths * base
        for t in range(self.L + 1):
            code = code + (em.tokens[:, t] + 1) * (self.n + 1) ** t
        return code

    def decode(self, code: int) -> tuple[int, ...]:
        base = (self.n + 1) ** (self.L + 1)
        length, rest = divmod(int(code), base)
        toks = []
        for _ in range(length):
            rest, t = divmod(rest, self.n + 1)
            toks.append(t - 1)
        return tuple(toks)


def chain_law(
    adapter: Adapter, bi: BatteryInstance, seed: int, grid: int = 33, max_rows: int = MAX_SWEEP_ROWS
) -> tuple[dict[tuple[int, ...], float], dict[tuple[int, ...], dict[tuple[int, ...], float]], int]:
    """Exact (to :data:`BISECTION_TOL`) output law of a chain verifier that uses its uniforms.

    Returns
    -------
    (law, per_draft, calls)
        The law averaged over drafts from q, the law given each draft, and the rows evaluated.

    Raises
    ------
    ExactUnavailable
        Output not a function of the uniforms, not piecewise constant on a product grid, too
        many cells, or invalid outputs.
    VerifierFailure
        The verifier raised or hung.
    """
    inst = bi.float_instance
    tables = Tables(inst)
    table = DraftTable.from_instance(inst)
    drafts, weights = table.tokens, np.asarray(table.probs, dtype=np.float64)
    m, D = len(drafts), inst.L + 1
    f = _ChainMap(adapter, bi, tables, drafts)
    rng = np.random.default_rng([seed, 21])
    # the output must be a function of the uniforms
    probe_u = rng.random((m, D))
    a, b = f(np.arange(m), probe_u), f(np.arange(m), probe_u)
    if not np.array_equal(a, b):
        raise ExactUnavailable("the output is not a function of the supplied uniforms (it draws its own randomness)")
    eps = 1e-9
    bases = [np.full(D, 0.5), np.full(D, eps), np.full(D, 1 - eps)]
    for j in range(D):  # accept up to j (small coins), then a random coin / a rejecting coin at j
        for last in (None, 1 - eps):
            base = rng.random(D)
            base[:j] = eps
            if last is not None:
                base[j] = last
            bases.append(base)
    bases += list(rng.random((2, D)))
    base_arr = np.array(bases)
    g = (np.arange(grid) + 0.5) / grid
    hints = [_hints(tables, drafts[i]) for i in range(m)]
    rows_needed = sum(D * len(base_arr) * (grid + len(h)) for h in hints)
    if rows_needed > max_rows:
        raise ExactUnavailable(
            f"the breakpoint sweep needs about {rows_needed} verifier rows (limit {max_rows}); "
            "this instance is checked statistically"
        )
    breaks: list[list[list[float]]] = [[[] for _ in range(D)] for _ in range(m)]
    for i in range(m):
        pts = np.unique(np.concatenate([g, hints[i], [0.0]]))
        for j in range(D):
            U = np.repeat(base_arr, len(pts), axis=0)
            U[:, j] = np.tile(pts, len(base_arr))
            codes = f(np.full(len(U), i), U).reshape(len(base_arr), len(pts))
            changes = np.argwhere(codes[:, 1:] != codes[:, :-1])
            if not len(changes):
                continue
            lo = pts[changes[:, 1]].copy()
            hi = pts[changes[:, 1] + 1].copy()
            rows = base_arr[changes[:, 0]]
            left = codes[changes[:, 0], changes[:, 1]]
            while np.max(hi - lo) > BISECTION_TOL:
                mid = (lo + hi) / 2
                U = rows.copy()
                U[:, j] = mid
                same = f(np.full(len(U), i), U) == left
                lo = np.where(same, mid, lo)
                hi = np.where(same, hi, mid)
            breaks[i][j] = sorted(set(np.round(hi, 12).tolist()))
    law: dict[tuple[int, ...], float] = {}
    per_draft: dict[tuple[int, ...], dict[tuple[int, ...], float]] = {}
    total_cells = sum(math.prod(len(breaks[i][j]) + 1 for j in range(D)) for i in range(m))
    if total_cells > MAX_CELLS:
        raise ExactUnavailable(f"{total_cells} cells exceed the limit {MAX_CELLS}")
    for i in range(m):
        edges = [np.array([0.0, *breaks[i][j], 1.0]) for j in range(D)]
        grids = np.meshgrid(*[np.arange(len(e) - 1) for e in edges], indexing="ij")
        cells = np.stack([gr.ravel() for gr in grids], axis=1)
        lows = np.stack([edges[j][cells[:, j]] for j in range(D)], axis=1)
        highs = np.stack([edges[j][cells[:, j] + 1] for j in range(D)], axis=1)
        vol = np.prod(highs - lows, axis=1)
        centre = (lows + highs) / 2
        other = lows + (highs - lows) * rng.uniform(0.05, 0.95, size=lows.shape)
        c1 = f(np.full(len(cells), i), centre)
        c2 = f(np.full(len(cells), i), other)
        if not np.array_equal(c1, c2):
            k = int(np.argmax(c1 != c2))
            raise ExactUnavailable(
                f"the output is not constant on a cell of the breakpoint grid (draft {drafts[i].tolist()}, "
                f"cell {lows[k].tolist()}..{highs[k].tolist()}): not piecewise constant on a product grid"
            )
        kern: dict[tuple[int, ...], float] = {}
        for code, v in zip(c1.tolist(), vol.tolist(), strict=True):
            o = f.decode(code)
            kern[o] = kern.get(o, 0.0) + v
        per_draft[tuple(int(t) for t in drafts[i])] = kern
        for o, v in kern.items():
            law[o] = law.get(o, 0.0) + weights[i] * v
    return law, per_draft, f.calls


def chain_checks(
    adapter: Adapter, battery: list[BatteryInstance], reference: str | None, seed: int
) -> tuple[list[CheckResult], bool, dict[str, dict[tuple[int, ...], float]]]:
    """Exact-by-bisection checks of a chain verifier on every battery instance.

    Returns
    -------
    (checks, available, laws)
        ``available`` is False when the verifier cannot be handled at all (the output is not a
        function of the uniforms, or the first instance failed): the harness then falls back
        to the statistical level. ``laws`` maps instance labels to the located laws; an
        instance without a law has a ``passed=None`` check and is checked statistically.
    """
    checks: list[CheckResult] = []
    laws: dict[str, dict[tuple[int, ...], float]] = {}
    ref = reference_verifier(reference) if reference else None
    for pos, bi in enumerate(battery):
        name = f"exact_defect[{bi.label}]"
        try:
            law, per_draft, calls = adapter.guard.run(lambda bi=bi: chain_law(adapter, bi, seed))  # one worker job
        except ExactUnavailable as exc:
            if pos == 0 and "sweep needs" not in str(exc):
                unavailable = CheckResult(
                    name, "exact", None, instance=bi.spec(), detail=f"exact level unavailable: {exc}"
                )
                return [unavailable], False, {}
            checks.append(
                CheckResult(name, "exact", None, instance=bi.spec(), detail=f"exact level unavailable: {exc}")
            )
            continue
        laws[bi.label] = law
        inst: Instance = bi.float_instance
        defect = float(validity_defect(inst.target, law, inst.L))
        ok = defect <= CHAIN_TOL
        checks.append(
            CheckResult(
                name,
                "exact",
                ok,
                statistic=defect,
                sample_size=calls,
                instance=bi.spec(),
                detail=(
                    f"validity defect of the law located by bisection (breakpoints to {BISECTION_TOL:g}, "
                    f"{calls} rows evaluated): {defect:.3g} ({'<=' if ok else '>'} tolerance {CHAIN_TOL:g})"
                ),
                diagnosis="ok" if ok else "not_lossless",
            )
        )
        if ref is not None:
            tables = Tables(inst)
            worst: tuple[float, float, list[int]] = (-1.0, 0.0, [])
            for draft, kern in per_draft.items():
                d = np.array([draft], dtype=np.int64)
                q, p = tables.rows(d)
                rlaw = ref.outcome_law(d, q, p)
                tv = float(_tv(kern, rlaw))
                if tv > worst[0]:
                    worst = (tv, _stop_tv(kern, rlaw, inst.L), list(draft))
            same = worst[0] <= CHAIN_TOL
            diag = "ok" if same else "differs_from_reference"
            checks.append(
                CheckResult(
                    f"reference_law_exact[{bi.label}]",
                    "reference",
                    same,
                    statistic=worst[0],
                    instance=bi.spec(drafts=[worst[2]]),
                    detail=(
                        f"largest TV between the law given the draft and {reference}'s: {worst[0]:.3g} "
                        f"(draft {worst[2]}; stop-position law TV {worst[1]:.3g}; tolerance {CHAIN_TOL:g})"
                        + ("" if same else "; " + _differs(reference, worst[1] > CHAIN_TOL, 1))
                    ),
                    diagnosis=diag,
                )
            )
    return checks, True, laws


__all__ = [
    "BISECTION_TOL",
    "CHAIN_TOL",
    "FLOAT_TOL",
    "MAX_TUPLES",
    "ExactUnavailable",
    "chain_checks",
    "chain_law",
    "declared_law",
    "find_outcome_law",
    "outcome_law_checks",
]
