"""GPU layer: speculative decoding with Hugging Face causal LMs and batched verification kernels.

Public API (every name is imported lazily, on first access: ``import spectr_gbv.gpu`` needs
no extra, using a name needs ``torch`` and, for the decoder and caches, ``transformers``, the
``gpu`` extra; the verification kernels in :mod:`spectr_gbv.gpu.kernels` are imported on the
first verification):

* :class:`SpeculativeDecoder`, :class:`DecoderConfig` - the decoding loop
  (:mod:`spectr_gbv.gpu.decoder`);
* :class:`SamplingConfig`, :func:`process_logits` - temperature / top-k / top-p, applied
  identically to target and draft (:mod:`spectr_gbv.gpu.sampling`);
* :class:`DraftSource`, :class:`HFDraftSource`, :class:`NGramDraftSource` - drafters that
  return drafts with their exact laws (:mod:`spectr_gbv.gpu.draft_sources`);
* :class:`DecodeStats` (:mod:`spectr_gbv.gpu.stats`);
* :class:`RowCache` and the ``DynamicCache`` helpers (:mod:`spectr_gbv.gpu.cache`).

Layer rule: this package may import ``core``, ``theory``, ``reference`` and ``simulate``,
never the reverse.
"""

import importlib
from typing import Any

#: Public name -> defining module. Imported on first access, so ``import spectr_gbv.gpu.kernels``
#: needs only torch (the decoder's cache helpers import transformers).
_EXPORTS = {
    "RowCache": "cache",
    "crop_cache": "cache",
    "repeat_cache_rows": "cache",
    "select_cache_rows": "cache",
    "LOSSLESS_METHODS": "decoder",
    "LOSSY_METHODS": "decoder",
    "SINGLE_DRAFT_METHODS": "decoder",
    "DecoderConfig": "decoder",
    "SpeculativeDecoder": "decoder",
    "DraftSource": "draft_sources",
    "HFDraftSource": "draft_sources",
    "NGramDraftSource": "draft_sources",
    "model_vocab_size": "draft_sources",
    "SamplingConfig": "sampling",
    "process_logits": "sampling",
    "sample_from": "sampling",
    "top_k_mask": "sampling",
    "top_p_mask": "sampling",
    "DecodeStats": "stats",
}


def __getattr__(name: str) -> Any:
    """Import the public names lazily (see :data:`_EXPORTS`)."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"spectr_gbv.gpu.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "LOSSLESS_METHODS",
    "LOSSY_METHODS",
    "SINGLE_DRAFT_METHODS",
    "DecodeStats",
    "DecoderConfig",
    "DraftSource",
    "HFDraftSource",
    "NGramDraftSource",
    "RowCache",
    "SamplingConfig",
    "SpeculativeDecoder",
    "crop_cache",
    "model_vocab_size",
    "process_logits",
    "repeat_cache_rows",
    "sample_from",
    "select_cache_rows",
    "top_k_mask",
    "top_p_mask",
]
