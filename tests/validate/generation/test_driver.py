"""validate_generation: correct loops pass, wrong ones fail the right check, failures map to their category."""

from __future__ import annotations

import json

import pytest

from spectr_gbv.validate.generation import validate_generation
from tests.validate.generation import loops_for_tests as loops

QUICK = {"budget": "quick", "quiet": True}


def test_a_correct_loop_passes_with_its_power_stated():
    rep = validate_generation(loops.ancestral, pairs=["far"], **QUICK)
    assert rep.passed and rep.exit_code == 0 and rep.interface == "generation"
    names = [c.name for c in rep.checks]
    assert "sequence_law[far,p1,T=0.7,top_k=3,m=2]" in names and "positional_law[far,p1,T=0.7,top_k=3,m=2]" in names
    assert "draft_invariance[far]" in names and "runs" in names and "determinism" in names
    text = rep.to_text()
    assert "against a TV error of 0.2" in text
    assert "sizes covered: pairs far; V 8-8; m 2-2; settings T=0.7 top_k=3" in text
    data = json.loads(rep.to_json())
    assert data["passed"] is True and data["settings"]["tv_detected"] == 0.2
    assert data["settings"]["family_size"] == 4 and data["settings"]["verifier_calls"] == rep.settings["verifier_calls"]


def test_a_loop_ignoring_temperature_fails_the_law():
    rep = validate_generation(loops.wrong_temperature, pairs=["far"], **QUICK)
    assert not rep.passed and rep.exit_code == 1
    failed = {c.name: c for c in rep.failures}
    seq = failed["sequence_law[far,p1,T=0.7,top_k=3,m=2]"]
    assert seq.diagnosis in ("not_lossless", "zero_probability_token")
    assert "far,p1,T=0.7,top_k=3,m=2" in seq.detail


def test_a_draft_dependent_law_fails_draft_invariance():
    rep = validate_generation(loops.draft_only, pairs=["far"], **QUICK)
    inv = next(c for c in rep.checks if c.name == "draft_invariance[far]")
    assert inv.passed is False and inv.diagnosis in ("not_lossless", "zero_probability_token")


def test_an_unseeded_loop_gets_an_advisory_note_only():
    rep = validate_generation(loops.unseeded, pairs=["far"], **QUICK)
    det = next(c for c in rep.checks if c.name == "determinism")
    assert det.advisory and det.passed is False and det.diagnosis == "not_deterministic"
    assert rep.passed


@pytest.mark.parametrize(
    "loop, diagnosis, words",
    [
        (loops.raises, "raises", "RuntimeError: cache exploded at loops_for_tests.py"),
        (loops.hangs, "timeout", "longer than the per-call limit of 1 s"),
        (loops.exits, "exits", "SystemExit"),
        (loops.hard_exits, "exits", "4"),
        (loops.too_long, "bad_output", "token ids, expected max_new_tokens = 8 (the new tokens only)"),
        (loops.out_of_vocab, "bad_output", "token id 8 at position 7 is outside the vocabulary [0, 8)"),
        (loops.float_ids, "bad_output", "ids of dtype float64, expected integers"),
    ],
)
def test_failures_map_to_their_category(loop, diagnosis, words):
    rep = validate_generation(loop, pairs=["far"], time_limit_s=1.0, **QUICK)
    assert not rep.passed and rep.exit_code == 1
    runs = next(c for c in rep.checks if c.name == "runs")
    assert runs.passed is False and runs.category == "robustness" and runs.diagnosis == diagnosis
    assert words in runs.detail and "far,p1,T=0.7,top_k=3,m=2" in runs.detail
    assert any("the run stopped" in n for n in rep.notes)


def test_thread_isolation_reports_a_raise():
    rep = validate_generation(loops.raises, pairs=["far"], isolation="thread", **QUICK)
    runs = next(c for c in rep.checks if c.name == "runs")
    assert runs.diagnosis == "raises" and "(seed 0)" in runs.detail


def test_batched_interface_checks_batch_invariance():
    good = validate_generation(loops.ancestral_batched, interface="generation_batched", pairs=["far"], **QUICK)
    assert good.passed, good.to_text()
    batch = next(c for c in good.checks if c.name.startswith("batch_invariance["))
    assert batch.passed and batch.instance is not None and batch.instance["neighbours"]
    bad = validate_generation(loops.leaky_batched, interface="generation_batched", pairs=["far"], **QUICK)
    failed = [c.name for c in bad.failures]
    assert failed == ["batch_invariance[far,p1,T=0.7,top_k=3,m=2]"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"m": 9}, "m: "),
        ({"max_new_tokens": 1}, "max_new_tokens: 1 is less than m = 2"),
        ({"pairs": ["nope"]}, "pairs: unknown reference pair 'nope'"),
        ({"pairs": [loops.mismatched_pair()]}, "pairs: pair 'bad': models with different vocabularies"),
        ({"pairs": [object()]}, "pairs: expected reference pair names or ReferencePair objects"),
        ({"budget": "huge"}, "budget: expected one of quick, standard, thorough"),
        ({"seed": -1}, "seed: expected an int >= 0"),
        ({"interface": "chain"}, "interface: expected one of generation, generation_batched"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, message):
    args = {**QUICK, **kwargs}
    with pytest.raises(ValueError, match=message):
        validate_generation(loops.ancestral, **args)


def test_a_wrong_signature_raises_before_any_call():
    with pytest.raises(ValueError, match="no keyword parameter seed"):
        validate_generation(loops.no_seed, **QUICK)


def test_max_new_tokens_above_m_tests_the_first_m():
    rep = validate_generation(loops.ancestral, pairs=["far"], max_new_tokens=4, **QUICK)
    assert rep.passed and rep.settings["max_new_tokens"] == 4


def test_assert_generation_lossless():
    from spectr_gbv.testing import assert_generation_lossless

    rep = assert_generation_lossless(loops.ancestral, pairs=["far"])
    assert rep.passed and rep.budget == "quick"
    with pytest.raises(AssertionError, match=r"(?s)FAILED.*sequence_law\[far"):
        assert_generation_lossless(loops.wrong_temperature, pairs=["far"])
