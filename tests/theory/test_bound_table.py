"""bound_table's shared-across-K sums equal the single-K closed forms exactly."""

from __future__ import annotations

from spectr_gbv.core import random_instance
from spectr_gbv.theory import bounds
from spectr_gbv.theory.table import bound_table


def test_bound_table_equals_the_single_k_closed_forms():
    for seed in range(30):
        n, L = (2, 3, 4)[seed % 3], (1, 2, 3)[seed % 3 - 1]
        inst = random_instance(n, L, seed, zero_prob=(0.0, 0.3)[seed % 2])
        p, q = inst
        ks = [1, 2, 3, 5] if seed % 2 else [4, 1]
        for row in bound_table(inst, ks, with_lp=False):
            where = f"random({n}, {L}, {seed}) K={row.K}"
            assert row.cic_bound == bounds.cic_bound(p, q, row.K, L), where
            assert row.cic_bound_lossless == bounds.cic_bound_lossless(p, q, row.K, L), where
            assert row.prefix_relaxation == bounds.prefix_relaxation(p, q, row.K, L), where
            assert row.bv == bounds.bv_expected_accepted(p, q, L), where
            assert row.sd == bounds.sd_expected_accepted(p, q, L), where
            assert row.opt is None and row.ot is None
