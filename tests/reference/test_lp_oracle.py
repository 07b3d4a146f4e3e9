from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given, settings

from spectr_gbv.core.instance import default_instance
from spectr_gbv.reference.lp_oracle import LPOracleVerifier
from spectr_gbv.simulate.methods import simulate_method
from spectr_gbv.theory.bounds import bv_expected_accepted
from tests.strategies import instances


@pytest.mark.parametrize("K, value", [(1, F(113, 72)), (2, F(71, 36)), (3, F(2))])
def test_lp_oracle_reaches_opt_exactly_on_section_7(K, value):
    res = simulate_method(default_instance(), "lp_oracle", K)
    assert res.expected_accepted == value
    assert res.validity_defect == 0 and res.lossless


@settings(max_examples=15, deadline=None)
@given(instances(max_cells=9))
def test_lp_oracle_is_lossless_up_to_lp_rounding_and_equals_bv_at_k1(inst):
    res = simulate_method(inst, "lp_oracle", 1)
    # snapped kernel: the exact defect is what remains of HiGHS' float rounding
    assert float(res.validity_defect) < 1e-9
    assert abs(float(res.expected_accepted - bv_expected_accepted(inst.target, inst.draft, inst.L))) < 1e-8


def test_lp_oracle_rejects_other_shapes():
    v = LPOracleVerifier(default_instance(), 2)
    inst = default_instance()
    drafts = np.array([[0, 1]])
    dp = np.array([[inst.draft.cond(()), inst.draft.cond((0,))]], dtype=object)
    tp = np.array([[inst.target.cond(()), inst.target.cond((0,)), inst.target.cond((0, 1))]], dtype=object)
    with pytest.raises(ValueError, match="solved for K=2"):
        v.outcome_law(drafts, dp, tp)


def test_lp_rounding_defect_is_stated_and_judged_at_the_kernel_tolerance(capsys):
    """A fresh user's instance (n = 3, L = 2): at K = 3 the snapped LP kernel keeps an exact
    defect of 1/20485704000000. It is LP rounding, shown as such, never as a lossy verifier."""
    from pathlib import Path

    from spectr_gbv.cli.main import main
    from spectr_gbv.core.instance import load_instance
    from spectr_gbv.reference.lp_oracle import LP_KERNEL_TOLERANCE

    path = Path(__file__).resolve().parents[1] / "data" / "lp_rounding_instance.json"
    inst = load_instance(path)
    res = simulate_method(inst, "lp_oracle", 3)
    assert res.validity_defect == F(1, 20485704000000)
    assert res.tolerance == LP_KERNEL_TOLERANCE == 1e-9 and res.lossless and res.within_kernel_tolerance
    assert res.lossless_label == "yes (<= 1e-09)"
    exact = simulate_method(inst, "gbv_multipath", 3)  # exact kernels keep the exact criterion
    assert exact.tolerance is None and exact.validity_defect == 0 and exact.lossless_label == "yes"
    assert abs(float(res.expected_accepted - exact.expected_accepted)) < 1e-12  # both reach OPT(3) here
    assert main(["simulate", "--instance", str(path), "--methods", "lp_oracle", "--K", "3"]) == 0
    assert "~4.881e-14  yes (<= 1e-09)" in capsys.readouterr().out
