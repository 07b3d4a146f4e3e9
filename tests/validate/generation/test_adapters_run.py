"""Every ready generation adapter runs on the reference models: length, vocabulary, determinism, no side effects."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spectr_gbv.gpu.models.reference_pairs import reference_pair  # noqa: E402
from spectr_gbv.validate.generation.adapters import ADAPTERS, resolve_adapter  # noqa: E402

N = 4
SETTINGS = dict(temperature=0.8, top_k=0, top_p=1.0)


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def pairs():
    return {name: reference_pair(name) for name in ("close", "wide")}


def _prompts(fn, pair):
    """Three ragged prompts for a batched adapter, the 4-token prompt otherwise."""
    return [list(p) for p in pair.prompts] if fn.interface == "generation_batched" else list(pair.prompts[1])


def _rows(fn, out):
    return [list(r) for r in out] if fn.interface == "generation_batched" else [list(out)]


@pytest.mark.parametrize("name", list(ADAPTERS))
def test_adapter_returns_max_new_tokens_ids_in_the_support_deterministically(name, pairs):
    """Regression: before draft_sources expanded a tree slab's position ids to [B, n], every tree
    and auto-scored multi-draft adapter raised "position_ids: expected [1, 2], got (1, 1)" here."""
    fn = resolve_adapter(name)
    pair = pairs["close"]
    prompts = _prompts(fn, pair)
    first = fn(pair.target, pair.draft, prompts, N, seed=11, **SETTINGS)
    again = fn(pair.target, pair.draft, prompts, N, seed=11, **SETTINGS)
    rows = _rows(fn, first)
    assert len(rows) == (3 if fn.interface == "generation_batched" else 1)
    for row in rows:
        assert len(row) == N and all(isinstance(x, int) for x in row)
        assert set(row) <= set(pair.support), row
    if fn.deterministic:
        assert _rows(fn, again) == rows


@pytest.mark.parametrize(
    "name",
    ["hf-assisted", "hf-assisted:heuristic", "hf-assisted:usd", "spectr-decoder:mdbv:tree", "spectr-decoder:mdbv:flat",
     "spectr-decoder:near_opt_bv", "spectr-decoder-batched:gbv_multipath:tree"],
)
def test_wide_vocabulary_ids_past_255(name, pairs):
    fn = resolve_adapter(name)
    pair = pairs["wide"]
    seen = set()
    for seed in range(3):
        for row in _rows(fn, fn(pair.target, pair.draft, _prompts(fn, pair), N, seed=seed, **SETTINGS)):
            assert len(row) == N and set(row) <= set(pair.support), row
            seen.update(row)
    assert max(seen) > 255  # ids past one byte come back intact


def test_seeds_differ_and_outputs_depend_on_the_seed(pairs):
    pair = pairs["close"]
    for name in ("hf-assisted:constant-3", "spectr-decoder:mdbv"):
        fn = resolve_adapter(name)
        outs = {tuple(fn(pair.target, pair.draft, list(pair.prompts[0]), 6, seed=s, **SETTINGS)) for s in range(8)}
        assert len(outs) > 2, name


@pytest.mark.parametrize("name", ["hf-assisted:heuristic", "hf-assisted:confidence", "hf-assisted:ensemble"])
def test_hf_adapter_leaves_draft_config_and_global_rng_as_they_were(name, pairs):
    pair = pairs["close"]
    config = pair.draft.generation_config
    before = config.to_dict()
    torch.manual_seed(1234)
    expected = torch.rand(3)
    torch.manual_seed(1234)
    resolve_adapter(name)(pair.target, pair.draft, list(pair.prompts[1]), 8, seed=5, **SETTINGS)
    assert torch.equal(torch.rand(3), expected)  # the caller's RNG stream is untouched
    assert pair.draft.generation_config is config and config.to_dict() == before


def test_hf_heuristic_call_does_not_depend_on_earlier_calls(pairs):
    """transformers carries the heuristic draft length over between calls; the adapter restores it."""
    pair = pairs["close"]
    fn = resolve_adapter("hf-assisted:heuristic")
    args = (pair.target, pair.draft, list(pair.prompts[0]), 8)
    first = fn(*args, seed=2, **SETTINGS)
    for seed in range(3, 6):
        fn(*args, seed=seed, **SETTINGS)
    assert fn(*args, seed=2, **SETTINGS) == first
    assert pair.draft.generation_config.num_assistant_tokens is None


def test_batched_adapter_keeps_row_order_and_groups_by_length(pairs):
    pair = pairs["close"]
    batched = resolve_adapter("spectr-decoder-batched:mdbv")
    single = resolve_adapter("spectr-decoder:mdbv")
    a, b = list(pair.prompts[0]), list(pair.prompts[1])  # lengths 2 and 4
    # one prompt in a batch of one is decoded exactly as by the single-prompt adapter
    assert batched(pair.target, pair.draft, [a], N, seed=3, **SETTINGS) == [
        single(pair.target, pair.draft, a, N, seed=3, **SETTINGS)
    ]
    # the first length group runs first on the fresh generator, whatever follows it
    out = batched(pair.target, pair.draft, [a, b, a], N, seed=3, **SETTINGS)
    pair_only = batched(pair.target, pair.draft, [a, a], N, seed=3, **SETTINGS)
    assert [out[0], out[2]] == pair_only
    assert len(out[1]) == N


def test_ar_adapter_ignores_the_draft(pairs):
    pair = pairs["close"]
    fn = resolve_adapter("spectr-decoder:ar")
    x = fn(pair.target, pair.draft, list(pair.prompts[0]), N, seed=4, **SETTINGS)
    y = fn(pair.target, pair.alt_draft, list(pair.prompts[0]), N, seed=4, **SETTINGS)
    assert x == y


def test_prompt_may_be_a_tensor_or_numpy_array(pairs):
    np = pytest.importorskip("numpy")
    pair = pairs["close"]
    fn = resolve_adapter("hf-assisted:constant-3")
    ids = list(pair.prompts[1])
    ref = fn(pair.target, pair.draft, ids, N, seed=9, **SETTINGS)
    assert fn(pair.target, pair.draft, torch.tensor(ids), N, seed=9, **SETTINGS) == ref
    assert fn(pair.target, pair.draft, np.array(ids), N, seed=9, **SETTINGS) == ref


def test_usd_adapter_brings_its_own_assistant_and_leaves_the_draft_alone(pairs):
    from spectr_gbv.validate.generation.adapters.hf_usd import usd_kit

    pair = pairs["close"]
    fn = resolve_adapter("hf-assisted:usd")
    before = {k: v.clone() for k, v in pair.draft.state_dict().items()}
    out = fn(pair.target, pair.draft, list(pair.prompts[0]), 6, seed=1, **SETTINGS)
    assert fn(pair.target, pair.draft, list(pair.prompts[0]), 6, seed=1, **SETTINGS) == out  # within one process
    assert fn(pair.target, pair.alt_draft, list(pair.prompts[0]), 6, seed=1, **SETTINGS) == out  # draft ignored
    after = pair.draft.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    kit = usd_kit(pair.vocab_size)
    # transformers replaced the assistant's head by one over the 8 shared ids (the 9th word is assistant-only)
    assert type(kit.assistant.get_output_embeddings()).__name__ == "_PruneReindexingLMHead"
    assert kit.assistant.get_output_embeddings().pruned_lm_head.out_features == pair.vocab_size
    assert kit.assistant_tokenizer.get_vocab()["<extra>"] == pair.vocab_size
    with pytest.raises(ValueError, match="prompt_ids holds id 8, outside the target's vocabulary 0..7"):
        fn(pair.target, pair.draft, [1, 8], 2, seed=1, **SETTINGS)
