"""The generation gallery: entries well-formed, and the exact first-token laws behind its lossy verdicts.

The numbers pinned here are computed from the seeded reference pairs (seed 0) and the seeded
assistant of ``hf-assisted:usd``, through transformers' float32 forward passes: tolerances 1e-6
(absolute, on probabilities and total variations) cover float32 rounding on other CPUs.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from bench.gallery import generation_confirm as gc  # noqa: E402
from bench.gallery import run_gallery  # noqa: E402
from bench.gallery.generation_entries import GENERATION_ENTRIES  # noqa: E402
from spectr_gbv.simulate.monte_carlo import pooled_g_test  # noqa: E402
from spectr_gbv.validate.generation.adapters import ADAPTERS  # noqa: E402

TOL = 1e-6
#: p of close,p1,T=0.5 (reference pairs, seed 0), by token id.
P_CLOSE = [0.4396767599503423, 0.2984686620393339, 0.18273163118451025, 0.0, 0.06100137395920327, 0.0,
           0.00246575852008826, 0.015655814346522058]


def _usd_available() -> bool:
    try:
        from transformers.generation import candidate_generator
    except ImportError:
        return False
    return hasattr(candidate_generator, "AssistantToTargetTranslator") and hasattr(
        candidate_generator, "UniversalSpeculativeDecodingGenerator"
    )


# --- the entries ---------------------------------------------------------------------------------------------


def test_generation_entries_resolve_and_expect_the_adapters_verdicts():
    entries = {e.name: e for e in run_gallery.ENTRIES if e.interface.startswith("generation")}
    assert sorted(entries) == sorted(kw["name"] for kw in GENERATION_ENTRIES)
    assert len(entries) == 13
    for e in entries.values():
        fn = ADAPTERS[e.target]
        assert fn.interface == e.interface, e.name
        assert e.expect in {"PASSED", "FAILED"}, e.name
        lossy = not fn.lossless or e.target == "hf-assisted:usd"
        assert e.expect == ("FAILED" if lossy else "PASSED"), e.name
        assert (e.confirm is not None) == lossy, e.name
        if e.confirm is not None:
            assert callable(run_gallery._confirmation(e.confirm))
    assert {e.target for e in entries.values()} >= {
        "hf-assisted", "hf-assisted:heuristic", "hf-assisted:heuristic_transient", "hf-assisted:confidence",
        "hf-assisted:constant-1", "hf-assisted:usd", "hf-assisted:ensemble", "spectr-decoder:mdbv",
        "spectr-decoder:mdbv:flat", "spectr-decoder-batched:mdbv", "spectr-decoder:sd", "spectr-decoder:spectr",
        "spectr-decoder:rrs",
    }
    assert entries["generation_spectr_decoder_batched_mdbv"].command() == (
        "OMP_NUM_THREADS=1 spectr-gbv validate spectr-decoder-batched:mdbv --interface generation_batched "
        "--budget standard"
    )


def test_generation_page_names_its_source_and_versions():
    entry = next(e for e in run_gallery.ENTRIES if e.name == "generation_hf_assisted")
    text = run_gallery.page(entry, 0, "Validation of x: PASSED\n\nrest", 1.0, {"transformers": "5.25.0"}, None)
    assert "Packages (installed with this package's `gpu` extra, CPU only): **transformers 5.25.0**" in text
    assert "Packages (PyPI" not in text
    assert "## Independent confirmation" not in text
    assert "spectr-gbv validate hf-assisted --interface generation --budget standard" in text


def test_generation_selector_lists_only_generation_entries(capsys):
    assert run_gallery.main(["--generation", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 13
    assert all(line.startswith("generation_") for line in lines)


def test_parse_scenario_reads_the_first_failing_small_vocabulary_label():
    report = (
        "Law checks\n"
        "PASS    statistical  sequence_law[close,p1,T=0.5,m=2]  1  0.5  48  -  ok\n"
        "FAIL    statistical  sequence_law[wide,p0,T=0.6,top_p=0.9,m=2]  9  1e-9  48  -  not_lossless\n"
        "FAIL    statistical  positional_law[far,p1,T=0.7,top_k=3,m=2]  9  1e-9  48  -  not_lossless\n"
    )
    assert gc.parse_scenario(report) == ("far", 1, 0.7, 3, 1.0)
    assert gc.parse_scenario("no failure") == gc.DEFAULT_SCENARIO == ("close", 1, 0.5, 0, 1.0)


# --- the exact formula ---------------------------------------------------------------------------------------


def test_first_token_law_is_the_target_when_draw_and_verify_agree_and_the_mixture_for_the_ensemble():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(6))
    p[2] = 0.0
    p /= p.sum()
    q = rng.dirichlet(np.ones(6))
    assert np.abs(gc.first_token_law(p, q, q) - p).max() < 1e-15
    for w in (0.25, 0.5, 0.9):
        mix = w * p + (1 - w) * q
        assert np.abs(gc.first_token_law(p, q, q, ensemble_weight=w) - mix).max() < 1e-15
    # a permuted verifier law: P(x) computed by hand for V = 2
    got = gc.first_token_law(np.array([0.5, 0.5]), np.array([0.8, 0.2]), np.array([0.2, 0.8]))
    # accept 0 always (ratio 2.5), 1 with 0.5/0.8; reject mass 0.2 * 0.375 = 0.075 goes to (p - q_v)+ = token 0
    assert got.tolist() == pytest.approx([0.8 + 0.075, 0.125], abs=1e-15)


def test_first_token_law_refuses_a_rejection_with_an_empty_residual():
    # draft token 1 has p = q_v = 0: 0/0 is NaN, `r < NaN` rejects, and (p - q_v)+ is all zero
    p, q_draw, q_verify = np.array([1.0, 0.0]), np.array([0.0, 1.0]), np.array([1.0, 0.0])
    with pytest.raises(ValueError, match=r"q_verify: rejects with positive probability"):
        gc.first_token_law(p, q_draw, q_verify)
    assert gc.first_token_law(p, q_draw, q_verify, ensemble_weight=0.5).tolist() == [1.0, 0.0]  # falls back to p


# --- universal assisted decoding -----------------------------------------------------------------------------


@pytest.mark.skipif(not _usd_available(), reason="transformers lacks universal assisted decoding")
def test_usd_first_token_law_for_a_fixed_vocab_order_is_far_from_p_and_fits_seeded_calls(monkeypatch):
    from spectr_gbv.validate.generation.adapters import hf_usd

    monkeypatch.setattr(hf_usd, "_KITS", {})  # a fresh kit: fresh tokenizers, so a fresh translator
    kit = hf_usd.usd_kit(8)
    rotated = {**{f"t{i}": i for i in (1, 2, 3, 4, 5, 6, 7, 0)}, "<extra>": 8}
    assert rotated == kit.assistant_tokenizer.get_vocab()  # the same map, in a fixed iteration order
    monkeypatch.setattr(kit.assistant_tokenizer, "get_vocab", lambda: dict(rotated))

    laws = gc.usd_laws(gc.DEFAULT_SCENARIO)
    assert laws.order == [1, 2, 3, 4, 5, 6, 7, 0]
    assert laws.p.tolist() == pytest.approx(P_CLOSE, abs=TOL)
    # the draft law is the assistant's, by id; the verifier reads it through the order
    assert laws.q_draw[6] == pytest.approx(0.9048785000924858, abs=TOL)
    assert laws.q_verify.tolist() == pytest.approx(laws.q_draw[laws.order].tolist(), abs=1e-12)
    expected = [0.004039470508444113, 0.08600651709959721, 0.002539160890833959, 0.0, 0.0016824997304334787, 0.0,
                0.9048984113737121, 0.000833940396979212]
    assert laws.law.tolist() == pytest.approx(expected, abs=TOL)
    assert float(gc.total_variation(laws.law, laws.p)) == pytest.approx(0.9024326528536238, abs=TOL)

    tvs = gc.all_orders_tv(laws)
    assert len(tvs) == 40320
    assert tvs[0] < 1e-15  # the increasing order is lossless
    assert int((tvs < 1e-12).sum()) == 2  # ... and the order exchanging 3 and 5 (p = 0 at both) only
    assert tvs[-1] == pytest.approx(0.2711848964702561, abs=TOL)  # the decreasing order (the last permutation)
    assert float(np.median(tvs)) == pytest.approx(0.9024326706535901, abs=TOL)
    assert float(tvs.max()) == pytest.approx(0.9026780331132721, abs=TOL)
    assert int((tvs > 0.05).sum()) == 39600

    counts = gc.first_tokens("hf-assisted:usd", gc.DEFAULT_SCENARIO, 60)
    assert counts.sum() == 60
    fit = pooled_g_test(counts, laws.law)
    assert fit.df >= 1 and fit.p_value > gc.FIT_LEVEL
    assert pooled_g_test(counts, laws.p).p_value < 1e-20


# --- ensemble verification -----------------------------------------------------------------------------------


def test_ensemble_first_token_law_is_the_mixture_and_fits_seeded_calls():
    from spectr_gbv.gpu.models.reference_pairs import reference_pair
    from spectr_gbv.gpu.models.sequence_law import SamplingSettings, conditional_law

    laws = gc.ensemble_laws(gc.DEFAULT_SCENARIO)
    assert laws.p.tolist() == pytest.approx(P_CLOSE, abs=TOL)
    # transformers' assistant scores are the draft's logits divided by T twice: q is the draft's law at T^2
    pair = reference_pair("close")
    assert laws.q_draw.tolist() == pytest.approx(
        conditional_law(pair.draft, pair.prompts[1], SamplingSettings(0.25)).tolist(), abs=TOL
    )
    expected = [0.3852470591448243, 0.47242730170635544, 0.0956860435594489, 0.0, 0.037523174460061814, 0.0,
                0.001235649675824054, 0.007880771453485489]
    assert laws.law.tolist() == pytest.approx(expected, abs=TOL)
    assert laws.law.tolist() == pytest.approx((0.5 * laws.p + 0.5 * laws.q_draw).tolist(), abs=1e-15)
    tv = float(gc.total_variation(laws.law, laws.p))
    assert tv == pytest.approx(0.17395863966702155, abs=TOL)
    assert tv == pytest.approx(0.5 * float(gc.total_variation(laws.p, laws.q_draw)), abs=1e-15)
    counts = gc.first_tokens("hf-assisted:ensemble", gc.DEFAULT_SCENARIO, 60)
    assert pooled_g_test(counts, laws.law).p_value > gc.FIT_LEVEL
    assert pooled_g_test(counts, laws.p).p_value < 0.01


@pytest.mark.skipif(not _usd_available(), reason="transformers lacks universal assisted decoding")
def test_pinned_order_witness_restores_the_kit_cache_and_pins_the_order():
    from spectr_gbv.validate.generation.adapters import hf_usd

    before = dict(hf_usd._KITS)
    laws, counts = gc.pinned_order_witness(gc.DEFAULT_SCENARIO, 30)
    assert laws.order == list(gc.PINNED_ORDER)
    assert float(gc.total_variation(laws.law, laws.p)) == pytest.approx(0.9024326528536238, abs=TOL)
    assert counts.sum() == 30 and pooled_g_test(counts, laws.p).p_value < 1e-6
    assert hf_usd._KITS == before
