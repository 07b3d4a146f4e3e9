"""OPT(K) LP frontier: column generation (default) against the plain multiset LP, side by side.

For each size, both formulations are solved in this one process on the same seeded float
instance (``random_instance(n, L, 0, exact=False)``); the table gives CPU seconds
(``time.process_time``), the ratio old / new, the optima and their difference, and the
exact recheck defects of the new kernel. Frontier sizes (where the plain LP does not finish
within its budget) run the new path only, with the stages timed: column generation (HiGHS
master re-solves), kernel read-out, exact recheck. Peak memory is the process's
``ru_maxrss`` after each size (monotone, so read it as an upper bound).

Usage::

    python bench/lp_frontier.py            # the table of docs/results/lp_frontier.md
    python bench/lp_frontier.py --quick    # two small sizes only
"""

from __future__ import annotations

import argparse
import resource
import time

from spectr_gbv.core import random_instance
from spectr_gbv.theory import lp_build as build
from spectr_gbv.theory import lp_colgen as colgen
from spectr_gbv.theory.lp import _keys, lp_size, optimal_lossless
from spectr_gbv.theory.lp_check import check_opt

SIDE_BY_SIDE = [(2, 2, 3), (3, 2, 3), (3, 3, 2), (2, 4, 3), (4, 2, 4), (3, 3, 3)]
FRONTIER = [(4, 3, 3), (4, 3, 4)]
QUICK = [(2, 2, 3), (3, 2, 3)]


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def side_by_side(n: int, length: int, k: int) -> str:
    """One table row: old and new CPU time, ratio, optima."""
    p, q = random_instance(n, length, 0, exact=False)
    t0 = time.process_time()
    old = optimal_lossless(p, q, k, length, _method="full", max_nonzeros=10**12)
    t1 = time.process_time()
    new = optimal_lossless(p, q, k, length, _method="colgen", max_nonzeros=10**12)
    t2 = time.process_time()
    nvar, nrow, nnz = lp_size(p, q, k, length, "opt")
    return (
        f"| {n} | {length} | {k} | {nvar:,} | {nnz:,} | {t1 - t0:.2f} | {t2 - t1:.2f} | {(t1 - t0) / (t2 - t1):.1f}x "
        f"| {old.value:.12f} | {abs(old.value - new.value):.1e} | {float(new.validity_defect):.1e} | {_peak_mb():.0f} |"
    )


def frontier(n: int, length: int, k: int) -> str:
    """One table row: the new path's stages (CPU seconds) on a size the plain LP does not reach."""
    p, q = random_instance(n, length, 0, exact=False)
    nvar, nrow, nnz = lp_size(p, q, k, length, "opt")
    t0 = time.process_time()
    tree = build.prefix_tree(p, q, length)
    sol = colgen.solve_colgen(tree, k)
    t1 = time.process_time()
    ms, _ = build.multisets(len(tree.drafts), k)
    kernel = colgen.kernel_rows(tree, ms, _keys(tree.drafts, ms), sol)
    t2 = time.process_time()
    defect, rows, value = check_opt(kernel, p, q, length)
    t3 = time.process_time()
    return (
        f"| {n} | {length} | {k} | {nvar:,} | {nnz:,} | {len(ms):,} | {sol.rounds} | {t1 - t0:.1f} | {t2 - t1:.1f} "
        f"| {t3 - t2:.1f} | {t3 - t0:.1f} | {sol.value:.12f} | {abs(float(value) - sol.value):.1e} "
        f"| {float(defect):.1e} | {_peak_mb():.0f} |"
    )


def main() -> None:
    """Print both tables (markdown)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two small side-by-side sizes, no frontier")
    args = ap.parse_args()
    print("Side by side (CPU s; old = plain multiset LP, new = column generation)\n")
    print("| n | L | K | plain LP variables | plain LP nonzeros | old s | new s | old/new | OPT(K) | diff "
          "| validity defect | peak MB |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for size in QUICK if args.quick else SIDE_BY_SIDE:
        print(side_by_side(*size), flush=True)
    if args.quick:
        return
    print("\nFrontier (new path only; CPU s per stage)\n")
    print("| n | L | K | plain LP variables | plain LP nonzeros | multisets | rounds | colgen s | kernel s "
          "| recheck s | total s | OPT(K) | exact value - float | validity defect | peak MB |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for size in FRONTIER:
        print(frontier(*size), flush=True)


if __name__ == "__main__":
    main()
