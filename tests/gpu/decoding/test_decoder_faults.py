"""Decoder faults that used to decode wrongly and silently (docs/bad_input.md, "Decoder faults").

* a target or draft left in training mode (attention dropout 0.5) decodes exactly as in eval
  mode, with a ``TrainingModeWarning`` naming the model, and keeps the caller's mode;
* the tree-attention probe runs the model in eval mode (a training-mode model is not blamed on
  its masks) and names the cause of a failure: a forward that is random in eval mode, the
  exception a masked forward raised, a small difference (numerics) or a large one (masks);
* a bfloat16 pair decodes a batch with tree scoring (one ulp used to fail the probe);
* a draft source returning other shapes than asked raises ``ValueError`` naming the source and
  both numbers;
* ``optimal_multidraft`` / ``near_opt_bv`` above V = 4,096 warn with a per-call estimate (no
  kernel runs).
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from spectr_gbv.gpu import SpeculativeDecoder  # noqa: E402
from spectr_gbv.gpu.decoding import guards, tree_support  # noqa: E402
from spectr_gbv.gpu.decoding.draft_sources import HFDraftSource, NGramDraftSource  # noqa: E402
from spectr_gbv.gpu.decoding.guards import SlowMethodWarning, TrainingModeWarning  # noqa: E402
from spectr_gbv.gpu.decoding.tree_support import probe_tree_attention, supports_tree_attention  # noqa: E402
from tests.gpu.decoding.test_tree import MaskIgnoringLlama, MaskRefusingLlama, _with_llama_signature  # noqa: E402
from tests.gpu.tiny_models import tiny_llama  # noqa: E402

V = 8
PROMPTS = [[1, 2, 3], [4, 0, 2]]


def dropout_llama(seed: int, p: float = 0.5) -> torch.nn.Module:
    """A tiny Llama whose attention drops out with probability ``p`` in training mode."""
    model = tiny_llama(V, seed=seed, num_layers=2)
    for layer in model.model.layers:
        layer.self_attn.attention_dropout = p
    return model


# ----------------------------------------------------------------------------- 1. training mode
def test_models_in_training_mode_decode_as_in_eval_mode_warn_and_keep_their_mode():
    target, draft = dropout_llama(0), dropout_llama(1)
    kwargs = dict(method="mdbv", num_drafts=3, draft_length=3, temperature=1.0, seed=3, device="cpu")
    ref, ref_stats = SpeculativeDecoder(target, draft, **kwargs).generate(PROMPTS, max_new_tokens=16)
    target.train()
    draft.train()
    dec = SpeculativeDecoder(target, draft, **kwargs)
    assert target.training and draft.training  # the constructor leaves the caller's mode
    with pytest.warns(TrainingModeWarning) as record:
        ids, stats = dec.generate(PROMPTS, max_new_tokens=16)
    messages = [str(w.message) for w in record if w.category is TrainingModeWarning]
    assert messages == [
        "the target model LlamaForCausalLM and the draft model LlamaForCausalLM are in training mode (dropout "
        "would change the laws decoded); SpeculativeDecoder.generate runs them in eval mode and restores the "
        "mode afterwards"
    ]
    assert ids.tolist() == ref.tolist() and stats.accepted_hist == ref_stats.accepted_hist
    assert all(m.training for m in target.modules()) and all(m.training for m in draft.modules())


def test_eval_mode_restores_mixed_modes_and_names_only_the_training_model():
    target, draft = dropout_llama(0), dropout_llama(1)
    draft.model.layers[0].train()  # one submodule training, the rest in eval mode
    with pytest.warns(TrainingModeWarning, match=r"^the draft model LlamaForCausalLM is in training mode"):
        with guards.eval_mode({"target": target, "draft": draft}, "test"):
            assert not any(m.training for m in draft.modules())
    assert [n for n, m in draft.named_modules() if m.training][:2] == ["model.layers.0", "model.layers.0.self_attn"]
    assert not draft.training and not any(m.training for m in target.modules())


def test_train_mode_logits_under_the_guard_equal_eval_logits():
    model = dropout_llama(2)
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        ref = model(input_ids=ids).logits
        model.train()
        assert not torch.equal(model(input_ids=ids).logits, ref)  # dropout is active: the fault
        with pytest.warns(TrainingModeWarning, match="the model model LlamaForCausalLM"):
            with guards.eval_mode({"model": model}, "test"):
                out = model(input_ids=ids).logits
    assert torch.equal(out, ref) and model.training


def test_hf_draft_source_runs_its_model_in_eval_mode():
    draft = dropout_llama(1)
    src = HFDraftSource(draft)
    draft.train()
    from spectr_gbv.gpu.decoding.sampling import SamplingConfig

    with pytest.warns(TrainingModeWarning, match="HFDraftSource.begin"):
        src.begin(torch.tensor(PROMPTS))
    with pytest.warns(TrainingModeWarning, match="HFDraftSource.propose"):
        drafts, q = src.propose(2, 3, SamplingConfig(), torch.Generator().manual_seed(0))
    draft.eval()
    ref = HFDraftSource(draft)
    ref.begin(torch.tensor(PROMPTS))
    ref_drafts, ref_q = ref.propose(2, 3, SamplingConfig(), torch.Generator().manual_seed(0))
    assert torch.equal(drafts, ref_drafts) and torch.equal(q, ref_q)


# ----------------------------------------------------------------------------- 2. the probe's diagnosis
def test_probe_runs_a_training_model_in_eval_mode_and_passes():
    model = dropout_llama(3)
    model.train()
    probe = probe_tree_attention(model)
    assert probe.ok and probe.cause == "" and model.training


@_with_llama_signature
class RandomLlama(transformers.LlamaForCausalLM):
    """Adds noise to its logits in eval mode too (a stochastic layer that ignores ``model.eval()``)."""

    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        out.logits = out.logits + 0.3 * torch.randn_like(out.logits)
        return out


def _as(cls, dtype=torch.float32):
    base = tiny_llama(V, seed=0, num_layers=2)
    out = cls(base.config).eval()
    out.load_state_dict(base.state_dict())
    return out.to(dtype)


def test_probe_names_a_random_forward_not_the_masks():
    probe = probe_tree_attention(_as(RandomLlama))
    assert not probe.ok and probe.cause == "random"
    assert probe.reason.startswith("two identical forwards of the model differ (by ")
    assert "the masks were not tested" in probe.reason and "ignores the custom 4-D" not in probe.reason


def test_probe_names_a_refused_mask_and_an_ignored_one():
    refused = probe_tree_attention(_as(MaskRefusingLlama))
    assert (refused.cause, refused.reason) == (
        "raised",
        "a forward with a custom 4-D attention mask raised ValueError: custom 4-D attention masks are not supported",
    )
    model = _as(MaskIgnoringLlama, torch.bfloat16)
    ignored = probe_tree_attention(model)
    assert ignored.cause == "masks" and ignored.error / (1 + ignored.scale) > 0.4
    assert ignored.reason.endswith("means it ignores the custom 4-D attention mask or the position ids")
    assert "bfloat16 ulps" in ignored.reason
    message = tree_support.tree_attention_refusal(model, "target")
    assert message.startswith("the target model MaskIgnoringLlama does not score token trees correctly (its log-probs")


def test_probe_calls_a_small_difference_numerics(monkeypatch):
    """With the old floor (1e-3 relative, under one bfloat16 ulp) a bf16 model fails, and is called numerics."""
    monkeypatch.setattr(tree_support, "PROBE_ULPS", 0.1)
    model = tiny_llama(V, seed=7, num_layers=2).to(torch.bfloat16)
    probe = probe_tree_attention(model)
    assert not probe.ok and probe.cause == "numerics" and 0 < probe.error < 0.1 * (1 + probe.scale)
    assert "looks like bfloat16 rounding (numerics), not ignored masks" in probe.reason


# ----------------------------------------------------------------------------- 3. bf16 batches
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_pair_decodes_a_batch_with_tree_scoring(dtype):
    target = tiny_llama(V, seed=0, num_layers=2).to(dtype)
    draft = tiny_llama(V, seed=1).to(dtype)
    probe = probe_tree_attention(target)
    ulps = min(64 * torch.finfo(dtype).eps, 0.1)  # bfloat16: the cap, 12.8 ulps; float16: 64 ulps
    assert probe.ok and probe.dtype == dtype and probe.tolerance == pytest.approx(ulps * (1 + probe.scale))
    assert supports_tree_attention(draft)
    dec = SpeculativeDecoder(target, draft, num_drafts=3, draft_length=2, seed=0, device="cpu")
    ids, stats = dec.generate(PROMPTS, max_new_tokens=8)
    assert stats.scoring == "tree" and ids.shape == (2, 11) and stats.tokens_generated == 16


# ----------------------------------------------------------------------------- 4. draft source shapes
class ShortSource(NGramDraftSource):
    """Returns fewer drafts, tokens or probabilities than asked."""

    def __init__(self, cut: str) -> None:
        super().__init__(V, order=2)
        self.cut = cut

    def propose(self, num_drafts, draft_length, sampling, generator):
        drafts, q = super().propose(num_drafts, draft_length, sampling, generator)
        if self.cut == "K":
            return drafts[:, :1], q[:, :1]
        if self.cut == "L":
            return drafts[:, :, :1], q[:, :, :1]
        if self.cut == "V":
            return drafts, q[..., :-1]
        return drafts.float(), q


@pytest.mark.parametrize(
    "cut, message",
    [
        ("K", r"^draft source ShortSource.propose returned 1 draft per row \(drafts of shape \(2, 1, 3\)\), "
              r"asked for num_drafts = 4$"),
        ("L", r"returned 1 token per draft \(drafts of shape \(2, 4, 1\)\), asked for draft_length = 3"),
        ("V", r"returned 7 probabilities per law \(draft_probs of shape \(2, 4, 3, 7\)\), asked for the target's vo"),
        ("dtype", r"ShortSource.propose returned drafts of dtype torch.float32; token ids are integers"),
    ],
)
def test_a_draft_source_returning_other_shapes_is_refused(cut, message):
    dec = SpeculativeDecoder(tiny_llama(V, seed=0), ShortSource(cut), num_drafts=4, draft_length=3, device="cpu")
    with pytest.raises(ValueError, match=message):
        dec.generate(PROMPTS, max_new_tokens=6)


# ----------------------------------------------------------------------------- 5. slow verifiers
@pytest.fixture(scope="module")
def wide():
    """A tiny Llama with V = 8,192 (no kernel is run with it)."""
    return tiny_llama(8192, seed=0, hidden_size=8)


def _slow_warnings(target, **kwargs):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        SpeculativeDecoder(target, target, device="cpu", **kwargs)
    return [str(w.message) for w in record if w.category is SlowMethodWarning]


@pytest.mark.parametrize("method, seconds", [("optimal_multidraft", "34"), ("near_opt_bv", "27")])
def test_slow_verifiers_on_a_large_vocabulary_warn_with_a_cost_estimate(wide, method, seconds):
    (message,) = _slow_warnings(wide, method=method, num_drafts=3, draft_length=24)
    assert message.startswith(f"{method} verifies with a sort and a peel of every drafted node's vocabulary row")
    assert f"at V = 8192, K = 3, L = 24, B = 1 expect about {seconds} s per verification call" in message
    assert _slow_warnings(wide, method="mdbv", num_drafts=3, draft_length=24) == []
    assert _slow_warnings(tiny_llama(4096, seed=0, hidden_size=8), method=method) == []


def test_slow_method_estimate_scales_with_nodes_and_vocabulary():
    assert guards.slow_method_seconds("optimal_multidraft", 8192, 12) == pytest.approx(12 * 0.47)
    assert guards.slow_method_seconds("near_opt_bv", 32000, 24) == pytest.approx(24 * 0.38 * (32000 / 8192) ** 1.3)
    assert guards.slow_method_note("near_opt_bv", 4096, 3, 8) is None
    assert guards.slow_method_note("mdbv", 10**5, 3, 8) is None
