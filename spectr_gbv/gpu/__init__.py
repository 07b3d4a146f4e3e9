"""GPU layer: speculative decoding with Hugging Face causal LMs and batched verification kernels.

Public API (importing this package needs ``torch`` and ``transformers``; the verification
kernels in :mod:`spectr_gbv.gpu.kernels` are imported lazily, on the first verification):

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

from spectr_gbv.gpu.cache import RowCache, crop_cache, repeat_cache_rows, select_cache_rows
from spectr_gbv.gpu.decoder import (
    LOSSLESS_METHODS,
    LOSSY_METHODS,
    SINGLE_DRAFT_METHODS,
    DecoderConfig,
    SpeculativeDecoder,
)
from spectr_gbv.gpu.draft_sources import DraftSource, HFDraftSource, NGramDraftSource, model_vocab_size
from spectr_gbv.gpu.sampling import SamplingConfig, process_logits, sample_from, top_k_mask, top_p_mask
from spectr_gbv.gpu.stats import DecodeStats

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
