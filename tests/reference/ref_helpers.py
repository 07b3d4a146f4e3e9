"""Constants and helpers shared by the reference-layer tests (not a test module)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from spectr_gbv.simulate.monte_carlo import pooled_g_test

LOSSLESS = (
    "ar",
    "sd",
    "bv",
    "spectr",
    "rrs",
    "gbv_multipath",
    "mdbv",
    "optimal_multidraft",
    "near_opt_bv",
    "hsd",
    "hsd_multidraft",
    "khisti_is",
    "rrs_random",
    "traversal",
)
LOSSY = ("spectr_gbv_released", "independent_bv", "hsd_released")


def law_p_value(samples: Iterable[tuple[int, ...]], law: Mapping[tuple[int, ...], object]) -> float:
    """p-value of the pooled G-test of sampled outputs against an exact law.

    Fails at once if a sample has probability 0 in ``law`` (rare outputs are pooled).
    """
    outcomes = list(law)
    index = {o: i for i, o in enumerate(outcomes)}
    counts = np.zeros(len(outcomes), dtype=np.int64)
    for s in samples:
        assert s in index, f"sampled {s}, which has probability 0 in the exact law"
        counts[index[s]] += 1
    return pooled_g_test(counts, np.array([float(law[o]) for o in outcomes])).p_value  # type: ignore[arg-type]


def sampled_p_value(verifier, args: tuple, n: int, seed: int) -> float:
    """:func:`law_p_value` of ``n`` samples of ``verifier`` on ``args`` against its outcome law."""
    law = verifier.outcome_law(*args)
    rng = np.random.default_rng(seed)
    return law_p_value((verifier.sample(*args, rng=rng) for _ in range(n)), law)
