"""The deployable optimum: one verifier for a family of instances that share rows (docs/near_opt_bv.md).

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
import statistics
import sys

from tqdm import tqdm

from spectr_gbv.core.instance import Instance, random_instance
from spectr_gbv.core.tabular import TabularAR
from spectr_gbv.ledger.deployable import joint_optimum
from spectr_gbv.reference.near_opt_bv import NearOptBlockVerifier
from spectr_gbv.simulate.exact import simulate_exact
from spectr_gbv.theory.lp import optimal_lossless


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
        total = joint_optimum(fam, args.K).value
        md = [float(simulate_exact(i, "mdbv", args.K).expected_accepted) for i in fam]
        ok = [j for j in range(len(fam)) if opts[j] - md[j] > 1e-6]
        if not ok:
            print(f"| {seed} | {sum(opts):.6f} | - | - | MDBV = OPT on every member | - | - |")
            continue
        w = [1.0 / (opts[j] - md[j]) if j in ok else 0.0 for j in range(len(fam))]
        wsum = joint_optimum(fam, args.K, w).value
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
