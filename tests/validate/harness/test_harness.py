"""The conformance harness end to end: lossless verifiers pass, lossy and broken ones fail with
the right diagnosis, reports are complete.

Every run is seeded, so each outcome below is deterministic. Statistical runs use
``budget="quick"`` (power 0.99 against a total-variation error of 0.05 at the Bonferroni
level) or a single targeted instance; the defects detected are far larger (the released
rule's 6/25 on ``random_instance(2, 1, 0)``, K = 2).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from spectr_gbv.core import Instance, TabularAR, random_instance
from spectr_gbv.reference import get_verifier
from spectr_gbv.validate import CheckResult, ValidationReport, validate
from spectr_gbv.validate.report.results import CATEGORIES, DIAGNOSES

LOSSLESS = ("sd", "bv", "mdbv", "spectr", "rrs", "gbv_multipath")
WITNESS = [(random_instance(2, 1, 0), 2)]  # THEORY.md witness: the released rule's defect is 6/25


def _sd(draft_tokens, draft_probs, target_probs, rng, *, residual="ok", reuse=False):
    """Token-level SD on draft 0 with optional planted bugs (generic interface)."""
    with np.errstate(divide="ignore", invalid="ignore"):  # the probes feed zero rows
        return _sd_body(draft_tokens[0], draft_probs[0], target_probs[0], rng, residual, reuse)


def _sd_body(d, q, p, rng, residual, reuse):
    L, V = len(d), p.shape[-1]
    for j in range(L):
        x = int(d[j])
        u = rng.random()
        if not u < p[j, x] / q[j, x]:
            res = np.maximum(p[j] - q[j], 0.0)
            w = np.exp(res) / np.exp(res).sum() if residual == "softmax" else res / res.sum()
            v = u if reuse else rng.random()
            z = min(int(np.searchsorted(np.cumsum(w), v, side="right")), V - 1)
            return [int(t) for t in d[:j]] + [z]
    z = min(int(np.searchsorted(np.cumsum(p[L]), rng.random(), side="right")), V - 1)
    return [int(t) for t in d] + [z]


def softmax_residual(d, q, p, rng):
    return _sd(d, q, p, rng, residual="softmax")


def reused_uniform(d, q, p, rng):
    return _sd(d, q, p, rng, reuse=True)


@pytest.mark.parametrize("name", LOSSLESS)
def test_lossless_reference_verifiers_pass_at_the_exact_level(name):
    rep = validate(get_verifier(name).sample, level="exact", budget="quick")
    assert rep.passed, rep.to_text()
    assert rep.level_used == "exact"
    names = {c.name for c in rep.checks}
    assert {"exact_defect[dense]", "exact_defect[long_block]", "adversarial_search", "determinism"} <= names
    exact = [c for c in rep.checks if c.name.startswith("exact_defect")]
    # exactly 0 in rationals; the 33,000-token instance is checked in float64 at its stated tolerance
    assert all(c.statistic == 0.0 for c in exact if c.name != "exact_defect[wide_vocab]")
    (wide,) = [c for c in exact if c.name == "exact_defect[wide_vocab]"]
    assert "in float64 (tolerance 1e-09)" in wide.detail and wide.statistic < 1e-12


def test_lossless_verifier_passes_the_statistical_battery():
    rep = validate(get_verifier("mdbv").sample, budget="quick", seed=1)
    assert rep.passed, rep.to_text()
    stat = [c for c in rep.checks if c.category == "statistical"]
    assert len(stat) == 18 and all(c.power >= 0.99 for c in stat if c.name.startswith("end_to_end"))
    assert rep.settings["samples_per_instance"]["long_block"] == max(rep.settings["samples_per_instance"].values())
    eff = {c.name: c for c in rep.checks if c.category == "efficiency"}
    assert eff["efficiency[dense]"].passed and "OPT(2)" in eff["efficiency[dense]"].detail


def test_released_rule_fails_with_its_exact_defect():
    rep = validate(get_verifier("spectr_gbv_released").sample, level="exact", budget="quick", instances=WITNESS)
    assert not rep.passed
    ex = next(c for c in rep.checks if c.name == "exact_defect[user0]")
    assert ex.passed is False and ex.diagnosis == "not_lossless"
    assert ex.statistic == 0.24 and "6/25" in ex.detail and "in rationals" in ex.detail
    assert ex.instance["n"] == 2 and ex.instance["L"] == 1 and ex.instance["K"] == 2
    assert rep.smallest_failure.instance["n"] == 2


def test_released_rule_fails_the_statistical_level():
    rep = validate(get_verifier("spectr_gbv_released").sample, budget="quick", instances=WITNESS)
    e2e = next(c for c in rep.checks if c.name == "end_to_end_law[user0]")
    # quick plans its samples against a TV error of 0.1: the defect 6/25 still gives p < 1e-6
    assert e2e.passed is False and e2e.p_value < 1e-6 and e2e.diagnosis == "not_lossless"
    assert rep.smallest_failure.size_key == (2.0, 1.0, 2.0)


def _b9_instance(L: int) -> Instance:
    """ECOSYSTEM.md B9's row at every position: q = (0.6, 0.2, 0.2), p = (0.2, 0.4, 0.4)."""
    p = TabularAR.context_free(["1/5", "2/5", "2/5"], depth=L)
    q = TabularAR.context_free(["3/5", "1/5", "1/5"], depth=L - 1)
    return Instance(p, q, L, name="b9")


def test_wrong_residual_and_reused_uniform_are_told_apart():
    # rejection of token 0 with probability 2/3; residual (0, 1/2, 1/2); softmax gives token 0 mass
    # 0.29 (p = 0 there: also a zero-probability output), the reused coin gives token 1 mass 1/4
    rep = validate(softmax_residual, budget="quick", instances=[(_b9_instance(1), 1)])
    assert "zero_probability_token" in {c.diagnosis for c in rep.failures}
    rep = validate(reused_uniform, budget="quick", instances=[(_b9_instance(1), 1)])
    stat = [c for c in rep.failures if c.category == "statistical"]
    assert stat and {c.diagnosis for c in stat} == {"reuses_uniform"}
    rep = validate(reused_uniform, budget="quick", reference="sd", instances=[(_b9_instance(2), 1)])
    ref = next(c for c in rep.checks if c.category == "reference")
    # a difference from the reference is never a law verdict: the law checks say reuses_uniform
    assert ref.passed is False and ref.diagnosis == "differs_from_reference" and "uniform that rejected" in ref.detail


def test_wrong_residual_diagnosis():
    def bonus_from_q(d, q, p, rng):  # SD whose bonus token is drawn from the draft row: acceptance is right
        out = get_verifier("sd").sample(d, q, p, rng)
        if len(out) == d.shape[1] + 1:
            row = q[0, -1]
            out = out[:-1] + (min(int(np.searchsorted(np.cumsum(row), rng.random(), side="right")), len(row) - 1),)
        return list(out)

    rep = validate(bonus_from_q, budget="quick", instances=[(random_instance(3, 2, 1, exact=False), 1)])
    stat = [c for c in rep.failures if c.category == "statistical"]
    assert stat and {c.diagnosis for c in stat} == {"wrong_residual"}
    assert "matches 'sd'" in stat[0].detail


def test_a_raising_verifier_yields_a_failed_runs_check():
    def raising(*args):
        raise RuntimeError("kaboom")

    rep = validate(raising, budget="quick")
    assert not rep.passed
    assert [(c.name, c.diagnosis) for c in rep.failures] == [("runs", "raises")]
    assert "RuntimeError: kaboom" in rep.failures[0].detail


def test_a_hanging_verifier_times_out_and_is_not_called_again():
    import time

    calls = []

    def hanging(d, q, p, rng):
        calls.append(1)
        if len(calls) > 3:
            time.sleep(3)
        return get_verifier("sd").sample(d, q, p, rng)

    t0 = time.monotonic()
    rep = validate(hanging, budget="quick", time_limit_s=0.2, isolation="thread")
    assert time.monotonic() - t0 < 2.5
    assert [(c.name, c.diagnosis) for c in rep.failures] == [("runs", "timeout")]
    assert "per-call limit of 0.2 s" in rep.failures[0].detail
    assert len(calls) == 4


def test_garbage_outputs_fail_structurally():
    rep = validate(lambda d, q, p, rng: [float("nan")], budget="quick")
    assert rep.failures and {c.diagnosis for c in rep.failures} == {"nan_or_out_of_vocab"}
    ids = next(c for c in rep.checks if c.name == "ids_in_range")
    assert ids.passed is False and ids.statistic == ids.sample_size > 0
    rep = validate(lambda d, q, p, rng: "oops", budget="quick")
    assert next(c for c in rep.checks if c.name == "output_format").diagnosis == "bad_output"
    rep = validate(lambda d, q, p, rng: [int(d[0, 0]) ^ 1, 0, 0, 0, 0, 0, 0, 0], budget="quick")
    assert next(c for c in rep.checks if c.name == "output_format").passed is False


def test_nondeterminism_and_placeholders_are_flagged():
    def unseeded(d, q, p, rng):
        return get_verifier("sd").sample(d, q, p, np.random.default_rng())

    rep = validate(unseeded, budget="quick", instances=WITNESS)
    det = next(c for c in rep.checks if c.name == "determinism")
    assert det.passed is False and det.diagnosis == "not_deterministic"

    def no_guard(d, q, p, rng):  # SD without a check on negative ids (ECOSYSTEM.md B7/B8)
        for j in range(d.shape[1]):
            x = d[0, j]
            with np.errstate(divide="ignore", invalid="ignore"):
                if not rng.random() < p[0, j, x] / q[0, j, x]:
                    return [int(t) for t in d[0, :j]] + [int(np.argmax(p[0, j]))]
        return [int(t) for t in d[0]] + [0]

    rep = validate(no_guard, budget="quick", instances=WITNESS)
    ph = [c for c in rep.checks if c.name.startswith("placeholder_ids")]
    assert any(c.passed is False and c.diagnosis == "accepts_placeholder" for c in ph)


def test_zero_coin_probe():
    def le(d, q, p, rng):  # accept iff u <= p/q: a coin of exactly 0 accepts p(x) = 0 (B10)
        x = int(d[0, 0])
        if rng.random() <= p[0, 0, x] / q[0, 0, x]:
            return [x, 1]
        return [1]

    rep = validate(le, budget="quick", instances=WITNESS)
    zc = next(c for c in rep.checks if c.name == "zero_coin")
    assert zc.passed is False and zc.diagnosis == "zero_probability_token"
    ok = validate(get_verifier("sd").sample, budget="quick", instances=WITNESS)
    assert next(c for c in ok.checks if c.name == "zero_coin").passed is True


def test_report_text_json_and_smallest_failure():
    rep = validate(get_verifier("spectr_gbv_released").sample, level="exact", budget="quick", instances=WITNESS)
    data = json.loads(rep.to_json())
    assert data["passed"] is False and data["num_failed"] == len(rep.failures)
    assert data["smallest_failure"]["name"] == rep.smallest_failure.name
    assert data["checks"][0]["category"] == "structural"
    text = rep.to_text()
    assert text.startswith("Validation of spectr_gbv.reference.spectr_gbv_released:ReleasedSpecTrGBVVerifier.sample")
    assert "FAILED" in text.splitlines()[0] and "Smallest failing case" in text and "Settings:" in text
    assert rep.to_dict()["settings"]["verifier_calls"] > 0


def test_check_result_and_report_rules():
    with pytest.raises(ValueError, match="category"):
        CheckResult("x", "nope", True)
    with pytest.raises(ValueError, match="diagnosis"):
        CheckResult("x", "exact", False, diagnosis="weird")
    with pytest.raises(ValueError, match="needs a diagnosis"):
        CheckResult("x", "exact", False)
    a = CheckResult("a", "statistical", False, instance={"n": 3, "L": 1, "K": 2}, diagnosis="not_lossless")
    b = CheckResult("b", "exact", False, instance={"n": 2, "L": 2, "K": 1}, diagnosis="not_lossless")
    c = CheckResult("c", "exact", None, statistic=math.inf)
    rep = ValidationReport("v", "generic", "exact", "exact", None, 0, "quick", [a, b, c])
    assert rep.smallest_failure is b and not rep.passed and rep.failures == [a, b]
    # fewest draft tuples first: (3, 1, 2) has 9, (2, 5, 2) has 1,024
    long = CheckResult("long", "exact", False, instance={"n": 2, "L": 5, "K": 2}, diagnosis="not_lossless")
    assert (long.draft_tuples, a.draft_tuples, c.draft_tuples) == (1024, 9, math.inf)
    assert ValidationReport("v", "generic", "exact", "exact", None, 0, "quick", [long, a]).smallest_failure is a
    assert json.loads(rep.to_json())["checks"][2]["statistic"] == "inf"
    assert ValidationReport("v", "generic", "exact", "exact", None, 0, "quick", [c]).passed
    assert len(CATEGORIES) == 7 and DIAGNOSES[-1] == "ok"


def test_bad_arguments_name_the_argument():
    sample = get_verifier("sd").sample
    for kwargs, msg in (
        ({"interface": "tree"}, "unknown interface"),
        ({"level": "fuzzy"}, "level"),
        ({"budget": "huge"}, "budget"),
        ({"seed": -1}, "seed"),
        ({"reference": "nope"}, "unknown method 'nope'"),
        ({"time_limit_s": 0}, "time_limit_s"),
        ({"instances": []}, "instances"),
        ({"instances": [3]}, r"instances\[0\]"),
        ({"instances": [(random_instance(2, 1, 0), 2)], "interface": "chain"}, "K = 2"),
    ):
        with pytest.raises(ValueError, match=msg):
            validate(sample, **kwargs)
    with pytest.raises(ValueError, match="verify"):
        validate(42)


def test_g_test_pooling_and_impossible_cells():
    from scipy import stats

    from spectr_gbv.validate.checks.statistical import combine, g_test

    obs, prob = np.array([30, 50, 20]), np.array([0.3, 0.5, 0.2])
    ref = stats.power_divergence(obs, prob * 100, lambda_="log-likelihood")
    t = g_test(obs, prob)
    assert (t.g, t.p_value, t.df) == (pytest.approx(ref[0]), pytest.approx(ref[1]), 2) and t.g == 0.0
    # a 1e-4 cell (expected 0.01) observed once is merged, not allowed to dominate G
    t = g_test(np.array([50, 49, 1]), np.array([0.5, 0.4999, 1e-4]))
    assert t.cells == 2 and t.g == 0.0
    t = g_test(np.array([5, 0, 1]), np.array([0.5, 0.5, 0.0]))  # an output of probability 0
    assert t.g == math.inf and t.p_value == 0.0
    both = combine([g_test(np.array([10, 30]), np.array([0.5, 0.5])), g_test(obs, prob)])
    assert both.df == 3 and both.p_value == pytest.approx(stats.chi2.sf(both.g, 3))


def test_verifier_warnings_are_counted_in_a_note_not_printed():
    import warnings

    from spectr_gbv.testing.mutants import correct_sd

    def noisy(drafts, draft_probs, target_probs, rng):
        warnings.warn("noisy verifier", RuntimeWarning, stacklevel=1)
        return correct_sd(drafts, draft_probs, target_probs, rng)

    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")
        rep = validate(noisy, budget="quick", instances=[(random_instance(2, 1, 0), 1)])
    assert escaped == []
    note = next(n for n in rep.notes if "Python warnings" in n)
    calls = rep.settings["verifier_calls"]
    assert note.startswith(f"{calls} Python warnings were issued") and "RuntimeWarning: noisy verifier (x" in note


def test_calls_are_counted_when_the_verifier_raises():
    made = []

    def raises(drafts, draft_probs, target_probs, rng):
        made.append(type(drafts).__module__)
        raise ValueError("nope")

    rep = validate(raises, budget="quick", isolation="thread")
    assert not rep.passed and rep.failures[0].diagnosis == "raises"
    assert made and rep.settings["verifier_calls"] == len(made)  # every call made, retries included


def test_probes_and_search_can_be_skipped_to_test_only_the_given_instances():
    from spectr_gbv.testing.mutants import MUTANTS, correct_sd

    case = [(random_instance(2, 1, 0), 1)]
    rep = validate(MUTANTS["zero_residual_oov"], budget="quick", instances=case, probes=False, search=False)
    names = {c.name for c in rep.checks}
    assert not names & {"degenerate_residual", "zero_coin", "nan_target_row", "adversarial_search"}
    assert "placeholder_ids[zero_rows]" not in names and "end_to_end_law[user0]" in names
    assert rep.settings["family_size"] == 3 and any("probes skipped" in n for n in rep.notes)
    assert any("adversarial search skipped" in n for n in rep.notes)
    full = validate(MUTANTS["zero_residual_oov"], budget="quick", instances=case)
    assert not full.passed and "degenerate_residual" in {c.name for c in full.failures}
    # exact level, everything exact, nothing statistical left: a family of 1, no division by zero
    exact = validate(get_verifier("mdbv"), level="exact", budget="quick", instances=case, probes=False, search=False)
    assert exact.passed and exact.settings["family_size"] == 1
    assert validate(correct_sd, budget="quick", instances=case, probes=False, search=False).passed


def test_k_out_of_range_for_a_single_draft_interface_is_named():
    from spectr_gbv.testing.mutants import correct_sd_chain

    with pytest.raises(ValueError, match=r"instances\[0\]: K = 2 must be 1..1 for this interface"):
        validate(correct_sd_chain, interface="chain", instances=[(random_instance(2, 1, 0), 2)])
    with pytest.raises(ValueError, match=r"instances\[0\]: K = 0 must be >= 1 for this interface"):
        validate(get_verifier("mdbv").sample, instances=[(random_instance(2, 1, 0), 0)])
