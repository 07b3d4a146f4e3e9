"""Speed-up of the exact simulator over a plain loop over ordered draft tuples.

Run: ``python bench/exact_simulator_speedup.py [n L K]`` (default 3 2 3). For each method it
computes the same exact output law twice, side by side in one run:

* plain: every ordered tuple of drafts in V^L with q > 0, inputs built per tuple from the
  instance tables (``iteration_inputs``), the public ``outcome_law`` (validation included);
* simulator: :func:`spectr_gbv.simulate.simulate_exact` (multisets for symmetric verifiers,
  rows gathered once by vectorised indexing, grouping by law key, validation once).

It checks that both laws are equal and prints the wall-time ratio plain / simulator.
"""

from __future__ import annotations

import itertools
import sys
import time
from fractions import Fraction

from spectr_gbv.core import Instance, random_instance
from spectr_gbv.reference import get_verifier, iteration_inputs
from spectr_gbv.reference.kernels import clear_caches
from spectr_gbv.simulate import simulate_exact


def plain_law(instance: Instance, method: str, K: int) -> dict[tuple[int, ...], Fraction]:
    """Exact output law by a plain loop over all ordered draft tuples."""
    verifier = get_verifier(method)
    singles = [x for x in itertools.product(range(instance.n), repeat=instance.L) if instance.draft.prob(x) > 0]
    law: dict[tuple[int, ...], Fraction] = {}
    for drafts in itertools.product(singles, repeat=K):
        weight = Fraction(1)
        for x in drafts:
            weight *= instance.draft.prob(x)
        for o, prob in verifier.outcome_law(*iteration_inputs(instance, drafts)).items():
            law[o] = law.get(o, Fraction(0)) + weight * prob
    return law


def main(argv: list[str]) -> None:
    """Time both paths for a few methods and print the ratios."""
    n, L, K = (int(a) for a in argv) if argv else (3, 2, 3)
    instance = random_instance(n, L, seed=2024, exact=True)
    print(f"exact random instance n={n}, L={L}, K={K} (seed 2024)")
    print(f"{'method':>14} {'plain s':>9} {'simulator s':>12} {'speed-up':>9}  tuples")
    for method in ("gbv_multipath", "spectr", "mdbv", "bv"):
        clear_caches()  # SpecTr's rho cache: neither path starts warm
        t0 = time.perf_counter()
        slow = plain_law(instance, method, K)
        t1 = time.perf_counter()
        clear_caches()
        res = simulate_exact(instance, method, K)
        t2 = time.perf_counter()
        assert res.output_law == slow, f"{method}: the two exact laws differ"
        print(
            f"{method:>14} {t1 - t0:9.3f} {t2 - t1:12.3f} {(t1 - t0) / (t2 - t1):8.1f}x"
            f"  {res.num_draft_tuples} {res.enumeration}, {res.num_kernels} kernels"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
