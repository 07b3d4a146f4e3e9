"""Models built for the verifiers' tests and timings: synthetic pairs and the generation referee's models.

* :mod:`~spectr_gbv.gpu.models.synthetic` - random pairs of real models' shapes with high acceptance
  (:func:`synthetic_pair`), for timing where weights cannot be fetched;
* :mod:`~spectr_gbv.gpu.models.reference_lm` - :class:`ReferenceLM`, a real HF causal LM (config,
  croppable cache, positions, masks) whose next-token law is a known function of its context;
* :mod:`~spectr_gbv.gpu.models.reference_pairs` - the generation referee's target/draft pairs
  (:func:`reference_pair`: close, far, identical, zeros, peaked, wide vocabulary);
* :mod:`~spectr_gbv.gpu.models.sequence_law` - the exact law of the first m generated tokens after
  temperature, top-k and top-p (:func:`sequence_law`).

The real pair (the SmolLM2-135M-Instruct target, its distilled draft, fetching, the cache,
conversion, prompt sets) is the application's: :mod:`spectr_gbv.realpair.models`.

Import rule: may import :mod:`spectr_gbv.gpu.kernels`, :mod:`spectr_gbv.gpu.decoding`, ``core``,
``theory``, ``reference``, ``simulate``, torch and transformers; never :mod:`spectr_gbv.realpair`.
Importing this package imports nothing heavy: the names below are imported lazily, on first
access; monkeypatch a name in its defining module.
"""

from spectr_gbv.core.lazy import lazy_getattr

#: Public name -> defining module (relative to this package), imported on first access.
_EXPORTS = {
    "synthetic_pair": "synthetic",
    "ReferenceLM": "reference_lm",
    "ReferenceLMConfig": "reference_lm",
    "REFERENCE_PAIRS": "reference_pairs",
    "ReferencePair": "reference_pairs",
    "reference_pair": "reference_pairs",
    "SamplingSettings": "sequence_law",
    "processed_probs": "sequence_law",
    "sequence_law": "sequence_law",
}


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


__all__ = sorted(_EXPORTS)
