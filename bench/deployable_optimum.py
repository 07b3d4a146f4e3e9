"""The deployable optimum: one verifier for a family of instances that share rows (issue 18 research).

A deployed verifier reads only the rows of the drafted prefixes: p and q at every prefix of
every draft (and p after each whole draft). So on two instances whose rows agree along the
drafts of a multiset M it must use the same kernel on M. OPT(K) (``theory.lp.optimal_lossless``)
optimises every instance separately, with all of its rows; this script solves the joint LP over
a *family* of instances (a base instance with the subtree below each root token either kept or
replaced by a donor's), with one kernel per class of indistinguishable multisets, lossless on
every member, and reports:

* the implementability gap: sum over the family of OPT(K) minus the joint optimum of the sum
  (positive: no deployable verifier attains OPT(K) on every member);
* the best deployable mean gap closure over MDBV on the family (the joint LP with weights
  1/(OPT - E_mdbv)), next to near_opt_bv's (score selection) and the walk's.

LPs in float64 by HiGHS (tolerance 1e-10), so values are good to about 1e-9. Usage::

    python bench/deployable_optimum.py [--n 2] [--L 3] [--K 2] [--seeds 6]
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
from fractions import Fraction

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog
from tqdm import tqdm

from spectr_gbv.core.instance import Instance, random_instance
from spectr_gbv.core.tabular import TabularAR
from spectr_gbv.reference.near_opt_bv import NearOptBlockVerifier
from spectr_gbv.simulate.exact import simulate_exact
from spectr_gbv.theory.lp import optimal_lossless

HIGHS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}


def graft(base: Instance, donor: Instance, token: int) -> Instance:
    """``base`` with the rows of every prefix starting with ``token`` taken from ``donor``."""
    models = []
    for name in ("target", "draft"):
        own, other = getattr(base, name), getattr(donor, name)
        laws = {pre: list(row) for pre, row in own.items()}
        laws.update({pre: list(row) for pre, row in other.items() if pre and pre[0] == token})
        models.append(TabularAR(own.n, laws, depth=own.depth, name=name))
    return Instance(models[0], models[1], base.L)


def family(n: int, L: int, seed: int, donors: int = 2) -> list[Instance]:
    """The (donors + 1)^n instances: each root token's subtree from the base or a donor."""
    base = random_instance(n, L, seed)
    extra = [random_instance(n, L, 1000 * (j + 1) + seed) for j in range(donors)]
    out = []
    for combo in itertools.product(range(donors + 1), repeat=n):
        inst = base
        for token, c in enumerate(combo):
            if c:
                inst = graft(inst, extra[c - 1], token)
        out.append(inst)
    return out


def _rows_along(inst: Instance, multiset: tuple[tuple[int, ...], ...]) -> tuple:
    key = []
    for x in multiset:
        for t in range(inst.L + 1):
            key.append(tuple(inst.target.cond(x[:t]).tolist()))
            if t < inst.L:
                key.append(tuple(inst.draft.cond(x[:t]).tolist()))
    return tuple(key)


def joint_optimum(insts: list[Instance], k: int, weights: list[float]) -> tuple[float, list[float]]:
    """max sum_i weights_i E_i over kernels shared on indistinguishable multisets, lossless on each member."""
    n, L = insts[0].n, insts[0].L
    blocks = list(itertools.product(range(n), repeat=L))
    cols: dict[tuple, int] = {}
    entries: list[tuple[int, int, float]] = []
    rhs: list[float] = []
    objective: dict[int, float] = {}
    seen: set = set()
    per = []
    for inst in insts:
        qd = {x: Fraction(inst.draft.prob(x)) for x in blocks}
        ms = []
        for m in itertools.combinations_with_replacement([x for x in blocks if qd[x] > 0], k):
            counts = [m.count(x) for x in set(m)]
            mult = math.factorial(k) // math.prod(math.factorial(c) for c in counts)
            ms.append((m, float(mult * math.prod(qd[x] for x in m)), (m, _rows_along(inst, m))))
        per.append(ms)

    def outputs(m: tuple) -> list[tuple[int, ...]]:
        prefixes = {()} | {x[:t] for x in m for t in range(1, L + 1)}
        return [z + (v,) for z in sorted(prefixes) for v in range(n)]

    def col(tag: tuple, o: tuple[int, ...]) -> int:
        return cols.setdefault((tag, o), len(cols))

    for ms in per:
        for m, _, tag in ms:
            if tag not in seen:
                seen.add(tag)
                entries.extend((len(rhs), col(tag, o), 1.0) for o in outputs(m))
                rhs.append(1.0)
    for i, (inst, ms) in enumerate(zip(insts, per, strict=True)):
        ys = list(itertools.product(range(n), repeat=L + 1))
        row_of = {y: len(rhs) + j for j, y in enumerate(ys)}
        rhs.extend(float(inst.target.prob(y)) for y in ys)
        for m, mass, tag in ms:
            for o in outputs(m):
                c = col(tag, o)
                objective[c] = objective.get(c, 0.0) - weights[i] * mass * (len(o) - 1)
                for y in ys:
                    if y[: len(o)] == o:
                        cont = float(inst.target.prob(y[len(o) :], given=o)) if len(o) <= L else 1.0
                        if cont:
                            entries.append((row_of[y], c, mass * cont))
    a = sp.csr_matrix(
        ([e[2] for e in entries], ([e[0] for e in entries], [e[1] for e in entries])), shape=(len(rhs), len(cols))
    )
    c = np.zeros(len(cols))
    for j, v in objective.items():
        c[j] = v
    res = linprog(c, A_eq=a, b_eq=np.array(rhs), bounds=(0, None), method="highs", options=HIGHS)
    if res.status != 0:
        raise RuntimeError(f"joint LP: {res.message}")
    values = [sum(mass * (len(o) - 1) * res.x[cols[(tag, o)]] for m, mass, tag in ms for o in outputs(m)) for ms in per]
    return -res.fun, values


def _closure(
    fam: list[Instance], verifier: NearOptBlockVerifier, k: int, md: list[float], opts: list[float], ok: list[int]
) -> float:
    vals = [float(simulate_exact(i, verifier, k).expected_accepted) for i in fam]
    return statistics.mean((vals[j] - md[j]) / (opts[j] - md[j]) for j in ok)


def main(argv: list[str] | None = None) -> None:
    """Print the implementability gap and the best deployable closure per family."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2)
    ap.add_argument("--L", type=int, default=3)
    ap.add_argument("--K", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=6)
    args = ap.parse_args(argv)
    print(f"n = {args.n}, L = {args.L}, K = {args.K}; families of 3^{args.n} instances\n")
    print("Closure columns: mean over the members with MDBV < OPT of (E - E_mdbv) / (OPT - E_mdbv); 'best deployable'")
    print("is the verifier that maximises that mean (one joint LP); gaps within 1e-9 print as 0.\n")
    print("| base seed | sum OPT | joint optimum | gap | best deployable closure | near_opt_bv | walk |")
    print("|---|---|---|---|---|---|---|")
    gaps, best, near, walk = [], [], [], []
    for seed in tqdm(range(args.seeds), desc="families", file=sys.stderr):
        fam = family(args.n, args.L, seed)
        opts = [optimal_lossless(i.target, i.draft, args.K, args.L).value for i in fam]
        total, _ = joint_optimum(fam, args.K, [1.0] * len(fam))
        md = [float(simulate_exact(i, "mdbv", args.K).expected_accepted) for i in fam]
        ok = [j for j in range(len(fam)) if opts[j] - md[j] > 1e-6]
        if not ok:
            print(f"| {seed} | {sum(opts):.6f} | - | - | MDBV = OPT on every member | - | - |")
            continue
        w = [1.0 / (opts[j] - md[j]) if j in ok else 0.0 for j in range(len(fam))]
        wsum, _ = joint_optimum(fam, args.K, w)
        b = (wsum - sum(w[j] * md[j] for j in ok)) / len(ok)

        c_near, c_walk = (
            _closure(fam, verifier, args.K, md, opts, ok)
            for verifier in (NearOptBlockVerifier(), NearOptBlockVerifier(selection="walk"))
        )
        gaps.append(sum(opts) - total)
        best.append(b)
        near.append(c_near)
        walk.append(c_walk)
        gap = sum(opts) - total
        gap = 0.0 if abs(gap) < 1e-9 else gap
        print(f"| {seed} | {sum(opts):.6f} | {total:.6f} | {gap:.2e} | {b:.4f} | {c_near:.4f} | {c_walk:.4f} |")
    print(
        f"\nmean: gap {statistics.mean(gaps):.2e} (largest {max(gaps):.2e}); best deployable closure "
        f"{statistics.mean(best):.4f}; near_opt_bv {statistics.mean(near):.4f}; walk {statistics.mean(walk):.4f}"
    )


if __name__ == "__main__":
    main()
