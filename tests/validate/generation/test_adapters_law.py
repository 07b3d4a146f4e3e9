"""A cheap exact sanity check per adapter family: the first token's law over seeded calls vs the exact law.

The exact law is :func:`~spectr_gbv.gpu.models.sequence_law.conditional_law` of the target after
the prompt (temperature 0.7, top-k 4: four tokens kept). 200 seeded calls, pooled G-test at
alpha = 1e-3 (seeds are fixed, so the outcome is too); with df = 3 its power is 0.97 against a
total-variation error of 0.2 and 0.999 at 0.25 (``g_test_power``), 0.18 at 0.1: a sanity
check of the wiring, not the referee's verdict. The lossy-by-design ensemble adapter is the
negative control: on the far pair its first token's empirical law over these seeds is at total
variation 0.44 from the target's (G-test p about 1e-58). The "far" pair (q independent of p)
makes most first tokens come from the residual.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spectr_gbv.gpu.models.reference_pairs import reference_pair  # noqa: E402
from spectr_gbv.gpu.models.sequence_law import SamplingSettings, conditional_law  # noqa: E402
from spectr_gbv.simulate.monte_carlo import GTest, pooled_g_test  # noqa: E402
from spectr_gbv.validate.generation.adapters import resolve_adapter  # noqa: E402

SETTINGS = SamplingSettings(temperature=0.7, top_k=4, top_p=1.0)
KWARGS = dict(temperature=0.7, top_k=4, top_p=1.0)
SEEDS = 200
ALPHA = 1e-3


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def far():
    return reference_pair("far")


def _first_token_test(counts: np.ndarray, pair, prompt) -> GTest:
    law = conditional_law(pair.target, prompt, SETTINGS)
    assert np.count_nonzero(law) == 4
    return pooled_g_test(counts, law)


def _first_tokens(name: str, pair, prompt, max_new_tokens: int) -> np.ndarray:
    fn = resolve_adapter(name)
    counts = np.zeros(pair.vocab_size, dtype=np.int64)
    for seed in range(SEEDS):
        counts[fn(pair.target, pair.draft, prompt, max_new_tokens, seed=seed, **KWARGS)[0]] += 1
    return counts


def test_hf_assisted_first_token_follows_the_target_law(far):
    # max_new_tokens = 2: one drafted token is verified before the first token is emitted
    prompt = list(far.prompts[0])
    g = _first_token_test(_first_tokens("hf-assisted:constant-3", far, prompt, 2), far, prompt)
    assert g.p_value > ALPHA, g


def test_hf_assisted_ensemble_control_is_rejected(far):
    prompt = list(far.prompts[0])
    counts = _first_tokens("hf-assisted:ensemble", far, prompt, 2)
    g = _first_token_test(counts, far, prompt)
    assert g.p_value < 1e-20, g  # accepting against 0.5 p + 0.5 q moves the law far from p
    tv = 0.5 * np.abs(counts / SEEDS - conditional_law(far.target, prompt, SETTINGS)).sum()
    assert tv > 0.25, tv


def test_spectr_decoder_first_token_follows_the_target_law(far):
    # max_new_tokens = 1: the decoder still drafts K = 2 x L = 3 tokens and verifies them
    prompt = list(far.prompts[0])
    g = _first_token_test(_first_tokens("spectr-decoder:mdbv", far, prompt, 1), far, prompt)
    assert g.p_value > ALPHA, g


def test_spectr_decoder_batched_rows_follow_their_own_laws(far):
    fn = resolve_adapter("spectr-decoder-batched:mdbv")
    prompts = [list(far.prompts[0]), [4, 2]]  # one length: a single batched call of two rows
    counts = np.zeros((2, far.vocab_size), dtype=np.int64)
    for seed in range(SEEDS // 2):
        out = fn(far.target, far.draft, prompts, 1, seed=seed, **KWARGS)
        for b in range(2):
            counts[b, out[b][0]] += 1
    for b in range(2):
        g = _first_token_test(counts[b], far, prompts[b])
        assert g.p_value > ALPHA, (b, g)
