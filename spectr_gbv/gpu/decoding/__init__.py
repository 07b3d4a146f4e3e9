"""The decoding loop: speculative decoding with Hugging Face causal LMs, one batch row per prompt.

Holds the loop and what it is made of:

* :mod:`~spectr_gbv.gpu.decoding.decoder` - :class:`SpeculativeDecoder`, :class:`DecoderConfig`;
* :mod:`~spectr_gbv.gpu.decoding.cache` - :class:`RowCache` and the ``DynamicCache`` helpers;
* :mod:`~spectr_gbv.gpu.decoding.tree` - :class:`TokenTree`, each distinct draft prefix once (tree scoring);
* :mod:`~spectr_gbv.gpu.decoding.tree_support` - :func:`supports_tree_attention`, the one-time probe that
  chooses tree or flat scoring;
* :mod:`~spectr_gbv.gpu.decoding.sampling` - temperature / top-k / top-p, applied identically to
  target and draft;
* :mod:`~spectr_gbv.gpu.decoding.draft_sources` - drafters that return drafts with their exact laws;
* :mod:`~spectr_gbv.gpu.decoding.stats` - :class:`DecodeStats`, the per-call counters and timers;
* :mod:`~spectr_gbv.gpu.decoding.guards` - run-time guards: models in training mode, draft proposals
  of the wrong shape, slow verifiers on a large vocabulary.

Import rule: may import :mod:`spectr_gbv.gpu.kernels` (the decoder, lazily, on the first
verification), ``core``, ``theory``, ``reference``, ``simulate``, torch and transformers; never
:mod:`spectr_gbv.gpu.models` or :mod:`spectr_gbv.realpair` (kernels <- decoding <- models <- bench).
Names are imported lazily, on first access, as in :mod:`spectr_gbv.gpu`.
"""

from spectr_gbv.core.lazy import lazy_getattr

#: Public name -> defining module (relative to this package), imported on first access.
_EXPORTS = {
    "RowCache": "cache",
    "crop_cache": "cache",
    "repeat_cache_rows": "cache",
    "select_cache_rows": "cache",
    "LOSSLESS_METHODS": "decoder",
    "LOSSY_METHODS": "decoder",
    "SINGLE_DRAFT_METHODS": "decoder",
    "SCORING_MODES": "decoder",
    "DecoderConfig": "decoder",
    "SpeculativeDecoder": "decoder",
    "DraftSource": "draft_sources",
    "DraftSourceBase": "draft_sources",
    "HFDraftSource": "draft_sources",
    "NGramDraftSource": "draft_sources",
    "model_vocab_size": "cache",
    "SamplingConfig": "sampling",
    "process_logits": "sampling",
    "sample_from": "sampling",
    "top_k_mask": "sampling",
    "top_p_mask": "sampling",
    "DecodeStats": "stats",
    "TokenTree": "tree",
    "supports_tree_attention": "tree_support",
    "probe_tree_attention": "tree_support",
    "TreeProbe": "tree_support",
    "TrainingModeWarning": "guards",
    "SlowMethodWarning": "guards",
}


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


__all__ = sorted(_EXPORTS)
