"""OPT(K) by column generation against the plain multiset LP; the memory guard."""

from __future__ import annotations

import numpy as np
import pytest

import spectr_gbv.theory.lp_build as lp_build
from spectr_gbv.core import random_instance
from spectr_gbv.theory import lp_colgen as colgen
from spectr_gbv.theory.lp import (
    COLGEN_MIN_NONZEROS,
    MAX_LP_MEMORY_SHARE,
    LPTooLargeError,
    estimate_lp_memory,
    kernel_for,
    lp_size,
    machine_memory,
    optimal_lossless,
)
from spectr_gbv.theory.lp_check import check_opt, check_opt_fractions

TOL = 1e-8

# 36 small instances: n, L, K, seed, exact, zero_prob (n**L * K <= 54, as tests/theory/test_lp.py)
CASES = [
    (n, length, k, seed, exact, zero)
    for seed, (n, length, k) in enumerate([(2, 1, 2), (2, 2, 2), (2, 2, 3), (3, 1, 3), (3, 2, 2), (2, 3, 2)] * 3)
    for exact, zero in ((True, 0.0), (False, 0.3))
]


@pytest.mark.parametrize(("n", "length", "k", "seed", "exact", "zero"), CASES)
def test_colgen_equals_plain_lp(n, length, k, seed, exact, zero):
    p, q = random_instance(n, length, seed, exact=exact, zero_prob=zero)
    new = optimal_lossless(p, q, k, length, _method="colgen")
    old = optimal_lossless(p, q, k, length, _method="full")
    assert abs(new.value - old.value) <= TOL
    assert abs(float(new.value_exact_check) - new.value) <= TOL
    assert new.validity_defect <= TOL and new.marginal_defect <= TOL
    assert set(new.kernel) == set(old.kernel)  # one row per multiset, as the plain LP
    assert (new.num_variables, new.num_constraints, new.nonzeros) == lp_size(p, q, k, length, "opt")
    for key, law in new.kernel.items():
        assert abs(sum(law.values()) - 1) < 1e-12 and all(prob > 0 for prob in law.values())
        assert all(any(o[:-1] == x[: len(o) - 1] for x in key) and p.prob(o) > 0 for o in law)
        assert kernel_for(new, key[::-1]) == law


def test_integer_recheck_equals_fraction_recheck():
    """check_opt (common denominator) and the plain Fraction loop give the same exact numbers."""
    for seed, exact in ((0, True), (1, False), (2, True)):
        p, q = random_instance(3, 2, seed, exact=exact, zero_prob=0.3 * (seed == 2))
        res = optimal_lossless(p, q, 2, 2, _method="colgen")
        assert check_opt(res.kernel, p, q, 2) == check_opt_fractions(res.kernel, p, q, 2)
        assert check_opt(res.kernel, p, q, 2) == (res.validity_defect, res.marginal_defect, res.value_exact_check)


def test_order_columns_are_transport_images():
    """b_sigma is the node total of 'each multiset goes to its first held node in sigma'."""
    p, q = random_instance(2, 2, 5, exact=False)
    tree = lp_build.prefix_tree(p, q, 2)
    ms, mult = lp_build.multisets(len(tree.drafts), 3)
    mass = mult * np.prod(tree.q_drafts[ms], axis=1)
    rng = np.random.default_rng(0)
    for _ in range(5):
        rank = rng.permutation(len(tree.node_len))
        held = tree.chains[ms].reshape(len(ms), -1)
        first = [min((z for z in row if z >= 0), key=lambda z: rank[z]) for row in held.tolist()]
        expected = np.bincount(first, weights=mass, minlength=len(rank))
        assert np.allclose(colgen.order_column(tree, rank, 3), expected, atol=1e-15)


def test_memory_guard_refuses_n2000_l1_at_once(monkeypatch):
    """An n = 2000, L = 1 LP (plain formulation) is refused before anything is built."""
    p, q = random_instance(2000, 1, 0, exact=False)

    def boom(*args: object) -> None:
        raise AssertionError("the LP was built")

    monkeypatch.setattr(lp_build, "build_opt", boom)
    monkeypatch.setattr(lp_build, "multisets", boom)
    monkeypatch.setattr(colgen, "solve_colgen", boom)
    with pytest.raises(LPTooLargeError) as info:
        optimal_lossless(p, q, 1, 1, _method="full", max_memory=int(MAX_LP_MEMORY_SHARE * 16e9))
    msg = str(info.value)
    nvar, nrow, nnz = lp_size(p, q, 1, 1, "opt")
    assert "\n" not in msg
    for part in ("n=2000", "L=1", "K=1", f"{nvar} variables", f"{nrow} constraints", f"{nnz} nonzeros", "--no-lp"):
        assert part in msg
    assert "GB estimated" in msg and "max_memory=8.0 GB" in msg and "max_nonzeros" not in msg
    # the default path (column generation at this size) is refused too, by its tree size
    with pytest.raises(LPTooLargeError) as info:
        optimal_lossless(p, q, 1, 1)
    assert str(info.value) == (
        "OPT(K) LP for n=2000, L=1, K=1: column generation over 2001 prefix-tree nodes, over the limit "
        "MAX_COLGEN_NODES=500 (hours of solving); rerun with --no-lp to skip the LPs"
    )


def test_memory_estimate_model():
    """The model's terms, and the default budget is half the machine's memory."""
    size = (10**6, 10**4, 2 * 10**6)
    plain = estimate_lp_memory(size, 4, 3, "opt", 1000, "full")
    assert plain == int(2.0 * (50e6 + 700 * 2e6 + 2000 * 1e4 + 1000 * 4**4))
    assert estimate_lp_memory(size, 4, 3, "opt", 1000) == int(2.0 * (50e6 + 600 * 1000 + 100 * 1e6 + 1000 * 4**4))
    assert estimate_lp_memory(size, 4, 3, "ot", 1000) == int(2.0 * (50e6 + 700 * 2e6 + 2000 * 1e4 + 1000 * 4**3))
    assert machine_memory() > 0
    p, q = random_instance(2, 2, 0, exact=True)
    assert optimal_lossless(p, q, 2, 2, max_memory=10**12).success
    with pytest.raises(LPTooLargeError, match="max_memory=0.0 GB"):
        optimal_lossless(p, q, 2, 2, max_memory=1)


def test_max_nonzeros_still_honoured():
    p, q = random_instance(3, 2, 0, exact=True)
    for method in ("auto", "colgen", "full"):
        with pytest.raises(LPTooLargeError, match="max_nonzeros=10;"):
            optimal_lossless(p, q, 2, 2, max_nonzeros=10, _method=method)


def test_auto_picks_the_plain_lp_for_small_and_colgen_for_large():
    p, q = random_instance(2, 2, 3, exact=True)
    assert lp_size(p, q, 2, 2, "opt")[2] <= COLGEN_MIN_NONZEROS
    auto, full = optimal_lossless(p, q, 2, 2), optimal_lossless(p, q, 2, 2, _method="full")
    assert auto.kernel == full.kernel and "column generation" not in auto.message
    p, q = random_instance(3, 3, 0, exact=False)
    assert lp_size(p, q, 3, 3, "opt")[2] > COLGEN_MIN_NONZEROS
    res = optimal_lossless(p, q, 3, 3)
    assert "column generation" in res.message and res.validity_defect <= TOL
    assert abs(res.value - 2.1361236797178) < 1e-9  # the plain LP's optimum (bench/lp_frontier.py)


def test_unknown_method():
    p, q = random_instance(2, 1, 0, exact=True)
    with pytest.raises(ValueError, match="_method"):
        optimal_lossless(p, q, 1, 1, _method="simplex")
