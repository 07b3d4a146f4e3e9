"""Unit tests of the decoder plumbing: logit processing, cache helpers, stats, draft sources, errors."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import numpy as np  # noqa: E402
from transformers.generation.logits_process import (  # noqa: E402
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from spectr_gbv.gpu import (  # noqa: E402
    DraftSource,
    HFDraftSource,
    NGramDraftSource,
    RowCache,
    SamplingConfig,
    SpeculativeDecoder,
    crop_cache,
    process_logits,
    repeat_cache_rows,
    sample_from,
    select_cache_rows,
    top_k_mask,
    top_p_mask,
)
from spectr_gbv.gpu.decoding import DraftSourceBase  # noqa: E402
from spectr_gbv.gpu.decoding.cache import model_forward  # noqa: E402
from spectr_gbv.gpu.decoding.tree_support import supports_tree_attention  # noqa: E402
from tests.gpu.tiny_models import (  # noqa: E402
    assert_exact_draft_laws,
    exact_law,
    g_test,
    law_test,
    no_cache_logits,
    tiny_llama,
    unit_pair,
)

V = 5


@pytest.fixture(scope="module")
def models():
    return unit_pair(V)


# ----------------------------------------------------------------------------- sampling
def test_temperature_is_softmax_of_scaled_logits():
    logits = torch.randn(3, 7, generator=torch.Generator().manual_seed(0))
    for t in (0.5, 1.0, 1.7):
        got = process_logits(logits, SamplingConfig(temperature=t), dtype=torch.float64)
        torch.testing.assert_close(got, torch.softmax(logits.double() / t, -1))


def test_top_k_mask_is_exact_and_keeps_ties():
    logits = torch.tensor([[0.0, 3.0, 1.0, 3.0, 2.0], [5.0, 4.0, 3.0, 2.0, 1.0]])
    assert top_k_mask(logits, 2).tolist() == [[False, True, False, True, False], [True, True, False, False, False]]
    assert top_k_mask(logits, 3).tolist() == [[False, True, False, True, True], [True, True, True, False, False]]
    assert top_k_mask(logits, 9).all()
    probs = process_logits(logits, SamplingConfig(top_k=2), dtype=torch.float64)
    assert probs[1, 2:].eq(0).all()
    torch.testing.assert_close(probs[1, :2], torch.softmax(torch.tensor([5.0, 4.0], dtype=torch.float64), -1))


def test_top_p_mask_is_the_smallest_nucleus():
    gen = torch.Generator().manual_seed(1)
    probs = torch.softmax(2 * torch.randn(50, 9, generator=gen, dtype=torch.float64), -1)
    for top_p in (0.05, 0.3, 0.5, 0.9, 0.999):
        mask = top_p_mask(probs, top_p)
        for row, keep in zip(probs, mask, strict=True):
            order = torch.argsort(row, descending=True, stable=True)
            cum = torch.cumsum(row[order], 0)
            n_keep = int((cum < top_p).sum()) + 1  # smallest prefix with mass >= top_p
            expected = torch.zeros_like(keep)
            expected[order[: min(n_keep, len(row))]] = True
            assert torch.equal(keep, expected)


def test_processing_matches_hf_logits_warpers():
    gen = torch.Generator().manual_seed(2)
    logits = 3 * torch.randn(40, 11, generator=gen)
    for t, k, p in [(0.7, 4, 0.8), (1.3, None, 0.6), (1.0, 3, None), (0.9, 6, 0.95)]:
        procs = [TemperatureLogitsWarper(t)]
        procs += [TopKLogitsWarper(k)] if k else []
        procs += [TopPLogitsWarper(p)] if p else []
        ref = torch.softmax(LogitsProcessorList(procs)(None, logits.clone()), -1)
        got = process_logits(logits, SamplingConfig(t, k, p))
        torch.testing.assert_close(got, ref, atol=1e-6, rtol=1e-5)


def test_greedy_is_one_hot_at_first_argmax_and_bad_logits_raise():
    probs = process_logits(torch.tensor([[1.0, 4.0, 4.0, 0.0]]), SamplingConfig(temperature=0))
    assert probs.tolist() == [[0.0, 1.0, 0.0, 0.0]]
    with pytest.raises(ValueError, match="NaN"):
        process_logits(torch.tensor([0.0, float("nan")]), SamplingConfig())
    with pytest.raises(ValueError, match="no finite"):
        process_logits(torch.tensor([-float("inf")] * 3), SamplingConfig())


@pytest.mark.parametrize(
    "kwargs", [dict(temperature=-1.0), dict(temperature=float("nan")), dict(top_k=0), dict(top_p=0.0), dict(top_p=1.5)]
)
def test_bad_sampling_config_raises(kwargs):
    with pytest.raises(ValueError):
        SamplingConfig(**kwargs)


# ----------------------------------------------------------------------------- cache helpers
def test_crop_select_repeat_match_a_no_cache_forward(models):
    target, _ = models
    prompts = [[1, 2, 3, 4, 0, 2], [4, 4, 1, 0, 3, 1]]
    cache = transformers.DynamicCache()
    with torch.no_grad():
        model_forward(target, torch.tensor(prompts), cache, torch.arange(6).expand(2, 6))
        crop_cache(cache, 3)
        repeat_cache_rows(cache, 3)  # rows: 0 0 0 1 1 1
        select_cache_rows(cache, torch.tensor([4, 1]))  # -> prompt 1, prompt 0
        new = torch.tensor([[2, 2], [3, 0]])
        got = model_forward(target, new, cache, torch.tensor([[3, 4], [3, 4]]))
    for row, base in enumerate([prompts[1][:3], prompts[0][:3]]):
        ref = no_cache_logits(target, base + new[row].tolist())[3:]
        torch.testing.assert_close(got[row], ref, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="length"):
        crop_cache(cache, 99)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_row_cache_with_holes_matches_a_no_cache_forward(attn):
    model = tiny_llama(V, seed=3, num_layers=2, initializer_range=0.25, attn_implementation=attn)
    rc = RowCache(3, torch.device("cpu"))
    seqs = [[1, 2, 3], [4, 0, 1], [2, 2, 2]]
    with torch.no_grad():
        rc.forward(model, torch.tensor(seqs))
        rc.truncate(torch.tensor([3, 1, 2]))  # ragged rows: [1 2 3], [4], [2 2]
        seqs = [[1, 2, 3], [4], [2, 2]]
        block = torch.tensor([[0, 3], [1, 1], [4, 0]])
        valid = torch.tensor([[False, True], [True, True], [False, True]])  # left padding
        out = rc.forward(model, block, valid)
        for r in range(3):
            seqs[r] += block[r][valid[r]].tolist()
            torch.testing.assert_close(out[r, -1], no_cache_logits(model, seqs[r])[-1], atol=1e-5, rtol=0)
        rc.repeat(2)
        rc.select(torch.tensor([5, 0, 3]))
        seqs = [seqs[2], seqs[0], seqs[1]]
        rc.truncate(rc.lengths - torch.tensor([1, 0, 2]))  # drop some, keep a hole-free prefix
        seqs = [seqs[0][:-1], seqs[1], seqs[2][:-2]]
        out = rc.forward(model, torch.tensor([[1, 2], [3, 4], [0, 0]]))
        for r, extra in enumerate([[1, 2], [3, 4], [0, 0]]):
            seqs[r] += extra
            ref = no_cache_logits(model, seqs[r])[-2:]
            torch.testing.assert_close(out[r], ref, atol=1e-5, rtol=0)
    assert rc.lengths.tolist() == [len(s) for s in seqs]
    assert rc.valid.shape[1] == max(len(s) for s in seqs) and torch.isfinite(out).all()


# ----------------------------------------------------------------------------- draft sources
def test_hf_draft_source_laws_are_the_exact_sampling_laws(models):
    """q[b, k, t] equals the processed law of the draft model at (prompt, draft prefix)."""
    _, draft = models
    src = HFDraftSource(draft)
    assert isinstance(src, DraftSource)
    sampling = SamplingConfig(temperature=0.8, top_k=3)
    prompts = torch.tensor([[1, 2, 3], [0, 4, 4]])
    src.begin(prompts)
    drafts, q = src.propose(3, 2, sampling, torch.Generator().manual_seed(0))
    assert drafts.shape == (2, 3, 2) and q.shape == (2, 3, 2, V)
    assert_exact_draft_laws(draft, prompts, drafts, q, sampling)
    assert src.forward_calls == 1 + 2  # prefill, then one batched call per position


def test_ngram_source_counts_context_and_commits():
    src = NGramDraftSource(vocab_size=4, order=2, smoothing=0.5, corpus=[[0, 1, 0, 1]])
    src.begin(torch.tensor([[2, 0]]))
    drafts, q = src.propose(2, 3, SamplingConfig(), torch.Generator().manual_seed(0))
    # after token 0: corpus counts 0->1 twice, plus smoothing 0.5 each
    torch.testing.assert_close(q[0, 0, 0].double(), torch.tensor([0.5, 2.5, 0.5, 0.5], dtype=torch.float64) / 4)
    src.commit(torch.tensor([1]), torch.tensor([2]), torch.tensor([3]))
    assert src._contexts[0] == [2, 0] + drafts[0, 1, :2].tolist() + [3]
    with pytest.raises(ValueError):
        NGramDraftSource(vocab_size=4, order=0)


class _Uniform(DraftSourceBase):
    """A third-party source: uniform drafts, no model (the bookkeeping attributes inherited)."""

    vocab_size = V

    def begin(self, prompt_ids):
        self.rows = prompt_ids.shape[0]

    def propose(self, num_drafts, draft_length, sampling, generator):
        q = torch.full((self.rows, num_drafts, draft_length, V), 1.0 / V)
        return sample_from(q.view(-1, V), generator).view(self.rows, num_drafts, draft_length), q

    def commit(self, draft_index, num_accepted, next_token):
        pass

    def select_rows(self, rows):
        self.rows = rows.shape[0]


def test_draft_source_interface_and_base_defaults(models):
    """Every attribute the decoder reads is part of DraftSource; DraftSourceBase supplies the bookkeeping ones."""
    assert {"vocab_size", "model", "forward_calls", "positions"} <= set(DraftSource.__annotations__)
    ngram = NGramDraftSource(vocab_size=4)
    assert isinstance(ngram, DraftSource) and isinstance(ngram, DraftSourceBase)
    assert (ngram.model, ngram.forward_calls, ngram.positions) == (None, 0, 0)

    class Bare:  # the four methods and vocab_size, but none of the bookkeeping attributes
        vocab_size = V
        begin = propose = commit = select_rows = _Uniform.begin

    assert not isinstance(Bare(), DraftSource)
    target, _ = models
    with pytest.raises(ValueError, match="draft must be a causal LM or a DraftSource, got Bare"):
        SpeculativeDecoder(target, Bare(), method="mdbv", num_drafts=2, draft_length=2)
    ids, st = SpeculativeDecoder(target, _Uniform(), method="mdbv", num_drafts=2, draft_length=2, seed=0).generate(
        [1, 2, 3], max_new_tokens=6
    )
    assert ids.shape == (9,) and st.draft_calls == 0 and st.draft_positions == 0


# ----------------------------------------------------------------------------- decoder
@pytest.mark.parametrize("scoring", ["tree", "flat"])
def test_stats_accounting_and_call_counts(models, scoring):
    target, draft = models
    assert supports_tree_attention(target) and supports_tree_attention(draft)  # the one-time probes, before counting
    calls = []
    handle = target.register_forward_hook(lambda *a: calls.append(1))
    try:
        dec = SpeculativeDecoder(target, draft, method="mdbv", num_drafts=2, draft_length=3, seed=0, scoring=scoring)
        ids, st = dec.generate([1, 2, 3], max_new_tokens=25)
    finally:
        handle.remove()
    assert st.scoring == scoring
    if scoring == "flat":
        assert st.target_positions == 2 * 4 * st.iterations and st.draft_positions == (1 + 2 * 2) * st.iterations
    else:  # each distinct prefix once: the root, then 1 or 2 nodes per depth
        assert st.iterations * 4 <= st.target_positions <= st.iterations * 7
        assert st.iterations * 3 <= st.draft_positions <= st.iterations * 5
    assert ids.shape == (3 + 25,) and ids[:3].tolist() == [1, 2, 3]
    assert ((ids >= 0) & (ids < V)).all()
    assert sum(st.accepted_hist) == st.row_iterations == st.iterations == st.target_calls
    assert st.tokens_emitted == sum((t + 1) * c for t, c in enumerate(st.accepted_hist))
    assert st.tokens_generated == 25 and 0 <= st.tokens_emitted - 25 <= 3
    assert len(calls) == st.prefill_calls + st.target_calls  # ONE target forward per iteration
    assert st.draft_calls == 1 + 3 * st.iterations  # prefill + one batched call per position
    assert st.block_efficiency == st.tokens_emitted / st.iterations
    assert st.time_total >= st.time_draft + st.time_target + st.time_verify - 1e-9
    assert st.accepted_hist[3] > 0 or st.accepted_hist[2] > 0  # the caches were cropped after acceptance


def test_batched_rows_finish_independently(models):
    target, draft = models
    dec = SpeculativeDecoder(target, draft, method="spectr", num_drafts=3, draft_length=2, seed=1)
    ids, st = dec.generate(torch.tensor([[1, 2]] * 40), max_new_tokens=7)
    assert ids.shape == (40, 9) and ((ids >= 0) & (ids < V)).all()
    assert st.tokens_generated == 280 and st.row_iterations == sum(st.accepted_hist)
    assert st.row_iterations < st.iterations * 40  # finished rows were dropped


@pytest.mark.parametrize("drafter", ["hf", "ngram"])
def test_one_token_prompt_and_batch(models, drafter):
    """T = 1: nothing to prefill; both caches start empty."""
    target, draft = models
    source = draft if drafter == "hf" else NGramDraftSource(V)
    dec = SpeculativeDecoder(target, source, method="mdbv", num_drafts=2, draft_length=2, seed=2)
    ids, st = dec.generate(torch.tensor([[3], [1], [0]]), max_new_tokens=6)
    assert ids.shape == (3, 7) and st.prefill_calls == 0 and ((ids >= 0) & (ids < V)).all()


def test_seed_reproducibility(models):
    target, draft = models
    runs = [SpeculativeDecoder(target, draft, method="rrs", num_drafts=2, draft_length=2, seed=5) for _ in range(2)]
    a, b = (d.generate([3, 1], max_new_tokens=12)[0] for d in runs)
    assert torch.equal(a, b)


def test_ar_is_plain_sampling_token_for_token(models):
    """AR with seed s equals sampling from the processed target law with the same generator."""
    target, _ = models
    sampling = SamplingConfig(temperature=0.9, top_p=0.9)
    dec = SpeculativeDecoder(target, None, method="ar", temperature=0.9, top_p=0.9, seed=11)
    ids, st = dec.generate([1, 2], max_new_tokens=20)
    gen, seq = torch.Generator().manual_seed(11), [1, 2]
    for _ in range(20):
        law = process_logits(no_cache_logits(target, seq)[-1], sampling)
        seq.append(int(sample_from(law[None], gen)))
    assert ids.tolist() == seq and st.target_calls == 20 and st.accepted_hist == [20]


@pytest.mark.parametrize("method", ["ar", "sd", "bv", "spectr", "rrs", "gbv_multipath", "mdbv"])
def test_greedy_equals_target_argmax_continuation(models, method):
    """Temperature 0: one-hot laws on both sides, output = the target's greedy continuation."""
    target, draft = models
    K = 1 if method in ("ar", "sd", "bv") else 2
    dec = SpeculativeDecoder(target, draft, method=method, num_drafts=K, draft_length=3, temperature=0.0, seed=0)
    ids, _ = dec.generate([1, 2, 3], max_new_tokens=15)
    seq = [1, 2, 3]
    for _ in range(15):
        seq.append(int(no_cache_logits(target, seq)[-1].argmax()))
    assert ids.tolist() == seq


def test_ngram_draft_end_to_end_is_lossless(models):
    """N-gram drafts + MDBV: the first 2 tokens follow the target law.

    G-test, alpha 1e-3, N = 4000 runs, V^2 = 25 cells (df <= 24): power >= 0.977 against any
    law at TV 0.06 (0.81 at TV 0.05), worst direction (non-centrality 4 N d^2).
    """
    target, _ = models
    dec = SpeculativeDecoder(target, NGramDraftSource(V, order=2), method="mdbv", num_drafts=2, draft_length=2, seed=3)
    res, st = law_test(dec, [1, 2, 1], m=2, runs=4000, power_tv=0.06)
    assert res.p_value > res.alpha and res.power >= 0.9, str(res)
    assert st.block_efficiency > 1.0


def test_ar_law_matches_exact_law(models):
    """AR with T = 1.2, top-k 4: same G-test as above (alpha 1e-3, N = 4000, power >= 0.977 at TV 0.06)."""
    target, _ = models
    dec = SpeculativeDecoder(target, None, method="ar", temperature=1.2, top_k=4, seed=4)
    res, _ = law_test(dec, [0, 3], m=2, runs=4000, power_tv=0.06)
    assert res.p_value > res.alpha and res.power >= 0.9, str(res)


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "prompt, match",
    [
        (torch.tensor([[[1, 2]]]), "shape"),
        (torch.tensor([], dtype=torch.int64), "shape"),
        (torch.tensor([1.0, 2.0]), "integer"),
        (torch.tensor([1, V]), "vocabulary"),
        ([-1, 2], "vocabulary"),
    ],
)
def test_bad_prompts_raise(models, prompt, match):
    dec = SpeculativeDecoder(models[0], models[1], method="sd", num_drafts=1, draft_length=2, seed=0)
    with pytest.raises(ValueError, match=match):
        dec.generate(prompt, max_new_tokens=3)


@pytest.mark.parametrize("n", [0, -2, 1.5, True])
def test_bad_max_new_tokens_raise(models, n):
    dec = SpeculativeDecoder(models[0], None, method="ar")
    with pytest.raises(ValueError, match="max_new_tokens"):
        dec.generate([1, 2], max_new_tokens=n)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(method="mdbv", num_drafts=0), "num_drafts"),
        (dict(method="mdbv", draft_length=0), "draft_length"),
        (dict(method="sd", num_drafts=2), "single draft"),
        (dict(method="nope"), "unknown method"),
        (dict(method="spectr_gbv_released"), "lossy"),
        (dict(method="lp_oracle"), "unknown method"),
        (dict(method="mdbv", temperature=-0.5), "temperature"),
    ],
)
def test_bad_configuration_raises(models, kwargs, match):
    with pytest.raises(ValueError, match=match):
        SpeculativeDecoder(models[0], models[1], **kwargs)


def test_vocab_mismatch_and_missing_draft_raise(models):
    with pytest.raises(ValueError, match="vocabulary mismatch"):
        SpeculativeDecoder(models[0], tiny_llama(V + 1, seed=0), method="mdbv")
    with pytest.raises(ValueError, match="vocabulary mismatch"):
        SpeculativeDecoder(models[0], NGramDraftSource(V + 2), method="rrs")
    with pytest.raises(ValueError, match="needs a draft"):
        SpeculativeDecoder(models[0], None, method="bv", num_drafts=1)


def test_kernel_output_out_of_vocabulary_is_raised_not_emitted(models):
    from dataclasses import dataclass

    @dataclass
    class Out:
        tokens: torch.Tensor
        num_accepted: torch.Tensor
        draft_index: torch.Tensor

    def bad_verify(method, drafts, q, p, **kw):
        B, K, L = drafts.shape
        tokens = torch.full((B, L + 1), -1)
        tokens[:, 0] = V  # out of range
        return Out(tokens, torch.zeros(B, dtype=torch.int64), torch.zeros(B, dtype=torch.int64))

    dec = SpeculativeDecoder(models[0], models[1], method="mdbv", seed=0)
    dec._verify_fn = bad_verify
    with pytest.raises(RuntimeError, match="outside"):
        dec.generate([1, 2], max_new_tokens=4)


def test_exact_law_helper_sums_to_one(models):
    law = exact_law(models[0], [1], 3, SamplingConfig(top_k=3))
    assert law.shape == (V**3,) and abs(law.sum() - 1) < 1e-9
    counts = np.round(law * 1000).astype(int)
    assert g_test(counts, law).p_value > 0.5
