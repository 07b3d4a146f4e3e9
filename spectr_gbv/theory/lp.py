r"""Exact optima as linear programs: OPT(K) (stateless lossless) and OT(K) (coupling).

Both LPs are indexed by draft *multisets*: the K drafts are i.i.d., so symmetrising a kernel
over the orderings of the drafts keeps it valid and keeps its value, and the optimum over
multiset-indexed kernels is the optimum over all kernels. A multiset M of drafts x^L with
q(x^L) > 0 has mass :math:`m(M) = \frac{K!}{\prod_x c_x!}\prod_k q(x^{(k)})`. Outputs and
targets with zero target probability are left out (validity forces them to 0). The LPs are
solved by ``scipy.optimize.linprog(method="highs")`` in float64 with sparse constraint
matrices, one exactly redundant row dropped (THEORY.md section 5, pitfall), and the returned
kernel is re-checked in exact rational arithmetic (:class:`LPResult` fields ``*_defect``).
OPT(K) LPs above :data:`COLGEN_MIN_NONZEROS` are solved by column generation over priority
orders of the prefix tree (:mod:`spectr_gbv.theory.lp_colgen`): an exactly equivalent LP whose
master has the size of the prefix tree, not of the multisets (docs/results/lp_frontier.md).
Before anything is built, an
LP whose estimated peak memory (:func:`estimate_lp_memory`) exceeds
:data:`MAX_LP_MEMORY_SHARE` of :func:`machine_memory`, or whose nonzeros exceed
:data:`MAX_LP_NONZEROS`, is refused with a one-line :class:`LPTooLargeError`.
An LP with at least :data:`LP_PROGRESS_NONZEROS` constraint nonzeros shows its stage
(building, solving, exact recheck) on a one-line bar on stderr when it is a terminal
(:func:`~spectr_gbv.core.progress.progress`; silenced by ``--quiet`` or ``SPECTR_GBV_QUIET=1``).

Values are expected *accepted* tokens E[tau]; add 1 for the per-iteration block efficiency.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from spectr_gbv.core.progress import ProgressBar, progress
from spectr_gbv.core.tabular import TabularAR
from spectr_gbv.theory import lp_build as build
from spectr_gbv.theory import lp_colgen as colgen
from spectr_gbv.theory.checks import check_models
from spectr_gbv.theory.lp_check import check_opt, check_ot, exact

#: Largest number of constraint-matrix nonzeros a plain LP (OT(K), small OPT(K)) may have
#: before it is refused by default, next to the memory estimate (:func:`estimate_lp_memory`);
#: OPT(K) by column generation is refused by memory only unless ``max_nonzeros`` is passed.
MAX_LP_NONZEROS = 20_000_000

#: OPT(K) LPs with at most this many plain-LP nonzeros are solved as the plain multiset LP
#: (a basic solution: small kernels whose entries snap to exact rationals); larger ones by
#: column generation (:mod:`spectr_gbv.theory.lp_colgen`).
COLGEN_MIN_NONZEROS = 100_000

#: Column generation is refused on prefix trees with more nodes than this (its time grows
#: about as nodes^2.6 at K = 1), before it starts; e.g. n = 2000, L = 1 (2,001 nodes).
MAX_COLGEN_NODES = 500

#: Share of the machine's memory (:func:`machine_memory`) an LP may be estimated to need
#: before it is refused with :class:`LPTooLargeError`.
MAX_LP_MEMORY_SHARE = 0.5

#: Factor applied to the fitted memory model of :func:`estimate_lp_memory` (the fit is within
#: 1.3x of the peaks it was fitted to; HiGHS's factorisation fill can grow faster than linearly).
LP_MEMORY_SAFETY = 2.0

#: LPs with at least this many constraint nonzeros show their stages (build, solve, exact
#: recheck) on a progress line (:func:`~spectr_gbv.core.progress.progress`).
LP_PROGRESS_NONZEROS = 50_000

Draft = tuple[int, ...]
Multiset = tuple[Draft, ...]
Kernel = dict[Multiset, dict[tuple[int, ...], float]]


class LPTooLargeError(ValueError):
    """The LP for this (n, L, K) would exceed ``max_memory`` or ``max_nonzeros``; raised before building it.

    The message is one line: the kind, n, L, K, the size (variables, constraints, nonzeros),
    the estimated memory in GB against the limit, and the hint ``--no-lp``.
    """


def machine_memory() -> int:
    """Total memory of this machine in bytes (the cgroup limit when it is lower).

    Returns
    -------
    int
        ``os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")``, or the cgroup v2
        ``memory.max`` of this process when that is set and smaller; 0 if neither is readable.

    Examples
    --------
    >>> machine_memory() > 0
    True
    """
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 0
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as fh:
            limit = fh.read().strip()
        if limit.isdigit() and (total == 0 or int(limit) < total):
            total = int(limit)
    except OSError:
        pass
    return total


#: Memory model constants (bytes), fitted to peak RSS above the interpreter's
#: (``resource.getrusage``; docs/results/lp_frontier.md): a plain LP
#: (OT(K), OPT(K) with ``_method="full"``) costs about 650 B per nonzero in HiGHS plus the
#: kernel read back; the column-generation OPT(K) costs per multiset (key and row dict) and
#: per kernel entry, bounded by the plain LP's kernel variables; the exact recheck holds about
#: four dense object arrays of Fractions over V^(L+1) (OPT) or V^L (OT).
_BYTES_PER_NONZERO = 700
_BYTES_PER_ROW = 2_000
_BYTES_PER_MULTISET = 600
_BYTES_PER_KERNEL_ENTRY = 100
_BYTES_PER_CHECK_CELL = 1_000
_BYTES_BASE = 50_000_000


def estimate_lp_memory(
    size: tuple[int, int, int], n: int, draft_length: int, kind: str, num_multisets: int, method: str = "colgen"
) -> int:
    r"""Estimated peak memory (bytes, safety factor included) of solving and rechecking one LP.

    The model, fitted to peak RSS (see :data:`LP_MEMORY_SAFETY`):

    - plain LP (``kind="ot"``, or OPT with ``method="full"``):
      :math:`700\,\mathrm{nnz} + 2000\,\mathrm{rows}` (HiGHS's matrix copies and factors, the
      float64 solution and the sparse kernel read back);
    - OPT by column generation (``method="colgen"``): the master is of the size of the prefix
      tree and negligible; :math:`600\,|\mathcal M| + 100\,E` with :math:`|\mathcal M|` the
      multisets and E <= the plain LP's variables the kernel entries;
    - both: the exact recheck, :math:`1000\,n^{L+1}` (OPT) or :math:`1000\,n^L` (OT), and
      50 MB of fixed cost;

    times :data:`LP_MEMORY_SAFETY`.

    Parameters
    ----------
    size : tuple of int
        (variables, constraints, nonzeros) of the plain LP (:func:`lp_size`).
    n, draft_length : int
        Vocabulary size and L.
    kind : {"opt", "ot"}
    num_multisets : int
        Draft multisets C(D + K - 1, K), D the drafts with q(x^L) > 0.
    method : {"colgen", "full"}
        How OPT(K) is solved (ignored for OT).

    Returns
    -------
    int
        Bytes.

    Examples
    --------
    >>> estimate_lp_memory((10**6, 10**4, 2 * 10**6), 4, 3, "ot", 1000) / 1e9
    2.940128
    """
    cells = n ** (draft_length + (kind == "opt"))
    if kind == "opt" and method == "colgen":
        work = _BYTES_PER_MULTISET * num_multisets + _BYTES_PER_KERNEL_ENTRY * size[0]
    else:
        work = _BYTES_PER_NONZERO * size[2] + _BYTES_PER_ROW * size[1]
    return int(LP_MEMORY_SAFETY * (_BYTES_BASE + work + _BYTES_PER_CHECK_CELL * cells))


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


def _refuse_if_large(
    size: tuple[int, int, int],
    n: int,
    k: int,
    length: int,
    kind: str,
    limit: int | None,
    max_memory: int | None,
    num_multisets: int,
    method: str = "colgen",
) -> None:
    """Raise :class:`LPTooLargeError` (one line) before building an LP over either limit."""
    need = estimate_lp_memory(size, n, length, kind, num_multisets, method)
    budget = int(MAX_LP_MEMORY_SHARE * machine_memory()) if max_memory is None else int(max_memory)
    over = []
    if budget > 0 and need > budget:
        over.append(f"over the limit max_memory={budget / 1e9:.1f} GB")
    nonzero_limit = MAX_LP_NONZEROS if limit is None else limit
    if size[2] > nonzero_limit and (over or limit is not None or kind == "ot" or method == "full"):
        over.append(f"over the limit max_nonzeros={nonzero_limit}")
    if over:
        raise LPTooLargeError(
            f"{kind.upper()}(K) LP for n={n}, L={length}, K={k}: {size[0]} variables, {size[1]} constraints, "
            f"{size[2]} nonzeros, about {need / 1e9:.1f} GB estimated, {' and '.join(over)}; "
            "rerun with --no-lp to skip the LPs"
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


def _plan_opt(
    target: TabularAR,
    draft: TabularAR,
    num_drafts: int,
    draft_length: int,
    max_nonzeros: int | None,
    max_memory: int | None,
    method: str,
) -> tuple[TabularAR, TabularAR, build.PrefixTree, tuple[int, int, int], str]:
    """Check the OPT(K) LP's inputs and size; its prefix tree, plain-LP size and solve method."""
    target, draft = _checked(target, draft, num_drafts, draft_length, "opt")
    tree = build.prefix_tree(target, draft, draft_length)
    size = build.opt_size(tree, num_drafts)
    n_ms = build.num_multisets(len(tree.drafts), num_drafts)
    if method == "auto":
        method = "full" if size[2] <= COLGEN_MIN_NONZEROS else "colgen"
    _refuse_if_large(size, target.n, num_drafts, draft_length, "opt", max_nonzeros, max_memory, n_ms, method)
    nodes = len(tree.node_len)
    if method == "colgen" and nodes > MAX_COLGEN_NODES:
        raise LPTooLargeError(
            f"OPT(K) LP for n={target.n}, L={draft_length}, K={num_drafts}: column generation over {nodes} "
            f"prefix-tree nodes, over the limit MAX_COLGEN_NODES={MAX_COLGEN_NODES} (hours of solving); "
            "rerun with --no-lp to skip the LPs"
        )
    return target, draft, tree, size, method


def _plan_ot(
    target: TabularAR,
    draft: TabularAR,
    num_drafts: int,
    draft_length: int,
    max_nonzeros: int | None,
    max_memory: int | None,
) -> tuple[TabularAR, TabularAR, tuple[np.ndarray, np.ndarray, np.ndarray], tuple[int, int, int]]:
    """Check the OT(K) LP's inputs and size; its draft support, target support and size (no exact joint)."""
    target, draft = _checked(target, draft, num_drafts, draft_length, "ot")
    drafts, q_drafts = build.draft_support(draft, draft_length)
    targets = np.argwhere(np.asarray(target.joint(draft_length) > 0, dtype=bool)).astype(np.int64)
    size = build.ot_size(len(drafts), len(targets), num_drafts)
    n_ms = build.num_multisets(len(drafts), num_drafts)
    _refuse_if_large(size, target.n, num_drafts, draft_length, "ot", max_nonzeros, max_memory, n_ms, "full")
    return target, draft, (drafts, q_drafts, targets), size


def check_lp_fits(
    target: TabularAR,
    draft: TabularAR,
    num_drafts: int,
    draft_length: int,
    kind: str,
    *,
    max_nonzeros: int | None = None,
    max_memory: int | None = None,
) -> None:
    """Raise exactly what :func:`optimal_lossless` (``"opt"``) or :func:`optimal_coupling` (``"ot"``) would refuse.

    The same checks, run without building or solving the LP (the prefix tree is counted), so
    a caller solving several LPs can refuse a too-large one before spending minutes on the
    others (``spectr-gbv bound`` checks every K and both LPs first).

    Parameters
    ----------
    target, draft : TabularAR
        p and q (OPT needs target depth >= L).
    num_drafts, draft_length : int
        K >= 1 and L >= 1.
    kind : {"opt", "ot"}
    max_nonzeros, max_memory : int, optional
        As :func:`optimal_lossless` / :func:`optimal_coupling` (their defaults when omitted).

    Raises
    ------
    ValueError
        Bad ``kind``, K, L or models, or (OPT) target depth < L.
    LPTooLargeError
        The LP would be refused (one line naming n, L, K, the size and ``--no-lp``).

    References
    ----------
    THEORY.md section 5 (the LPs); this package's memory guard.

    Examples
    --------
    >>> from spectr_gbv.core import default_instance
    >>> check_lp_fits(*default_instance(), num_drafts=2, draft_length=2, kind="opt")
    """
    if kind == "opt":
        _plan_opt(target, draft, num_drafts, draft_length, max_nonzeros, max_memory, "auto")
    elif kind == "ot":
        _plan_ot(target, draft, num_drafts, draft_length, max_nonzeros, max_memory)
    else:
        raise ValueError(f"kind must be 'opt' or 'ot', got {kind!r}")


def optimal_lossless(
    target: TabularAR,
    draft: TabularAR,
    num_drafts: int,
    draft_length: int,
    *,
    max_nonzeros: int | None = None,
    max_memory: int | None = None,
    time_limit: float | None = None,
    _method: str = "auto",
) -> LPResult:
    r"""OPT(K): the best stateless lossless K-draft verifier, by linear programming.

    .. math::
        \max_{w\ge0}\ \sum_{M,o} w(M,o)\,(|o|-1)\quad\text{s.t.}\quad
        \sum_o w(M,o) = m(M),\qquad
        \sum_{m=1}^{L+1} a(y^m)\,p(y_{m+1..L+1}|y^m) = p(y)\ \ \forall y\in V^{L+1},

    with :math:`a(o)=\sum_M w(M,o)`; o ranges over (a prefix of length 0..L of a draft in M)
    + one token. Validity is imposed through the sparse recursion
    :math:`A(zv) = p(v|z)A(z) + a(zv)` (see :mod:`~spectr_gbv.theory.lp_build`), one redundant row dropped.

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
    max_nonzeros : int, optional
        Refuse LPs whose plain multiset LP has more constraint nonzeros. Default: the plain
        LP is refused above :data:`MAX_LP_NONZEROS`; column generation only by memory.
    max_memory : int, optional
        Refuse LPs estimated (:func:`estimate_lp_memory`) to need more bytes; default
        :data:`MAX_LP_MEMORY_SHARE` of :func:`machine_memory`.
    time_limit : float, optional
        HiGHS time limit in seconds (hitting it raises :class:`LPSolveError`); with column
        generation, a limit on the whole loop.
    _method : {"auto", "colgen", "full"}
        Private: ``"full"`` solves the plain multiset LP (the formulation before column
        generation, kept for ``bench/lp_frontier.py`` and the tests), ``"colgen"`` column
        generation, ``"auto"`` the plain LP up to :data:`COLGEN_MIN_NONZEROS` nonzeros.
        All give the same optimum (to HiGHS tolerances) and the same exact rechecks; the
        kernels may differ (OPT(K) has many optimal kernels). ``num_variables``,
        ``num_constraints`` and ``nonzeros`` report the plain LP's size (:func:`lp_size`)
        either way; the column-generation rounds are in ``message``.

    Returns
    -------
    LPResult
        ``kind="opt"``; kernel maps each sorted draft multiset to its output law.

    Raises
    ------
    ValueError
        K, L < 1, mismatched models, or a target of depth < L (message names ``target``).
    LPTooLargeError
        Over ``max_memory`` or ``max_nonzeros`` (checked before building; one line naming
        n, L, K, the size, the estimated GB and ``--no-lp``), or column generation over more
        than :data:`MAX_COLGEN_NODES` prefix-tree nodes.
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
    target, draft, tree, size, _method = _plan_opt(
        target, draft, num_drafts, draft_length, max_nonzeros, max_memory, _method
    )
    if _method == "colgen":
        with _stages(size, "opt", num_drafts) as bar:
            _next_stage(bar, "solving (column generation, HiGHS)")
            sol = colgen.solve_colgen(tree, num_drafts, time_limit)
            if sol.status != 0:
                raise LPSolveError("OPT", sol.status, sol.message)
            _next_stage(bar, "kernel and exact recheck")
            ms, _ = build.multisets(len(tree.drafts), num_drafts)
            kernel = colgen.kernel_rows(tree, ms, _keys(tree.drafts, ms), sol)
            checks = check_opt(kernel, target, draft, draft_length)
            bar.update()
        return LPResult(sol.value, "opt", num_drafts, draft_length, kernel, 0, sol.message, *size, *checks)
    if _method != "full":
        raise ValueError(f"_method must be 'auto', 'colgen' or 'full', got {_method!r}")
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
    max_nonzeros: int | None = None,
    max_memory: int | None = None,
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
    max_nonzeros, max_memory : int, optional
        As :func:`optimal_lossless` for the plain LP (default :data:`MAX_LP_NONZEROS`; memory
        model of :func:`estimate_lp_memory`).
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
        Over ``max_memory`` or ``max_nonzeros`` (checked before building).
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
    target, draft, (drafts, q_drafts, targets), size = _plan_ot(
        target, draft, num_drafts, draft_length, max_nonzeros, max_memory
    )
    L = draft_length
    p_exact = exact(target.joint(L))
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
