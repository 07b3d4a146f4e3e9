"""The correct speculative generation loops: output contract, determinism, caches, exact first-token law."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from spectr_gbv.gpu.models.reference_pairs import reference_pair
from spectr_gbv.gpu.models.sequence_law import SamplingSettings, processed_probs, sequence_law
from spectr_gbv.testing.mutants.generation_bugs import shared_noise
from spectr_gbv.testing.mutants.generation_loops import (
    GENERATION_LOOPS,
    BatchedSpeculativeLoop,
    SpeculativeLoop,
    processed_law,
    speculative_generate,
    speculative_generate_batched,
)
from spectr_gbv.validate.generation.interface import check_signature


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    # the reference models' forwards are tiny: intra-op threads only add contention on shared cores
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def close():
    return reference_pair("close")


@pytest.fixture(scope="module")
def far():
    return reference_pair("far")


def _call(fn, pair, n, seed, **kw):
    kw = {"temperature": 0.8, "top_k": 0, "top_p": 1.0, **kw}
    if fn.interface == "generation_batched":
        return fn(pair.target, pair.draft, [list(p) for p in pair.prompts], n, seed=seed, **kw)
    return [fn(pair.target, pair.draft, list(pair.prompts[0]), n, seed=seed, **kw)]


@pytest.mark.parametrize("name", sorted(GENERATION_LOOPS))
@pytest.mark.parametrize("pair_name", ["close", "wide"])
def test_correct_loops_return_max_new_tokens_on_the_support_and_repeat_per_seed(name, pair_name):
    fn, pair = GENERATION_LOOPS[name], reference_pair(pair_name)
    assert fn.bug == "ok" and fn.interface in ("generation", "generation_batched") and fn.source
    check_signature(fn, fn.interface)
    rows = _call(fn, pair, 7, seed=11, top_k=4)
    for row in rows:
        assert len(row) == 7 and set(row) <= set(pair.support)
    assert rows == _call(fn, pair, 7, seed=11, top_k=4)
    assert any(_call(fn, pair, 7, seed=s, top_k=4) != rows for s in range(12, 16))
    assert _call(fn, pair, 0, seed=11) == [[] for _ in rows]


def test_processed_law_equals_the_referees_processed_probs(close):
    logits = close.target.next_logits([1, 2, 4])
    for settings in (SamplingSettings(), SamplingSettings(0.7, 3), SamplingSettings(1.3, 0, 0.8)):
        ours = processed_law(logits[None], settings)[0].numpy()
        np.testing.assert_allclose(ours, processed_probs(logits, settings), rtol=0, atol=1e-6)


def test_caches_hold_exactly_the_accepted_context_after_every_iteration(far):
    loop = SpeculativeLoop(far.target, far.draft, SamplingSettings(0.7), seed=5, gamma=3)
    loop.generate(list(far.prompts[0]), 20)
    assert any(step["accepted"] < 3 for step in loop.trace)  # the far pair rejects: crops happen
    for step in loop.trace:
        assert step["target_cache"] == step["kept"]
        assert step["draft_cache"] <= step["kept"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_batch_of_one_replays_the_cached_single_loop(far, seed):
    # same noise, same laws: a cached loop that crops correctly equals the uncached recomputation
    single = speculative_generate(far.target, far.draft, list(far.prompts[1]), 9, temperature=0.7, seed=seed)
    batch = speculative_generate_batched(far.target, far.draft, [list(far.prompts[1])], 9, temperature=0.7, seed=seed)
    assert batch == [single]


def test_batched_row_logits_do_not_depend_on_neighbours(close):
    loop = BatchedSpeculativeLoop(close.target, close.draft, SamplingSettings(), seed=0, gamma=2)
    row = [1, 2, 4]
    alone = loop._last_logits(close.target, [row], 3)[0]
    for neighbours in ([[7]], [[0, 1, 2, 4, 6, 7, 0]], [[6, 6], [1, 1, 1, 1, 1, 1]]):
        together = loop._last_logits(close.target, [row, *neighbours], 3)[0]
        assert torch.equal(alone, together)


def _first_token_tv(fn, pair, n_seeds, settings):
    law = {k[0]: v for k, v in sequence_law(pair.target, list(pair.prompts[0]), 1, settings).items()}
    kw = settings.as_kwargs()
    counts = Counter(fn(pair.target, pair.draft, list(pair.prompts[0]), 1, seed=s, **kw)[0] for s in range(n_seeds))
    cells = set(law) | set(counts)
    return 0.5 * sum(abs(counts.get(c, 0) / n_seeds - law.get(c, 0.0)) for c in cells)


def test_first_token_law_matches_the_exact_law_and_the_same_statistic_rejects_shared_noise(close):
    # 400 seeds, 6 cells: the empirical TV of an exact sampler is below 0.09 with probability > 0.999
    # (sum of sqrt(p / N) / 2 <= sqrt(6 / 400) / 2 = 0.061 in expectation, DKW-type tail); fixed seeds: deterministic
    settings = SamplingSettings(0.7)
    assert _first_token_tv(speculative_generate, close, 400, settings) < 0.09
    assert _first_token_tv(shared_noise, close, 400, settings) > 0.15


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"temperature": 0.0}, "temperature"),
        ({"top_k": -1}, "top_k"),
        ({"top_p": 1.5}, "top_p"),
        ({"seed": -1}, "seed"),
        ({"gamma": 0}, "gamma"),
    ],
)
def test_bad_settings_raise_naming_the_argument(close, kwargs, message):
    with pytest.raises(ValueError, match=message):
        speculative_generate(close.target, close.draft, [1, 2], 2, **kwargs)


def test_bad_requests_raise_naming_the_argument(close):
    wide = reference_pair("wide")
    with pytest.raises(ValueError, match="draft: vocabulary 1000 differs"):
        speculative_generate(close.target, wide.draft, [1, 2], 2)
    with pytest.raises(ValueError, match="prompt_ids"):
        speculative_generate(close.target, close.draft, [], 2)
    with pytest.raises(ValueError, match=r"prompt_ids: expected at least one id in \[0, 8\)"):
        speculative_generate(close.target, close.draft, [1, 8], 2)
    with pytest.raises(ValueError, match="max_new_tokens"):
        speculative_generate(close.target, close.draft, [1], -1)
    with pytest.raises(ValueError, match=r"prompt_ids\[1\]"):
        speculative_generate_batched(close.target, close.draft, [[1], []], 2)
    with pytest.raises(ValueError, match="at least one prompt"):
        speculative_generate_batched(close.target, close.draft, [], 2)


def test_real_llama_cached_loop_equals_the_padded_recomputation_and_warns_nothing():
    # a real transformers model: DynamicCache cropping and position ids agree with the uncached, padded batch
    import warnings

    from spectr_gbv.gpu.models.synthetic import synthetic_pair

    target, draft = synthetic_pair("tiny-target", "tiny-draft", closeness=0.5, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. a deprecated cache keyword
        single = speculative_generate(target, draft, [5, 17, 3], 8, temperature=0.7, seed=2)
        batch = speculative_generate_batched(target, draft, [[5, 17, 3]], 8, temperature=0.7, seed=2)
    assert batch == [single] and len(single) == 8
