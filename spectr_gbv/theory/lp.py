r"""Exact optima as linear programs: OPT(K) (stateless lossless) and OT(K) (coupling).

Both LPs are indexed by draft *multisets*: the K drafts are i.i.d., so symmetrising a kernel
over the orderings of the drafts keeps it valid and keeps its value, and the optimum over
multiset-indexed kernels is the optimum over all kernels. A multiset M of drafts x^L with
q(x^L) > 0 has mass :math:`m(M) = \frac{K!}{\prod_x c_x!}\prod_k q(x^{(k)})`. Outputs and
targets with zero target probability are left out (validity forces them to 0). The LPs are
solved by ``scipy.optimize.linprog(method="highs")`` in float64 with sparse constraint
matrices, one exactly redundant row dropped (THEORY.md section 5, pitfall), and the returned
kernel is re-checked in exact rational arithmetic (:class:`LPResult` fields ``*_defect``).
An LP with at least :data:`LP_PROGRESS_NONZEROS` constraint nonzeros shows its stage
(building, solving, exact recheck) on a one-line bar on stderr when it is a terminal
(:func:`~spectr_gbv.core.progress.progress`; silenced by ``--quiet`` or ``SPECTR_GBV_QUIET=1``).

Values are expected *accepted* tokens E[tau]; add 1 for the per-iteration block efficiency.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from spectr_gbv.core.progress import ProgressBar, progress
from spectr_gbv.core.tabular import TabularAR
from spectr_gbv.theory import _lp_build as build
from spectr_gbv.theory._checks import check_models
from spectr_gbv.theory._lp_check import check_opt, check_ot, exact

#: Largest number of constraint-matrix nonzeros an LP may have before it is refused.
MAX_LP_NONZEROS = 20_000_000

#: LPs with at least this many constraint nonzeros (about a second to build, solve and
#: recheck) show a progress line (:func:`~spectr_gbv.core.progress.progress`).
LP_PROGRESS_NONZEROS = 50_000

Draft = tuple[int, ...]
Multiset = tuple[Draft, ...]
Kernel = dict[Multiset, dict[tuple[int, ...], float]]


class LPTooLargeError(ValueError):
    """The LP for this (n, L, K) would exceed ``max_nonzeros``; raised before building it."""


class LPSolveError(RuntimeError):
    """HiGHS did not return an optimal solution.

    Attributes
    ----------
    status : int
        ``scipy.optimize.linprog`` status (1 iteration/time limit, 2 infeasible, 3 unbounded,
        4 numerical difficulties).
    message : str
        The solver's message, unchanged.
    """

    def __init__(self, kind: str, status: int, message: str) -> None:
        super().__init__(f"{kind} LP: linprog(method='highs') status {status}: {message}")
        self.kind, self.status, self.message = kind, status, message


@dataclass(frozen=True)
class LPResult:
    r"""Optimum of :func:`optimal_lossless` (``kind="opt"``) or :func:`optimal_coupling` ("ot").

    Attributes
    ----------
    value : float
        Optimal expected accepted tokens E[tau] (float64, from HiGHS).
    kind : str
        ``"opt"`` or ``"ot"``.
    num_drafts, draft_length : int
        K and L.
    kernel : dict
        Sorted multiset (tuple of K draft tuples) -> {output: conditional probability}, zero
        entries omitted, one key per multiset of drafts with q(x^L) > 0. OPT outputs are
        tuples o in V^{j+1} (j accepted tokens, then one token); OT outputs are target blocks
        y in V^L. Rows are renormalised to sum to 1 in float64; a multiset whose float64 mass
        underflows to 0, or whose row HiGHS leaves empty (mass below ~1e-20), gets the law
        of p at the first position (OPT: reject all) or p on V^L (OT); the exact rechecks
        below include these corrections.
    status : int
        ``linprog`` status, always 0 here (other statuses raise :class:`LPSolveError`).
    message : str
        ``linprog`` message.
    num_variables, num_constraints, nonzeros : int
        Size of the LP that was solved (after the dropped redundant row); equal to
        :func:`lp_size` unless some multiset mass underflows in float64.
    validity_defect : Fraction
        Exact recheck of the kernel, entries read as the exact values of their floats. OPT:
        :math:`\frac12\sum_{y\in V^{L+1}}|\sum_m a(y^m)p(y_{m+1..L+1}|y^m) - p(y)|`. OT: total
        variation between the coupling's y-marginal and p on V^L.
    marginal_defect : Fraction
        Largest :math:`|\text{row sum} - 1|` of the kernel (OT: also :math:`|\text{column mass} - p(y)|`).
    value_exact_check : Fraction
        The objective recomputed exactly from the kernel.
    """

    value: float
    kind: str
    num_drafts: int
    draft_length: int
    kernel: Kernel = field(repr=False)
    status: int
    message: str
    num_variables: int
    num_constraints: int
    nonzeros: int
    validity_defect: Fraction
    marginal_defect: Fraction
    value_exact_check: Fraction

    @property
    def success(self) -> bool:
        """True when ``status == 0``."""
        return self.status == 0


def _checked(
    target: TabularAR, draft: TabularAR, num_drafts: int, draft_length: int, kind: str
) -> tuple[TabularAR, TabularAR]:
    if kind not in ("opt", "ot"):
        raise ValueError(f"kind must be 'opt' or 'ot', got {kind!r}")
    target, draft = check_models(target, draft, draft_length, num_drafts)
    if kind == "opt" and target.depth < draft_length:
        raise ValueError(
            f"target needs laws at prefixes of length 0..L={draft_length} for OPT (bonus "
            f"position); it has depth {target.depth}"
        )
    return target, draft


def lp_size(target: TabularAR, draft: TabularAR, num_drafts: int, draft_length: int, kind: str) -> tuple[int, int, int]:
    """Exact size of the OPT or OT LP, counted on the prefix tree without building it.

    Parameters
    ----------
    target, draft : TabularAR
        p and q (OPT needs target depth >= L).
    num_drafts, draft_length : int
        K >= 1 and L >= 1.
    kind : {"opt", "ot"}

    Returns
    -------
    (num_variables, num_constraints, nonzeros) : tuple of int
        The counts :func:`optimal_lossless` / :func:`optimal_coupling` report (fewer only if
        a multiset's float64 mass underflows to 0 and is left out of the LP).

    Raises
    ------
    ValueError
        Bad ``kind``, K, L or models, or (OPT) target depth < L.

    References
    ----------
    THEORY.md section 5.

    Examples
    --------
    >>> from spectr_gbv.core import default_instance
    >>> lp_size(*default_instance(), num_drafts=2, draft_length=2, kind="ot")
    (40, 13, 70)
    """
    target, draft = _checked(target, draft, num_drafts, draft_length, kind)
    if kind == "opt":
        return build.opt_size(build.prefix_tree(target, draft, draft_length), num_drafts)
    drafts, _ = build.draft_support(draft, draft_length)
    num_targets = int(np.count_nonzero(np.asarray(target.joint(draft_length) > 0, dtype=bool)))
    return build.ot_size(len(drafts), num_targets, num_drafts)


def _refuse_if_large(size: tuple[int, int, int], n: int, k: int, length: int, kind: str, limit: int) -> None:
    if size[2] > limit:
        raise LPTooLargeError(
            f"{kind.upper()}(K) LP for n={n}, L={length}, K={k} has {size[0]} variables, "
            f"{size[1]} constraints and {size[2]} nonzeros, over the limit max_nonzeros={limit}"
        )


def _stages(size: tuple[int, int, int], kind: str, k: int) -> ProgressBar:
    """A three-stage bar (build, solve, recheck) for a large LP, a no-op for a small one."""
    quiet = True if size[2] < LP_PROGRESS_NONZEROS else None
    bar = progress(3, f"{kind.upper()}(K={k}) LP, {size[2]:,} nonzeros", quiet=quiet, unit="stage")
    bar.set_postfix_str("building")
    return bar


def _next_stage(bar: ProgressBar, stage: str) -> None:
    bar.update()
    bar.set_postfix_str(stage)


def _keys(tree_drafts: np.ndarray, ms: np.ndarray) -> list[Multiset]:
    drafts = [tuple(x) for x in tree_drafts.tolist()]
    return [tuple(drafts[d] for d in row) for row in ms.tolist()]


def optimal_lossless(
    target: TabularAR,
    draft: TabularAR,
    num_drafts: int,
    draft_length: int,
    *,
    max_nonzeros: int = MAX_LP_NONZEROS,
    time_limit: float | None = None,
) -> LPResult:
    r"""OPT(K): the best stateless lossless K-draft verifier, by linear programming.

    .. math::
        \max_{w\ge0}\ \sum_{M,o} w(M,o)\,(|o|-1)\quad\text{s.t.}\quad
        \sum_o w(M,o) = m(M),\qquad
        \sum_{m=1}^{L+1} a(y^m)\,p(y_{m+1..L+1}|y^m) = p(y)\ \ \forall y\in V^{L+1},

    with :math:`a(o)=\sum_M w(M,o)`; o ranges over (a prefix of length 0..L of a draft in M)
    + one token. Validity is imposed through the sparse recursion
    :math:`A(zv) = p(v|z)A(z) + a(zv)` (see ``_lp_build``), one redundant row dropped.

    Parameters
    ----------
    target : TabularAR
        p, laws at every prefix of length 0..L (length L is the bonus position).
    draft : TabularAR
        q, laws at every prefix of length 0..L-1, same vocabulary.
    num_drafts : int
        K >= 1 i.i.d. drafts.
    draft_length : int
        L >= 1 tokens per draft.
    max_nonzeros : int
        Refuse LPs with more constraint nonzeros (default :data:`MAX_LP_NONZEROS`).
    time_limit : float, optional
        HiGHS time limit in seconds (hitting it raises :class:`LPSolveError`).

    Returns
    -------
    LPResult
        ``kind="opt"``; kernel maps each sorted draft multiset to its output law.

    Raises
    ------
    ValueError
        K, L < 1, mismatched models, or a target of depth < L (message names ``target``).
    LPTooLargeError
        The LP would have more than ``max_nonzeros`` nonzeros (checked before building).
    LPSolveError
        ``linprog`` status != 0 (status and message carried, never swallowed).

    References
    ----------
    Hu et al. 2025, "Towards optimal multi-draft speculative decoding", arXiv 2502.18779
    (optimal multi-draft acceptance as an LP); THEORY.md sections 2 and 5.

    Examples
    --------
    >>> from spectr_gbv.core import default_instance
    >>> res = optimal_lossless(*default_instance(), num_drafts=2, draft_length=2)
    >>> round(res.value * 36, 6), res.validity_defect < 1e-12
    (71.0, True)
    """
    target, draft = _checked(target, draft, num_drafts, draft_length, "opt")
    tree = build.prefix_tree(target, draft, draft_length)
    size = build.opt_size(tree, num_drafts)
    _refuse_if_large(size, target.n, num_drafts, draft_length, "opt", max_nonzeros)
    with _stages(size, "opt", num_drafts) as bar:
        ms, mult = build.multisets(len(tree.drafts), num_drafts)
        mass = mult * np.prod(tree.q_drafts[ms], axis=1)
        lp = build.build_opt(tree, ms, mass)
        _next_stage(bar, "solving (HiGHS)")
        status, message, value, x = build.solve(lp, time_limit)
        if status != 0:
            raise LPSolveError("OPT", status, message)
        _next_stage(bar, "exact recheck")
        root = np.asarray(target.cond(()), dtype=np.float64)
        fallback = {(v,): float(root[v]) for v in np.flatnonzero(root > 0).tolist()}
        kernel = build.read_kernel(lp, x, _keys(tree.drafts, ms), tree.row_output, fallback)
        checks = check_opt(kernel, target, draft, draft_length)
        bar.update()
    size = (lp.a_eq.shape[1], lp.a_eq.shape[0], lp.a_eq.nnz)
    return LPResult(value, "opt", num_drafts, draft_length, kernel, status, message, *size, *checks)


def optimal_coupling(
    target: TabularAR,
    draft: TabularAR,
    num_drafts: int,
    draft_length: int,
    *,
    max_nonzeros: int = MAX_LP_NONZEROS,
    time_limit: float | None = None,
) -> LPResult:
    r"""OT(K): the best coupling of K i.i.d. drafts with a target block (stateful optimum).

    .. math::
        OT(K) = \max_{\pi\in\Pi(q^{\otimes K},\,p)}\ E_\pi\big[\max_k \mathrm{LCP}(X^{(k)}, Y)\big]

    over couplings of the draft multiset law (masses m(M)) and p on V^L; a transportation LP
    with one redundant row dropped. :math:`OT(1) = \sum_i\sum_{x^i}\min\{p(x^i), q(x^i)\}`.

    Parameters
    ----------
    target, draft : TabularAR
        p and q, laws at every prefix of length 0..L-1 (at least), same vocabulary.
    num_drafts, draft_length : int
        K >= 1 and L >= 1.
    max_nonzeros : int
        As :func:`optimal_lossless`.
    time_limit : float, optional
        HiGHS time limit in seconds.

    Returns
    -------
    LPResult
        ``kind="ot"``; kernel maps each sorted multiset to the conditional law of Y on V^L.

    Raises
    ------
    ValueError
        K, L < 1 or mismatched models.
    LPTooLargeError
        The LP would have more than ``max_nonzeros`` nonzeros.
    LPSolveError
        ``linprog`` status != 0.

    References
    ----------
    THEORY.md sections 2 and 5; Sun et al. 2024, arXiv 2403.10444 (K = 1, greedy value).

    Examples
    --------
    >>> from spectr_gbv.core import default_instance
    >>> round(optimal_coupling(*default_instance(), num_drafts=1, draft_length=2).value, 9)
    1.625
    """
    target, draft = _checked(target, draft, num_drafts, draft_length, "ot")
    L = draft_length
    drafts, q_drafts = build.draft_support(draft, L)
    p_exact = exact(target.joint(L))
    targets = np.argwhere(np.asarray(p_exact > 0, dtype=bool)).astype(np.int64)
    size = build.ot_size(len(drafts), len(targets), num_drafts)
    _refuse_if_large(size, target.n, num_drafts, L, "ot", max_nonzeros)
    with _stages(size, "ot", num_drafts) as bar:
        ms, mult = build.multisets(len(drafts), num_drafts)
        mass = mult * np.prod(q_drafts[ms], axis=1)
        p_targets = np.asarray(p_exact[tuple(targets.T)], dtype=np.float64)
        lp = build.build_ot(drafts, ms, mass, targets, p_targets)
        _next_stage(bar, "solving (HiGHS)")
        status, message, value, x = build.solve(lp, time_limit)
        if status != 0:
            raise LPSolveError("OT", status, message)
        _next_stage(bar, "exact recheck")
        outputs = [tuple(y) for y in targets.tolist()]
        fallback = dict(zip(outputs, p_targets.tolist(), strict=True))
        kernel = build.read_kernel(lp, x, _keys(drafts, ms), outputs, fallback)
        checks = check_ot(kernel, target, draft, L)
        bar.update()
    size = (lp.a_eq.shape[1], lp.a_eq.shape[0], lp.a_eq.nnz)
    return LPResult(value, "ot", num_drafts, L, kernel, status, message, *size, *checks)


def kernel_for(result: LPResult, drafts: Sequence[Sequence[int]]) -> dict[tuple[int, ...], float]:
    """Conditional output law of an LP kernel for an ordered draft tuple.

    Parameters
    ----------
    result : LPResult
        From :func:`optimal_lossless` or :func:`optimal_coupling`.
    drafts : sequence of K sequences of L ints
        The drafts in any order (the kernel is symmetric; the sorted multiset is looked up).

    Returns
    -------
    dict
        Output tuple -> probability (OPT: o in V^{j+1}; OT: y in V^L), summing to 1 up to
        float rounding.

    Raises
    ------
    ValueError
        Wrong number or length of drafts, or a draft with q(x^L) = 0 (not in the kernel).

    References
    ----------
    THEORY.md section 5.

    Examples
    --------
    >>> from spectr_gbv.core import default_instance
    >>> res = optimal_lossless(*default_instance(), num_drafts=1, draft_length=2)
    >>> round(sum(kernel_for(res, [(1, 0)]).values()), 12)
    1.0
    """
    key = tuple(sorted(tuple(int(t) for t in x) for x in drafts))
    if len(key) != result.num_drafts or any(len(x) != result.draft_length for x in key):
        raise ValueError(f"drafts must be {result.num_drafts} sequences of length {result.draft_length}, got {key!r}")
    if key not in result.kernel:
        raise ValueError(f"drafts {key!r} have zero draft probability (not in the kernel)")
    return result.kernel[key]
