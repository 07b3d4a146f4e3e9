"""GPU layer: speculative decoding with Hugging Face causal LMs and batched verification kernels.

Three subpackages, each one idea; imports go one way, kernels <- decoding <- models:

* :mod:`spectr_gbv.gpu.kernels` - the batched verification kernels, :func:`verify`;
* :mod:`spectr_gbv.gpu.decoding` - the decoding loop, caches, sampling, draft sources, stats;
* :mod:`spectr_gbv.gpu.models` - synthetic pairs of real models' shapes and the generation
  referee's models (reference LMs, their pairs, the exact sequence law).

The real model pair (SmolLM2-135M-Instruct and its distilled draft, fetching, prompt sets) and
``spectr-gbv bench`` are an application of this layer, :mod:`spectr_gbv.realpair`; nothing here
imports it. The flat modules of earlier releases (``spectr_gbv.gpu.decoder``,
``spectr_gbv.gpu.benchmark``, ...) are gone; CHANGELOG.md lists each old path with its new module.

Public API (every name is imported lazily, on first access: ``import spectr_gbv.gpu`` needs
no extra, using a name needs ``torch`` and, for the decoder and caches, ``transformers``, the
``gpu`` extra; the verification kernels in :mod:`spectr_gbv.gpu.kernels` are imported on the
first verification):

* :func:`verify` - the batched verification kernels (:mod:`spectr_gbv.gpu.kernels`);
  :class:`KernelInputs`, :class:`UniformSource`, :class:`VerifyOutput` - the interface of a
  user's torch rule, ``rule(inputs, uniforms) -> VerifyOutput``, which ``verify``, the decoder
  and the bench take in place of a method name (:mod:`spectr_gbv.gpu.kernels.rules`;
  :class:`UnverifiedRuleWarning` for a rule that makes no ``lossless`` claim);
* :class:`SpeculativeDecoder`, :class:`DecoderConfig` - the decoding loop
  (:mod:`spectr_gbv.gpu.decoding.decoder`);
* :class:`SamplingConfig`, :func:`process_logits` - temperature / top-k / top-p, applied
  identically to target and draft (:mod:`spectr_gbv.gpu.decoding.sampling`);
* :class:`DraftSource` (:class:`DraftSourceBase` gives its defaults), :class:`HFDraftSource`,
  :class:`NGramDraftSource` - drafters that return drafts with their exact laws
  (:mod:`spectr_gbv.gpu.decoding.draft_sources`);
* :class:`DecodeStats` (:mod:`spectr_gbv.gpu.decoding.stats`);
* :class:`TokenTree`, :func:`supports_tree_attention` - tree-structured scoring and the probe that
  chooses it (:mod:`spectr_gbv.gpu.decoding.tree`, :mod:`spectr_gbv.gpu.decoding.tree_support`);
* :class:`RowCache` and the ``DynamicCache`` helpers (:mod:`spectr_gbv.gpu.decoding.cache`).

Layer rule: this package may import ``core``, ``theory``, ``reference``, ``simulate`` and
``ledger``, never the reverse. ``load_target`` and ``load_draft``, exported here in earlier
releases, come from :mod:`spectr_gbv.realpair.models`.
"""

from spectr_gbv.core.lazy import lazy_getattr

#: Public name -> defining module. Imported on first access, so ``import spectr_gbv.gpu.kernels``
#: needs only torch (the decoder's cache helpers import transformers).
_EXPORTS = {
    "RowCache": "decoding.cache",
    "crop_cache": "decoding.cache",
    "repeat_cache_rows": "decoding.cache",
    "select_cache_rows": "decoding.cache",
    "LOSSLESS_METHODS": "decoding.decoder",
    "LOSSY_METHODS": "decoding.decoder",
    "SINGLE_DRAFT_METHODS": "decoding.decoder",
    "SCORING_MODES": "decoding.decoder",
    "DecoderConfig": "decoding.decoder",
    "SpeculativeDecoder": "decoding.decoder",
    "DraftSource": "decoding.draft_sources",
    "DraftSourceBase": "decoding.draft_sources",
    "HFDraftSource": "decoding.draft_sources",
    "NGramDraftSource": "decoding.draft_sources",
    "model_vocab_size": "decoding.cache",
    "SamplingConfig": "decoding.sampling",
    "process_logits": "decoding.sampling",
    "sample_from": "decoding.sampling",
    "top_k_mask": "decoding.sampling",
    "top_p_mask": "decoding.sampling",
    "DecodeStats": "decoding.stats",
    "TokenTree": "decoding.tree",
    "supports_tree_attention": "decoding.tree_support",
    "verify": "kernels",
    "KernelInputs": "kernels",
    "UniformSource": "kernels",
    "VerifyOutput": "kernels",
    "UnverifiedRuleWarning": "kernels",
}


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


__all__ = [
    "LOSSLESS_METHODS",
    "LOSSY_METHODS",
    "SCORING_MODES",
    "SINGLE_DRAFT_METHODS",
    "DecodeStats",
    "DecoderConfig",
    "DraftSource",
    "DraftSourceBase",
    "HFDraftSource",
    "KernelInputs",
    "NGramDraftSource",
    "RowCache",
    "SamplingConfig",
    "SpeculativeDecoder",
    "TokenTree",
    "UniformSource",
    "UnverifiedRuleWarning",
    "VerifyOutput",
    "crop_cache",
    "model_vocab_size",
    "process_logits",
    "repeat_cache_rows",
    "sample_from",
    "select_cache_rows",
    "supports_tree_attention",
    "top_k_mask",
    "top_p_mask",
    "verify",
]
