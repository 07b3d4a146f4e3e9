"""Port of SGLang's target-only tree sampling, the K drafts as a tree (interface ``generic_torch``).

Upstream: sgl-project/sglang, ``sgl-kernel/csrc/speculative/speculative_sampling.cuh``, kernel
``TreeSpeculativeSamplingTargetOnly`` at commit ``120affb9613cc3f5bcd055ec09c7621d3ced0ebc`` (its Triton port in
the python tree, ``python/sglang/srt/speculative/triton_ops/spec_tree.py``,
``tree_speculative_sampling_target_only_kernel_triton``, states the same semantics), called from the EAGLE verify
(``python/sglang/srt/speculative/eagle_info.py``, ``EagleVerifyInput.verify``) with ``draft_probs`` all zeros,
``coins = torch.rand_like(candidates, dtype=torch.float32)`` (one per tree node) and then
``coins_for_final_sampling = torch.rand((bs,), dtype=torch.float32)``; ``threshold_single = threshold_acc = 1``
(the server defaults; the launcher caps ``threshold_acc`` at ``>= 1e-9``). Target probabilities are float32.

The tree: node 0 is the root (the last verified token); every distinct draft prefix is a node; the children of a
node are its distinct next draft tokens in order of first appearance over the drafts (``retrive_next_token`` is
the first child, ``retrive_next_sibling`` the next one); a node's target row is the target law after its prefix.

The walk, per level (float32 throughout): ``prob_acc += p(x_child)`` over the siblings in order, with **one** coin
for the level; the child is accepted iff ``coin <= prob_acc / threshold_acc`` or ``p(x_child) >= threshold_single``;
then ``prob_acc = 0`` and the next level's coin is ``coins[accepted node]``. A rejected sibling's target
probability is written into ``draft_probs`` at its row, so the final residual ``relu(p - draft_probs)`` is p with
the rejected siblings removed; after the last level (all levels accepted) the residual is p itself (no draft row).
The final token is an inverse-CDF draw with ``coins_for_final_sampling``: ``u = coin * sum(residual)``, the first
index with ``residual > 0`` whose cumulative sum exceeds ``u`` (float32, sequential here; CUB's block scan
upstream), else the last index with ``residual > 0``, else ``V - 1``.

The acceptance ignores q: the emitted token at a level is ``x_j`` with probability ``p(x_j)`` and otherwise a draw
from p restricted to the untried tokens, so the step is lossless for any q (target-only), up to two degenerate
events:

- **the degenerate residual** (the case asked about): when every token of the row's support was tried as a
  sibling and rejected, the residual is all zero, ``u = coin * 0 = 0``, no entry is positive, and the kernel
  emits ``V - 1`` whatever its target probability (``sampled_id = d - 1`` in the CUDA kernel, ``final_token =
  vocab_size - 1`` in the Triton port). It needs a coin above the float32 sum of p over the siblings, i.e. that
  sum rounding below 1 and the coin landing in the gap (probability at most 2^-24 per level on ordinary
  randomness), or a forced coin;
- **the zero coin**: ``coin <= prob_acc`` with ``coin = 0`` accepts a first sibling of target probability 0
  (``0 <= 0``); torch's CPU float32 uniform is 0 with probability 2^-24 per draw.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def _as_tensor(x: Any, dtype: torch.dtype) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x).to(dtype)


def build_tree(draft_tokens: np.ndarray) -> tuple[list[int], list[int], list[int], list[tuple[int, int]]]:
    """The drafts as SGLang's retrieve arrays.

    Parameters
    ----------
    draft_tokens : ndarray, shape [K, L], int64

    Returns
    -------
    candidates : list of int
        Token of each node (node 0, the root, holds -1: the last verified token is not a draft).
    next_token : list of int
        First child of each node, -1 if none.
    next_sibling : list of int
        Next sibling of each node, -1 if none.
    rows : list of (int, int)
        ``(k, t)``: the node's target row is ``target_probs[k, t]`` (its depth t, a draft k through it).
    """
    candidates, next_token, next_sibling, rows = [-1], [-1], [-1], [(0, 0)]
    last_child: dict[int, int] = {}
    index: dict[tuple[int, ...], int] = {(): 0}
    K, L = draft_tokens.shape
    for k in range(K):
        for t in range(L):
            prefix = tuple(int(x) for x in draft_tokens[k, : t + 1])
            if prefix in index:
                continue
            node = len(candidates)
            parent = index[prefix[:-1]]
            index[prefix] = node
            candidates.append(prefix[-1])
            next_token.append(-1)
            next_sibling.append(-1)
            rows.append((k, t + 1))
            if parent in last_child:
                next_sibling[last_child[parent]] = node
            else:
                next_token[parent] = node
            last_child[parent] = node
    return candidates, next_token, next_sibling, rows


def draw_coins(n_nodes: int, generator: torch.Generator) -> tuple[np.ndarray, np.float32]:
    """Upstream's ``coins`` (float32, one per tree node) then ``coins_for_final_sampling`` (one float32)."""
    coins = torch.rand((n_nodes,), dtype=torch.float32, generator=generator).numpy()
    coin_final = torch.rand((1,), dtype=torch.float32, generator=generator).numpy()[0]
    return coins, coin_final


def _sample_final(values: np.ndarray, coin: np.float32) -> int:
    """Inverse CDF over the positive entries of ``values`` (float32): the kernel's final draw."""
    total = np.float32(0)
    for v in values:
        total = np.float32(total + v)
    u = np.float32(coin * total)
    cum = np.float32(0)
    last_valid = -1
    for i, v in enumerate(values):
        if v > 0:
            cum = np.float32(cum + v)
            if cum > u:
                return i
            last_valid = i
    return last_valid if last_valid != -1 else len(values) - 1


def verify(
    draft_tokens: Any,
    draft_probs: Any,
    target_probs: Any,
    generator: torch.Generator,
    *,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
) -> list[int]:
    """SGLang's target-only tree verification of the K drafts (``generic_torch``): the emitted tokens.

    Parameters
    ----------
    draft_tokens : Tensor or ndarray, shape [K, L], int64
        Merged into a tree (shared prefixes are one node).
    draft_probs : Tensor or ndarray, shape [K, L, V], float64
        Unused: the target-only kernel is given zeros.
    target_probs : Tensor or ndarray, shape [K, L+1, V], float64
        Cast to float32.
    generator : torch.Generator
        One float32 coin per tree node, then one float32 coin for the final draw.
    threshold_single, threshold_acc : float
        Upstream's relaxation knobs; 1.0 (the defaults) is exact acceptance.

    Returns
    -------
    list of int
        The accepted path's tokens plus the final token (length 1..L+1).
    """
    drafts = _as_tensor(draft_tokens, torch.int64).numpy()
    p = _as_tensor(target_probs, torch.float64).to(torch.float32).numpy()
    candidates, next_token, next_sibling, rows = build_tree(drafts)
    n_nodes, V = len(candidates), p.shape[-1]
    coins, coin_final = draw_coins(n_nodes, generator)
    thr_acc = np.float32(max(threshold_acc, 1e-9))
    thr_single = np.float32(threshold_single)
    tree_probs = np.stack([p[k, t] for k, t in rows])  # [n_nodes, V] float32
    scratch = np.zeros_like(tree_probs)  # draft_probs: zeros, then the rejected siblings' p
    num_speculative_tokens = drafts.shape[1] + 1
    prob_acc, cur_row, coin = np.float32(0), 0, coins[0]
    out: list[int] = []
    cur_index = 0
    for _ in range(1, num_speculative_tokens):
        cur_index = next_token[cur_index]
        while cur_index != -1:
            token = candidates[cur_index]
            target_prob_single = tree_probs[cur_row, token]
            prob_acc = np.float32(prob_acc + target_prob_single)
            if coin <= np.float32(prob_acc / thr_acc) or target_prob_single >= thr_single:
                prob_acc, cur_row, coin = np.float32(0), cur_index, coins[cur_index]
                out.append(token)
                break
            scratch[cur_row, token] = tree_probs[cur_row, token]
            cur_index = next_sibling[cur_index]
        if cur_index == -1:
            break
    all_accepted = len(out) == num_speculative_tokens - 1
    draft_row = np.zeros(V, dtype=np.float32) if all_accepted else scratch[cur_row]
    values = np.maximum(tree_probs[cur_row] - draft_row, np.float32(0))
    return [*out, _sample_final(values, coin_final)]
