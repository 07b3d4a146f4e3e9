"""Test helpers for the gpu layer: tiny random causal LMs, exact laws by enumeration, G-tests.

Nothing is downloaded: models are built from a ``LlamaConfig`` with a fixed torch seed and a
large ``initializer_range`` so that the next-token laws are far from uniform.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from spectr_gbv.gpu.decoding.sampling import SamplingConfig, process_logits  # noqa: E402
from spectr_gbv.simulate.monte_carlo import g_test_power, pooled_g_test  # noqa: E402


def tiny_llama(
    vocab_size: int = 6,
    seed: int = 0,
    *,
    hidden_size: int = 16,
    num_layers: int = 1,
    initializer_range: float = 0.5,
    attn_implementation: str = "sdpa",
    max_position_embeddings: int = 128,
) -> LlamaForCausalLM:
    """A random Llama causal LM (float32, eval mode) built from a config with a fixed seed."""
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=max_position_embeddings,
        initializer_range=initializer_range,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=None,
        pad_token_id=None,
    )
    config._attn_implementation = attn_implementation
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()


@torch.no_grad()
def exact_law(model: torch.nn.Module, prompt: list[int], m: int, sampling: SamplingConfig) -> np.ndarray:
    """Exact law of the first m generated tokens, by enumerating V^m continuations (no cache).

    Returns
    -------
    ndarray [V**m], float64
        Index = ``np.ravel_multi_index(tokens, (V,) * m)``.
    """
    V = model.config.vocab_size
    law = np.ones(1)
    for j in range(m):
        prefixes = list(itertools.product(range(V), repeat=j))
        ids = torch.tensor([prompt + list(pre) for pre in prefixes], dtype=torch.int64)
        probs = process_logits(model(input_ids=ids).logits[:, -1], sampling, dtype=torch.float64).numpy()
        law = (law[:, None] * probs).reshape(-1)
    return law


@dataclass(frozen=True)
class GTestResult:
    """G-test of observed counts against an exact law (cells with expected count < 5 pooled)."""

    g: float
    p_value: float
    df: int
    n: int
    alpha: float
    tv: float
    power: float
    power_tv: float

    def __str__(self) -> str:
        return (
            f"G={self.g:.1f} df={self.df} p={self.p_value:.3g} N={self.n} alpha={self.alpha} "
            f"observed TV={self.tv:.4f} power(TV {self.power_tv})={self.power:.3f}"
        )


def g_test(counts: np.ndarray, law: np.ndarray, *, alpha: float = 1e-3, power_tv: float = 0.05) -> GTestResult:
    """``scipy.stats.power_divergence(lambda_="log-likelihood")`` with pooling, TV and power.

    Power is the worst-direction guarantee of :func:`spectr_gbv.simulate.monte_carlo.g_test_power`
    (non-central chi-square, non-centrality 4 N d^2) for a TV error ``power_tv``.
    """
    counts = np.asarray(counts, dtype=np.float64)
    n = int(counts.sum())
    test = pooled_g_test(counts, law)
    df = max(test.df, 1)
    tv = 0.5 * float(np.abs(counts / n - law).sum())
    return GTestResult(test.g, test.p_value, df, n, alpha, tv, g_test_power(n, df, alpha, power_tv), power_tv)


def first_tokens_counts(tokens: torch.Tensor, prompt_len: int, m: int, vocab_size: int) -> np.ndarray:
    """Histogram over V^m of the first m generated tokens of each row of ``tokens [B, T+N]``."""
    first = tokens[:, prompt_len : prompt_len + m].cpu().numpy()
    idx = np.ravel_multi_index(tuple(first.T), (vocab_size,) * m)
    return np.bincount(idx, minlength=vocab_size**m)


def law_test(decoder, prompt: list[int], m: int, runs: int, *, alpha: float = 1e-3, power_tv: float = 0.05):
    """Run ``runs`` independent rows through ``decoder`` and G-test the first m tokens."""
    tokens, stats = decoder.generate(torch.tensor([prompt] * runs), max_new_tokens=m)
    law = exact_law(decoder.target, prompt, m, decoder.config.sampling)
    counts = first_tokens_counts(tokens, len(prompt), m, decoder.vocab_size)
    return g_test(counts, law, alpha=alpha, power_tv=power_tv), stats


def perturbed_copy(model: LlamaForCausalLM, seed: int, scale: float) -> LlamaForCausalLM:
    """A draft close to ``model``: same architecture, weights ``w + scale * std(w) * N(0, 1)``.

    The noise comes from its own seed, so target and draft are two different random models
    whose laws are close enough for drafts to be accepted often (tau = L happens).
    """
    draft = LlamaForCausalLM(model.config).eval()
    draft.load_state_dict(model.state_dict())
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in draft.parameters():
            noise = torch.randn(param.shape, generator=gen, dtype=param.dtype)
            param.add_(scale * float(param.std() if param.numel() > 1 else 1.0) * noise)
    return draft


def unit_pair(vocab_size: int = 5) -> tuple[LlamaForCausalLM, LlamaForCausalLM]:
    """The decoding unit tests' pair: a 2-layer tiny Llama and a perturbed copy (scale 0.15)."""
    target = tiny_llama(vocab_size, seed=0, num_layers=2, initializer_range=0.25)
    return target, perturbed_copy(target, seed=1, scale=0.15)


@torch.no_grad()
def no_cache_logits(model: torch.nn.Module, ids: list[int]) -> torch.Tensor:
    """``model``'s logits ``[len(ids), V]`` on ``ids`` fed as one plain sequence, without a cache."""
    return model(input_ids=torch.tensor([ids])).logits[0]


@torch.no_grad()
def assert_exact_draft_laws(
    draft: torch.nn.Module, prompts: torch.Tensor, drafts: torch.Tensor, q: torch.Tensor, sampling: SamplingConfig
) -> None:
    """Each ``q[b, k, t]`` is the processed law of ``draft`` at (prompt b, draft k's first t tokens), within
    1e-5, and ``drafts[b, k, t]`` lies in its support (it was drawn from that law)."""
    B, K, L = drafts.shape
    for b in range(B):
        for k in range(K):
            for t in range(L):
                ids = prompts[b].tolist() + drafts[b, k, :t].tolist()
                ref = process_logits(no_cache_logits(draft, ids)[-1], sampling)
                torch.testing.assert_close(q[b, k, t], ref, atol=1e-5, rtol=0)
                assert q[b, k, t, drafts[b, k, t]] > 0


@torch.no_grad()
def model_instance(target, draft, prompt: list[int], L: int, sampling: SamplingConfig):
    """Tabular :class:`~spectr_gbv.core.instance.Instance` of the processed laws after ``prompt``.

    Target laws at every continuation of length 0..L, draft laws at 0..L-1 (float64), for the
    exact simulator of the reference layer (e.g. the validity defect of a lossy rule).
    """
    from spectr_gbv.core.instance import Instance
    from spectr_gbv.core.tabular import TabularAR

    def levels(model, depth):
        V = model.config.vocab_size
        out = []
        for t in range(depth + 1):
            prefixes = list(itertools.product(range(V), repeat=t))
            ids = torch.tensor([prompt + list(pre) for pre in prefixes], dtype=torch.int64)
            probs = process_logits(model(input_ids=ids).logits[:, -1], sampling, dtype=torch.float64).numpy()
            probs = probs / probs.sum(-1, keepdims=True)
            out.append(probs.reshape((V,) * (t + 1)))
        return out

    p = TabularAR.from_levels(levels(target, L), name="target")
    q = TabularAR.from_levels(levels(draft, L - 1), name="draft")
    return Instance(p, q, L, name="tiny-llama")
