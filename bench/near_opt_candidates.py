"""Research log: candidate near_opt_bv verifiers, measured exactly against OPT(K).

Each candidate is a lossless verifier written against the reference interface (not registered:
a candidate becomes ``near_opt_bv`` only when it meets every requirement it is held to, docs/near_opt_bv.md). The
battery (60 (instance, K) cases: n = 2, L = 2 dense; n = 3, L = 2 sparse; n = 2, L = 3 dense;
K = 2, 3, 4) is evaluated in exact rationals, OPT(K) by the LP; the table is the gap closure
(E - E_mdbv) / (OPT - E_mdbv) over the cases where MDBV is below OPT, the validity defects,
the monotonicity steps in K, and the cases where a candidate is below the best existing method.

Candidate ``selected_path_optimal`` (C1): walk down the draft trie choosing ONE path, at each
node with the optimal single-step rule of ``optimal_multidraft`` (a priority-order mixture
selecting a drafted token: :func:`spectr_gbv.reference.optimal_multidraft.node_rule`); the
selected path X* then has an autoregressive law r, computable along the path by carrying the
distribution of the number of drafts through the current node; run block verification on X*
with draft law r. Lossless: BV is lossless for any draft law, and X* ~ r exactly. K = 1: r = q,
so it is BV; L = 1: r is the optimal selection law d, so it is SD with d, which is OPT(K).

Candidates C2 (the first ``near_opt_bv``, ``selection="walk"``, and its variants): the same
walk, but the node rule is chosen for the law of the NUMBER of drafts through the node (one
priority-order mixture for every count, :func:`spectr_gbv.reference.coverage.mixture_rule`),
with BV's running weight scaling the target (``weighting``) and a choice of optimal base
(``priority``). C3: C2 plus a correction coupled with the drafts left at BV's stop. C4: independent
per-draft scores split at every drafted prefix (module :mod:`spectr_gbv.reference.score_laws`),
with the split variants of ``split`` (``bench/experiments/near_opt_variants.py``).
C5 (the registered ``near_opt_bv`` is C5a): C4d's lexicographic
base with its under-drafted children re-split in proportion to q (``priority="hedge"``). C6a: C5a
with the over-drafted children's mass also split by q, floored at the target
(``priority=neutral_base`` of ``bench/experiments/near_opt_variants.py``; a negative result).

Usage::

    python bench/near_opt_candidates.py               # the 60-case battery (LPs here; ~1 min)
    python bench/near_opt_candidates.py --sweep DIR   # the instances of a sweep dataset (its
                                                      # rows give the other methods and OPT)
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.experiments.near_opt_variants import PROPORTIONAL, RULE, neutral_base  # noqa: E402 - needs ROOT
from spectr_gbv.core.instance import random_instance  # noqa: E402
from spectr_gbv.reference.base import Verifier, VerifyInput  # noqa: E402
from spectr_gbv.reference.choosers import Chooser, Emission  # noqa: E402
from spectr_gbv.reference.coverage import mixture_rule, point_mass  # noqa: E402
from spectr_gbv.reference.kernels import block_verify  # noqa: E402
from spectr_gbv.reference.near_opt_bv import NearOptBlockVerifier, _walk, child_counts  # noqa: E402
from spectr_gbv.reference.optimal_multidraft import (  # noqa: E402
    Decomposition,
    node_rule,
    order_vertex,
    selection_probabilities,
)
from spectr_gbv.simulate.exact import simulate_exact  # noqa: E402
from spectr_gbv.theory.lp import optimal_lossless  # noqa: E402

BATTERY = [(2, 2, s, 0.0) for s in range(8)] + [(3, 2, s, 0.3) for s in range(8)] + [(2, 3, s, 0.0) for s in range(4)]
KS = (2, 3, 4)
EXISTING = ("mdbv", "gbv_multipath", "optimal_multidraft", "khisti_is", "traversal")
#: The methods near_opt_bv is held never to be below (docs/near_opt_bv.md, "Never below the list").
HELD_LIST = ("mdbv", "gbv_multipath", "optimal_multidraft", "traversal")


class SelectedPathOptimalBV(Verifier):
    """Candidate C1 (module docstring): optimal node selection of one path, then BV with its law.

    ``priority`` picks the optimal node base (:func:`~spectr_gbv.reference.optimal_multidraft.node_rule`):
    ``"id"`` (C1a) or ``"ratio"`` (C1b, high p/q tokens first). ``vertex_weight`` theta > 0 mixes
    the node law with the ratio-priority vertex (the order of ``gbv_multipath``'s lexicographic
    maximum: p/q descending, ties by the larger token id): theta = 1 is ``gbv_multipath``.
    """

    name = "cand_selected_path_optimal"
    lossless = True
    symmetric = True
    structure = "selected_draft"
    citation = "candidate C1 (this project, docs/near_opt_bv.md)"

    def __init__(self, priority: str = "id", vertex_weight: Fraction = Fraction(0)) -> None:
        super().__init__()
        self.priority = priority
        self.theta = Fraction(vertex_weight)

    def rule(
        self, p: tuple[Fraction, ...], q: tuple[Fraction, ...], c: int
    ) -> tuple[tuple[Fraction, ...], Decomposition]:
        """The node's selection law and its priority-order mixture (module docstring)."""
        d, orders = node_rule(p, q, c, self.priority)
        if not self.theta:
            return d, orders
        vorder = tuple(sorted((y for y in range(len(q)) if q[y] > 0), key=lambda y: (-(p[y] / q[y]), -y)))
        v = order_vertex(q, vorder, c)
        th = self.theta
        mix = tuple((1 - th) * a + th * b for a, b in zip(d, v, strict=True))
        return mix, tuple((w * (1 - th), o) for w, o in orders if th < 1) + ((th, vorder),)

    def _rows(self, batch: VerifyInput, k: int) -> tuple[tuple[int, ...], list[np.ndarray]]:
        """Draft k's tokens and the selected-path law r(.|x^t), t = 0..L-1."""
        x = batch.draft(k)
        dist = {batch.K: Fraction(1)}  # P(path to the node selected, m drafts through it)
        rows = []
        for t, y in enumerate(x):
            p, q = tuple(batch.target_probs[k, t].tolist()), tuple(batch.draft_probs[k, t].tolist())
            total = sum(dist.values())
            r = [Fraction(0)] * len(q)
            new: dict[int, Fraction] = {}
            for m, w in dist.items():
                d, orders = self.rule(p, q, m)
                for v in range(len(q)):
                    r[v] += w * d[v]
                for mm, pr in child_counts(q, orders, m, y).items():
                    new[mm] = new.get(mm, Fraction(0)) + w * pr
            rows.append(np.array([v / total for v in r], dtype=object))
            dist = new
        return x, rows

    def selected_draft_probability(self, batch: VerifyInput) -> Fraction:
        """r(x) for ``batch`` = K copies of x."""
        x, rows = self._rows(batch, 0)
        return math.prod((row[v] for row, v in zip(rows, x, strict=True)), start=Fraction(1))

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Select the path node by node, then block verification with draft law r."""
        if not batch.exact:
            raise ValueError("candidate C1 is written for exact inputs only")
        active = list(range(batch.K))
        for t in range(batch.L):
            k0 = active[0]
            p, q = tuple(batch.target_probs[k0, t].tolist()), tuple(batch.draft_probs[k0, t].tolist())
            tokens = [int(batch.drafts[j, t]) for j in active]
            sel = selection_probabilities(self.rule(p, q, len(tokens))[1], tokens)
            cands = sorted(sel)
            y = cands[chooser.categorical([sel[v] for v in cands])] if len(cands) > 1 else cands[0]
            active = [j for j in active if int(batch.drafts[j, t]) == y]
        k = active[0]
        x, rows = self._rows(batch, k)
        tau, law = block_verify(
            chooser, x, batch.target_probs[k, : batch.L], rows, batch.target_probs[k, batch.L], True
        )
        return Emission(x[:tau], law)


def walk(**kwargs: str) -> NearOptBlockVerifier:
    """The walk selection (C2 family)."""
    return NearOptBlockVerifier(selection="walk", **kwargs)


class CorrectedWalk(NearOptBlockVerifier):
    """Candidate C3: C2, then BV's correction token coupled with the drafts the walk left at the stop.

    At the stop u = x^tau the drafts through u whose next token comes after the walk's token c in
    the order drawn there are i.i.d. q restricted to those tokens (given the walk); the correction
    (law R, BV's residual) is drawn by the optimal single-step rule for them (select with the
    point-mass rule's law d, accept with min(1, R/d), else the residual of R against d); an
    accepted drafted token y continues with the drafts through uy, recursively. Lossless; it
    gains exactly nothing on every case measured: R lives on the tight set of d, whose tokens are
    selected whenever drafted, so no token drafted after c has R > 0 (docs/near_opt_bv.md).
    """

    name = "cand_corrected_walk"
    structure = None  # the structured path would bypass run

    def __init__(self) -> None:
        super().__init__(selection="walk")

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Walk (drawing the order at each node), BV, then the coupled correction."""
        orders_drawn: list[tuple[int, ...]] = []

        def pick(t: int, node: Any, tokens: list[int]) -> int:
            i = chooser.categorical([w for w, _ in node.orders]) if len(node.orders) > 1 else 0
            orders_drawn.append(node.orders[i][1])
            return next(y for y in node.orders[i][1] if y in set(tokens))

        nodes, k = _walk(batch, pick, self.priority, self.weighting)
        x = batch.draft(k)
        rows = [np.array(node.d, dtype=object) for node in nodes]
        tau, law = block_verify(
            chooser, x, batch.target_probs[k, : batch.L], rows, batch.target_probs[k, batch.L], True
        )
        if tau == batch.L:
            return Emission(x, law)
        order = orders_drawn[tau]
        after = set(order[order.index(x[tau]) + 1 :])
        usable = [j for j in range(batch.K) if batch.draft(j)[:tau] == x[:tau] and int(batch.drafts[j, tau]) in after]
        if not usable:
            return Emission(x[:tau], law)
        q = tuple(batch.draft_probs[k, tau].tolist())
        mass = sum((q[v] for v in after), Fraction(0))
        q_after = tuple(q[v] / mass if v in after else Fraction(0) for v in range(len(q)))
        res = tuple(v / sum(law.tolist(), Fraction(0)) for v in law.tolist())
        d, orders = mixture_rule(res, q_after, point_mass(len(usable)), "ratio")
        sel = selection_probabilities(orders, [int(batch.drafts[j, tau]) for j in usable])
        cands = sorted(sel)
        y = cands[chooser.categorical([sel[v] for v in cands])] if len(cands) > 1 else cands[0]
        if not chooser.bernoulli(min(Fraction(1), res[y] / d[y])):
            return Emission(
                x[:tau], np.array([max(a - b, Fraction(0)) for a, b in zip(res, d, strict=True)], dtype=object)
            )
        sub = [j for j in usable if int(batch.drafts[j, tau]) == y]
        if tau + 1 == batch.L:
            return Emission(x[:tau] + (y,), batch.target_probs[sub[0], batch.L])
        rest = VerifyInput(
            batch.drafts[sub, tau + 1 :], batch.draft_probs[sub, tau + 1 :], batch.target_probs[sub, tau + 1 :], True
        )
        e = self.run(rest, prep, chooser)
        return Emission(x[:tau] + (y,) + e.prefix, e.weights)


def _candidates() -> dict[str, Verifier]:
    return {
        "C1a selected path, optimal node rule per count (id order)": SelectedPathOptimalBV("id"),
        "C1b selected path, optimal node rule per count (ratio order)": SelectedPathOptimalBV("ratio"),
        "C1c C1b mixed 3/4 with the ratio vertex (theta 1/4)": SelectedPathOptimalBV("ratio", Fraction(1, 4)),
        "C1d theta 1/2": SelectedPathOptimalBV("ratio", Fraction(1, 2)),
        "C1e theta 1 (= gbv_multipath: a consistency check)": SelectedPathOptimalBV("ratio", Fraction(1)),
        "C2 walk (first near_opt_bv): count-law rule, BV-weighted target, ratio base": walk(),
        "C2b count-law rule, unweighted target, ratio base": walk(weighting="none"),
        "C2c count-law rule, weighted at the last level only": walk(weighting="leaf"),
        "C2d count-law rule, BV-weighted, id base": walk(priority="id"),
        "C2e count-law rule, lexicographically optimal base": walk(priority="lex"),
        "C3 C2 + the correction coupled with the unselected drafts": CorrectedWalk(),
        "C4a scores, split by the ratio rule's orders": NearOptBlockVerifier(split="orders", priority="ratio"),
        "C4b scores, the ratio rule's law with its largest proportional share": NearOptBlockVerifier(
            split=RULE, priority="ratio"
        ),
        "C4c scores, optimal law with the largest proportional share": NearOptBlockVerifier(
            split=PROPORTIONAL, priority="ratio"
        ),
        "C4d scores, orders of the lexicographically optimal base (near_opt_bv before C5a)": NearOptBlockVerifier(
            priority="lex"
        ),
        "C5a near_opt_bv: scores, hedged base (C4d, under-drafted children re-split by q)": NearOptBlockVerifier(),
        "C5b C5a with an unweighted target": NearOptBlockVerifier(weighting="none"),
        "C5c C5a at the last level only": NearOptBlockVerifier(weighting="leaf"),
        "C5d the walk with the hedged base": walk(priority="hedge"),
        "C6a C5a with the over-drafted surplus also split by q (floored at t)": NearOptBlockVerifier(
            priority=neutral_base
        ),
    }


Case = tuple[str, Any, int, dict[str, Fraction | float], float]


def _lp_cases() -> list[Case]:
    cases: list[Case] = []
    for n, L, s, zp in tqdm(BATTERY, desc="battery (LPs)", file=sys.stderr):
        inst = random_instance(n, L, s, zero_prob=zp)
        for k in KS:
            vals: dict[str, Fraction | float] = {
                m: Fraction(simulate_exact(inst, m, k).expected_accepted) for m in EXISTING
            }
            opt = optimal_lossless(inst.target, inst.draft, k, L).value
            cases.append((f"random:{n},{L},{s},{zp:g}", inst, k, vals, opt))
    return cases


def _sweep_cases(path: str) -> list[Case]:
    from spectr_gbv.sweep.store import read_table  # the sweep extra (pyarrow)

    rows: dict[tuple[str, int], dict[str, Any]] = defaultdict(dict)
    for r in read_table(path).to_pylist():
        rows[(r["instance_id"], r["K"])][r["method"]] = r["expected_accepted_float"]
        rows[(r["instance_id"], r["K"])]["opt"] = r["opt"]
    cases: list[Case] = []
    for (iid, k), vals in sorted(rows.items()):
        if not iid.startswith("random:") or not set(EXISTING) <= set(vals):
            continue
        n, L, s, *zp = iid.split(":")[1].split(",")
        inst = random_instance(int(n), int(L), int(s), zero_prob=float(zp[0]) if zp else 0.0)
        cases.append((iid, inst, k, {m: vals[m] for m in EXISTING}, vals["opt"]))
    return cases


def main(argv: list[str] | None = None) -> None:
    """Evaluate the candidates on a battery and print the markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sweep",
        help="a sweep dataset (Parquet) with the methods " + ", ".join(EXISTING) + " and the opt measure",
    )
    ap.add_argument("--only", help="comma-separated prefixes of candidate labels: C1a-e, C2, C2b-e, C3, C4a-d")
    args = ap.parse_args(argv)
    cands = _candidates()
    if args.only:
        keep = tuple(args.only.split(","))
        cands = {m: v for m, v in cands.items() if m.startswith(keep)}
    cases = _sweep_cases(args.sweep) if args.sweep else _lp_cases()
    names = list(EXISTING) + list(cands)
    closure: dict[str, list[float]] = {m: [] for m in names}
    ratio: dict[str, list[float]] = {m: [] for m in names}
    defects = {m: 0 for m in cands}
    drops = {m: 0 for m in cands}
    below: dict[str, list[str]] = {m: [] for m in cands}
    prev: dict[tuple[str, str], float] = {}
    for iid, inst, k, given, opt in tqdm(cases, desc="candidates", file=sys.stderr):
        vals = {m: float(v) for m, v in given.items()}
        for m, v in cands.items():
            r = simulate_exact(inst, v, k)
            vals[m] = float(r.expected_accepted)
            defects[m] += r.validity_defect != 0
            if (m, iid) in prev and vals[m] < prev[(m, iid)] - 1e-12:
                drops[m] += 1
            prev[(m, iid)] = vals[m]
            best = max(HELD_LIST, key=lambda e: vals[e])
            if vals[m] < vals[best] - 1e-12:
                below[m].append(f"{iid} K={k}: {best} +{vals[best] - vals[m]:.4f}")
        base = vals["mdbv"]
        for m in names:
            ratio[m].append(vals[m] / opt if opt > 0 else 1.0)
            if opt - base > 1e-9:
                closure[m].append((vals[m] - base) / (opt - base))
    print(f"{len(cases)} cases; gap closure over mdbv on the {len(closure['mdbv'])} with MDBV < OPT\n")
    print("| method | E/OPT mean | closure mean | median | worst | defects | drops in K | below the list |")
    print("|---|---|---|---|---|---|---|---|")
    for m in names:
        xs = closure[m]
        extra = (f"{defects[m]} | {drops[m]} | {len(below[m])}") if m in cands else "- | - | -"
        print(
            f"| {m} | {statistics.mean(ratio[m]):.4f} | {statistics.mean(xs):.3f} | {statistics.median(xs):.3f} "
            f"| {min(xs):.3f} | {extra} |"
        )
    for m, lines in below.items():
        if lines:
            print(f"\n{m} below the best of the list on {len(lines)}: " + "; ".join(lines[:12]))


if __name__ == "__main__":
    main()
