"""bound_table's shared-across-K sums equal the single-K closed forms exactly; its LPs are size-checked first."""

from __future__ import annotations

import pytest

import spectr_gbv.theory.table as table
from spectr_gbv.core import random_instance
from spectr_gbv.theory import bounds
from spectr_gbv.theory.lp import LPTooLargeError, check_lp_fits, lp_size, optimal_coupling
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


def test_a_too_large_lp_is_refused_before_any_lp_is_solved(monkeypatch):
    # Regression: `spectr-gbv bound --random 4,4,0 --K 3` solved OPT(3) by column generation
    # and only then refused OT(3) at 145 million nonzeros.
    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("an LP was solved")

    monkeypatch.setattr(table, "optimal_lossless", boom)
    monkeypatch.setattr(table, "optimal_coupling", boom)
    inst = random_instance(4, 4, 0)
    with pytest.raises(LPTooLargeError) as info:
        bound_table(inst, [1, 3])
    nvar, nrow, nnz = lp_size(inst.target, inst.draft, 3, 4, "ot")
    head = f"OT(K) LP for n=4, L=4, K=3: {nvar} variables, {nrow} constraints, {nnz} nonzeros"
    assert str(info.value).startswith(head)
    assert (nvar, nrow, nnz) == (72964304, 776309, 145152392)


def test_check_lp_fits_refuses_what_the_solvers_refuse():
    p, q = random_instance(4, 4, 0)
    assert check_lp_fits(p, q, 1, 2, "opt") is None and check_lp_fits(p, q, 1, 2, "ot") is None
    with pytest.raises(LPTooLargeError) as checked:
        check_lp_fits(p, q, 3, 4, "ot", max_memory=10**9)
    with pytest.raises(LPTooLargeError) as solved:
        optimal_coupling(p, q, 3, 4, max_memory=10**9)
    assert str(checked.value) == str(solved.value) and "max_memory=1.0 GB" in str(checked.value)
    with pytest.raises(ValueError, match="kind must be 'opt' or 'ot'"):
        check_lp_fits(p, q, 1, 2, "lossy")
