r"""The law of the accepted length given the drafts, and :math:`E[\tau \mid X^{(1..K)}]`, without sampling.

A kernel run draws the verifier's own randomness (BV's uniforms, a selection, a final token)
on top of the drafts; averaging :math:`\tau` over many runs on the same drafts estimates
:math:`E[\tau \mid X]` with a sampling error. For the methods below that conditional
expectation has a closed form in the quantities the kernels already compute, so it is
returned directly (float64), which removes the verifier's randomness from paired
comparisons on recorded iterations (``bench/paired_kernels.py --exact``; a Rao-Blackwellised
estimate: same mean, smaller variance).

* block verification of one draft with draft rows r (Sun et al. 2024, Algorithm 2):
  :math:`\tau = \max\{i : \eta_i < h_i\}` over independent uniforms, so
  :math:`P(\tau = i) = h_i \prod_{j > i} (1 - h_j)` and
  :math:`P(\tau = 0) = \prod_j (1 - h_j)` (:func:`block_end_law`);
* ``sd``: :math:`E[\tau] = \sum_t \prod_{s \le t} \min\{1, p(x_s)/q(x_s)\}` on draft 0;
* ``bv``: BV of draft 0 with q;
* ``gbv_multipath``: BV of the (deterministically) selected draft with the skewed rows;
* ``near_opt_bv`` (score selection): :math:`\sum_k P(\text{draft } k \text{ wins})\,
  E_{BV}[\tau \mid x^{(k)}, r]` with the kernel's exact win probabilities and rows;
* ``mdbv``: draft k's block verification starts from the state (accepted prefix, residual)
  the earlier drafts left, so the states are enumerated: at most :math:`(L + 1)^{K - 1}`
  branches per batch row, each carrying a V-sized law (the last draft's branches need none).

Every law equals that of the corresponding :func:`~spectr_gbv.gpu.kernels.verify` kernel's
``num_accepted`` over its randomness, up to float64 rounding (tested against the reference
layer's exact outcome laws).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from spectr_gbv.core.methods import methods_where
from spectr_gbv.gpu.kernels.block import BlockWeightsT, block_next_law, block_weights
from spectr_gbv.gpu.kernels.bv import bv_weights
from spectr_gbv.gpu.kernels.common import KernelInputs, batch_arange, validate_inputs
from spectr_gbv.gpu.kernels.gbv_multipath import select_path as gbv_select_path
from spectr_gbv.gpu.kernels.gbv_multipath import skewed_rows
from spectr_gbv.gpu.kernels.mdbv import continues
from spectr_gbv.gpu.kernels.near_opt_bv import score_selection
from spectr_gbv.gpu.kernels.sd import sd_acceptance_probs

#: Methods :func:`expected_accepted` computes in closed form: the table's entries with
#: ``tau_law=True`` (:data:`~spectr_gbv.core.methods.METHOD_TABLE`), whose law is ``_law_<name>`` here.
EXPECTED_METHODS: tuple[str, ...] = methods_where(tau_law=True)


def block_end_law(weights: BlockWeightsT, start: torch.Tensor | None = None) -> torch.Tensor:
    r"""Law of block verification's accepted end, :math:`P(\mathrm{end} = e)`, e = 0..L.

    .. math::
        P(\mathrm{end} = e) = h_e \prod_{j > e} (1 - h_j)\ (e > a), \qquad
        P(\mathrm{end} = a) = \prod_{j > a} (1 - h_j)

    for :func:`~spectr_gbv.gpu.kernels.block.block_stop`'s rule
    :math:`\mathrm{end} = \max\{i : \eta_i < h_i\}` (``a`` = ``start`` if none).

    Parameters
    ----------
    weights : BlockWeightsT
        From :func:`~spectr_gbv.gpu.kernels.block.block_weights` (``h`` float64 [B, L], 0
        before ``start``).
    start : Tensor, int64 [B], optional
        First verified position (default 0).

    Returns
    -------
    Tensor, float64 [B, L + 1]
        Rows summing to 1 (within rounding); 0 below ``start``.

    References
    ----------
    Sun et al. 2024, arXiv 2403.10444, Algorithm 2; THEORY.md section 3.
    """
    h = weights.h
    B, L = h.shape
    if start is None:
        start = torch.zeros(B, dtype=torch.int64, device=h.device)
    keep = 1.0 - h
    # tail[:, t] = prod_{j > t} (1 - h_j), t = 0..L-1; all = prod_j (1 - h_j)
    rev = torch.cumprod(keep.flip(-1), -1).flip(-1)  # prod_{j >= t}
    tail = torch.cat([rev[:, 1:], torch.ones_like(rev[:, :1])], -1)
    law = torch.zeros(B, L + 1, dtype=torch.float64, device=h.device)
    law[:, 1:] = h * tail
    law[batch_arange(h), start] += rev[:, 0]
    return law


def _bv_law(path: torch.Tensor, p_rows: torch.Tensor, draft_rows: torch.Tensor) -> torch.Tensor:
    """Law of tau [B, L + 1] of BV of ``path`` [B, L] against ``p_rows`` [B, L+1, V], draft rows [B, L, V]."""
    L = path.shape[1]
    return block_end_law(block_weights(path, p_rows[:, 0], p_rows[:, :L], draft_rows))


def _law_sd(inputs: KernelInputs) -> torch.Tensor:
    reach = torch.cumprod(sd_acceptance_probs(inputs), -1)  # P(tau >= t), t = 1..L
    above = torch.cat([torch.ones_like(reach[:, :1]), reach], -1)  # P(tau >= t), t = 0..L
    return above - torch.cat([reach, torch.zeros_like(reach[:, :1])], -1)


def _law_bv(inputs: KernelInputs) -> torch.Tensor:
    return block_end_law(bv_weights(inputs))


def _law_gbv_multipath(inputs: KernelInputs) -> torch.Tensor:
    b = batch_arange(inputs.drafts)
    k = gbv_select_path(inputs)
    x, p, q = inputs.drafts[b, k], inputs.target_probs[b, k], inputs.draft_probs[b, k]
    if inputs.K > 1:
        q = skewed_rows(x, p[:, : inputs.L], q, inputs.K)
    return _bv_law(x, p, q)


def _law_near_opt_bv(inputs: KernelInputs) -> torch.Tensor:
    sel = score_selection(inputs)
    if bool(sel.unresolved.any()):
        rows = sel.unresolved.nonzero().flatten().tolist()
        raise ValueError(
            f"near_opt_bv: batch rows {rows} fall back to the walk (a drafted entry below float64's "
            "range), whose random order draws have no closed form here; sample them with verify()"
        )
    b = batch_arange(inputs.drafts)
    total = torch.zeros(inputs.B, inputs.L + 1, dtype=torch.float64, device=inputs.device)
    for j in range(inputs.K):
        k = sel.first[:, j]
        p_path = inputs.target_probs[b, k].to(torch.float64)
        p_path = p_path / p_path.sum(-1, keepdim=True)
        total = total + sel.win[:, j].unsqueeze(-1) * _bv_law(inputs.drafts[b, k], p_path, sel.rows(k))
    return total


def _law_mdbv(inputs: KernelInputs) -> torch.Tensor:
    """Enumerate MDBV's states (row, accepted length a, source draft, next-token law R)."""
    B, K, L = inputs.B, inputs.K, inputs.L
    drafts, p_all, q_all = inputs.drafts, inputs.target_probs, inputs.draft_probs
    device = drafts.device
    row = batch_arange(drafts)
    prob = torch.ones(B, dtype=torch.float64, device=device)
    a = torch.zeros(B, dtype=torch.int64, device=device)
    src = torch.zeros(B, dtype=torch.int64, device=device)
    law = p_all[:, 0, 0]
    ends = torch.arange(L + 1, device=device)
    out = torch.zeros(B, L + 1, dtype=torch.float64, device=device)
    for k in range(K):
        x = drafts[row, k]
        active = continues(x, drafts[row, src], a) & (a < L)
        i = active.nonzero().flatten()
        start = a[i]
        weights = block_weights(x[i], law[i], p_all[row[i], k, :L], q_all[row[i], k], start)
        end_law = block_end_law(weights, start)  # [n, L + 1]
        if k == K - 1:  # the last draft: its end law is all that is needed
            stay = (~active).nonzero().flatten()  # branches this draft does not continue stop at a
            out.index_put_((row[stay], a[stay]), prob[stay], accumulate=True)
            return out.index_add_(0, row[i], prob[i].unsqueeze(-1) * end_law)
        j, e = (end_law > 0).nonzero(as_tuple=True)  # the reachable (branch, end) pairs
        sub = BlockWeightsT(weights.w[j], weights.h[j])
        r = row[i][j]
        nxt, _ = block_next_law(sub, e, law[i][j], p_all[r, k, :L], q_all[r, k], p_all[r, k, L], start[j])
        nxt = torch.where((e == L).unsqueeze(-1), nxt, nxt / nxt.sum(-1, keepdim=True))
        keep = ~active
        row = torch.cat([row[keep], r])
        prob = torch.cat([prob[keep], prob[i][j] * end_law[j, e]])
        a = torch.cat([a[keep], ends[e]])
        src = torch.cat([src[keep], torch.full((j.numel(),), k, dtype=torch.int64, device=device)])
        law = torch.cat([law[keep], nxt.to(law.dtype)])
    raise AssertionError("unreachable: the loop returns at k = K - 1")


#: Method -> its closed-form law of tau given the drafts (``_law_<method>`` of this module).
_LAWS: dict[str, Callable[[KernelInputs], torch.Tensor]] = {m: globals()[f"_law_{m}"] for m in EXPECTED_METHODS}


def _check(method: str) -> None:
    if not isinstance(method, str) or method not in _LAWS:
        raise ValueError(f"method must be one of {', '.join(EXPECTED_METHODS)}, got {method!r}")


def accepted_law(
    method: str, drafts: torch.Tensor, draft_probs: torch.Tensor, target_probs: torch.Tensor
) -> torch.Tensor:
    r"""Law of a kernel's accepted length given its drafts, :math:`P(\tau = i \mid X)`, per batch row.

    The law of :func:`~spectr_gbv.gpu.kernels.verify`'s ``num_accepted`` over the verifier's
    own randomness (its uniforms, selection and final draw), computed in closed form (module
    docstring), not sampled.

    Parameters
    ----------
    method : str
        One of :data:`EXPECTED_METHODS`: ``sd``, ``bv``, ``gbv_multipath``, ``mdbv``,
        ``near_opt_bv`` (the registered score selection).
    drafts : Tensor, int64 [B, K, L]
    draft_probs : Tensor, float32 or float64 [B, K, L, V]
    target_probs : Tensor, same dtype, [B, K, L+1, V]
        As for :func:`~spectr_gbv.gpu.kernels.verify`.

    Returns
    -------
    Tensor, float64 [B, L + 1]
        ``law[b, i]`` = :math:`P(\tau = i \mid X^{(b)})`; rows sum to 1 within float64
        rounding. ``mdbv`` holds up to :math:`(L + 1)^{K - 1}` laws of V entries per row at its
        widest step (81 at K = 3, L = 8); the others cost one kernel call.

    Raises
    ------
    ValueError
        ``method`` not in :data:`EXPECTED_METHODS` (the other kernels' randomness has no closed
        form here: average their samples); any input problem of
        :func:`~spectr_gbv.gpu.kernels.common.validate_inputs`; ``near_opt_bv`` rows that fall
        back to the walk (``precision_fallbacks``), named by index.

    References
    ----------
    Sun et al. 2024, arXiv 2403.10444, Algorithm 2 (the law of BV's stop); Leviathan et al.
    2023, arXiv 2211.17192 (``sd``); the method modules of :mod:`spectr_gbv.gpu.kernels`.

    Examples
    --------
    >>> import torch
    >>> p = torch.tensor([[[[0.25, 0.75], [0.5, 0.5]]]], dtype=torch.float64)  # [1, 1, 2, 2]
    >>> q = torch.tensor([[[[0.5, 0.5]]]], dtype=torch.float64)  # [1, 1, 1, 2]
    >>> accepted_law("bv", torch.tensor([[[0]]]), q, p)  # accept with min{1, 0.25 / 0.5}
    tensor([[0.5000, 0.5000]], dtype=torch.float64)
    """
    _check(method)
    return _LAWS[method](validate_inputs(drafts, draft_probs, target_probs))


def expected_accepted(
    method: str, drafts: torch.Tensor, draft_probs: torch.Tensor, target_probs: torch.Tensor
) -> torch.Tensor:
    r"""Expected accepted tokens of a kernel given its drafts, :math:`E[\tau \mid X]`, per batch row.

    The mean of :func:`accepted_law`: the mean of :func:`~spectr_gbv.gpu.kernels.verify`'s
    ``num_accepted`` over the verifier's own randomness, so paired comparisons on recorded
    drafts carry no verifier noise.

    Parameters
    ----------
    method : str
        One of :data:`EXPECTED_METHODS`.
    drafts, draft_probs, target_probs : Tensor
        As for :func:`accepted_law` ([B, K, L], [B, K, L, V], [B, K, L+1, V]).

    Returns
    -------
    Tensor, float64 [B]
        In [0, L].

    Raises
    ------
    ValueError
        As :func:`accepted_law`.

    References
    ----------
    As :func:`accepted_law`.

    Examples
    --------
    >>> import torch
    >>> p = torch.tensor([[[[0.25, 0.75], [0.5, 0.5]]]], dtype=torch.float64)  # [1, 1, 2, 2]
    >>> q = torch.tensor([[[[0.5, 0.5]]]], dtype=torch.float64)  # [1, 1, 1, 2]
    >>> expected_accepted("bv", torch.tensor([[[0]]]), q, p)  # min{1, 0.25 / 0.5}
    tensor([0.5000], dtype=torch.float64)
    """
    law = accepted_law(method, drafts, draft_probs, target_probs)
    return law @ torch.arange(law.shape[-1], dtype=torch.float64, device=law.device)


__all__ = ["EXPECTED_METHODS", "accepted_law", "block_end_law", "expected_accepted"]
