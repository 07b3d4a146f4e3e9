"""The robustness probes' former blind spots, each as a planted mutant: right diagnosis, right severity.

``litgpt_like`` passed the quick and standard runs (its rejecting coin is the smallest, and its
first coin comes after discarded draws); ``bf16_coin`` blinded the all-zero-residual probe
(the forced float32 coin rounds to 1 in bfloat16) and its report named the float32 value;
``float64_zero_coin`` failed exactly like a bfloat16 coin although it is 2**45 times rarer;
``sample_and_match`` has no coin but got "coin confirmed"; ``target_only_tree`` (SGLang's
degenerate case) was never reached.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from spectr_gbv.core import random_instance
from spectr_gbv.testing.mutants import CORRECT
from spectr_gbv.testing.mutants import robustness_bugs as R
from spectr_gbv.validate import validate
from spectr_gbv.validate.coins import numpy_coin_generator
from spectr_gbv.validate.interfaces.registry import make_adapter
from spectr_gbv.validate.isolation.guard import CallGuard
from spectr_gbv.validate.probes import coin_probes as cp
from spectr_gbv.validate.probes import free_probes as fp
from spectr_gbv.validate.report.results import CheckResult, by_severity

torch = pytest.importorskip("torch")


def _adapter(fn):
    return make_adapter(fn, fn.interface, CallGuard(10))


def _free(fn, K=1):
    return {r.name: r for r in fp.check_degenerate_rows(_adapter(fn), K, 0)}


# ----------------------------------------------------------------------------- the mutants themselves
def test_mutants_behave_as_their_public_code():
    q = torch.tensor([[[2.0**-34, 2.0**-24, 1 - 2.0**-24 - 2.0**-34]]], dtype=torch.float64)
    p = torch.tensor([[[0.0, 2.0**-24, 1 - 2.0**-24 - 2.0**-34 - 2.0**-31]] * 2], dtype=torch.float64)
    d = torch.tensor([[0]])
    with pytest.raises(RuntimeError, match="probability tensor contains"):
        R.litgpt_like(d, q, p, torch.Generator().manual_seed(0))  # p(0) = 0 < q(0): always rejected
    assert R.float64_zero_coin(d, q, p, torch.Generator().manual_seed(0)) == [0]  # argmax over zeros
    assert R.bf16_coin(d, q, p, torch.Generator().manual_seed(0)) == [0]  # 0/0, NaN wins the argmax
    # target-only tree: drafts covering p's support, a coin above p(0) = 1 - 2**-31: falls to id V - 1
    rng = np.random.Generator(np.random.PCG64(0))
    cover = np.array([[[1 - 2.0**-31, 0.0, 0.0]] * 2])
    assert R.target_only_tree(np.array([[0]]), cover[:, :1], cover, numpy_coin_generator("max", 0)) == [2]
    assert R.target_only_tree(np.array([[0]]), cover[:, :1], cover, rng) == [0, 0]
    assert R.sample_and_match(np.array([[1]]), None, np.array([[[0.0, 0.0, 1.0]] * 2]), rng) == [2]
    assert {fn.bug for fn in R.ROBUSTNESS_MUTANTS.values()} == {"raises", "zero_probability_token", "ok"}


# ----------------------------------------------------------------------------- the wrong PASS
def test_litgpt_like_fails_the_forcing_free_probe_every_call():
    res = _free(R.litgpt_like)
    zt = res["zero_target_draft"]
    assert zt.passed is False and zt.diagnosis == "raises"
    assert "failed in 20/20 calls with ordinary randomness (raises in 20/20)" in zt.detail
    assert "RuntimeError: probability tensor contains" in zt.detail
    assert zt.severity == 1.0
    assert zt.severity_note == "every call: 20/20 calls failed (95% Clopper-Pearson interval 0.832..1)"
    ni = res["near_identical_rows"]
    assert ni.passed is False and ni.diagnosis == "raises" and 0.2 <= ni.severity <= 0.8


def test_litgpt_like_forced_coin_is_the_smallest_one_after_discarded_draws():
    res = cp.check_degenerate_residual(_adapter(R.litgpt_like), 1, 0)
    assert res.passed is False and res.diagnosis == "raises" and "crashes on an all-zero residual" in res.detail
    coin = res.instance["coin"]
    # V = 3 uniforms discarded for each of the L + 1 = 2 target rows: the coin is draw 6, and it rejects at 0
    assert (coin["which"], coin["index"], coin["count"], coin["dtype"], coin["dtype_confirmed"]) == (
        "zero",
        6,
        1,
        "float32",
        True,
    )
    assert res.severity == 2.0**-24 and res.severity_note.startswith("about 1 call in 2^24")
    zc = cp.check_zero_coin(_adapter(R.litgpt_like), 1, 0)  # its rule accepts nothing at a coin of 0
    assert zc.passed is None and zc.detail.startswith("inconclusive")


# ----------------------------------------------------------------------------- precision and severity
def test_bf16_coin_reports_the_bfloat16_value_it_saw():
    deg = cp.check_degenerate_residual(_adapter(R.bf16_coin), 1, 0)
    assert deg.passed is False and deg.diagnosis == "zero_probability_token"
    coin = deg.instance["coin"]
    seen = (coin["which"], coin["value"], coin["dtype"], coin["dtype_confirmed"])
    assert seen == ("high", 1 - 2.0**-8, "bfloat16", True)
    assert "torch.rand bfloat16 uniform = 0.99609375" in deg.detail and "0.99999994" not in deg.detail
    assert round(math.log2(deg.severity)) == -8 and "about 1 call in 2^8" in deg.severity_note
    zc = cp.check_zero_coin(_adapter(R.bf16_coin), 1, 0)
    assert zc.passed is False and zc.diagnosis == "zero_probability_token"
    assert zc.instance["coin"]["dtype"] == "bfloat16" and round(math.log2(zc.severity)) == -9


def test_float64_zero_coin_is_2_to_the_53_rare_and_ranked_below_the_common_failure():
    zc = cp.check_zero_coin(_adapter(R.float64_zero_coin), 2, 0)
    assert zc.passed is False and zc.diagnosis == "zero_probability_token"
    coin = zc.instance["coin"]
    assert (coin["index"], coin["count"], coin["dtype"], coin["value"]) == (0, 2, "float64", 0.0)
    assert zc.severity == 2.0**-53 and zc.severity_note.startswith("about 1 call in 2^53")
    assert "float64 draw 0 of torch's CPU generator forced" in zc.detail
    zt = _free(R.float64_zero_coin)["zero_target_draft"]
    assert zt.diagnosis == "zero_probability_token" and zt.severity == 1.0 and "20/20" in zt.detail
    ranked = by_severity([zc, CheckResult("end_to_end_law", "statistical", True), zt])
    assert [c.name for c in ranked] == ["zero_target_draft", "end_to_end_law", "zero_coin"]
    assert zc.to_dict()["severity"] == 2.0**-53


# ----------------------------------------------------------------------------- no coin, and SGLang's case
def test_sample_and_match_is_inconclusive_never_confirmed():
    ad = _adapter(R.sample_and_match)
    for check in (cp.check_zero_coin, cp.check_degenerate_residual, cp.check_covering_drafts):
        res = check(ad, 1, 0)
        assert res.passed is None and res.detail.startswith("inconclusive") and "confirmed" not in res.detail
    deg = cp.check_degenerate_residual(ad, 1, 0)
    assert "came out the same under ordinary coins" in deg.detail and deg.sample_size == 4
    assert all(r.passed for r in _free(R.sample_and_match).values())


def test_target_only_tree_fails_covering_drafts_only():
    ad = _adapter(R.target_only_tree)
    for K in (1, 2):
        res = cp.check_covering_drafts(ad, K, 0)
        assert res.passed is False and res.diagnosis == "zero_probability_token"
        assert "emitted [2]: token 2 at position 0 has target probability 0" in res.detail
        assert res.instance["coin"]["which"] == "max" and res.severity == 2.0**-53
    assert cp.check_degenerate_residual(ad, 2, 0).passed is None  # p(x) tiny: the old probe cannot reach it


@pytest.mark.parametrize("method", sorted(CORRECT))
def test_correct_verifiers_pass_the_new_probes(method):
    ad = make_adapter(CORRECT[method], "generic", CallGuard(10))
    for K in (1, 2):
        res = cp.check_covering_drafts(ad, K, 0)
        assert res.passed is True and "coin confirmed" in res.detail and res.severity is None
        for r in fp.check_degenerate_rows(ad, K, 0):
            assert r.passed is True and "all 20 calls with ordinary randomness emitted a valid token" in r.detail


def test_validate_runs_the_new_probes_and_fails_on_them():
    rep = validate(R.target_only_tree, budget="quick", instances=[(random_instance(2, 1, 0), 1)], search=False)
    names = [c.name for c in rep.checks]
    i = names.index("degenerate_residual")
    assert names[i + 1 : i + 4] == ["covering_drafts", "zero_target_draft", "near_identical_rows"]
    assert not rep.passed and [c.name for c in rep.failures] == ["covering_drafts"]
    assert "[severity: about 1 call in 2^53" in rep.to_text()
