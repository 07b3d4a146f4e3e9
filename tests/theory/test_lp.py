"""OPT(K) and OT(K) linear programs (THEORY.md sections 5 and 7)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import OptimizeResult

import spectr_gbv.theory.lp_build as lp_build
from spectr_gbv.core import Instance, default_instance, random_instance
from spectr_gbv.theory.bounds import (
    bv_expected_accepted,
    cic_bound_lossless,
    greedy_expected_accepted,
    l1_optimum,
    prefix_relaxation,
)
from spectr_gbv.theory.lp import (
    LPResult,
    LPSolveError,
    LPTooLargeError,
    kernel_for,
    lp_size,
    optimal_coupling,
    optimal_lossless,
)

TOL = 1e-8
LP_SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def lp_cases(draw: st.DrawFn, L: tuple[int, int] = (1, 3)) -> tuple[Instance, int]:
    """(exact instance with zeros, K): n in 2..3, L in ``L``, K in 1..3, n**L * K <= 54."""
    n = draw(st.integers(2, 3))
    length = draw(st.integers(*L))
    k = draw(st.integers(1, 3).filter(lambda k: n**length * k <= 54))
    seed = draw(st.integers(0, 2**31 - 1))
    zero_prob = draw(st.sampled_from([0.0, 0.3]))
    return random_instance(n, length, seed, exact=True, zero_prob=zero_prob), k


def assert_checked(res: LPResult) -> None:
    """The exact rechecks of a returned kernel are tiny and agree with the LP value."""
    assert res.status == 0 and res.success
    assert res.validity_defect <= TOL
    assert res.marginal_defect <= TOL
    assert abs(float(res.value_exact_check) - res.value) <= TOL
    assert all(0 <= prob <= 1 for law in res.kernel.values() for prob in law.values())


# ---------------------------------------------------------------- section 7 test vector


@pytest.mark.parametrize(
    ("solver", "k", "expected"),
    [
        (optimal_lossless, 1, Fraction(113, 72)),
        (optimal_coupling, 1, Fraction(13, 8)),
        (optimal_lossless, 2, Fraction(71, 36)),
        (optimal_coupling, 2, Fraction(71, 36)),
        (optimal_lossless, 3, Fraction(2)),
    ],
)
def test_section7_values(solver, k, expected):
    res = solver(*default_instance(), k, 2)
    assert abs(res.value - expected) < 1e-9
    assert abs(res.value_exact_check - expected) < 1e-9
    assert res.validity_defect < 1e-9 and res.marginal_defect < 1e-9
    assert (res.num_drafts, res.draft_length) == (k, 2)


def test_section7_float_instance_matches_exact():
    inst = default_instance()
    for solver in (optimal_lossless, optimal_coupling):
        exact = solver(*inst, 2, 2)
        flt = solver(*inst.to_float(), 2, 2)
        assert abs(exact.value - flt.value) < 1e-9
        assert_checked(flt)


def test_kernel_shape_on_section7():
    inst = default_instance()
    res = optimal_lossless(*inst, 2, 2)
    drafts = [(0, 0), (0, 1), (1, 0), (1, 1)]  # all have q > 0
    assert len(res.kernel) == math.comb(len(drafts) + 1, 2)
    for key, law in res.kernel.items():
        assert list(key) == sorted(key)
        for o in law:  # o = (prefix of a draft in the multiset) + one token, p(o) > 0
            assert 1 <= len(o) <= 3 and any(o[:-1] == x[: len(o) - 1] for x in key)
            assert inst.target.prob(o) > 0
    assert kernel_for(res, [(1, 1), (0, 0)]) is kernel_for(res, [(0, 0), (1, 1)])
    coupling = optimal_coupling(*inst, 2, 2)
    assert all(len(y) == 2 for law in coupling.kernel.values() for y in law)


def test_lp_size_matches_solved_lp():
    inst = default_instance()
    for kind, solver in (("opt", optimal_lossless), ("ot", optimal_coupling)):
        for k in (1, 2, 3):
            res = solver(*inst, k, 2)
            assert lp_size(*inst, k, 2, kind) == (res.num_variables, res.num_constraints, res.nonzeros)


# ---------------------------------------------------------------- properties


@LP_SETTINGS
@given(lp_cases())
def test_chain_of_optima(case):
    """B_BV(K) <= OPT(K) <= OT(K) <= PR(K); the kernels pass the exact rechecks."""
    (p, q), k = case
    length = case[0].L
    opt = optimal_lossless(p, q, k, length)
    ot = optimal_coupling(p, q, k, length)
    assert_checked(opt)
    assert_checked(ot)
    assert float(cic_bound_lossless(p, q, k, length)) <= opt.value + TOL
    assert opt.value <= ot.value + TOL
    assert ot.value <= float(prefix_relaxation(p, q, k, length)) + TOL
    assert lp_size(p, q, k, length, "opt") == (opt.num_variables, opt.num_constraints, opt.nonzeros)
    assert lp_size(p, q, k, length, "ot") == (ot.num_variables, ot.num_constraints, ot.nonzeros)


@LP_SETTINGS
@given(lp_cases())
def test_single_draft_optima(case):
    """OPT(1) is block verification's value, OT(1) the greedy (prefix-maximal) value."""
    (p, q), _ = case
    length = case[0].L
    assert abs(optimal_lossless(p, q, 1, length).value - float(bv_expected_accepted(p, q, length))) <= TOL
    assert abs(optimal_coupling(p, q, 1, length).value - float(greedy_expected_accepted(p, q, length))) <= TOL


@LP_SETTINGS
@given(lp_cases(L=(1, 1)))
def test_l1_closed_form(case):
    """At L = 1, OPT(K) = OT(K) = min_A [p(A) + 1 - q(A)^K]."""
    (p, q), k = case
    expected = float(l1_optimum(p.cond(()), q.cond(()), k)[0])
    assert abs(optimal_lossless(p, q, k, 1).value - expected) <= TOL
    assert abs(optimal_coupling(p, q, k, 1).value - expected) <= TOL


@settings(max_examples=30, deadline=None)
@given(lp_cases(L=(2, 3)))
def test_float_instances(case):
    """The float64 copy of an instance gives the same optima and passes the rechecks."""
    inst, k = case
    flt = inst.to_float()
    for solver in (optimal_lossless, optimal_coupling):
        res = solver(*flt, k, inst.L)
        assert_checked(res)
        assert abs(res.value - solver(*inst, k, inst.L).value) <= TOL


def test_kernel_is_symmetric_and_complete():
    inst = random_instance(2, 2, 7, exact=True, zero_prob=0.3)
    res = optimal_lossless(*inst, 3, 2)
    drafts = [x for x in [(a, b) for a in range(2) for b in range(2)] if inst.draft.prob(x) > 0]
    assert len(res.kernel) == math.comb(len(drafts) + 2, 3)
    for key, law in res.kernel.items():
        assert abs(sum(law.values()) - 1) < 1e-12
        assert kernel_for(res, key[::-1]) == law


# ---------------------------------------------------------------- errors


def test_too_large_refused_before_building(monkeypatch):
    inst = random_instance(3, 3, 0, exact=True)

    def boom(*args: object) -> None:
        raise AssertionError("the LP was built")

    monkeypatch.setattr(lp_build, "build_opt", boom)
    monkeypatch.setattr(lp_build, "build_ot", boom)
    for solver, kind in ((optimal_lossless, "OPT"), (optimal_coupling, "OT")):
        with pytest.raises(LPTooLargeError) as info:
            solver(*inst, 3, 3, max_nonzeros=1000)
        msg = str(info.value)
        nvar, nrow, nnz = lp_size(*inst, 3, 3, kind.lower())
        for part in (kind, "n=3", "L=3", "K=3", f"{nvar} variables", f"{nrow} constraints"):
            assert part in msg
        assert f"{nnz} nonzeros" in msg and "max_nonzeros=1000" in msg
        assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("solver", [optimal_lossless, optimal_coupling])
def test_bad_arguments(solver):
    p, q = default_instance()
    with pytest.raises(ValueError, match="num_drafts"):
        solver(p, q, 0, 2)
    with pytest.raises(ValueError, match="draft_length"):
        solver(p, q, 1, 0)
    with pytest.raises(ValueError, match="kind"):
        lp_size(p, q, 1, 2, "both")


def test_opt_needs_target_at_depth_L():
    p, q = default_instance()
    shallow = p.truncate(1)
    with pytest.raises(ValueError, match="target"):
        optimal_lossless(shallow, q, 1, 2)
    assert abs(optimal_coupling(shallow, q, 1, 2).value - 13 / 8) < 1e-9  # OT lives on V^L


def test_kernel_for_errors():
    res = optimal_lossless(*default_instance(), 2, 2)
    with pytest.raises(ValueError, match="2 sequences of length 2"):
        kernel_for(res, [(0, 0)])
    with pytest.raises(ValueError, match="2 sequences of length 2"):
        kernel_for(res, [(0, 0), (0, 1, 1)])
    inst = random_instance(2, 2, 3, exact=True, zero_prob=0.5)
    zero = next(x for x in [(a, b) for a in range(2) for b in range(2)] if inst.draft.prob(x) == 0)
    with pytest.raises(ValueError, match="zero draft probability"):
        kernel_for(optimal_lossless(*inst, 1, 2), [zero])


def _fake_linprog(statuses: list[int]):
    """A linprog stand-in returning the given failure statuses, then the real solution."""
    real = lp_build.linprog
    calls: list[dict] = []

    def fake(*args: object, **kwargs: dict) -> OptimizeResult:
        calls.append(kwargs["options"])
        if len(calls) <= len(statuses):
            return OptimizeResult(status=statuses[len(calls) - 1], message=f"fake failure {len(calls)}")
        return real(*args, **kwargs)

    return fake, calls


def test_solver_failure_is_raised_with_status(monkeypatch):
    fake, calls = _fake_linprog([4, 4, 4, 4])
    monkeypatch.setattr(lp_build, "linprog", fake)
    with pytest.raises(LPSolveError) as info:
        optimal_lossless(*default_instance(), 1, 2)
    assert info.value.status == 4 and "fake failure 4" in info.value.message
    assert "fake failure 1" in info.value.message  # earlier attempts are reported too
    assert isinstance(info.value, RuntimeError) and len(calls) == 4


def test_limit_status_is_not_retried(monkeypatch):
    fake, calls = _fake_linprog([1])
    monkeypatch.setattr(lp_build, "linprog", fake)
    with pytest.raises(LPSolveError) as info:
        optimal_coupling(*default_instance(), 1, 2, time_limit=5.0)
    assert info.value.status == 1 and len(calls) == 1 and calls[0]["time_limit"] == 5.0


def test_presolve_infeasibility_is_retried_and_reported(monkeypatch):
    fake, calls = _fake_linprog([2])
    monkeypatch.setattr(lp_build, "linprog", fake)
    res = optimal_lossless(*default_instance(), 2, 2)
    assert abs(res.value - 71 / 36) < 1e-9 and res.status == 0
    assert "fake failure 1" in res.message and calls[1]["presolve"] is False


def test_tiny_probabilities():
    """Masses far below HiGHS's default tolerances (1e-7, 1e-9) are still honoured."""
    from spectr_gbv.core import TabularAR

    eps = Fraction(1, 10**8)
    p = TabularAR.context_free([1 - eps, eps], depth=2, name="target")
    q = TabularAR.context_free([1 - eps, eps], depth=2, name="draft")
    for solver in (optimal_lossless, optimal_coupling):
        res = solver(p, q, 2, 2)
        assert_checked(res)
        assert abs(res.value - 2) < 1e-12
    q2 = TabularAR.context_free([1, 0], depth=2, name="draft")
    res = optimal_coupling(p, q2, 2, 2)
    assert_checked(res)
    assert abs(res.value - float((1 - eps) + (1 - eps) ** 2)) < 1e-12


def test_underflowing_multiset_mass():
    """A multiset whose float64 mass underflows is left out of the LP and gets the fallback."""
    from spectr_gbv.core import TabularAR

    tiny = Fraction(1, 10**200)
    p = TabularAR.context_free(["1/2", "1/2"], depth=1, name="target")
    q = TabularAR.context_free([1 - tiny, tiny], depth=1, name="draft")
    expected = float(l1_optimum(p.cond(()), q.cond(()), 2)[0])
    for solver in (optimal_lossless, optimal_coupling):
        res = solver(p, q, 2, 1)
        assert_checked(res)
        assert abs(res.value - expected) < 1e-12
        assert set(res.kernel) == {((0,), (0,)), ((0,), (1,)), ((1,), (1,))}
        assert abs(sum(kernel_for(res, [(1,), (1,)]).values()) - 1) < 1e-12
