"""Reference verifiers against the LP optima: no stateless lossless verifier beats OPT(K),
no verifier of any kind (stateful included) beats OT(K), and the LP oracle attains OPT(K)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from spectr_gbv.simulate.methods import simulate_method
from spectr_gbv.theory.lp import optimal_coupling, optimal_lossless
from tests.simulate.sim_helpers import LOSSLESS
from tests.strategies import instances

LP_TOL = 1e-8


@st.composite
def cases(draw: st.DrawFn):
    inst = draw(instances(n=(2, 3), L=(1, 2), exact=True))
    K = draw(st.integers(1, 3).filter(lambda k: inst.n ** (inst.L * k) <= 729))
    return inst, K


@settings(max_examples=40, deadline=None)
@given(cases())
def test_no_lossless_verifier_beats_opt_and_the_oracle_attains_it(case):
    inst, K = case
    p, q, L = inst.target, inst.draft, inst.L
    opt = optimal_lossless(p, q, K, L).value
    ot = optimal_coupling(p, q, K, L).value
    for m in LOSSLESS:
        assert float(simulate_method(inst, m, K).expected_accepted) <= opt + LP_TOL, m
    oracle = simulate_method(inst, "lp_oracle", K)
    assert abs(float(oracle.expected_accepted) - opt) <= LP_TOL
    assert float(oracle.validity_defect) <= 1e-9
    greedy = simulate_method(inst, "greedy_bv", K)
    assert float(greedy.expected_accepted) <= optimal_coupling(p, q, 1, L).value + LP_TOL
    assert opt <= ot + LP_TOL
