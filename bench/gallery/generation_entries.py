"""Gallery entries for whole generation loops (``spectr-gbv validate ADAPTER --interface generation``).

:data:`GENERATION_ENTRIES` holds the keyword arguments of one ``run_gallery.Entry`` per ready adapter
(plain data, so this module imports neither the script nor torch): transformers' assisted generation
on each candidate-generator path with a separate draft model, universal assisted decoding, the lossy
ensemble control, and this package's ``SpeculativeDecoder``. The ``target`` of an entry is the
adapter's registry name (``spectr_gbv.validate.generation.adapters.ADAPTERS``); the lossy verdicts
are confirmed by :mod:`bench.gallery.generation_confirm`.
"""

from __future__ import annotations

from typing import Any

_HF_PACKAGES = ("transformers", "torch", "tokenizers")
_OWN_PACKAGES = ("spectr_gbv", "torch", "transformers")
_HF_SOURCE = "Packages (installed with this package's `gpu` extra, CPU only)"
_OWN_SOURCE = "This package's own decoder (no third-party code under test); versions"

_REFEREE = (
    "The referee builds the models (the reference pairs of `spectr_gbv.gpu.models.reference_pairs`: "
    "transformers causal LMs with real configs, `DynamicCache`, position ids and attention masks, whose laws put "
    "mass on 6 tokens so the target's exact sequence law is enumerable), hands the loop a prompt, temperature, "
    "top-k, top-p and a seed, and tests the first m generated tokens of many seeded calls against that exact law "
    "(`docs/validate.md`, 'Whole generation loops')."
)

_HF_FUNCTION = (
    "`transformers.generation.utils.GenerationMixin.generate(input_ids, assistant_model=draft, do_sample=True, "
    "...)`: `_assisted_decoding` with the candidate generator named below, verification by `_speculative_sampling` "
    "(Leviathan et al. 2023, Algorithm 1: accept while `r < p/q`, residual `(p - q)+` at the first rejection, bonus "
    "token after a full accept), KV-cache rollback of both models after each round."
)

_HF_WRAPPER = (
    "`spectr_gbv/validate/generation/adapters/hf_assisted.py`, `assisted_generate`: the call a user makes, "
    "`target.generate(input_ids, attention_mask=1, assistant_model=draft, do_sample=True, temperature=T, top_k=k, "
    "top_p=p, max_new_tokens=N, min_new_tokens=N, eos_token_id=None, pad_token_id=-1)` with the other warpers "
    "pinned to their neutral values, after `torch.manual_seed(seed)` inside `torch.random.fork_rng`; the draft "
    "length settings are set on the assistant's generation config for the call and restored afterwards. Batch "
    "size 1 (transformers refuses more). scikit-learn is not installed here, so the confidence threshold never "
    "adapts. At a temperature T != 1 the assistant's scores in this transformers version are its logits divided "
    "by T twice (`tests/gallery/test_generation_confirm.py` pins it: on `close,p1,T=0.5` the q that "
    "`_speculative_sampling` receives is the draft model's law at T^2 = 0.25): drafts are sharper than asked, and "
    "verification reads the same scores, so the output law is unaffected; the acceptance rate is the draft's at "
    "T^2. " + _REFEREE
)

_HF_PASS = (
    "At this budget (power 0.99 against a TV error of 0.1 on the joint law of the first m tokens, on seven "
    "reference pairs with temperatures, top-k and top-p, draft invariance on two pairs) the loop samples the "
    "target's sequence law: users of `generate(assistant_model=..., do_sample=True)` with {what} get the target "
    "model's distribution. Not covered: batch sizes > 1 (refused by transformers), EOS handling, other model "
    "families' cache classes."
)


def _hf(name: str, adapter: str, title: str, generator: str, what: str) -> dict[str, Any]:
    return {
        "name": name,
        "title": title,
        "target": adapter,
        "interface": "generation",
        "packages": _HF_PACKAGES,
        "budget": "standard",
        "extra": (),
        "expect": "PASSED",
        "source": _HF_SOURCE,
        "function": _HF_FUNCTION + " " + generator,
        "wrapper": _HF_WRAPPER,
        "meaning": _HF_PASS.format(what=what),
    }


_DECODER_FUNCTION = (
    "`spectr_gbv.gpu.SpeculativeDecoder(target, draft, method, num_drafts=K, draft_length=L, temperature, top_k, "
    "top_p, seed, scoring).generate(prompt, max_new_tokens)`: K i.i.d. drafts of L tokens from the draft model, "
    "scored by the target ({scoring}), verified by `{method}`, residual and bonus draws, cache rollback; every "
    "draft token and uniform from one `torch.Generator` seeded with `seed`."
)
_DECODER_WRAPPER = (
    "`spectr_gbv/validate/generation/adapters/spectr_decoder.py`: one decoder per call with the referee's models "
    "and settings (`top_k=0` / `top_p=1` mapped to off), returning the new ids. " + _REFEREE
)


def _decoder(name: str, adapter: str, method: str, scoring: str, budget: str, interface: str = "generation") -> dict:
    return {
        "name": name,
        "title": f"this package's `SpeculativeDecoder`, method `{method}` ({scoring})",
        "target": adapter,
        "interface": interface,
        "packages": _OWN_PACKAGES,
        "budget": budget,
        "extra": (),
        "expect": "PASSED",
        "source": _OWN_SOURCE,
        "function": _DECODER_FUNCTION.format(method=method, scoring=scoring),
        "wrapper": _DECODER_WRAPPER,
        "meaning": (
            f"The whole decoding loop with `{method}` ({scoring}) samples the target's sequence law at this budget "
            f"({'power 0.99 against a TV error of 0.1' if budget == 'standard' else 'quick: TV error 0.2'} on the "
            "joint law of the first m tokens): drafting, verification, residual and bonus draws and the cache "
            "rollback together, not only the verification rule the `validate` harness checks."
        ),
    }


GENERATION_ENTRIES: tuple[dict[str, Any], ...] = (
    _hf(
        "generation_hf_assisted",
        "hf-assisted",
        "transformers' assisted generation (library defaults)",
        "Here `AssistedCandidateGenerator` with the library defaults: `constant` schedule, 20 draft tokens, "
        "confidence threshold 0.4 (the draft stops a round when its probability of the token it drew falls below).",
        "the library's default draft settings",
    ),
    _hf(
        "generation_hf_assisted_heuristic",
        "hf-assisted:heuristic",
        "transformers' assisted generation, `heuristic` schedule",
        "Here `AssistedCandidateGenerator` with `num_assistant_tokens_schedule='heuristic'` from 5 draft tokens "
        "(+2 after a fully accepted round, -1 otherwise), threshold off.",
        "the heuristic draft-length schedule",
    ),
    _hf(
        "generation_hf_assisted_heuristic_transient",
        "hf-assisted:heuristic_transient",
        "transformers' assisted generation, `heuristic_transient` schedule",
        "Here `AssistedCandidateGenerator` with `num_assistant_tokens_schedule='heuristic_transient'` from 5 "
        "draft tokens, threshold off.",
        "the heuristic_transient schedule",
    ),
    _hf(
        "generation_hf_assisted_confidence",
        "hf-assisted:confidence",
        "transformers' assisted generation, confidence threshold 0.5",
        "Here `AssistedCandidateGenerator`, constant 8 draft tokens, `assistant_confidence_threshold=0.5` (fixed: "
        "its ROC-curve update needs scikit-learn); stopping depends on the drafted prefix only.",
        "a confidence threshold",
    ),
    _hf(
        "generation_hf_assisted_constant_1",
        "hf-assisted:constant-1",
        "transformers' assisted generation, 1 draft token per round",
        "Here `AssistedCandidateGenerator`, constant schedule, 1 draft token, threshold off (every round ends with "
        "a residual or bonus draw).",
        "one draft token per round",
    ),
    {
        "name": "generation_hf_assisted_usd",
        "title": "transformers' universal assisted decoding (different tokenizers, sampling)",
        "target": "hf-assisted:usd",
        "interface": "generation",
        "packages": _HF_PACKAGES,
        "budget": "standard",
        "extra": (),
        "expect": "FAILED",
        "confirm": "bench.gallery.generation_confirm:confirm_usd",
        "source": _HF_SOURCE,
        "function": (
            "`generate(assistant_model=..., tokenizer=..., assistant_tokenizer=..., do_sample=True)`: "
            "`UniversalSpeculativeDecodingGenerator` (`generation/candidate_generator.py`; Timor et al. 2025, "
            "meant to be lossless). `AssistantToTargetTranslator` prunes the assistant's head to the tokens both "
            "vocabularies share, in the order of `assistant_overlap_token_ids` (the assistant tokenizer's "
            "`get_vocab()` iteration order), `get_target_ids` maps a drafted column j to the target id of "
            "`assistant_overlap_token_ids[j]`, and `get_target_logits` scatters the columns onto the target ids "
            "of the shared assistant ids in increasing order; `_speculative_sampling` verifies."
        ),
        "wrapper": (
            "`spectr_gbv/validate/generation/adapters/hf_usd.py`: the adapter brings its own assistant (a seeded "
            "one-layer Llama over V + 1 words) and two `tokenizers` WordLevel tokenizers, `t<i>` -> i, the "
            "assistant's with one extra word (so the vocabularies differ and transformers takes its pruning path); "
            "the referee's draft is ignored, 3 draft tokens, threshold off. `get_vocab()` of a `tokenizers` model "
            "iterates a hash map whose order changes between processes, so the adapter is not deterministic "
            "across processes (the advisory determinism note). " + _REFEREE
        ),
        "meaning": (
            "Universal assisted decoding with sampling does not sample the target's law in this transformers "
            "version: the drafts are drawn from the pruned head's law q_s in `get_vocab()` order, but accepted and "
            "corrected with q_v, the same numbers placed on the target ids in increasing order, a permutation of "
            "q_s. The exact first-token law above (computed from the translator transformers built, confirmed by "
            "seeded calls) is far from p; only an order that happens to be increasing is lossless. The "
            "`draft_invariance` failures come from the law test against the exact law, not from a dependence on "
            "the draft (the adapter ignores it). Users of `generate(..., assistant_tokenizer=..., do_sample=True)` "
            "with an assistant whose vocabulary has tokens the target lacks (the pruning path) get a distorted "
            "distribution unless the `get_vocab()` order happens to be increasing on the shared tokens. Greedy "
            "decoding (`do_sample=False`) takes another candidate generator "
            "(`AssistedCandidateGeneratorDifferentTokenizers`, no pruned head) and is not tested here."
        ),
    },
    {
        "name": "generation_hf_assisted_ensemble",
        "title": "transformers' assisted generation with `assistant_ensemble_weight` (negative control)",
        "target": "hf-assisted:ensemble",
        "interface": "generation",
        "packages": _HF_PACKAGES,
        "budget": "standard",
        "extra": (),
        "expect": "FAILED",
        "confirm": "bench.gallery.generation_confirm:confirm_ensemble",
        "source": _HF_SOURCE,
        "function": _HF_FUNCTION + " Here with `assistant_ensemble_weight=0.5` (DIVERSE static ensemble "
        "verification): the acceptance ratio becomes `1 - w + w p/q`, documented as trading a controlled "
        "distributional bias for acceptance; 3 draft tokens, threshold off.",
        "wrapper": _HF_WRAPPER,
        "meaning": (
            "A negative control: ensemble verification is lossy by design (transformers' docstring says it "
            "verifies against `w p + (1 - w) q` 'at the cost of controlled distributional bias'), so the referee "
            "must reject it, and does. The exact first-token law above is the mixture `0.5 p + 0.5 q`. This is "
            "not a bug in transformers; users who set `assistant_ensemble_weight` get the mixture, not the target."
        ),
    },
    _decoder("generation_spectr_decoder_mdbv", "spectr-decoder:mdbv", "mdbv", "K = 2, L = 3, scoring auto", "standard"),
    _decoder(
        "generation_spectr_decoder_mdbv_flat",
        "spectr-decoder:mdbv:flat",
        "mdbv",
        "K = 2, L = 3, flat scoring: K batch rows",
        "standard",
    ),
    _decoder(
        "generation_spectr_decoder_batched_mdbv",
        "spectr-decoder-batched:mdbv",
        "mdbv",
        "B prompts per call, K = 2, L = 3, scoring auto",
        "standard",
        interface="generation_batched",
    ),
    _decoder("generation_spectr_decoder_sd", "spectr-decoder:sd", "sd", "K = 1, L = 3", "quick"),
    _decoder("generation_spectr_decoder_spectr", "spectr-decoder:spectr", "spectr", "K = 2, L = 3, auto", "quick"),
    _decoder("generation_spectr_decoder_rrs", "spectr-decoder:rrs", "rrs", "K = 2, L = 3, scoring auto", "quick"),
)

__all__ = ["GENERATION_ENTRIES"]
