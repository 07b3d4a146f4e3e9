from fractions import Fraction as F

import pytest
from hypothesis import given, settings

from spectr_gbv.core.instance import Instance, default_instance
from spectr_gbv.core.tabular import TabularAR
from spectr_gbv.theory import bounds, properties
from tests.strategies import instances


def test_all_properties_hold_on_section_7():
    reports = properties.check_all(default_instance(), ks=(1, 2, 3))
    assert [r.name for r in reports] == ["monotonicity", "convergence", "k1_reduction", "orderings"]
    for rep in reports:
        assert rep.holds, rep.counterexample
        assert rep.counterexample is None and rep.checks
    mono = reports[0].checks[0]
    assert mono["values"] == {"K": 1, "difference": "25/108", "increment": "25/108"}


def test_strictness_fails_exactly_when_no_partial_ratio():
    # q == p: r == 1 everywhere, so B(K) is constant (= L) and not strictly increasing
    p = TabularAR.context_free(["1/3", "2/3"], 2)
    rep = properties.check_monotonicity(Instance(p, p, 2), ks=(1, 2))
    assert rep.holds
    assert all(not c["values"]["strict"] for c in rep.checks if "iff" in c["check"])


def test_convergence_without_cover_reports_limit_below_L():
    p = TabularAR.context_free(["1/2", "1/2"], 2)
    q = TabularAR.context_free(["1", "0"], 2)
    rep = properties.check_convergence(Instance(p, q, 2), ks=(1, 5))
    assert rep.holds
    assert rep.checks[0]["values"] == {"limit": "3/4", "L": 2, "covers": False}


def test_a_broken_identity_yields_a_counterexample(monkeypatch):
    monkeypatch.setattr(bounds, "cic_bound_increment", lambda *a: F(0))
    rep = properties.check_monotonicity(default_instance(), ks=(1,))
    assert not rep.holds
    assert rep.counterexample["check"] == "B(2) - B(1) == sum p r (1-r)^K"
    assert rep.counterexample["values"]["difference"] == "25/108"
    assert rep.counterexample["instance"].startswith("default: the public exact test vector")


@settings(max_examples=60, deadline=None)
@given(instances(max_cells=9))
def test_properties_hold_on_generated_instances(inst):
    reports = properties.check_all(inst, ks=(1, 2, 3))
    for rep in reports:
        assert rep.holds, rep.counterexample


@settings(max_examples=20, deadline=None)
@given(instances(exact=False, max_cells=9))
def test_properties_hold_on_float_instances(inst):
    for rep in properties.check_all(inst, ks=(1, 2), with_lp=False):
        assert rep.holds, rep.counterexample


def test_bad_ks():
    with pytest.raises(ValueError, match="ks"):
        properties.check_monotonicity(default_instance(), ks=(0,))
