"""PORT of TensorRT-LLM's two-model rejection sampling (PyTorch backend ``TorchSampler``), interface ``batched_torch``.

This module is a **port**, not the released code run in place: the release cannot be installed or imported on this
machine (``bench/engines/envs/trtllm.sh`` records why, ``docs/results/engine_trtllm_sampler.md`` quotes it).

Upstream: NVIDIA/TensorRT-LLM, release 1.2.1 (PyPI ``tensorrt-llm==1.2.1``, git tag ``release/1.2.1``; the
Triton backend pins that release at ``tensorrt_llm`` commit ``2fdb9e66302b15db9a9b5e71d3ac45d5921ea45d``,
triton-inference-server/tensorrtllm_backend PRs #853 and #856). Neither the wheel nor that commit could be read here;
the code ported is the stored text of

- ``tensorrt_llm/_torch/pyexecutor/sampling_utils.py`` at commit ``053c42c948a14cf3c21981179ecc10a7d7ad8fb6``:
  ``get_rejected_indices``, ``sample_rejected``, ``top_k_top_p_sampling_batch`` (the ``("temperature", T)``
  strategy that ``sample`` dispatches to); ``sampler.py`` imports them from there;
- ``tensorrt_llm/_torch/pyexecutor/sampler.py`` (same era): ``TorchSampler._process_draft_tokens_rejection_sampling``
  (the caller: draft probabilities, order of draws, accepted tokens, correction, bonus) and the batched target
  sampling of ``sample_async`` that sets ``request.py_target_probs``.

The arithmetic and the draws of these functions are the same in PR #6542 (Aug 2025, where they were introduced) and
in ``tensorrt_llm/_torch/pyexecutor/sampler/two_model_spec_dec.py`` at ``00be09f78ecf0691f2b8e15dea518d1d6468679e``
(Aug 2026, after the file was split); the only difference between the two is ``pin_memory=True`` (053c42c9) versus
``pin_memory=prefer_pinned()`` (00be09f7) when the draft ids are copied to the device. With a CPU-only torch build
``torch.tensor(..., pin_memory=True)`` raises ``RuntimeError: pin_memory=True requires a CUDA or other accelerator
backend; no pinned memory allocator is available on this system`` (torch 2.13.0+cpu): the port copies the ids
pinned only where an accelerator exists (pinning is a transfer detail, never a value).

One round for a request with L draft tokens, in upstream's order (one ``torch.Generator`` for the whole sampler,
``TorchSampler.get_generator(device)``; here the harness's generator):

1. ``sample_async``: the target logits of every request of the strategy group, ``[sum(L + 1), V]`` float32, go
   through ``sample(strategy, logits, generator=...)``: ``softmax(logits / max(T, 1e-5))`` and **one**
   ``torch.multinomial(softmax, 1, generator)`` over all rows (request-major). Row ``L`` of a request is its bonus
   token; rows ``0..L-1`` are drawn and unused when rejection sampling runs. ``py_target_probs`` is the request's
   ``[L + 1, V]`` slice of the softmax;
2. ``update_requests`` -> ``process_draft_tokens`` -> ``_process_draft_tokens_rejection_sampling``, request by
   request: ``sample(strategy, py_draft_logits [L, V], generator)`` recomputes the draft probabilities **and draws
   L tokens that are discarded** (``torch.multinomial``); ``get_rejected_indices``: ``accept = minimum(1, t / d)``
   (float32; upstream names the draft probability ``p`` and the target one ``q``) and ``rejected =
   (torch.rand(L, generator) > accept).nonzero()`` (float32 uniforms); the first rejected index is the number
   accepted; on a rejection ``sample_rejected``: ``new = t - d``, ``where(new > 0, new, 0.0)`` (not normalised)
   and ``torch.multinomial(new, 1, generator)``; with no rejection the bonus is the target sample of step 1 at row
   L (``add_token(..., step=num_accepted)``).

The adapter feeds float32 logits ``log p`` and ``log q`` (``-inf`` at probability 0, so the softmax returns the
harness's rows rounded to float32), temperature 1 (strategy ``("temperature", 1.0)``: no top-k/top-p masking; the
harness's rows carry any truncation), and verifies draft 0 of each row (TRT-LLM verifies one chain per request).

Failure modes that follow from this logic (pinned in ``tests/engines/test_trtllm_port.py``):

- **zero coin.** ``u > min(1, t/d)`` rejects; a uniform of exactly 0 accepts a drafted token whatever ``t``, so a
  drafted token with ``t = 0 < d`` is accepted with probability ``P(u = 0)``: 2^-24 for torch's CPU float32
  ``torch.rand`` (``(r >> 8) * 2^-24``), 0 under ordinary randomness, emitted under a forced zero coin;
- **empty residual.** A rejection where ``t <= d`` on every token (rows that agree up to float32 rounding; or a
  row where the draft's float32 mass exceeds the target's everywhere it matters) makes ``new`` all zero, and
  ``torch.multinomial`` raises ``RuntimeError: invalid multinomial distribution (sum of probabilities <= 0)``;
- ``torch.multinomial`` on CPU is an exponential race ``argmax(probs / Exp(1))``: an exponential of exactly 0 at an
  entry of probability 0 gives ``0 / 0 = NaN`` (2^-53 per zero entry and draw, see ``bench/gallery/README.md``).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import torch

__all__ = [
    "ENTRIES",
    "PLACEHOLDER_TOKEN_ID",
    "TRTLLM_VERSION",
    "get_rejected_indices",
    "process_draft_tokens_rejection_sampling",
    "sample_rejected",
    "temperature_sampling_batch",
    "verify",
    "verify_cuda",
]

#: The release ported (PyPI ``tensorrt-llm``; tag ``release/1.2.1``).
TRTLLM_VERSION = "1.2.1"
#: Commits whose stored text was ported (see the module docstring).
PORTED_COMMITS = {
    "sampling_utils.py": "053c42c948a14cf3c21981179ecc10a7d7ad8fb6",
    "sampler/two_model_spec_dec.py (same arithmetic)": "00be09f78ecf0691f2b8e15dea518d1d6468679e",
    "release 1.2.1 as pinned by tensorrtllm_backend": "2fdb9e66302b15db9a9b5e71d3ac45d5921ea45d",
}
#: Padding of the unused output slots (the harness's convention; TRT-LLM returns counts and a token buffer).
PLACEHOLDER_TOKEN_ID = -1


def _as_tensor(x: Any, dtype: torch.dtype) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x).to(dtype)


def _logits_float32(probs: torch.Tensor) -> torch.Tensor:
    """float32 logits ``log(probs)`` (``-inf`` at 0): the logits a model head would hand the sampler."""
    return torch.log(probs.to(torch.float64)).to(torch.float32)


def temperature_sampling_batch(
    logits: torch.Tensor, *, temperature: float, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Upstream ``top_k_top_p_sampling_batch`` with ``top_k = V``, ``top_p = 1`` (``temperature_sampling_batch``).

    Parameters
    ----------
    logits : Tensor, shape [N, V], float32
    temperature : float
        > 0; upstream divides by ``max(temperature, 1e-5)``.
    generator : torch.Generator, optional
        One ``torch.multinomial(softmax, 1)`` over the N rows.

    Returns
    -------
    tokens : Tensor, shape [N], int64
    softmax : Tensor, shape [N, V], float32

    Raises
    ------
    AssertionError
        As upstream, when ``logits`` is not 2-D or ``temperature <= 0``.
    """
    assert logits.dim() == 2, "logits should be 2D: [batch_size, vocab_size]"
    assert temperature > 0, "non-greedy sampling requires valid temperature"
    logits = logits / max(temperature, 1e-5)
    softmax = torch.softmax(logits, dim=-1)
    next_tokens = torch.multinomial(softmax, num_samples=1, generator=generator).squeeze(-1)
    return next_tokens, softmax


def get_rejected_indices(
    draft_probs: torch.Tensor, target_probs: torch.Tensor, generator: torch.Generator, draft_tokens: list[int]
) -> torch.Tensor:
    """Upstream ``get_rejected_indices``: positions whose float32 coin exceeds ``min(1, target / draft)``.

    Parameters
    ----------
    draft_probs : Tensor, shape [L, V], float32
        Its first dimension sets L (upstream: ``ModelDrafter`` pads ``draft_tokens`` but not ``draft_probs``).
    target_probs : Tensor, shape [L+1, V] (or [1, L+1, V]), float32
        ``squeeze(0)`` is applied, as upstream.
    generator : torch.Generator
        ``torch.rand(L)`` float32, one draw per position (all L drawn even after a rejection).
    draft_tokens : list of int
        At least L ids; the first L are verified.

    Returns
    -------
    Tensor, shape [R, 1], int64
        ``nonzero()`` of the rejection mask; ``[0, 0]`` is the number of accepted tokens when R > 0.
    """
    num_draft_tokens = draft_probs.size(0)
    draft_tokens = draft_tokens[:num_draft_tokens]
    token_idx = torch.arange(num_draft_tokens, dtype=torch.int32, device=generator.device)
    # upstream: torch.tensor(..., pin_memory=True).to(device, non_blocking=True); pinning raises on CPU-only torch,
    # so it is kept only where an accelerator exists (pinning never changes values)
    draft_tokens_dev = torch.tensor(draft_tokens, dtype=torch.int32, pin_memory=torch.cuda.is_available()).to(
        device=generator.device, non_blocking=True
    )
    p = draft_probs[token_idx, draft_tokens_dev]
    q = target_probs.squeeze(0)[token_idx, draft_tokens_dev]
    accept_probs = torch.minimum(torch.ones((), device=generator.device, dtype=q.dtype), q / p)
    rejected_indices = (
        torch.rand(accept_probs.shape, generator=generator, device=accept_probs.device) > accept_probs
    ).nonzero()
    return rejected_indices


def sample_rejected(
    draft_probs: torch.Tensor, target_probs: torch.Tensor, generator: torch.Generator, num_accepted: int
) -> int:
    """Upstream ``sample_rejected``: one ``torch.multinomial`` draw from ``max(target - draft, 0)`` (unnormalised).

    Parameters
    ----------
    draft_probs : Tensor, shape [L, V], float32
    target_probs : Tensor, shape [L+1, V], float32
    generator : torch.Generator
    num_accepted : int
        The rejected position.

    Returns
    -------
    int
        The correction token.

    Raises
    ------
    RuntimeError
        From ``torch.multinomial`` when the residual is all zero (``t <= d`` everywhere in float32).
    """
    last_draft = draft_probs[num_accepted]
    last_target = target_probs[num_accepted]
    new = last_target - last_draft
    new = torch.where(new > 0, new, 0.0)
    new_token = torch.multinomial(new, num_samples=1, generator=generator).squeeze(-1)
    return cast(int, new_token.item())


def process_draft_tokens_rejection_sampling(
    draft_logits: torch.Tensor,
    target_probs: torch.Tensor,
    draft_tokens: list[int],
    target_tokens: list[int],
    generator: torch.Generator,
    *,
    temperature: float = 1.0,
) -> list[int]:
    """Upstream ``TorchSampler._process_draft_tokens_rejection_sampling`` for one request (no stop words, no d2t).

    Parameters
    ----------
    draft_logits : Tensor, shape [L, V], float32
        ``request.py_draft_logits``.
    target_probs : Tensor, shape [L+1, V], float32
        ``request.py_target_probs`` (the softmax of step 1 of the module docstring).
    draft_tokens : list of int, length L
        ``request.py_draft_tokens``.
    target_tokens : list of int, length L+1
        The request's column of ``new_tokens_list`` (the target samples of step 1); entry L is the bonus.
    generator : torch.Generator
        The draft re-sampling (L multinomial draws, discarded), L float32 coins, then one multinomial on a
        rejection.
    temperature : float
        The request's temperature (strategy ``("temperature", T)``).

    Returns
    -------
    list of int
        The emitted tokens: the accepted drafts, then the correction or the bonus (length 1..L+1).
    """
    _, draft_probs = temperature_sampling_batch(draft_logits, temperature=temperature, generator=generator)
    rejected_indices = get_rejected_indices(draft_probs, target_probs, generator, draft_tokens)
    sample_last = True
    if rejected_indices.numel() == 0:
        num_accepted = len(draft_tokens)
        sample_last = False
    else:
        num_accepted = cast(int, rejected_indices[0].item())
    emitted = [int(t) for t in draft_tokens[:num_accepted]]
    if sample_last:
        emitted.append(sample_rejected(draft_probs, target_probs, generator, num_accepted))
    else:
        emitted.append(int(target_tokens[num_accepted]))
    return emitted


def verify(draft_tokens: Any, draft_probs: Any, target_probs: Any, generator: torch.Generator) -> torch.Tensor:
    """TensorRT-LLM's two-model rejection sampling on draft 0 of each row (``batched_torch``), as a batch of requests.

    Every row is one request of one strategy group (temperature 1): the target rows of all requests are sampled in
    one call first (``sample_async``), then each request is verified in order (``update_requests``).

    Parameters
    ----------
    draft_tokens : Tensor or ndarray, shape [B, K, L], int64
        Only draft 0 is verified.
    draft_probs : Tensor or ndarray, shape [B, K, L, V], float64
        Turned into float32 logits ``log q`` (the draft model's ``py_draft_logits``).
    target_probs : Tensor or ndarray, shape [B, K, L+1, V], float64
        Turned into float32 logits ``log p``; row L is the bonus position.
    generator : torch.Generator
        The sampler's generator (see the module docstring for the order of draws).

    Returns
    -------
    Tensor, shape [B, L+1], int64
        Emitted tokens, then -1.

    Raises
    ------
    RuntimeError
        Upstream's ``torch.multinomial`` error on a rejection at an all-zero residual.
    """
    device = generator.device
    drafts = _as_tensor(draft_tokens, torch.int64)[:, 0]
    q_logits = _logits_float32(_as_tensor(draft_probs, torch.float64)[:, 0]).to(device)
    p_logits = _logits_float32(_as_tensor(target_probs, torch.float64)[:, 0]).to(device)
    B, L = drafts.shape
    V = p_logits.shape[-1]
    target_tokens, target_softmax = temperature_sampling_batch(
        p_logits.reshape(B * (L + 1), V), temperature=1.0, generator=generator
    )
    target_tokens = target_tokens.view(B, L + 1)
    target_softmax = target_softmax.view(B, L + 1, V)
    out = torch.full((B, L + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.int64)
    for b in range(B):
        emitted = process_draft_tokens_rejection_sampling(
            q_logits[b], target_softmax[b], drafts[b].tolist(), target_tokens[b].tolist(), generator
        )
        out[b, : len(emitted)] = torch.tensor(emitted, dtype=torch.int64)
    return out


def verify_cuda(draft_tokens: Any, draft_probs: Any, target_probs: Any, generator: torch.Generator) -> torch.Tensor:
    """:func:`verify` with every tensor and the sampler's generator on CUDA (the device TensorRT-LLM runs on).

    The CUDA generator is seeded with one 62-bit draw from the harness's CPU generator (the source of randomness is
    adapted, the order of the sampler's own draws is not); CUDA's Philox ``torch.rand`` and ``torch.multinomial``
    then replace the CPU streams, so the exact level and coin probes do not reach them.

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs : as :func:`verify`
    generator : torch.Generator
        The harness's CPU generator.

    Returns
    -------
    Tensor, shape [B, L+1], int64, CPU

    Raises
    ------
    RuntimeError
        No CUDA device.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("verify_cuda needs a CUDA device")
    seed = int(torch.randint(0, 2**62, (1,), generator=generator).item())
    cuda_generator = torch.Generator(device="cuda").manual_seed(seed)
    return verify(draft_tokens, draft_probs, target_probs, cuda_generator).cpu()


_ANALYSIS = """\
### Why a port: the release cannot be installed here

`bash bench/engines/envs/trtllm.sh 1.2.1` builds `.engines/trtllm-1.2.1/` as a user would (torch 2.13.0+cpu from
/opt/wheels, then `pip install tensorrt-llm==1.2.1`, then `--no-deps`, then the import). Its record
(`.engines/trtllm-1.2.1/trtllm_status.txt`, 2026-12-06):

```
install: FAILED (pip install tensorrt-llm==1.2.1)
    error: subprocess-exited-with-error
    socket.gaierror: [Errno -2] Name or service not known
    urllib.error.URLError: <urlopen error [Errno -2] Name or service not known>
    wheel_stub.error.InstallFailedError:
    The installation of tensorrt-llm for version 1.2.1 failed.
    This is a special placeholder package which downloads a real wheel package
    from https://pypi.nvidia.com/. If https://pypi.nvidia.com/ is not reachable, we
    error: metadata-generation-failed
install --no-deps: FAILED (the same lines)
import tensorrt_llm._torch.pyexecutor.sampler: FAILED: ModuleNotFoundError: No module named 'tensorrt_llm'
```

PyPI's `tensorrt-llm` 1.2.1 is a 10 kB sdist whose build backend (`wheel_stub`) fetches the real wheel from
pypi.nvidia.com during the metadata step; that host does not resolve from this machine, so `--no-deps` cannot help
and nothing named `tensorrt_llm` is ever installed. (From the source, a machine with the real wheel would still need
the compiled extension: `sampler.py` imports `tensorrt_llm.bindings` at module top. Not measured here.) A second
obstacle sits in the function itself: the ported revision copies the draft ids with
`torch.tensor(..., pin_memory=True)`, which on a CPU-only torch raises `RuntimeError: pin_memory=True requires a CUDA
or other accelerator backend; no pinned memory allocator is available on this system`. Upstream's own "cpu_only" test
therefore needs a CUDA build of torch. Later revisions use `pin_memory=prefer_pinned()`.

### What is ported, from where

- Release: **tensorrt-llm 1.2.1** (git tag `release/1.2.1`; triton-inference-server/tensorrtllm_backend PR #853
  moves to that tag, and its submodule then points at NVIDIA/TensorRT-LLM `2fdb9e66302b15db9a9b5e71d3ac45d5921ea45d`).
  The stored copy of the upstream repository has no text at that commit, and the 2.5 GB snapshot is over the fetch
  limit. So the port follows the stored text of
  `tensorrt_llm/_torch/pyexecutor/sampling_utils.py` at `053c42c948a14cf3c21981179ecc10a7d7ad8fb6`
  (`get_rejected_indices`, `sample_rejected`, `top_k_top_p_sampling_batch`) and `sampler.py` of the same era
  (`TorchSampler._process_draft_tokens_rejection_sampling`, the batched target sampling in `sample_async`).
- The arithmetic and the draws are the same in PR #6542 (Aug 2025, which added these functions) and in
  `sampler/two_model_spec_dec.py` at `00be09f78ecf0691f2b8e15dea518d1d6468679e` (Aug 2026). 1.2.1 (Apr 2026) lies
  between the two. Only the pinning of the id copy differs (see above). The port keeps it wherever an accelerator
  exists.
- Not ported: the one-model MTP/EAGLE rejection path (`rejection_sampling_one_model`, PR #11001 closed, later work in
  PR #12588 merged on main in Apr 2026). Whether 1.2.1 ships it could not be checked. Relaxed acceptance and the
  greedy/tree paths are not rejection sampling.

### The function under test

For each request with L draft tokens, in upstream's order, one `torch.Generator` for the whole sampler:

1. `sample_async`: the target logits of every request in the strategy group (`[sum(L+1), V]` float32) go through
   `softmax(logits / T)` and **one** `torch.multinomial(softmax, 1)`. Row L of a request is its bonus token, and
   `py_target_probs` is the request's `[L+1, V]` slice of the softmax.
2. `_process_draft_tokens_rejection_sampling`: `sample(strategy, py_draft_logits)` recomputes the draft probabilities
   and **draws L tokens that are discarded**. Then `get_rejected_indices`: `accept = minimum(1, t/d)` (float32;
   upstream calls the draft probability `p` and the target one `q`), and `rejected = (torch.rand(L) > accept).nonzero()`
   (float32 coins, all L drawn). The first rejected index is the number of tokens accepted. On a rejection,
   `sample_rejected`: `new = t - d`, `where(new > 0, new, 0.0)` (not normalised), `torch.multinomial(new, 1)`.
   With no rejection, the bonus is the target sample from step 1.

### The adapter

`bench/engines/trtllm_sampler.py:verify` (interface `batched_torch`, draft 0 of each row; every row is one request of
one strategy group, temperature 1). The adapter feeds float32 logits `log q` (`py_draft_logits`) and `log p` (`-inf`
at probability 0, so each softmax returns the harness's row rounded to float32). The randomness is the harness's
`torch.Generator`, drawn in upstream's order and dtype, so the coin probes reach the draws upstream would make. Output:
the emitted tokens, then -1 (TRT-LLM writes them to its `new_tokens` buffer; the padding is the harness's convention).

### The failures

The law checks pass on all nine battery instances and the adversarial search finds nothing: as a statistical law,
the sampler is standard rejection sampling (planned power 0.99 against a TV error of 0.02 per instance, N = 38,267 to
66,465). The five failures are boundary events of the code:

1. **Zero coin** (`zero_coin`): TRT-LLM rejects iff `u > min(1, t/d)`, so a float32 coin of exactly 0 accepts
   any drafted token, including one of target probability 0. torch's CPU float32 `torch.rand` returns 0 with
   probability 2^-24 per coin, so about 1 call in 16.8 million that drafts such a token emits it. Under a forced coin
   it is emitted every time. (vLLM switched its coins to float64 for this reason; the strict orientation `u < t/d`,
   or a coin in (0, 1], closes it.)
2. **All-zero residual** (`zero_target_draft`, `near_identical_rows`, `degenerate_residual`): `sample_rejected` passes
   `where(t - d > 0, t - d, 0)` to `torch.multinomial` without a guard. When the draft's float32 row covers the
   target's everywhere (rows that agree up to rounding, or a rejected token of target probability 0 with `t <= d`
   elsewhere), the residual is all zero and the call raises `RuntimeError: invalid multinomial distribution (sum of
   probabilities <= 0)`. Under ordinary randomness this happened in 20/20 and 6/20 calls of the forcing-free probes.
   In TRT-LLM the exception propagates out of `update_requests`. What the executor then does with the request was not
   examined.
3. **Exponential race** (`covering_drafts`): the bonus token comes from `torch.multinomial`. On CPU that is
   `argmax(probs / E)` with E ~ Exp(1). An exponential of exactly 0 (a float64 uniform of 0, 2^-53) at an entry of
   probability 0 gives NaN, which `argmax` returns: a token of probability 0. This is torch's sampler, not
   TRT-LLM's logic, and it is pinned for torch 2.13 in `tests/gallery/test_ports.py`
   (`test_exponential_race_returns_a_zero_entry_whose_exponential_is_zero`). On CUDA, TRT-LLM's sampler runs
   torch's CUDA multinomial, not this CPU path.

Advisory only: `placeholder_ids` (the vLLM convention of -1 draft ids) does not apply. TRT-LLM pads its draft-token
list and reads only the first `draft_probs.size(0)` ids.

TensorRT-LLM's own test of these functions, measured against planted biases and beside the referee:
`docs/results/engine_tests_trtllm.md`.
"""

#: Page entries (``docs/results/engine_trtllm_sampler.md``).
ENTRIES: list[dict[str, Any]] = [
    {
        "name": "trtllm_sampler",
        "env": "trtllm-1.2.1",
        "target": "bench.engines.trtllm_sampler:verify",
        "args": ["--interface", "batched_torch"],
        "budget": "standard",
        "expect": "FAILED",
        "version": TRTLLM_VERSION,
        "title": "TensorRT-LLM 1.2.1 TorchSampler rejection sampling (PORT: get_rejected_indices, sample_rejected)",
        "analysis": _ANALYSIS,
        "confirm": "bench.engines.trtllm_confirm:confirm",
    },
]
