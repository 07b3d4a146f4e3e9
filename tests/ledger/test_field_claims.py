"""The field ledger: verdicts computed live, with exact values, witnesses and reproduce commands."""

from __future__ import annotations

import json
from fractions import Fraction as F

import pytest

from spectr_gbv.core.instance import default_instance, random_instance
from spectr_gbv.ledger import field_claims
from spectr_gbv.ledger.claims import FAILS, HOLDS
from spectr_gbv.simulate.exact import ExactResult


@pytest.fixture(scope="module")
def ledger():
    return {c.key: c for c in field_claims.field_ledger(default_instance(), (1, 2, 3))}


def test_keys_in_order(ledger):
    assert list(ledger) == [
        "bv_optimal",
        "hsd_beats_bv",
        "traversal",
        "kseq_approximation",
        "optimal_multidraft",
        "gbv_multipath",
        "single_path",
        "never_below",
    ]
    json.dumps([c.to_json() for c in ledger.values()])  # JSON-ready


def test_bv_optimal_holds(ledger):
    c = ledger["bv_optimal"]
    assert c.verdict == HOLDS
    assert c.values["BV"] == "113/72" and abs(c.values["opt1"] - 113 / 72) < 1e-8
    assert c.values["battery_instances"] == 80


def test_hsd_paper_rule_equals_bv_and_released_code_is_lossy(ledger):
    c = ledger["hsd_beats_bv"]
    assert c.verdict == FAILS
    assert c.values["hsd"] == {"expected_accepted": "113/72", "defect": "0"}
    assert c.values["hsd_released"] == {"expected_accepted": "13/8", "defect": "1/18"}
    assert c.values["paper_rule_beats_bv_somewhere"] is False
    assert any("gains by being lossy" in e for e in c.evidence)


def test_kseq_bound_is_not_refuted(ledger):
    c = ledger["kseq_approximation"]
    assert c.verdict == HOLDS
    assert field_claims.KSEQ_RATIO < c.values["worst_ratio"] < 1
    assert c.values["pairs"] == 3 * len(field_claims.L1_BATTERY_KS) * field_claims.FIELD_SEARCH_LIMIT
    assert any(e.startswith("reproduce: spectr-gbv report --random") for e in c.evidence)


def test_optimal_multidraft_attains_opt_at_l1(ledger):
    c = ledger["optimal_multidraft"]
    assert c.verdict == HOLDS
    assert c.values["l1_misses"] == 0
    assert c.values["l1_pairs"] == 3 * len(field_claims.L1_BATTERY_KS) * field_claims.FIELD_SEARCH_LIMIT
    rows = c.values["instance"]
    assert rows["2"]["expected_accepted"] == "415/216" and abs(rows["2"]["opt"] - 71 / 36) < 1e-8
    assert rows["3"]["expected_accepted"] == "3755/1944" and abs(rows["3"]["opt"] - 2) < 1e-8


def test_gbv_multipath_not_monotone(ledger):
    c = ledger["gbv_multipath"]
    assert c.verdict == FAILS
    assert c.values == {"1": "113/72", "2": "67/36", "3": "14/9", "4": "110/81"}


def test_verdicts_follow_the_code(monkeypatch):
    """A gbv_multipath that were monotone (values patched) turns the verdict to holds on that instance."""
    real = field_claims.simulate_method

    def patched(inst, method, k):
        r = real(inst, method, k)
        if method == "gbv_multipath":
            return ExactResult(**{**r.__dict__, "expected_accepted": F(k)})
        return r

    monkeypatch.setattr(field_claims, "simulate_method", patched)
    c = field_claims.claim_gbv_multipath(random_instance(2, 2, 0))
    assert c.verdict == HOLDS and c.values == {"1": "1", "2": "2", "3": "3", "4": "4"}


def test_traversal_claim_has_exact_evidence(ledger):
    c = ledger["traversal"]
    assert c.verdict in (HOLDS, FAILS)
    assert c.values["opt1"] == "113/72"


def test_report_shows_progress_on_a_terminal(monkeypatch):
    """The report (several seconds with the field ledger) draws a bar on stderr when it is a terminal."""
    import io

    from spectr_gbv.core.progress import QUIET_ENV, set_quiet
    from spectr_gbv.ledger.report import build_report

    class FakeTTY(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = FakeTTY()
    monkeypatch.delenv(QUIET_ENV, raising=False)
    monkeypatch.setattr("sys.stderr", stream)
    previous = set_quiet(False)
    try:
        rep = build_report(default_instance(), (1, 2), methods=("sd", "mdbv"), horizon=0, ledger="spectr_gbv")
    finally:
        set_quiet(previous)
    assert rep.field_claims == [] and len(rep.claims) == 6
    shown = stream.getvalue()
    assert "report:" in shown and "/7 [" in shown and "claims le" in shown


def test_single_path_holds(ledger):
    c = ledger["single_path"]
    assert c.verdict == HOLDS
    rows = c.values["instance"]
    assert set(rows) == {"1", "2", "3"}
    for k, opt in (("1", 113 / 72), ("2", 71 / 36), ("3", 2.0)):
        assert abs(rows[k]["opt"] - opt) <= 1e-8 and abs(rows[k]["single_path"] - opt) <= 1e-8
    assert (rows["1"]["near_opt_bv"], rows["2"]["near_opt_bv"], rows["3"]["near_opt_bv"]) == ("113/72", "881/448", "2")
    assert c.values["battery_instances"] == 20
    assert any("equal within 1e-08 on all 20 seeded sparse instances" in e for e in c.evidence)


def test_never_below_fails_exactly(ledger):
    c = ledger["never_below"]
    assert c.verdict == FAILS
    rows = c.values
    assert rows["2"] == {
        "A": {"best": "gbv_multipath", "value": "335/324", "near_opt_bv": "55/54"},
        "B": {"best": "optimal_multidraft", "value": "215/324", "near_opt_bv": "35/54"},
        "bound": "5/3",
    }
    assert (rows["3"]["bound"], rows["4"]["bound"]) == ("19/9", "65/27")
    for k in ("2", "3", "4"):
        assert F(rows[k]["A"]["value"]) + F(rows[k]["B"]["value"]) > F(rows[k]["bound"])
    assert c.witness is not None and any("E_A + E_B <= 5/3" in e for e in c.evidence)
