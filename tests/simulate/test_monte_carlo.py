import math

import pytest

from spectr_gbv.core.instance import default_instance
from spectr_gbv.simulate.exact import simulate_exact
from spectr_gbv.simulate.monte_carlo import g_test_power, monte_carlo

# Sample size: 6,000 iterations. The G-test of the first 3 tokens (7 df after pooling at most)
# at alpha = 1e-3 detects the released rule's defect on this instance (TV 0.059 at K=2) with
# power > 0.99 (worst direction: ncx2(df, 4 N d^2) = ncx2(7, 83.6)); the lossless MDBV is
# rejected with probability alpha = 1e-3 only, and the seed is fixed.


def test_lossless_method_passes_and_estimate_covers_exact_value():
    inst = default_instance()
    res = monte_carlo(inst, "mdbv", 2, 6000, seed=3)
    exact = float(simulate_exact(inst, "mdbv", 2).expected_accepted)
    assert res.ci_low <= exact <= res.ci_high
    assert not res.lossless_rejected and res.p_value > 1e-3
    assert res.tested_length == 3 and res.df <= 7


def test_released_rule_is_rejected_at_the_same_sample_size():
    assert g_test_power(6000, 7, 1e-3, tv=0.059) > 0.99
    res = monte_carlo(default_instance(), "spectr_gbv_released", 2, 6000, seed=3)
    assert res.lossless_rejected and res.p_value < 1e-6


def test_power_formula():
    # 4 N d^2 = 40 at N = 100000, d = 0.01
    # checked against 400,000 simulated ncx2(7, 40) draws: 0.9733
    assert g_test_power(100_000, 7, 1e-3) == pytest.approx(0.9733, abs=2e-3)
    assert g_test_power(1000, 7, 1e-3) < 0.01
    assert math.isclose(g_test_power(1, 1, 0.5, tv=0.0), 0.5)


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_iterations"):
        monte_carlo(default_instance(), "bv", 1, 10)
    with pytest.raises(ValueError, match="unknown method"):
        monte_carlo(default_instance(), "nope", 1, 1000)


@pytest.mark.parametrize("method", ["greedy_bv", "lp_oracle"])
def test_stateful_and_oracle_methods_sample_and_pass(method):
    from spectr_gbv.simulate.methods import simulate_method

    inst = default_instance()
    res = monte_carlo(inst, method, 2, 4000, seed=5)
    exact = float(simulate_method(inst, method, 2).expected_accepted)
    assert res.ci_low <= exact <= res.ci_high
    assert not res.lossless_rejected


def test_iterations_for_power_inverts_the_power():
    from spectr_gbv.simulate.monte_carlo import iterations_for_power

    n = iterations_for_power(7, 1e-3)
    assert g_test_power(n, 7, 1e-3) >= 0.99 > g_test_power(n - 1, 7, 1e-3)
