"""A user's draft-tree rule against the registered rule of the same structure, in the exact simulator.

Run: ``python bench/user_rule_speed.py [--reps 5]``. On ``random(n=3, L=3, seed=0)`` and
``random(n=4, L=3, seed=0)`` for K = 2, 3, side by side in one run (CPU seconds,
``time.process_time``, the median of ``--reps`` runs, SpecTr's caches cleared before each):

* ``rrs``: the registered verifier (``structure = "draft_tree"``);
* ``TreeRRS``: ``spectr_gbv.examples.own_rules:TreeRRS``, the same algorithm written as a user
  writes it, declaring ``structure = "draft_tree"`` in its class body;
* ``undeclared``: ``TreeRRS`` without the declaration (simulated draft tuple by draft tuple).

Both declared rules take the structured path (asserted) and give the same law to the last
rational digit (asserted); the ratios are ``TreeRRS / rrs`` and ``undeclared / TreeRRS``.
Results: docs/results/user_rule_speed.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from spectr_gbv.core import random_instance
from spectr_gbv.examples.own_rules import TreeRRS
from spectr_gbv.reference.kernels import clear_caches
from spectr_gbv.simulate import simulate_exact


class UndeclaredTreeRRS(TreeRRS):
    """:class:`TreeRRS` without ``structure`` in its own body: the tuple-by-tuple path."""

    name = "undeclared_tree_rrs"


def _median_seconds(reps: int, fn: Any, *args: Any) -> tuple[Any, float]:
    times, out = [], None
    for _ in range(reps):
        clear_caches()
        t0 = time.process_time()
        out = fn(*args)
        times.append(time.process_time() - t0)
    return out, statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    """Print the table; returns 0."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5, help="runs per cell (median reported)")
    args = ap.parse_args(argv)
    print(f"exact simulator, CPU seconds (median of {args.reps}), measured side by side")
    head = ("instance", "K", "rrs", "TreeRRS", "undeclared", "TreeRRS/rrs", "undecl/Tree")
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, (18, 2, 8, 8, 11, 12, 12), strict=True)))
    for n, L, seed in ((3, 3, 0), (4, 3, 0)):
        inst = random_instance(n, L, seed)
        for K in (2, 3):
            print(f"  n={n} L={L} K={K} ...", file=sys.stderr, flush=True)
            ref, t_ref = _median_seconds(args.reps, simulate_exact, inst, "rrs", K)
            mine, t_mine = _median_seconds(args.reps, simulate_exact, inst, TreeRRS(), K)
            slow, t_slow = _median_seconds(1, simulate_exact, inst, UndeclaredTreeRRS(), K)
            assert ref.enumeration == mine.enumeration == "draft_tree" and slow.enumeration != "draft_tree"
            assert ref.output_law == mine.output_law == slow.output_law
            label = f"random({n}, {L}, {seed})"
            print(
                f"{label:>18} {K:>2} {t_ref:>8.3f} {t_mine:>8.3f} {t_slow:>11.3f} "
                f"{t_mine / t_ref:>12.2f} {t_slow / t_mine:>12.1f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
