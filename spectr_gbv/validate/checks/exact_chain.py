"""The exact level of a chain verifier: the output law located by bisection of the uniforms.

For each fixed draft, :func:`chain_law` sweeps the product grid of the uniforms from several
base points, bisects every change of output to
:data:`~spectr_gbv.validate.checks.exact_declared.BISECTION_TOL` (starting from likely
breakpoints: cumulative sums of p, q and the residuals, and the ratios p/q), and integrates the
output law; :func:`chain_checks` compares it with the target law (and a named reference).
"""

from __future__ import annotations

import math

import numpy as np

from spectr_gbv.core.instance import Instance
from spectr_gbv.simulate.exact import DraftTable, validity_defect
from spectr_gbv.validate.battery.instance import BatteryInstance
from spectr_gbv.validate.battery.tables import Tables
from spectr_gbv.validate.checks.exact_declared import (
    BISECTION_TOL,
    CHAIN_TOL,
    MAX_CELLS,
    MAX_SWEEP_ROWS,
    ExactUnavailable,
    differs_reason,
    outcome_tv,
    stopping_tv,
)
from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.reference_variants import reference_verifier
from spectr_gbv.validate.report.results import CheckResult


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
                tv = float(outcome_tv(kern, rlaw))
                if tv > worst[0]:
                    worst = (tv, stopping_tv(kern, rlaw, inst.L), list(draft))
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
                        + ("" if same else "; " + differs_reason(reference, worst[1] > CHAIN_TOL, 1))
                    ),
                    diagnosis=diag,
                )
            )
    return checks, True, laws


__all__ = ["chain_checks", "chain_law"]
