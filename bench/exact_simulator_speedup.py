"""Speed of the exact simulator against a naive Fraction loop and its own tuple enumeration.

Run: ``python bench/exact_simulator_speedup.py [--quick]``. Two tables, each measured side by
side in one run (CPU seconds, ``time.process_time``; SpecTr's rho cache cleared before each):

1. ``random(n=3, L=3, seed=0)``, K = 3 (as ``spectr-gbv simulate --random 3,3,0 --K 3``):

   * naive: ``bench/exact_naive.py``, a straightforward enumeration of every ordered tuple in
     Fractions, written apart from the package (mdbv and gbv_multipath);
   * tuples: ``simulate_exact(..., fast=False)``, the package's tuple enumeration (ordered
     tuples, or multisets for symmetric verifiers; one kernel per tuple);
   * simulator: ``simulate_exact`` (the structured paths of
     :mod:`spectr_gbv.simulate.structured`);

   with the ratios naive / simulator and tuples / simulator. All laws must be equal to the
   last rational digit (asserted).
2. A dense ``random(n=4, L=3, seed=0, concentration=5)`` instance (64 drafts, 262,144 ordered
   3-tuples) with K = 3: the simulator's time for every lossless method (``lp_oracle`` is the
   LP, timed in ``bench/lp_frontier.py``).

``--quick`` skips the slow naive and tuple columns of table 1 for the methods other than mdbv
and gbv_multipath. Results: docs/results/exact_simulator_speed.md.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from spectr_gbv.core import random_instance
from spectr_gbv.core.methods import METHOD_TABLE, method_spec, methods_where
from spectr_gbv.reference.kernels import clear_caches
from spectr_gbv.simulate import simulate_exact
from spectr_gbv.simulate.methods import LOSSY_METHODS, simulate_method

sys.path.insert(0, str(Path(__file__).resolve().parent))
from exact_naive import NAIVE, naive_law  # noqa: E402

#: Table 2: the benchmark's default methods (all lossless) and the stateful greedy_bv, in table order.
LOSSLESS: tuple[str, ...] = tuple(m.name for m in METHOD_TABLE if m.lossless and (m.bench_default or m.stateful))
#: Table 1: the benchmark's default methods that read drafts, most complex first.
TABLE_1: tuple[str, ...] = tuple(
    reversed([m for m in methods_where(bench_default=True) if method_spec(m).drafts != "none"])
)


def _timed(fn: object, *args: object, **kwargs: object) -> tuple[object, float]:
    clear_caches()
    t0 = time.process_time()
    out = fn(*args, **kwargs)  # type: ignore[operator]
    return out, time.process_time() - t0


def table_small(quick: bool) -> None:
    """Table 1: naive, tuple enumeration and simulator on random(3, 3, 0), K = 3."""
    inst = random_instance(3, 3, 0)
    K = 3
    print(f"random(n=3, L=3, seed=0), K={K}: CPU seconds, measured side by side")
    print(f"{'method':>14} {'naive':>8} {'tuples':>8} {'simulator':>10} {'naive/sim':>10} {'tuples/sim':>11}  path")
    for method in TABLE_1:
        fast, t_fast = _timed(simulate_exact, inst, method, K)
        naive_s = tuples_s = float("nan")
        if method in NAIVE:
            law, naive_s = _timed(naive_law, inst, method, K)
            assert law == fast.output_law, f"{method}: naive and simulator laws differ"
        if not quick or method in NAIVE:
            plain, tuples_s = _timed(simulate_exact, inst, method, K, fast=False)
            assert plain.output_law == fast.output_law, f"{method}: tuple and structured laws differ"
        print(
            f"{method:>14} {naive_s:8.2f} {tuples_s:8.2f} {t_fast:10.3f} {naive_s / t_fast:9.0f}x "
            f"{tuples_s / t_fast:10.0f}x  {fast.enumeration}, {fast.num_kernels} kernels"
        )


def table_dense() -> None:
    """Table 2: every lossless method on a dense n = 4, L = 3 instance, K = 3."""
    inst = random_instance(4, 3, 0, concentration=5.0)
    K = 3
    print(f"\ndense random(n=4, L=3, seed=0, concentration=5), K={K}: simulator CPU seconds")
    for method in LOSSLESS:
        assert method not in LOSSY_METHODS
        res, secs = _timed(simulate_method, inst, method, K)
        print(
            f"{method:>14} {secs:8.3f} s  E[tau] = {float(res.expected_accepted):.6f}  defect {res.validity_defect}"
            f"  ({res.num_draft_tuples} tuples, {res.enumeration}, {res.num_kernels} kernels)"
        )


def main(argv: list[str]) -> None:
    """Print both tables."""
    quick = "--quick" in argv
    table_small(quick)
    table_dense()


if __name__ == "__main__":
    main(sys.argv[1:])
