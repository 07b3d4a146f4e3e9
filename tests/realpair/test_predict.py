"""Monte Carlo B(K), B_BV(K) of :mod:`spectr_gbv.realpair.predict` against the exact tabular bounds.

A tiny random Llama pair (V = 4, 2 layers; draft = the target with its weights perturbed) is
enumerated after a fixed context into a :class:`~spectr_gbv.core.TabularAR` pair (target laws at
every continuation of length 0..L, draft laws at 0..L-1, same temperature), and the exact
:func:`~spectr_gbv.theory.bounds.cic_bound` / :func:`~spectr_gbv.theory.bounds.cic_bound_lossless`
are compared with the estimate: within 4 standard errors, with SE < 0.02, for K in {1, 3}. At
K = 1 the exact identities B(1) = greedy value and B_BV(1) = BV value (THEORY.md sections 3-4)
are checked too, the SD estimate matches the exact SD value, and B_BV(K) <= B(K) holds per
context (beta <= r on every path).
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spectr_gbv.gpu.decoding.draft_sources import HFDraftSource  # noqa: E402
from spectr_gbv.gpu.decoding.sampling import SamplingConfig  # noqa: E402
from spectr_gbv.realpair.predict import Prediction, predict_block_efficiency  # noqa: E402
from spectr_gbv.theory.bounds import (  # noqa: E402
    bv_expected_accepted,
    cic_bound,
    cic_bound_lossless,
    greedy_expected_accepted,
    sd_expected_accepted,
)
from tests.gpu.tiny_models import model_instance, perturbed_copy, tiny_llama  # noqa: E402

V, CONTEXT, L, T, SAMPLES = 4, [1, 2], 3, 0.8, 4000


@pytest.fixture(scope="module")
def pair():
    target = tiny_llama(V, seed=0, num_layers=2, initializer_range=0.25)
    return target, perturbed_copy(target, seed=50, scale=0.6)


@pytest.fixture(scope="module")
def exact(pair):
    inst = model_instance(*pair, CONTEXT, L, SamplingConfig(T))
    return inst.target, inst.draft


@pytest.fixture(scope="module")
def predictions(pair):
    return predict_block_efficiency(*pair, [torch.tensor(CONTEXT)], [1, 3], L, T, SAMPLES, seed=0)


@pytest.mark.parametrize("j, K", [(0, 1), (1, 3)])
def test_monte_carlo_matches_the_exact_bounds(exact, predictions, j, K):
    p, q = exact
    pred = predictions[j]
    assert isinstance(pred, Prediction) and pred.num_drafts == K and pred.samples == SAMPLES and pred.contexts == 1
    for est, se, value in (
        (pred.cic_bound, pred.cic_bound_se, cic_bound(p, q, K, L)),
        (pred.bv_bound, pred.bv_bound_se, cic_bound_lossless(p, q, K, L)),
    ):
        assert 0 < se < 0.02
        assert abs(est - value) < 4 * se, (K, est, se, value)
    assert pred.cic_block_efficiency == pytest.approx(pred.cic_bound + 1)


def test_k1_identities_greedy_and_bv(exact, predictions):
    p, q = exact
    assert cic_bound(p, q, 1, L) == pytest.approx(greedy_expected_accepted(p, q, L), abs=1e-12)
    assert cic_bound_lossless(p, q, 1, L) == pytest.approx(bv_expected_accepted(p, q, L), abs=1e-12)
    pred = predictions[0]
    assert abs(pred.cic_bound - greedy_expected_accepted(p, q, L)) < 4 * pred.cic_bound_se
    assert abs(pred.bv_bound - bv_expected_accepted(p, q, L)) < 4 * pred.bv_bound_se
    # SD's E[tau] from the same paths (per-token ratios), the same for every K.
    sd = sd_expected_accepted(p, q, L)
    assert 0 < pred.sd_value_se < 0.02 and abs(pred.sd_value - sd) < 4 * pred.sd_value_se
    assert predictions[1].sd_value == pred.sd_value
    # The exact gap B(1) - B_BV(1) is real here, so the test distinguishes r from beta.
    assert cic_bound(p, q, 1, L) - bv_expected_accepted(p, q, L) > 5 * pred.cic_bound_se


def test_several_contexts_ordering_and_draft_source_path(pair):
    target, draft = pair
    contexts = [torch.tensor([1, 2]), torch.tensor([3]), torch.tensor([0, 1, 2, 3, 0])]
    preds = predict_block_efficiency(target, draft, contexts, [1, 2, 5], 4, 1.0, 64, seed=1, batch_rows=24)
    for pred in preds:
        assert len(pred.per_context_cic) == 3 and pred.contexts == 3
        assert pred.cic_bound == pytest.approx(sum(pred.per_context_cic) / 3)
        assert all(b <= c + 1e-12 for b, c in zip(pred.per_context_bv, pred.per_context_cic, strict=True))
        assert 0 < pred.alpha <= 1 and 0 < pred.bv_bound <= pred.cic_bound <= 4
        assert pred.sd_value <= preds[0].bv_bound + 1e-12  # SD <= BV = B_BV(1) on every path
    assert preds[0].cic_bound <= preds[1].cic_bound <= preds[2].cic_bound  # monotone in K (same paths)
    # The generic DraftSource path (one propose/commit per position) gives the same values.
    via_source = predict_block_efficiency(
        target, HFDraftSource(draft), contexts, [1, 2, 5], 4, 1.0, 64, seed=1, batch_rows=24
    )
    for a, b in zip(preds, via_source, strict=True):
        assert a.cic_bound == pytest.approx(b.cic_bound, abs=1e-5) and a.bv_bound == pytest.approx(b.bv_bound, abs=1e-5)
        assert a.alpha == pytest.approx(b.alpha, abs=1e-5)


def test_identical_draft_gives_L_and_bad_arguments_raise(pair):
    target, _ = pair
    pred = predict_block_efficiency(target, copy.deepcopy(target), [torch.tensor([1])], [2], 3, 0.5, 16, seed=0)[0]
    assert pred.cic_bound == pytest.approx(3, abs=1e-5) and pred.bv_bound == pytest.approx(3, abs=1e-5)
    assert pred.alpha == pytest.approx(1, abs=1e-5)
    assert pred.summary()["cic_block_efficiency"] == pytest.approx(4, abs=1e-5)
    with pytest.raises(ValueError, match="samples"):
        predict_block_efficiency(target, target, [torch.tensor([1])], [1], 3, 1.0, 1, seed=0)
    with pytest.raises(ValueError, match="num_drafts"):
        predict_block_efficiency(target, target, [torch.tensor([1])], [0], 3, 1.0, 8, seed=0)
    with pytest.raises(ValueError, match="vocabulary"):
        predict_block_efficiency(target, tiny_llama(6), [torch.tensor([1])], [1], 3, 1.0, 8, seed=0)
