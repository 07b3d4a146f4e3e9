"""SGLang's speculative verify kernels, called as SGLang 0.5.23 calls them, in `spectr-gbv validate` interfaces.

Entry points (sglang 0.5.23 from PyPI; ``sglang/kernels/ops/speculative/verify_sampling.py`` resolves them):

``chain`` / ``chain_block`` (interface ``chain_torch``): the **released Triton code**,
    ``sglang.kernels.ops.speculative.reject_sampling.chain_speculative_sampling_triton`` (kernel
    ``speculative_sampling_classic_kernel``), run in Triton 3.9.0's interpreter on the CPU
    (``bench.engines.triton_interpret``, ``TRITON_INTERPRET=1``). ``chain`` is SGLang's rejection sampling
    (``--speculative-use-rejection-sampling``), ``chain_block`` the same with ``block_verification=True``
    (``--speculative-use-block-verification``: Algorithm 2 of Sun et al., arXiv:2403.10444).
``tree_port`` (interface ``generic_torch``): a **port** of ``tree_speculative_sampling_target_only``. In 0.5.23 the
    function is a CUDA kernel compiled at first call (``sglang/kernels/ops/speculative/sampling.py`` ->
    ``load_jit`` of ``sglang/kernels/jit/csrc/speculative/sampling.cuh``, device code in
    ``sglang/kernels/jit/include/sgl_kernel/speculative/sampling.cuh``, ``TreeSpeculativeSamplingTargetOnly``);
    ``verify_sampling.py`` sets it to ``None`` on a non-CUDA platform, and the release ships no Triton port (the
    Triton ``tree_sampling.py`` exists only on sglang's main branch after 0.5.23). The port follows the 0.5.23
    device code line by line (float32; ``has_target_mass && (coin < prob_acc / threshold_acc || p >=
    threshold_single)``; rejected siblings' target mass written into ``draft_probs``; inverse CDF over the
    positive residual entries, else the last positive index, else ``V - 1``).

How SGLang calls them (``sglang/srt/speculative/eagle_utils.py``, ``eagle_sample``, 0.5.23), and what the adapters
pass:

- ``candidates`` int64 [B, n], ``n = draft_token_num``: column 0 the last verified token (the tree root), then the
  draft nodes. For a chain ``n = L + 1`` and node i is draft token i. The harness has no previous token: column 0
  holds 0 (the chain kernel never reads column 0; the tree kernel reads only its children).
- ``retrive_index`` int64 [B, n]: node -> flat slot ``b * n + i`` in ``predicts``; ``retrive_next_token`` /
  ``retrive_next_sibling`` int64 [B, n]: first child / next sibling, -1 for none (chain: ``[1, ..., L, -1]`` and
  all -1; the chain kernel ignores both).
- ``predicts`` int32 [B * n] zeros; ``accept_index`` int32 [B, L + 1] filled with -1; ``accept_token_num`` int32
  [B] (outputs, written in place). Emitted tokens of row b: ``predicts[accept_index[b, j]]`` for ``j = 0 ..
  accept_token_num[b]`` (the accepted drafts, then the correction or bonus token); ``accept_index`` stays -1
  after them, which the adapter maps to the harness's -1 padding.
- ``uniform_samples`` float32 [B, n] (``coins = torch.rand_like(candidates, dtype=float32)``; the chain kernel
  reads column ``step - 1`` for draft ``step``, the tree kernel the column of the node just accepted) and
  ``uniform_samples_for_final_sampling`` float32 [B] (one fresh coin for the final draw).
- ``target_probs`` float32 [B, n, V] (softmax of the verify logits, one row per node); ``draft_probs`` float32
  [B, L, V] for the chain (the draft's probabilities at its L steps) and zeros [B, n, V] for the target-only tree.
- ``threshold_single = threshold_acc = 1.0`` (server defaults: exact rejection sampling), ``deterministic=True``.

Randomness. ``chain_torch`` hands float64 uniforms ``u`` [B, L+1] in [0, 1). SGLang's coins are torch float32
uniforms, ``k * 2**-24`` with k uniform on ``0 .. 2**24 - 1`` on the CPU. The adapter maps ``u`` onto that grid by
``coin = floor(u * 2**24) * 2**-24`` (exact in float32, monotone, never 1.0): ``uniform_samples[b, t] = coin(u[b, t])``
for ``t < L`` (the acceptance coin of draft t + 1), column L (unused by the chain kernel) = 0, and
``uniform_samples_for_final_sampling[b] = coin(u[b, L])``. The output is then a piecewise-constant function of
``u``, so the exact level (bisection of the uniforms) and the coin probes reach SGLang's real coins; a harness coin
of 0 is an SGLang coin of 0. ``generic_torch`` (tree) hands a ``torch.Generator``; the port draws upstream's coins
from it in upstream's order and dtype (``rand`` float32 of the shape of ``candidates``, then one per row).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import numpy as np
import torch

#: Module of the released Triton chain kernel (sglang 0.5.23).
CHAIN_MODULE = "sglang.kernels.ops.speculative.reject_sampling"
#: The SGLang release these adapters were written against.
SGLANG_VERSION = "0.5.23"

_COIN_SCALE = float(2**24)


def engine_device() -> torch.device:
    """Where the chain kernel runs: ``SPECTR_ENGINE_DEVICE`` (default ``"cpu"``: Triton's interpreter; ``"cuda"``:
    compiled by real Triton, as ``bench/device_check.sh --engines-only`` runs it). Outputs come back to the CPU.
    """
    return torch.device(os.environ.get("SPECTR_ENGINE_DEVICE", "cpu"))


def _chain_kernel() -> Any:
    """``chain_speculative_sampling_triton`` from :data:`CHAIN_MODULE`, Triton's interpreter set up first.

    ``bench.engines.triton_interpret`` is imported before sglang unless the module is already loaded (the CI tests
    place a stand-in module in ``sys.modules`` under :data:`CHAIN_MODULE`).

    Raises
    ------
    ImportError
        sglang or triton is not installed (run inside ``.engines/sglang-0.5.23``).
    """
    if CHAIN_MODULE not in sys.modules and engine_device().type == "cpu":  # CUDA: compiled by real Triton
        importlib.import_module("bench.engines.triton_interpret")
    return importlib.import_module(CHAIN_MODULE).chain_speculative_sampling_triton


def sglang_coins(uniforms: Any) -> torch.Tensor:
    """Harness uniforms on SGLang's float32 coin grid: ``floor(u * 2**24) * 2**-24``.

    Parameters
    ----------
    uniforms : Tensor or ndarray, float, any shape, values in [0, 1)

    Returns
    -------
    torch.Tensor, float32, same shape
        Multiples of ``2**-24`` in ``[0, 1 - 2**-24]``: the values ``torch.rand(dtype=torch.float32)`` takes on
        the CPU. Exact (no rounding) and monotone in ``u``.
    """
    u = torch.as_tensor(np.asarray(uniforms, dtype=np.float64))
    k = torch.clamp(torch.floor(u * _COIN_SCALE), 0.0, _COIN_SCALE - 1.0)
    return (k / _COIN_SCALE).to(torch.float32)


def chain_call_inputs(
    draft_ids: Any, draft_probs: Any, target_probs: Any, uniforms: Any
) -> dict[str, torch.Tensor]:
    """The keyword arguments SGLang's EAGLE verify passes to the chain kernel, built from the harness's arrays.

    Parameters
    ----------
    draft_ids : Tensor or ndarray, shape [B, L], int64
    draft_probs : Tensor or ndarray, shape [B, L, V], float
        ``draft_probs[b, t] = q(. | context, drafts[:t])``.
    target_probs : Tensor or ndarray, shape [B, L+1, V], float
    uniforms : Tensor or ndarray, shape [B, L+1], float in [0, 1)

    Returns
    -------
    dict of str to Tensor
        ``predicts`` int32 [B*(L+1)] zeros, ``accept_index`` int32 [B, L+1] of -1, ``accept_token_num`` int32 [B],
        ``candidates`` int64 [B, L+1] (column 0: 0, the previous token, never read), ``retrive_index`` int64
        [B, L+1] (``b*(L+1) + i``), ``retrive_next_token`` int64 [B, L+1] (``i+1``, last -1),
        ``retrive_next_sibling`` int64 [B, L+1] (-1), ``uniform_samples`` float32 [B, L+1] (see the module
        docstring), ``uniform_samples_for_final_sampling`` float32 [B], ``target_probs`` float32 [B, L+1, V],
        ``draft_probs`` float32 [B, L, V].

    Raises
    ------
    ValueError
        Inconsistent shapes.
    """
    ids = torch.as_tensor(np.asarray(draft_ids), dtype=torch.int64)
    q = torch.as_tensor(np.asarray(draft_probs, dtype=np.float64)).to(torch.float32)
    p = torch.as_tensor(np.asarray(target_probs, dtype=np.float64)).to(torch.float32)
    B, L = ids.shape
    n = L + 1
    if q.shape[:2] != (B, L) or p.shape[:2] != (B, n) or q.shape[2] != p.shape[2]:
        raise ValueError(f"shapes: draft_ids {tuple(ids.shape)}, draft_probs {tuple(q.shape)}, "
                         f"target_probs {tuple(p.shape)}")
    coins = sglang_coins(uniforms)
    if coins.shape != (B, n):
        raise ValueError(f"uniforms must be [B, L+1] = [{B}, {n}], got {tuple(coins.shape)}")
    candidates = torch.cat([torch.zeros((B, 1), dtype=torch.int64), ids], dim=1)
    nxt = torch.arange(1, n + 1, dtype=torch.int64).repeat(B, 1)
    nxt[:, -1] = -1
    uniform_samples = torch.zeros((B, n), dtype=torch.float32)
    uniform_samples[:, :L] = coins[:, :L]
    return {
        "predicts": torch.zeros(B * n, dtype=torch.int32),
        "accept_index": torch.full((B, n), -1, dtype=torch.int32),
        "accept_token_num": torch.zeros(B, dtype=torch.int32),
        "candidates": candidates.contiguous(),
        "retrive_index": torch.arange(B * n, dtype=torch.int64).view(B, n).contiguous(),
        "retrive_next_token": nxt.contiguous(),
        "retrive_next_sibling": torch.full((B, n), -1, dtype=torch.int64),
        "uniform_samples": uniform_samples.contiguous(),
        "uniform_samples_for_final_sampling": coins[:, L].contiguous(),
        "target_probs": p.contiguous(),
        "draft_probs": q.contiguous(),
    }


def emitted_tokens(predicts: Any, accept_index: Any, accept_token_num: Any) -> torch.Tensor:
    """SGLang's outputs as the harness's rows: ``predicts[accept_index[b, j]]`` for ``j <= accept_token_num[b]``.

    Parameters
    ----------
    predicts : Tensor, shape [B*n], int32
    accept_index : Tensor, shape [B, L+1], int32, -1 after the emitted slots
    accept_token_num : Tensor, shape [B], int32 (accepted drafts, without the final token)

    Returns
    -------
    torch.Tensor, shape [B, L+1], int64
        The emitted tokens, then -1. A slot of ``accept_index`` that is -1 inside the emitted range (the kernel
        did not write it) gives -1 there, which the harness reports as a structural failure.
    """
    idx = torch.as_tensor(accept_index).to(torch.int64)
    pred = torch.as_tensor(predicts).to(torch.int64)
    num = torch.as_tensor(accept_token_num).to(torch.int64)
    B, width = idx.shape
    out = torch.full((B, width), -1, dtype=torch.int64)
    j = torch.arange(width).unsqueeze(0)
    valid = (j <= num.unsqueeze(1)) & (idx >= 0)
    out[valid] = pred[idx[valid]]
    return out


def _run_chain(draft_ids: Any, draft_probs: Any, target_probs: Any, uniforms: Any, block: bool) -> torch.Tensor:
    if uniforms is None:
        raise ValueError("the SGLang chain adapter needs the harness's uniforms (interface chain_torch)")
    dev = engine_device()
    kw = {k: v.to(dev) for k, v in chain_call_inputs(draft_ids, draft_probs, target_probs, uniforms).items()}
    kernel = _chain_kernel()
    extra = {"block_verification": True} if block else {}
    kernel(**kw, threshold_single=1.0, threshold_acc=1.0, deterministic=True, **extra)
    return emitted_tokens(kw["predicts"].cpu(), kw["accept_index"].cpu(), kw["accept_token_num"].cpu())


def chain(draft_ids: Any, draft_probs: Any, target_probs: Any, uniforms: Any) -> torch.Tensor:
    """SGLang 0.5.23 ``chain_speculative_sampling_triton`` (token-level rejection sampling), ``chain_torch``.

    Parameters
    ----------
    draft_ids : Tensor, shape [B, L], int64
    draft_probs : Tensor, shape [B, L, V], float64 (cast to float32, as SGLang's softmax outputs are)
    target_probs : Tensor, shape [B, L+1, V], float64 (cast to float32)
    uniforms : Tensor, shape [B, L+1], float64 in [0, 1)
        Mapped onto SGLang's float32 coins (module docstring).

    Returns
    -------
    torch.Tensor, shape [B, L+1], int64
        Emitted tokens, -1 padded.

    Raises
    ------
    ValueError
        ``uniforms`` is None or shapes disagree.
    ImportError
        sglang/triton missing (run in ``.engines/sglang-0.5.23``).

    Notes
    -----
    Source: sgl-project/sglang 0.5.23 (PyPI), ``python/sglang/kernels/ops/speculative/reject_sampling.py``,
    ``chain_speculative_sampling_triton``, called as in ``python/sglang/srt/speculative/eagle_utils.py``
    ``eagle_sample`` (``threshold_single = threshold_acc = 1.0``, ``deterministic=True``).
    """
    return _run_chain(draft_ids, draft_probs, target_probs, uniforms, block=False)


def chain_block(draft_ids: Any, draft_probs: Any, target_probs: Any, uniforms: Any) -> torch.Tensor:
    """As :func:`chain` with ``block_verification=True`` (SGLang's ``--speculative-use-block-verification``).

    Parameters, returns and errors as :func:`chain`. The block path reads the coin of draft ``step`` from column
    ``step - 1`` of ``uniform_samples`` (the same columns as the token path) and scans the steps from L down to 1.

    Notes
    -----
    Source: sgl-project/sglang 0.5.23 (PyPI), ``reject_sampling.py``, ``speculative_sampling_classic_kernel`` with
    ``BLOCK_VERIFICATION=True`` ("Algorithm 2: https://arxiv.org/abs/2403.10444").
    """
    return _run_chain(draft_ids, draft_probs, target_probs, uniforms, block=True)


# --------------------------------------------------------------------------------------------------------------
# Tree: a port of the 0.5.23 CUDA kernel (the release has no CPU implementation).


def tree_call_inputs(draft_tokens: Any, target_probs: Any, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """The K drafts as SGLang's tree inputs (batch size 1), with upstream's coins drawn from ``generator``.

    Parameters
    ----------
    draft_tokens : Tensor or ndarray, shape [K, L], int64
        Merged into a tree: a shared prefix is one node; children in order of first appearance over the drafts
        (``bench.gallery.ports.sglang_tree.build_tree``).
    target_probs : Tensor or ndarray, shape [K, L+1, V], float
        Node ``(k, t)``'s row is ``target_probs[k, t]`` (the law after the node's prefix); cast to float32.
    generator : torch.Generator
        ``coins = torch.rand([1, n], float32)`` (``rand_like(candidates)``), then ``torch.rand([1], float32)``.

    Returns
    -------
    dict of str to Tensor
        As :func:`chain_call_inputs` with B = 1 and n = the number of tree nodes (root included);
        ``draft_probs`` is zeros [1, n, V] (target-only) and ``accept_index`` is [1, L+1].
    """
    from bench.gallery.ports.sglang_tree import build_tree

    drafts = np.asarray(torch.as_tensor(np.asarray(draft_tokens)).to(torch.int64))
    p = torch.as_tensor(np.asarray(target_probs, dtype=np.float64)).to(torch.float32)
    cands, next_token, next_sibling, rows = build_tree(drafts)
    n, L = len(cands), drafts.shape[1]
    candidates = torch.tensor([[0] + cands[1:]], dtype=torch.int64)
    coins = torch.rand(candidates.shape, dtype=torch.float32, generator=generator)
    coin_final = torch.rand((1,), dtype=torch.float32, generator=generator)
    tp = torch.stack([p[k, t] for k, t in rows]).unsqueeze(0)
    return {
        "predicts": torch.zeros(n, dtype=torch.int32),
        "accept_index": torch.full((1, L + 1), -1, dtype=torch.int32),
        "accept_token_num": torch.zeros(1, dtype=torch.int32),
        "candidates": candidates,
        "retrive_index": torch.arange(n, dtype=torch.int64).view(1, n),
        "retrive_next_token": torch.tensor([next_token], dtype=torch.int64),
        "retrive_next_sibling": torch.tensor([next_sibling], dtype=torch.int64),
        "uniform_samples": coins,
        "uniform_samples_for_final_sampling": coin_final,
        "target_probs": tp.contiguous(),
        "draft_probs": torch.zeros_like(tp),
    }


def _f32(x: float) -> np.float32:
    return np.float32(x)


def tree_target_only_port(
    predicts: torch.Tensor,
    accept_index: torch.Tensor,
    accept_token_num: torch.Tensor,
    candidates: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    uniform_samples: torch.Tensor,
    uniform_samples_for_final_sampling: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
    deterministic: bool = True,
) -> None:
    """PORT of SGLang 0.5.23 ``tree_speculative_sampling_target_only`` (CUDA), same signature, outputs in place.

    Parameters
    ----------
    predicts : Tensor, shape [B*n], int32 (written)
    accept_index : Tensor, shape [B, S], int32 (written; S = max tree depth + 1 = ``num_speculative_tokens``)
    accept_token_num : Tensor, shape [B], int32 (written)
    candidates, retrive_index, retrive_next_token, retrive_next_sibling : Tensor, shape [B, n], int64
    uniform_samples : Tensor, shape [B, n], float32
    uniform_samples_for_final_sampling : Tensor, shape [B], float32
    target_probs : Tensor, shape [B, n, V], float32
    draft_probs : Tensor, shape [B, n, V], float32 (written: rejected siblings' target mass)
    threshold_single, threshold_acc : float in [0, 1]
    deterministic : bool
        Unused (it selects FlashInfer's deterministic block scan upstream; the port scans sequentially).

    Notes
    -----
    Source: sglang 0.5.23 wheel, ``sglang/kernels/jit/include/sgl_kernel/speculative/sampling.cuh``,
    ``TreeSpeculativeSamplingTargetOnly`` (one CUDA block per row; launched by
    ``sglang/kernels/jit/csrc/speculative/sampling.cuh`` with ``threshold_acc = max(threshold_acc, 1e-9)``).
    Float32 throughout. The residual sum is a CUB block reduction upstream and a sequential float32 sum here, so
    the two can differ in the last bits; the scan picks the first positive index whose cumulative sum exceeds
    ``u = coin * sum`` (``DeviceSamplingFromProb`` with predicate ``x > 0``), else the last positive index, else
    ``V - 1``.
    """
    del deterministic
    B, n = candidates.shape
    S = accept_index.shape[1]
    V = target_probs.shape[-1]
    tp = target_probs.numpy()
    dp = draft_probs.numpy()
    thr_acc = _f32(max(_f32(threshold_acc), _f32(1e-9)))
    thr_single = _f32(threshold_single)
    for b in range(B):
        prob_acc = _f32(0.0)
        cur_row = 0
        coin = _f32(uniform_samples[b, 0].item())
        last = int(retrive_index[b, 0])
        accept_index[b, 0] = last
        num = 0
        cur = 0
        for _ in range(1, S):
            cur = int(retrive_next_token[b, cur])
            while cur != -1:
                draft_index = int(retrive_index[b, cur])
                token = int(candidates[b, cur])
                p_single = tp[b, cur_row, token]
                prob_acc = _f32(prob_acc + p_single)
                has_mass = p_single > _f32(0.0)
                if has_mass and (coin < _f32(prob_acc / thr_acc) or p_single >= thr_single):
                    prob_acc = _f32(0.0)
                    cur_row = cur
                    coin = _f32(uniform_samples[b, cur].item())
                    predicts[last] = token
                    num += 1
                    accept_index[b, num] = draft_index
                    last = draft_index
                    break
                dp[b, cur_row, token] = tp[b, cur_row, token]
                cur = int(retrive_next_sibling[b, cur])
            if cur == -1:
                break
        accept_token_num[b] = num
        coin = _f32(uniform_samples_for_final_sampling[b].item())
        draft_row = dp[b, cur_row] if num != S - 1 else np.zeros(V, dtype=np.float32)
        resid = np.maximum(tp[b, cur_row] - draft_row, _f32(0.0)).astype(np.float32)
        cum = np.cumsum(resid, dtype=np.float32)  # sequential float32 sums; zero entries add exactly 0
        u = _f32(coin * cum[-1])
        positive = resid > 0
        hits = np.flatnonzero(positive & (cum > u))
        if hits.size:
            sampled = int(hits[0])
        else:
            valid = np.flatnonzero(positive)
            sampled = int(valid[-1]) if valid.size else V - 1
        predicts[last] = sampled


def tree_port(draft_tokens: Any, draft_probs: Any, target_probs: Any, generator: torch.Generator) -> list[int]:
    """PORT: SGLang 0.5.23 target-only tree verification of K drafts (interface ``generic_torch``).

    Parameters
    ----------
    draft_tokens : Tensor, shape [K, L], int64
    draft_probs : Tensor, shape [K, L, V], float64
        Unused: SGLang passes zeros to the target-only kernel.
    target_probs : Tensor, shape [K, L+1, V], float64
    generator : torch.Generator
        Upstream's coins (:func:`tree_call_inputs`).

    Returns
    -------
    list of int
        The accepted path's tokens, then the final token (length 1..L+1).

    Notes
    -----
    Calls :func:`tree_target_only_port` (the port of the CUDA kernel) with the inputs SGLang's EAGLE verify builds.
    ``threshold_single = threshold_acc = 1.0``.
    """
    del draft_probs
    kw = tree_call_inputs(draft_tokens, target_probs, generator)
    tree_target_only_port(**kw, threshold_single=1.0, threshold_acc=1.0, deterministic=True)
    row = emitted_tokens(kw["predicts"], kw["accept_index"], kw["accept_token_num"])[0]
    return [int(x) for x in row if x >= 0]


_CHAIN_ANALYSIS = """\
The released kernel (`speculative_sampling_classic_kernel`, token path) accepts draft t+1 iff `q(x) in (0, 1]` and
`coin * q(x) < p(x)` in float32, with the coin of column t; after a rejection it draws from `relu(p - q)` (q outside
[0, 1] or NaN read as 0) by an inverse CDF with a strict `cumsum > coin_final * sum` and the separate final coin;
after L acceptances it draws the bonus from p. That is token-level rejection sampling with a fresh coin for the
correction: lossless. The adapter maps the harness uniforms onto SGLang's float32 coin grid (`floor(u 2^24) 2^-24`),
so the harness's coin forcing reaches the kernel's real coins: a coin of 0 on a drafted token of target probability
0 is rejected (strict `<`), and the largest float32 coin accepts a token with p = q.

One documented corner remains (the kernel's own comment: "acceptable since this case is numerically
near-impossible"): when the residual `relu(p - q)` is all zero in float32 after a rejection (q >= p on every token,
possible only when the two float32 rows are normalised differently by rounding, and a coin above `p(x)/q(x)` ~ 1 -
2^-23), the scan finds nothing and emits `V - 1` whatever its target probability. On
valid rows its probability is of the order of 2^-23 per rejection, below any sampling
budget. The recorded CI fixtures pin both forced-coin facts on the real code (`tests/engines/data/
sglang_chain_zero_coin.npz`: coin 0 on a p = 0 draft -> rejected, the correction emitted; `sglang_chain_
empty_residual.npz`: q = p + 1 ulp everywhere, the largest coin -> rejection, then token V - 1 = 3 of p = 0).

The advisory `placeholder_ids` notes (drafts padded with -1, vLLM's convention) do not apply: SGLang's EAGLE drafts
are always vocabulary ids; given a -1 the kernel reads the probability row at offset -1 (outside the row) and can
accept it. Budget: the quick budget (TV 0.05, power 0.99 per instance); the interpreter runs the kernel at about
25 ms per row on this CPU, so the standard budget (about 50,000 rows per instance, some 450,000 rows with the search)
is hours here; it is the same command with `--budget standard` (`run_engines.py --only sglang_chain --budget
standard`).
"""

_BLOCK_ANALYSIS = """\
`block_verification=True` is Algorithm 2 of Sun et al. (arXiv:2403.10444): `prefix_prob_i = min(prefix_prob_{i-1}
p(x_i)/q(x_i), 1)`; scanning i = L..1, accept the longest prefix whose coin (column i-1) is below `h_i =
r_i / (r_i + 1 - prefix_prob_i)` with `r_i = sum relu(prefix_prob_i p_{i+1} - q_{i+1})` (`h_L = prefix_prob_L`;
`h_i = 1` when `prefix_prob_i = 1`); the correction is drawn from `relu(prefix_prob_tau p_tau - q_tau)` (row 0 with
scale 1 when nothing is accepted, p_L after a full accept) with the final coin. Block verification is lossless for
the emitted sequence but has another law of tau than token verification; the entry runs with `--reference bv`, so
beside the output law the referee compares the kernel's conditional law with the reference BV's (exit 3 if it
differs while lossless). Same float32 `V - 1` fallback as the
token path. The recorded CI fixture `tests/engines/data/sglang_chain_random_block.npz` pins the real kernel's output
on six rows (block accepts a longer prefix than token verification on row 0 with the same coins). SGLang's own
`test_block_verification.py` checks this path statistically on V = 2 only (see `engine_tests_sglang.md`).
"""

_TREE_ANALYSIS = """\
**Port, not the released code.** sglang 0.5.23 ships `tree_speculative_sampling_target_only` only as CUDA source
compiled at first call (`sglang/kernels/ops/speculative/sampling.py`: `load_jit(..., cuda_files=
["speculative/sampling.cuh"])`); on a CPU build `sglang.kernels.ops.speculative.verify_sampling` binds it to `None`
(`is_cuda()` is false) and the release has no Triton port (`tree_sampling.py` appeared on the main branch after
0.5.23). Called directly on CPU tensors in `.engines/sglang-0.5.23` it raises `RuntimeError: Cannot find flashinfer
package. Please install flashinfer to getthe required headers for JIT compilation.` (the JIT step; the launcher
also requires CUDA tensors, `TensorMatcher(...).with_device<kDLCUDA>`). `bench.engines.sglang_kernels.
tree_target_only_port` ports the 0.5.23 device code
(`sgl_kernel/speculative/sampling.cuh`, `TreeSpeculativeSamplingTargetOnly`) line by line, float32.

Against the project's earlier port (commit 120affb9) the acceptance test changed: 0.5.23 accepts a sibling iff
`p(x) > 0 and (coin < prob_acc / threshold_acc or p(x) >= threshold_single)` (strict `<`, target mass required), so
the zero-coin failure (a coin of 0 accepting a first sibling of p = 0) is fixed. The second failure mode is still
in the code: when the tried siblings cover p's support and their float32 sum rounds below 1, a coin in the gap
rejects them all, `relu(p - draft_probs)` is all zero and the kernel emits `V - 1` (`sampled_id = d - 1`), whatever
its target probability. The referee's `covering_drafts` probe finds it (K = 4 drafts covering a support whose float32
sum is 1 - 2^-23, the largest float32 coin forced: token V - 1 of p = 0 emitted); every law check passes (the event
has probability 2^-24 to 2^-23 per call on such rows, zero where the float32 sum reaches 1). The coin-replay witness
below shows it independently, with the exact coin, and counts the coins that do it.

SGLang's main branch after 0.5.23 adds a Triton port (`python/sglang/kernels/ops/speculative/tree_sampling.py`, read
at commit b3939a5e3253) that accepts on `coin <= next_prob_acc / threshold_acc` without the `p(x) > 0` guard, and its
test oracle (`test_tree_speculative_sampling_triton.py`, commit b2420d07e74d) does the same: the zero-coin acceptance
of a p = 0 first sibling that 0.5.23's CUDA kernel fixed comes back in that port (not released; not run here).
"""

#: Verdict pages (``docs/results/engine_<name>.md``); see the module docstring for the layouts.
ENTRIES: list[dict[str, Any]] = [
    {
        "name": "sglang_chain",
        "env": "sglang-0.5.23",
        "target": "bench.engines.sglang_kernels:chain",
        "args": ["--interface", "chain_torch", "--time-limit", "600"],
        "budget": "quick",
        "expect": "PASSED",
        "version": SGLANG_VERSION,
        "title": "SGLang 0.5.23 chain_speculative_sampling_triton (released Triton code, interpreter)",
        "analysis": _CHAIN_ANALYSIS,
        "confirm": None,
    },
    {
        "name": "sglang_chain_block",
        "env": "sglang-0.5.23",
        "target": "bench.engines.sglang_kernels:chain_block",
        "args": ["--interface", "chain_torch", "--reference", "bv", "--time-limit", "600"],
        "budget": "quick",
        "expect": "PASSED",
        "version": SGLANG_VERSION,
        "title": "SGLang 0.5.23 chain_speculative_sampling_triton, block_verification=True (released Triton code)",
        "analysis": _BLOCK_ANALYSIS,
        "confirm": None,
    },
    {
        "name": "sglang_tree",
        "env": "sglang-0.5.23",
        "target": "bench.engines.sglang_kernels:tree_port",
        "args": ["--interface", "generic_torch", "--workers", "1"],
        "budget": "quick",
        "expect": "FAILED",
        "version": SGLANG_VERSION,
        "title": "SGLang 0.5.23 tree_speculative_sampling_target_only (PORT of the CUDA kernel)",
        "analysis": _TREE_ANALYSIS,
        "confirm": "bench.engines.sglang_confirm:tree_witness_markdown",
    },
]
