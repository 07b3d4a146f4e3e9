"""Picklable model and prompt factories of the bench sweep's tests: tiny random Llama models, toy prompts.

Referenced as ``"tests.sweep.bench_models:tiny_models"`` and ``"tests.sweep.bench_models:tiny_prompts"``;
the Ray workers import this module (the repository root must be on their ``PYTHONPATH``).
"""

from __future__ import annotations

from typing import Any

import torch

from spectr_gbv.realpair.config import BenchConfig, BenchModels
from tests.gpu.tiny_models import perturbed_copy, tiny_llama

V = 16
MODELS = "tests.sweep.bench_models:tiny_models"
PROMPTS = "tests.sweep.bench_models:tiny_prompts"
TEXTS = ("def add(a, b):", "What is 2 + 3?", "for i in range(10):")


def toy_encode(text: str, chat: bool, max_tokens: int) -> torch.Tensor:
    """Characters mod V (a leading 2 for chat prompts)."""
    ids = [ord(c) % V for c in text][-max_tokens:] or [1]
    return torch.tensor(([2] if chat else []) + ids, dtype=torch.int64)


def toy_decode(ids: torch.Tensor) -> str:
    """Space-separated ids."""
    return " ".join(map(str, ids.tolist()))


def tiny_models() -> BenchModels:
    """Target: a 2-layer random Llama on V = 16 tokens; draft: a perturbed copy (same seeds every call)."""
    target = tiny_llama(V, 0, num_layers=2)
    return BenchModels(target, perturbed_copy(target, 1, 0.3), toy_encode, toy_decode, "tiny", "tiny-draft")


def tiny_prompts(config: BenchConfig, models: BenchModels) -> dict[str, list[Any]]:
    """The first ``config.num_prompts`` of :data:`TEXTS` for every dataset of the config."""
    texts = TEXTS[: config.num_prompts]
    return {ds: [models.encode(t, False, config.max_prompt_tokens) for t in texts] for ds in config.datasets}
