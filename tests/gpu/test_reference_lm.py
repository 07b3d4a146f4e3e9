"""The generation referee's reference models: a real HF causal LM whose law is exactly known."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import DynamicCache
from transformers.generation.logits_process import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from spectr_gbv.gpu.models.reference_lm import ReferenceLM, ReferenceLMConfig, context_state
from spectr_gbv.gpu.models.reference_pairs import REFERENCE_PAIRS, WIDE_SUPPORT, reference_pair
from spectr_gbv.gpu.models.sequence_law import (
    MAX_ENUMERATION,
    SamplingSettings,
    conditional_law,
    processed_probs,
    sequence_law,
    warped_scores,
)


@pytest.fixture(scope="module")
def pair():
    return reference_pair("close")


def _feed(model: ReferenceLM, ids: list[int], cache: DynamicCache, start: int) -> torch.Tensor:
    x = torch.tensor([ids])
    pos = torch.arange(start, start + len(ids))[None]
    return model(x, position_ids=pos, cache=cache).logits[0]


# ---------------------------------------------------------------- the model serves next_logits
def test_forward_equals_next_logits_token_by_token_with_a_cache(pair) -> None:
    m, seq = pair.target, [1, 2, 4, 0, 6, 7, 7, 2]
    cache = DynamicCache()
    for t, tok in enumerate(seq):
        out = _feed(m, [tok], cache, t)[-1]
        assert torch.equal(out, m.next_logits(seq[: t + 1]))
    whole = m(torch.tensor([seq])).logits[0]
    for t in range(len(seq)):
        assert torch.equal(whole[t], m.next_logits(seq[: t + 1]))


def test_a_cache_not_cropped_after_a_rejection_changes_the_law(pair) -> None:
    m = pair.target
    cache = DynamicCache()
    _feed(m, [1, 2, 4], cache, 0)
    _feed(m, [6, 6], cache, 3)  # two draft tokens, both rejected
    cache.crop(-2)
    assert torch.equal(_feed(m, [0], cache, 3)[-1], m.next_logits([1, 2, 4, 0]))
    stale = DynamicCache()
    _feed(m, [1, 2, 4], stale, 0)
    _feed(m, [6, 6], stale, 3)
    got = _feed(m, [0], stale, 3)[-1]  # the rejected tokens are still attended to
    assert not torch.equal(got, m.next_logits([1, 2, 4, 0]))
    assert torch.equal(got, m.next_logits([1, 2, 4, 6, 6, 0], position=3))


def test_wrong_position_ids_change_the_law(pair) -> None:
    m, seq = pair.target, [1, 2, 4, 0]
    states = {context_state(seq, s, len(m.config.table)) for s in range(2)}
    assert len(states) == 2  # the parity of the position enters the state
    shifted = m(torch.tensor([seq]), position_ids=torch.arange(1, 5)[None]).logits[0, -1]
    assert torch.equal(shifted, m.next_logits(seq, position=4))
    assert not torch.equal(shifted, m.next_logits(seq))


def test_left_padding_with_a_2d_mask_and_a_4d_additive_mask_give_each_row_its_own_law(pair) -> None:
    m = pair.target
    x = torch.tensor([[3, 3, 1, 2], [4, 0, 6, 1]])
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    out = m(x, attention_mask=mask).logits
    assert torch.equal(out[0, -1], m.next_logits([1, 2]))
    assert torch.equal(out[1, -1], m.next_logits([4, 0, 6, 1]))
    allowed = mask.bool()[:, None, None, :] & torch.ones(4, 4, dtype=torch.bool).tril()[None, None]
    additive = torch.where(allowed, 0.0, torch.finfo(torch.float32).min)
    pos = (mask.cumsum(1) - 1).clamp(min=0)
    out4 = m(x, attention_mask=additive, position_ids=pos).logits
    assert torch.equal(out4[:, -1], out[:, -1])


def test_logits_to_keep_and_the_support(pair) -> None:
    m = pair.target
    out = m(torch.tensor([[1, 2, 4]]), logits_to_keep=1).logits
    assert out.shape == (1, 1, 8)
    finite = torch.isfinite(out[0, 0]).nonzero().flatten().tolist()
    assert finite == list(m.support)
    assert m.config.pad_token_id not in m.support and m.config.eos_token_id is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"vocab_size": 1}, "vocab_size"),
        ({"support": (0, 0)}, "support"),
        ({"support": (0, 9)}, "support"),
        ({"support": (0, 1), "table": ((0.0,),)}, "table"),
        ({"support": (0, 1), "table": ((float("nan"), 0.0),)}, "NaN"),
        ({"support": (0, 1), "table": ((float("-inf"), float("-inf")),)}, "no possible token"),
    ],
)
def test_config_rejects_bad_tables(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ReferenceLMConfig(**kwargs)


def test_forward_rejects_out_of_vocabulary_ids(pair) -> None:
    with pytest.raises(ValueError, match="input_ids"):
        pair.target(torch.tensor([[1, 8]]))
    with pytest.raises(ValueError, match="context"):
        pair.target.next_logits([])


# ---------------------------------------------------------------- warpers as transformers applies them
@pytest.mark.parametrize(
    "settings",
    [
        SamplingSettings(),
        SamplingSettings(0.7),
        SamplingSettings(1.3, 3),
        SamplingSettings(0.8, 0, 0.8),
        SamplingSettings(0.9, 4, 0.85),
    ],
)
def test_processed_probs_match_transformers_warpers(pair, settings: SamplingSettings) -> None:
    logits = pair.target.next_logits([4, 0, 6, 1])
    procs = LogitsProcessorList()
    if settings.temperature != 1.0:
        procs.append(TemperatureLogitsWarper(settings.temperature))
    if settings.top_k:
        procs.append(TopKLogitsWarper(settings.top_k))
    if settings.top_p < 1.0:
        procs.append(TopPLogitsWarper(settings.top_p))
    hf = procs(torch.zeros(1, 1, dtype=torch.long), logits[None].clone())[0].softmax(-1).double().numpy()
    ours = processed_probs(logits, settings)
    assert np.array_equal(hf > 0, ours > 0)
    assert np.abs(hf - ours).max() < 1e-6
    assert math.isclose(ours.sum(), 1.0, abs_tol=1e-12)


def test_fragile_settings_raise() -> None:
    tied = torch.tensor([1.0, 1.0, 0.0, float("-inf")])
    with pytest.raises(ValueError, match="top_k"):
        warped_scores(tied, SamplingSettings(top_k=1))
    two = torch.tensor([0.0, 0.0])  # cumulative 0.5 at the smaller one: top_p = 0.5 sits on it
    with pytest.raises(ValueError, match="top_p"):
        warped_scores(two, SamplingSettings(top_p=0.5))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"temperature": 0.0}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_k": -1}, "top_k"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
    ],
)
def test_sampling_settings_name_the_bad_argument(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        SamplingSettings(**kwargs)


# ---------------------------------------------------------------- the exact sequence law
def test_sequence_law_is_the_chain_rule(pair) -> None:
    s = SamplingSettings(0.8, 0, 0.9)
    prompt = [1, 2]
    law = sequence_law(pair.target, prompt, 3, s)
    assert math.isclose(sum(law.values()), 1.0, abs_tol=1e-12)
    x = (4, 0, 7)
    expected = 1.0
    for t in range(3):
        expected *= conditional_law(pair.target, prompt + list(x[:t]), s)[x[t]]
    assert law.get(x, 0.0) == pytest.approx(expected, rel=1e-12)
    first = sequence_law(pair.target, prompt, 1, s)
    marg = {}
    for k, v in law.items():
        marg[k[:1]] = marg.get(k[:1], 0.0) + v
    assert all(marg[k] == pytest.approx(v, rel=1e-12) for k, v in first.items())


def test_sequence_law_refuses_too_large_an_enumeration(pair) -> None:
    m = math.ceil(math.log(MAX_ENUMERATION + 1, len(pair.target.support)))
    with pytest.raises(ValueError, match="^m: "):
        sequence_law(pair.target, [1], m, SamplingSettings())
    with pytest.raises(ValueError, match="prompt_ids"):
        sequence_law(pair.target, [], 1, SamplingSettings())


# ---------------------------------------------------------------- the pairs
def test_every_pair_builds_with_the_promised_properties() -> None:
    pairs = {name: reference_pair(name) for name in REFERENCE_PAIRS}
    ctx = [1, 2]
    assert torch.equal(pairs["identical"].target.next_logits(ctx), pairs["identical"].draft.next_logits(ctx))
    for name, pr in pairs.items():
        assert pr.target.config.vocab_size == pr.draft.config.vocab_size == pr.alt_draft.config.vocab_size
        assert not torch.equal(pr.draft._table, pr.alt_draft._table), name
    q = pairs["draft_zeros"].draft
    assert all(torch.isinf(q.next_logits(c)[[2, 6]]).all() for c in ([1], [4, 0], [7, 7, 1]))
    p = pairs["target_zeros"].target
    zero_states = [c for c in ([1], [2], [4], [0, 1], [6, 2], [7, 7]) if torch.isinf(p.next_logits(c)[4])]
    assert zero_states and torch.isfinite(pairs["target_zeros"].draft.next_logits(zero_states[0])[4])
    wide = pairs["wide"]
    assert wide.vocab_size == 1000 and wide.support == WIDE_SUPPORT and max(wide.support) > 256
    with pytest.raises(ValueError, match="unknown reference pair"):
        reference_pair("nope")


def test_transformers_generate_runs_on_the_reference_models(pair) -> None:
    torch.manual_seed(0)
    prompt = torch.tensor([list(pair.prompts[1])])
    out = pair.target.generate(prompt, assistant_model=pair.draft, do_sample=True, max_new_tokens=4, min_new_tokens=4)
    assert out.shape == (1, prompt.shape[1] + 4)
    assert set(out[0, prompt.shape[1] :].tolist()) <= set(pair.support)
