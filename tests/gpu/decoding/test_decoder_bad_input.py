"""Bad input of the gpu layer (docs/bad_input.md): exact messages or correct results.

* kernels: ``gbv_multipath`` with K = 68, 100, 1000 drafts (``math.comb(K, j)`` used to overflow
  int64 from K = 68 on) gives the float64 reference's skewed law (same tolerances as
  tests/gpu/kernels/test_kernels_numerics.py) and, at K = 100, the reference's emitted law (G-test,
  alpha = 1e-5, N = 20,000, power >= 0.999 against a total-variation error of 0.05); a method
  that is not a str names ``method``;
* sampling: a tiny temperature (1e-38 down to 5e-324) gives the arg-max law with exact ties split
  evenly in float32 and float64, a huge one the uniform law over the kept tokens, and the decoder
  at T = 1e-38 emits the greedy continuation;
* decoder: a run longer than the model's context (Llama ``max_position_embeddings``, GPT-2
  ``n_positions``; the bounds T + N + L - 1 for the target and T + N + L - 2 for the draft are
  tight), a ragged batch, text, an empty prompt, bad seeds and unavailable devices raise
  ``ValueError`` naming the argument; a refused device leaves the models where they were.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

from spectr_gbv.core.instance import random_instance  # noqa: E402
from spectr_gbv.gpu import SamplingConfig, SpeculativeDecoder, process_logits  # noqa: E402
from spectr_gbv.gpu.decoding.decoder import check_device, context_size  # noqa: E402
from spectr_gbv.gpu.decoding.sampling import FLOAT32_TEMPERATURE_RANGE  # noqa: E402
from spectr_gbv.gpu.kernels import validate_inputs, verify  # noqa: E402
from spectr_gbv.gpu.kernels.gbv_multipath import select_path, skewed_rows  # noqa: E402
from spectr_gbv.reference import gbv_multipath as ref_multipath  # noqa: E402
from spectr_gbv.reference.base import VerifyInput  # noqa: E402
from spectr_gbv.reference.base import validate_inputs as ref_validate  # noqa: E402
from spectr_gbv.reference.registry import get_verifier  # noqa: E402
from tests.gpu.kernels.test_kernels_helpers import (  # noqa: E402
    batch_tensors,
    emitted_counts,
    float_rows,
    g_test,
    run_kernel,
    sample_drafts,
)
from tests.gpu.tiny_models import tiny_llama  # noqa: E402

V = 8


@pytest.fixture(scope="module")
def models():
    return tiny_llama(V, seed=0), tiny_llama(V, seed=1)


def decoder(models, **kw):
    args = dict(method="mdbv", num_drafts=2, draft_length=2, seed=0, device="cpu")
    args.update(kw)
    return SpeculativeDecoder(models[0], models[1], **args)


def gpt2(n_positions: int, seed: int = 0) -> GPT2LMHeadModel:
    config = GPT2Config(
        vocab_size=4, n_positions=n_positions, n_embd=16, n_layer=1, n_head=2, bos_token_id=0, eos_token_id=0
    )
    torch.manual_seed(seed)
    return GPT2LMHeadModel(config).eval()


# ---------------------------------------------------------------------------- kernels: large K
def _large_k_groups(K: int, seed: int) -> list:
    inst = random_instance(4, 3, seed, exact=False, zero_prob=0.3 if seed else 0.0, concentration=0.5)
    rng = np.random.default_rng(seed)
    return [float_rows(inst, sample_drafts(inst, K, rng)) for _ in range(2)]


@pytest.mark.parametrize("K", [68, 100, 1000])
@pytest.mark.parametrize("seed", [0, 1])
def test_multipath_skewed_law_for_many_drafts_equals_the_float_reference(K, seed):
    groups = _large_k_groups(K, seed)
    drafts, q, p, _ = batch_tensors(groups, 1)
    inputs = validate_inputs(drafts, q, p)
    k_sel = select_path(inputs)
    b = torch.arange(inputs.B)
    rows = skewed_rows(inputs.drafts[b, k_sel], inputs.target_probs[b, k_sel, :3], inputs.draft_probs[b, k_sel], K)
    for i, g in enumerate(groups):
        # built directly: the reference's validate_inputs checks the K (K - 1) / 2 draft pairs (12 s at K = 1000);
        # float_rows gives consistent rows by construction
        batch = VerifyInput(*(np.asarray(a) for a in g), exact=False) if K > 100 else ref_validate(*g)
        k_ref = ref_multipath.select_path(batch)
        assert int(k_sel[i]) == k_ref
        ref_rows = np.stack(ref_multipath.skewed_rows(batch, k_ref))
        np.testing.assert_allclose(rows[i].numpy(), ref_rows, rtol=1e-10, atol=1e-13)
    out = verify("gbv_multipath", drafts, q, p, generator=torch.Generator().manual_seed(seed))
    assert out.tokens.shape == (2, 4) and bool((out.tokens[:, 0] >= 0).all())


def test_multipath_with_100_drafts_emits_the_reference_law():
    inst = random_instance(3, 2, 5, exact=False, concentration=0.5)
    g = float_rows(inst, sample_drafts(inst, 100, np.random.default_rng(5)))
    law = get_verifier("gbv_multipath").outcome_law(*g)
    drafts, q, p, group = batch_tensors([g], 20_000)
    out = run_kernel("gbv_multipath", drafts, q, p, 3)
    result = g_test(law, emitted_counts(out, group, 1)[0])
    assert result.passed, result.describe()
    assert result.power(0.05) >= 0.999, result.describe()


def test_kernel_method_that_is_not_a_str_names_method():
    drafts, q, p, _ = batch_tensors(_large_k_groups(2, 0)[:1], 1)
    with pytest.raises(ValueError, match=r"method must be a str naming one kernel method, got list \['sd'\]"):
        verify(["sd"], drafts, q, p)


# ---------------------------------------------------------------------------- sampling: temperature
def test_float32_temperature_range_is_float32s_normal_range():
    assert FLOAT32_TEMPERATURE_RANGE == (2.0**-126, (2 - 2.0**-23) * 2.0**127)


@pytest.mark.parametrize("T", [1e-30, 1e-38, 1e-45, 1e-300, 5e-324])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_tiny_temperature_is_the_argmax_law_with_ties_split_evenly(T, dtype):
    logits = torch.tensor([[1.0, 4.0, 4.0, -math.inf, 3.9999], [0.0, -1.0, 2.5, 2.0, 1e-3]])
    for top_k in (None, 3):
        got = process_logits(logits, SamplingConfig(T, top_k=top_k), dtype=dtype)
        assert got.dtype == dtype
        assert got.tolist() == [[0.0, 0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0, 0.0]]


@pytest.mark.parametrize("T", [1e30, 1e39, 1e300])
def test_huge_temperature_is_the_uniform_law_over_the_kept_tokens(T):
    logits = torch.tensor([[1.0, 4.0, 4.0, -math.inf, 3.9999]])
    got = process_logits(logits, SamplingConfig(T, top_k=3), dtype=torch.float64)
    assert got.tolist() == [[0.0, 1 / 3, 1 / 3, 0.0, 1 / 3]]
    got32 = process_logits(logits, SamplingConfig(T))
    torch.testing.assert_close(got32, torch.tensor([[0.25, 0.25, 0.25, 0.0, 0.25]]), rtol=0, atol=1e-7)


def test_moderate_temperature_matches_the_float64_softmax():
    logits = 5 * torch.randn(4, 9, generator=torch.Generator().manual_seed(0))
    for T in (1e-2, 0.3, 7.0):
        ref = torch.softmax(logits.double() / T, -1)
        torch.testing.assert_close(process_logits(logits, SamplingConfig(T), dtype=torch.float64), ref)
        torch.testing.assert_close(process_logits(logits, SamplingConfig(T)), ref.float(), rtol=1e-5, atol=1e-6)


def test_temperature_too_large_for_a_float_names_temperature():
    with pytest.raises(ValueError, match=r"temperature must be a finite number >= 0, got 1000000"):
        SamplingConfig(10**400)


def test_decoder_at_a_tiny_temperature_emits_the_greedy_continuation(models):
    prompt = torch.tensor([[1, 2, 3], [4, 0, 5]])
    greedy, _ = decoder(models, temperature=0).generate(prompt, 8)
    tiny, stats = decoder(models, temperature=1e-38).generate(prompt, 8)
    assert torch.equal(tiny, greedy)
    assert stats.tokens_generated == 16


def test_decoder_runs_multipath_with_many_drafts(models):
    tokens, stats = decoder(models, method="gbv_multipath", num_drafts=70, draft_length=2).generate([1, 2], 5)
    assert tokens.shape == (7,) and bool(((tokens >= 0) & (tokens < V)).all())
    assert stats.tokens_generated == 5


# ---------------------------------------------------------------------------- decoder: context size
def test_context_size_reads_the_hf_config(models):
    assert context_size(models[0]) == 128  # LlamaConfig.max_position_embeddings
    assert context_size(gpt2(16)) == 16  # GPT2Config.n_positions
    assert context_size(torch.nn.Linear(2, 2)) is None


def test_prompt_longer_than_llama_context_is_refused(models):
    with pytest.raises(ValueError) as info:
        decoder(models).generate([1] * 130, 4)
    assert str(info.value) == (
        "prompt_ids: prompt length 130 + max_new_tokens 4 + draft_length 2 needs 135 positions of the target "
        "model, more than its context size 128 (config.max_position_embeddings); shorten the prompt or lower "
        "max_new_tokens or draft_length"
    )
    ar = SpeculativeDecoder(models[0], None, method="ar", device="cpu")
    with pytest.raises(ValueError, match=r"prompt length 3 \+ max_new_tokens 127 needs 129 .* size 128 \(config"):
        ar.generate([1, 2, 3], 127)
    assert ar.generate([1, 2, 3], 126)[0].shape == (129,)  # T + N - 1 = 128 positions: allowed


def test_gpt2_prompt_past_n_positions_is_refused_not_an_index_error():
    target, draft = gpt2(16), gpt2(64)
    dec = SpeculativeDecoder(target, draft, method="mdbv", draft_length=3, seed=0, device="cpu")
    with pytest.raises(ValueError, match=r"prompt length 20 \+ max_new_tokens 4 \+ draft_length 3 needs 26 .* 16"):
        dec.generate([1] * 20, 4)
    with pytest.raises(ValueError, match=r"needs 17 positions of the target model, .* size 16 \(config.n_positions"):
        dec.generate([1] * 6, 9)
    out, _ = dec.generate(torch.tensor([[1] * 6] * 4), 8)  # T + N + L - 1 = 16: the largest run allowed
    assert out.shape == (4, 14)


def test_draft_context_bound_is_t_plus_n_plus_l_minus_2():
    dec = SpeculativeDecoder(gpt2(64), gpt2(16), method="mdbv", draft_length=3, seed=0, device="cpu")
    with pytest.raises(ValueError, match=r"needs 17 positions of the draft model, more than its context size 16"):
        dec.generate([1] * 6, 10)
    out, _ = dec.generate(torch.tensor([[1] * 6] * 4), 9)  # T + N + L - 2 = 16
    assert out.shape == (4, 15)


# ---------------------------------------------------------------------------- decoder: prompts
@pytest.mark.parametrize(
    "prompt, message",
    [
        (
            [[1, 2], [3]],
            "prompt_ids is a ragged batch (row lengths 2, 1): every row of a batch needs the same length T; "
            "pad the prompts to one length or run them separately",
        ),
        (
            "hello",
            "prompt_ids must be token ids (a Tensor [T] or [B, T] of token ids, a list of ints or a list of "
            "equal-length lists of ints), got str; tokenize the text first",
        ),
        (
            b"hi",
            "prompt_ids must be token ids (a Tensor [T] or [B, T] of token ids, a list of ints or a list of "
            "equal-length lists of ints), got bytes; tokenize the text first",
        ),
        (
            [],
            "prompt_ids is empty (shape (0,)): every row needs at least one token to condition on "
            "(e.g. the tokenizer's BOS id)",
        ),
        (
            [[]],
            "prompt_ids is empty (shape (1, 0)): every row needs at least one token to condition on "
            "(e.g. the tokenizer's BOS id)",
        ),
        (
            None,
            "prompt_ids must be a Tensor [T] or [B, T] of token ids, a list of ints or a list of equal-length "
            "lists of ints; got NoneType (Could not infer dtype of NoneType)",
        ),
    ],
    ids=["ragged", "str", "bytes", "empty", "empty-row", "None"],
)
def test_bad_prompts_give_our_message(models, prompt, message):
    with pytest.raises(ValueError) as info:
        decoder(models).generate(prompt, 3)
    assert str(info.value) == message


def test_prompt_id_beyond_int64_names_prompt_ids(models):
    with pytest.raises(ValueError, match=r"^prompt_ids must be a Tensor .*; got list \(Overflow"):
        decoder(models).generate([2**70], 3)


# ---------------------------------------------------------------------------- decoder: seeds, devices
@pytest.mark.parametrize(
    "seed, shown",
    [(2**70, "1180591620717411303424"), ("0", "'0'"), (1.5, "1.5"), (-1, "-1"), (True, "True"), (2**64, None)],
)
def test_bad_seeds_name_seed(models, seed, shown):
    shown = shown or str(2**64)
    with pytest.raises(ValueError) as info:
        decoder(models, seed=seed)
    assert str(info.value) == f"seed must be None or an int in 0..2**64 - 1, got {shown}"


def test_largest_seed_and_numpy_seed_are_accepted(models):
    a, _ = decoder(models, seed=2**64 - 1).generate([1, 2], 4)
    b, _ = decoder(models, seed=np.uint64(2**64 - 1)).generate([1, 2], 4)
    assert torch.equal(a, b)


@pytest.mark.parametrize(
    "device, message",
    [
        ("meta", "device='meta': the decoder runs on cpu, cuda, mps, xpu, not 'meta' (a meta tensor holds no data)"),
        ("gpu", "device='gpu' is not a torch device; use one of cpu, cuda, mps, xpu (e.g. 'cuda:0')"),
        (1.0, "device must be None, a str, a torch.device or an int, got float"),
    ],
)
def test_bad_devices_name_device_and_leave_the_models_alone(models, device, message):
    with pytest.raises(ValueError) as info:
        decoder(models, device=device)
    assert str(info.value) == message
    assert {p.device.type for m in models for p in m.parameters()} == {"cpu"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="the message is for a machine without CUDA")
def test_cuda_without_a_gpu_names_device(models):
    with pytest.raises(ValueError) as info:
        decoder(models, device="cuda")
    assert str(info.value) == (
        "device='cuda', but no cuda device is available (torch.cuda.is_available() is False); use device='cpu' or None"
    )
    with pytest.raises(ValueError, match=r"^device=0 is a CUDA index, but no CUDA GPU is available"):
        check_device(0)
    assert check_device(None) == torch.device("cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_index_past_the_device_count_names_device():
    n = torch.cuda.device_count()
    assert check_device("cuda") == torch.device("cuda")
    with pytest.raises(ValueError, match=rf"device='cuda:{n}', but only {n} cuda device\(s\) are available"):
        check_device(f"cuda:{n}")


def test_target_that_is_not_a_module_names_target(models):
    with pytest.raises(ValueError, match=r"^target must be a causal LM \(a torch.nn.Module\), got str$"):
        SpeculativeDecoder("gpt2", models[1], device="cpu")
