"""The planted-bug generation loops: each differs from the correct loop in exactly the intended way, and is lossy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from spectr_gbv.gpu.models.reference_pairs import reference_pair
from spectr_gbv.gpu.models.sequence_law import SamplingSettings
from spectr_gbv.testing.mutants import generation_bugs as gb
from spectr_gbv.testing.mutants.generation_loops import (
    BatchedSpeculativeLoop,
    LoopNoise,
    SpeculativeLoop,
    UntemperedDraftLoop,
    processed_law,
    speculative_generate,
)
from spectr_gbv.validate.generation.interface import check_signature

GAMMA = 3


@pytest.fixture(scope="module", autouse=True)
def one_thread():
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


def _loop(cls, pair, settings=None, seed=0, gamma=GAMMA):
    return cls(pair.target, pair.draft, settings or SamplingSettings(), seed=seed, gamma=gamma)


def one_step_law(sample: np.ndarray, q: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Exact law of the first emitted token when drafts come from ``sample`` and the verifier divides by ``q``."""
    ratio = np.divide(p, q, out=np.ones_like(p), where=q > 0)
    accepted = sample * np.minimum(1.0, ratio)
    residual = np.maximum(p - q, 0.0)
    rest = 1.0 - accepted.sum()
    return accepted + (rest * residual / residual.sum() if residual.sum() > 0 else rest * p)


def test_registry_tags_sources_and_signatures():
    assert list(gb.GENERATION_MUTANTS) == [
        "shared_noise",
        "q_untempered",
        "q_bf16",
        "no_cache_rollback",
        "bonus_wrong_position",
        "target_only_temperature",
        "batch_row_leak",
        "batch_padding_leak",
    ]
    for name, fn in gb.GENERATION_MUTANTS.items():
        assert fn.bug == name and fn.description and fn.source
        assert fn.caught_by in ("sequence_law", "batch_invariance")
        assert "References" in fn.__doc__
        check_signature(fn, fn.interface)
        assert fn.interface == ("generation_batched" if name.startswith("batch_") else "generation")


@pytest.mark.parametrize("name", sorted(gb.GENERATION_MUTANTS))
def test_every_mutant_returns_max_new_tokens_and_repeats_per_seed(close, name):
    fn = gb.GENERATION_MUTANTS[name]
    prompt = [list(p) for p in close.prompts] if fn.interface == "generation_batched" else list(close.prompts[0])
    out = fn(close.target, close.draft, prompt, 6, temperature=0.7, top_k=0, top_p=1.0, seed=4)
    assert out == fn(close.target, close.draft, prompt, 6, temperature=0.7, top_k=0, top_p=1.0, seed=4)
    rows = out if fn.interface == "generation_batched" else [out]
    assert all(len(r) == 6 and set(r) <= set(close.support) for r in rows)


def test_shared_noise_reuses_the_drafts_uniforms_for_the_coin_and_the_final_draw():
    gen = torch.Generator().manual_seed(0)
    shared = gb.SharedPhiloxNoise(gen, GAMMA, 8)
    for i in range(GAMMA):
        for token in (0, 5):
            assert shared.coin(i, token) == float(shared.draft_row(i)[token])
        assert torch.equal(shared.final_row(i), shared.draft_row(i))
    correct = LoopNoise(torch.Generator().manual_seed(0), GAMMA, 8)
    assert correct.coin(1, 5) != float(correct.draft_row(1)[5])
    assert not any(torch.equal(correct.final_row(j), correct.draft_row(j)) for j in range(GAMMA))


def test_shared_noise_changes_outputs_on_the_same_seeds(close):
    prompt = list(close.prompts[0])
    differ = sum(
        gb.shared_noise(close.target, close.draft, prompt, 2, seed=s)
        != speculative_generate(close.target, close.draft, prompt, 2, seed=s)
        for s in range(30)
    )
    assert differ >= 5


@pytest.mark.parametrize(
    ("cls", "sample_t", "q_t"),
    [(gb.UntemperedQLoop, 0.6, 1.0), (gb.TargetOnlyTemperatureLoop, 1.0, 0.6), (UntemperedDraftLoop, 1.0, 1.0)],
)
def test_temperature_mutants_sample_from_one_law_and_report_another(close, cls, sample_t, q_t):
    logits = close.draft.next_logits([1, 2])[None]
    sample, q = _loop(cls, close, SamplingSettings(0.6, 3)).draft_laws(logits)
    assert torch.equal(sample, processed_law(logits, SamplingSettings(sample_t, 3)))
    assert torch.equal(q, processed_law(logits, SamplingSettings(q_t, 3)))


@pytest.mark.parametrize(
    ("cls", "lossy"),
    [
        (gb.UntemperedQLoop, True),
        (gb.TargetOnlyTemperatureLoop, True),
        (gb.Bf16DraftLoop, True),
        (UntemperedDraftLoop, False),
        (SpeculativeLoop, False),
    ],
)
def test_exact_first_token_law_is_off_for_the_q_mutants_and_exact_for_the_controls(far, cls, lossy):
    settings = SamplingSettings(0.6)
    loop = _loop(cls, far, settings)
    worst = 0.0
    for prompt in far.prompts:
        p = processed_law(far.target.next_logits(list(prompt))[None], settings)[0].numpy()
        sample, q = loop.draft_laws(far.draft.next_logits(list(prompt))[None])
        law = one_step_law(sample[0].numpy(), q[0].numpy(), p)
        worst = max(worst, 0.5 * float(np.abs(law - p).sum()))
    if lossy:
        assert worst > 0.02
    else:
        assert worst < 1e-12


def test_q_bf16_samples_from_rounded_logits(close):
    logits = close.draft.next_logits([1, 2])[None]
    sample, q = _loop(gb.Bf16DraftLoop, close).draft_laws(logits)
    assert torch.equal(sample, processed_law(logits.to(torch.bfloat16).float(), SamplingSettings()))
    assert torch.equal(q, processed_law(logits, SamplingSettings()))
    assert float((sample - q).abs().max()) > 1e-3


def test_no_cache_rollback_leaves_rejected_drafts_in_the_targets_cache(far):
    correct, buggy = _loop(SpeculativeLoop, far, seed=5), _loop(gb.NoRollbackLoop, far, seed=5)
    correct.generate(list(far.prompts[0]), 12)
    buggy.generate(list(far.prompts[0]), 12)
    first = buggy.trace[0]
    assert first["accepted"] < GAMMA  # rejected at the first iteration: GAMMA - n drafts were never accepted
    assert correct.trace[0]["target_cache"] == correct.trace[0]["kept"]
    assert first["target_cache"] == first["kept"] + GAMMA - first["accepted"]
    assert correct.trace[0]["token"] == first["token"]  # the first iteration is the same; later ones read stale slots
    assert all(step["draft_cache"] <= step["kept"] for step in buggy.trace)
    assert [s["token"] for s in correct.trace] != [s["token"] for s in buggy.trace]


def test_bonus_wrong_position_reads_row_n_minus_one(close):
    # p rows one-hot on distinct tokens; q = p: every draft accepted, the bonus is row GAMMA's token
    V = close.vocab_size
    p = torch.zeros(GAMMA + 1, V, dtype=torch.float64)
    for i, token in enumerate((1, 2, 4, 6)):
        p[i, token] = 1.0
    drafts = [1, 2, 4]
    noise = LoopNoise(torch.Generator().manual_seed(0), GAMMA, V)
    assert _loop(SpeculativeLoop, close).verify(drafts, p[:GAMMA].clone(), p, noise) == (GAMMA, 6)
    assert _loop(gb.BonusRowLoop, close).verify(drafts, p[:GAMMA].clone(), p, noise) == (GAMMA, 4)
    # a rejection at 0 (q puts d_1 where p has no mass): the correct residual is p_0, the mutant's p[-1] = p_GAMMA
    q = torch.zeros(GAMMA, V, dtype=torch.float64)
    q[:, 7] = 1.0
    assert _loop(SpeculativeLoop, close).verify([7, 7, 7], q, p, noise) == (0, 1)
    assert _loop(gb.BonusRowLoop, close).verify([7, 7, 7], q, p, noise) == (0, 6)


def test_batch_row_leak_cuts_every_row_at_the_batchs_first_rejection(close):
    V = close.vocab_size
    p = torch.zeros(GAMMA + 1, V, dtype=torch.float64)
    for i, token in enumerate((1, 2, 4, 6)):
        p[i, token] = 1.0
    q_accept = p[:GAMMA].clone()
    q_reject = torch.zeros(GAMMA, V, dtype=torch.float64)
    q_reject[:, 7] = 1.0
    drafts = [[1, 2, 4], [7, 7, 7]]
    noises = [LoopNoise(torch.Generator().manual_seed(b), GAMMA, V) for b in range(2)]
    args = (drafts, [q_accept, q_reject], [p, p], noises)
    assert _loop(BatchedSpeculativeLoop, close).verify_rows(*args) == [(GAMMA, 6), (0, 1)]
    # row 0 accepted all three drafts, yet stops at row 1's rejection and draws its residual (p_0 - q_0)+ = 0 -> p_0
    assert _loop(gb.BatchStopLoop, close).verify_rows(*args) == [(0, 1), (0, 1)]
    assert _loop(gb.BatchStopLoop, close).verify_rows(drafts[:1], [q_accept], [p], noises[:1]) == [(GAMMA, 6)]


def test_batch_padding_leak_changes_a_rows_target_logits_with_its_neighbours(close):
    row = [1, 2, 4]
    correct, leaky = _loop(BatchedSpeculativeLoop, close), _loop(gb.PaddingLeakLoop, close)
    neighbour = [[0, 1, 2, 4, 6, 7]]  # three pads before the row: the positions' parity flips
    alone = leaky._last_logits(close.target, [row], 1)[0]
    assert torch.equal(alone, correct._last_logits(close.target, [row], 1)[0])
    assert torch.equal(correct._last_logits(close.target, [row, *neighbour], 1)[0], alone)
    assert not torch.equal(leaky._last_logits(close.target, [row, *neighbour], 1)[0], alone)
    # the draft is fed correctly: only the target leaks
    draft_alone = correct._last_logits(close.draft, [row], 1)[0]
    assert torch.equal(leaky._last_logits(close.draft, [row, *neighbour], 1)[0], draft_alone)
