"""Binned law test of the first generated tokens (:mod:`spectr_gbv.realpair.real_lossless`) on tiny models.

Tiny random Llama pair (V = 16, 2 layers; draft = perturbed copy), prompt [1, 2], 20,000 runs:
the exact binned law (one batched target forward over the first-token candidates) equals the
enumerated law of ``tests/gpu/tiny_models.py``; lossless methods pass with power >= 0.999
against a binned TV error of 0.05 (m = 2: about 245 named bins plus a rest bin); the lossy
released SpecTr-GBV rule and a planted bug (draft samples at T = 0.6 but reports its T = 1 law)
are rejected at the same size. The bin rules (rest pooled, small rest merged, impossible rest
observed -> G = inf, one bin -> nothing to test) are unit-tested on hand-made laws.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spectr_gbv.gpu import HFDraftSource, SamplingConfig  # noqa: E402
from spectr_gbv.gpu.decoding.sampling import process_logits, sample_from  # noqa: E402
from spectr_gbv.realpair.real_lossless import (  # noqa: E402
    BinnedLaw,
    LawTestResult,
    binned_g_test,
    exact_first_tokens_law,
    first_tokens_law_test,
)
from tests.gpu.tiny_models import exact_law, perturbed_copy, tiny_llama  # noqa: E402

V, PROMPT, RUNS = 16, [1, 2], 20_000


@pytest.fixture(scope="module")
def pair():
    target = tiny_llama(V, seed=0, num_layers=2, initializer_range=0.25)
    return target, perturbed_copy(target, seed=50, scale=0.12)


def test_exact_binned_law_matches_enumeration(pair):
    target, _ = pair
    law = exact_first_tokens_law(target, torch.tensor(PROMPT), 2, 0.8, runs=10**9)  # every pair named
    full = exact_law(target, PROMPT, 2, SamplingConfig(0.8))
    assert law.outcomes.tolist() == list(range(V * V)) and law.rest == pytest.approx(0, abs=1e-9)
    np.testing.assert_allclose(law.probs, full, rtol=1e-5, atol=1e-9)
    small = exact_first_tokens_law(target, torch.tensor(PROMPT), 2, 0.8, runs=1000)
    assert np.all(small.probs * 1000 >= 5) and small.rest == pytest.approx(1 - full[small.outcomes].sum())


@pytest.mark.parametrize("method, K, L, m", [("mdbv", 2, 2, 2), ("spectr", 3, 1, 1), ("sd", 1, 3, 2)])
def test_lossless_methods_pass(pair, method, K, L, m):
    res = first_tokens_law_test(*pair, torch.tensor(PROMPT), method, K, L, 1.0, RUNS, m, seed=7, chunk_rows=4096)
    assert isinstance(res, LawTestResult) and res.runs == RUNS and res.num_tokens == m
    assert res.power >= 0.999 and res.passed, res
    if m == 2:
        assert res.bins > 100 and res.rest_probability > 0  # binned, with a pooled rest bin
    assert res.summary()["g_statistic"] == res.g_statistic


def test_released_rule_fails(pair):
    """Pinned: observed TV 0.074, G = 692 on 244 dof (p ~ 2e-44)."""
    prompt = torch.tensor(PROMPT)
    res = first_tokens_law_test(
        *pair, prompt, "spectr_gbv_released", 3, 2, 1.0, RUNS, 2, seed=7, allow_lossy=True, chunk_rows=4096
    )
    assert res.power >= 0.999 and not res.passed and res.p_value < 1e-10, res


class WrongTemperatureDraft(HFDraftSource):
    """Planted bug: drafts sampled at T = 0.6, but the reported q is the T = 1 law."""

    def _sample_position(self, logits, sampling, generator):
        return sample_from(process_logits(logits, SamplingConfig(0.6)), generator), process_logits(logits, sampling)


def test_planted_bug_fails(pair):
    """Pinned: bv, L = 2, m = 1: observed TV 0.139, G = 2549 on 15 dof (p = 0)."""
    target, draft = pair
    res = first_tokens_law_test(
        target, WrongTemperatureDraft(draft), torch.tensor(PROMPT), "bv", 1, 2, 1.0, RUNS, 1, seed=7, chunk_rows=4096
    )
    assert res.power >= 0.999 and not res.passed, res


def test_greedy_has_nothing_to_test_and_lossy_needs_opt_in(pair):
    res = first_tokens_law_test(*pair, torch.tensor(PROMPT), "mdbv", 2, 2, 0.0, 300, 2, seed=0)
    assert res.bins == 1 and res.dof == 0 and res.passed and res.power == 0.0 and res.observed_tv == 0.0
    with pytest.raises(ValueError, match="lossy"):
        first_tokens_law_test(*pair, torch.tensor(PROMPT), "spectr_gbv_released", 2, 2, 1.0, 10, 1, seed=0)
    with pytest.raises(ValueError, match="num_tokens"):
        first_tokens_law_test(*pair, torch.tensor(PROMPT), "mdbv", 2, 2, 1.0, 10, 3, seed=0)


def test_bin_rules():
    law = BinnedLaw(np.array([3, 7]), np.array([0.5, 0.3]), 0.2, vocab_size=10, num_tokens=1)
    obs = np.array([3] * 50 + [7] * 30 + [0] * 12 + [9] * 8)  # the rest bin: 20 of expected 20
    g, p, dof, power, tv, bins = binned_g_test(law, obs)
    assert (bins, dof) == (3, 2) and g == pytest.approx(0, abs=1e-9) and p == pytest.approx(1) and tv == 0
    # A rest of expected count < 5 is merged into the smallest named bin.
    law_small = BinnedLaw(np.array([3, 7]), np.array([0.6, 0.37]), 0.03, vocab_size=10, num_tokens=1)
    g, p, dof, power, tv, bins = binned_g_test(law_small, obs)
    assert (bins, dof) == (2, 1)
    # An outcome of probability 0 observed: rejected outright.
    law_zero = BinnedLaw(np.array([3, 7]), np.array([0.6, 0.4]), 0.0, vocab_size=10, num_tokens=1)
    g, p, *_ = binned_g_test(law_zero, obs)
    assert g == math.inf and p == 0.0
    with pytest.raises(ValueError, match="empty"):
        binned_g_test(law, np.array([], dtype=np.int64))
