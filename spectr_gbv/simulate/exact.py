r"""Exact one-iteration simulator: a verifier's output law averaged over all draft tuples.

For an :class:`~spectr_gbv.core.Instance` (p, q, L) and K i.i.d. drafts,

.. math::
    a(o) = \sum_{X} \Big(\prod_{k} q(X^{(k)})\Big)\, P(O = o \mid X)

over every draft tuple X of positive probability, with :math:`P(O = o \mid X)` the verifier's
exact kernel (:meth:`~spectr_gbv.reference.Verifier.outcome_law`). From a it reports the
expected accepted tokens :math:`E[\tau] = \sum_o a(o)(|o| - 1)` and the validity defect of
THEORY.md section 2 (exact rationals for an exact instance).

Work saved, all exact:

* drafts with q = 0 are never enumerated;
* for ``symmetric`` verifiers (law invariant to the order of the drafts) the simulator
  enumerates draft *multisets* with weight ``multiplicity * prod q``, one kernel per multiset;
  order-dependent verifiers (first-accepted-wins scans: sd, bv, spectr, rrs, mdbv and the
  lossy ones) need every *ordered* tuple, since their law for (x, y) and (y, x) differ;
* tuples are grouped by the verifier's :meth:`~spectr_gbv.reference.Verifier.law_key`
  (e.g. sd and bv read only the first draft, ar none), one kernel per group;
* the rows ``draft_probs``/``target_probs`` of every draft are gathered once by vectorised
  numpy indexing of the instance tables, and tuple weights are vectorised products.

Enumeration is refused above :data:`MAX_DRAFT_TUPLES` tuples, and any run above
:data:`MAX_KERNEL_WORK` units of kernel work (evaluations x K x (L + 1) x n), before it starts
(:class:`EnumerationTooLargeError`). From :data:`PROGRESS_MIN_KERNELS` kernel evaluations
(or :data:`PROGRESS_MIN_WORK` units of work) on,
a progress bar over them goes to stderr when it is a terminal
(:func:`~spectr_gbv.core.progress.progress`; silenced by ``--quiet`` or ``SPECTR_GBV_QUIET=1``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from spectr_gbv.core.instance import Instance
from spectr_gbv.core.numbers import Scalar, check_distribution, sum_exact, zeros_like_kind
from spectr_gbv.core.progress import progress
from spectr_gbv.core.tabular import TabularAR
from spectr_gbv.reference.base import Verifier, VerifyInput
from spectr_gbv.reference.registry import available_methods, get_verifier
from spectr_gbv.reference.user_rules import resolve_rule
from spectr_gbv.simulate.structured import (
    ESTIMATE_CAP,
    StructuredLaw,
    StructureError,
    StructureTooLargeError,
    declared_structure,
    structured_kernels,
    structured_law,
)

#: Largest number of draft tuples (ordered tuples, or multisets for symmetric verifiers) the
#: simulator enumerates (one exact kernel each, at most), so the limit bounds a run's kernel
#: evaluations.
MAX_DRAFT_TUPLES = 200_000

#: A progress bar (:func:`~spectr_gbv.core.progress.progress`: on a terminal, unless quiet) is
#: shown when at least this many kernels are evaluated.
PROGRESS_MIN_KERNELS = 2_000

#: Largest kernel work the simulator starts: kernel evaluations x K x (L + 1) x n (each kernel
#: reads K drafts' L + 1 target rows of n entries, so its cost is about proportional to this
#: count; the messages estimate 10 us per unit). Checked before any kernel runs, on the tuple
#: path (tuples) and on a structured path (its estimate).
MAX_KERNEL_WORK = 10_000_000

#: A progress bar is also shown from this much kernel work on.
PROGRESS_MIN_WORK = 100_000

#: Float instances: ``lossless`` means ``validity_defect <= FLOAT_DEFECT_TOL``.
FLOAT_DEFECT_TOL = 1e-9


class EnumerationTooLargeError(ValueError):
    """The number of draft tuples to enumerate exceeds the limit."""


@dataclass(frozen=True)
class ExactResult:
    """Exact one-iteration result of a verifier on an instance.

    Attributes
    ----------
    method : str
        The verifier's stable name.
    K, L, n : int
        Drafts, draft length, vocabulary size.
    exact : bool
        Fractions throughout (exact instance) or float64.
    expected_accepted : Fraction or float
        :math:`E[\\tau]` (add 1 for the per-iteration block efficiency).
    validity_defect : Fraction or float
        THEORY.md section 2: :math:`\\frac12\\sum_y |\\sum_m a(y^m) p(y_{m+1..L+1}|y^m) - p(y)|`.
    lossless : bool
        ``validity_defect == 0`` (exact), or ``<= tolerance`` (float, or a float-derived kernel).
    tolerance : float or None
        None for exact instances and exact kernels; :data:`FLOAT_DEFECT_TOL` for float
        instances; the verifier's ``kernel_tolerance`` for a float-derived kernel on an exact
        instance (``lp_oracle``).
    output_law : dict of tuple of int to Fraction or float
        :math:`a(o)` over outputs of positive probability.
    num_draft_tuples : int
        Tuples enumerated (ordered tuples, or multisets for a symmetric verifier), over the
        drafts of positive probability.
    enumeration : str
        ``"ordered"`` or ``"multiset"``.
    num_kernels : int
        Kernel evaluations after grouping by :meth:`Verifier.law_key`.
    diagnostics : dict of str to Fraction or float or int
        ``clamped`` (total clamped weights over all kernels), ``clamped_draft_mass`` (draft
        probability of the tuples whose kernel clamped a weight), ``residual_fallbacks`` and
        ``fallback_draft_mass`` likewise (see :class:`~spectr_gbv.reference.Diagnostics`).
    """

    method: str
    K: int
    L: int
    n: int
    exact: bool
    expected_accepted: Scalar
    validity_defect: Scalar
    lossless: bool
    tolerance: float | None
    output_law: dict[tuple[int, ...], Scalar]
    num_draft_tuples: int
    enumeration: str
    num_kernels: int
    diagnostics: dict[str, Any] = field(default_factory=dict)

    @property
    def block_efficiency(self) -> Scalar:
        """Expected tokens per iteration, :math:`E[\\tau + 1]`."""
        return self.expected_accepted + 1

    @property
    def within_kernel_tolerance(self) -> bool:
        """True when a nonzero exact defect is within a float-derived kernel's tolerance (``lp_oracle``)."""
        return self.exact and self.tolerance is not None and self.validity_defect != 0 and self.lossless

    @property
    def lossless_label(self) -> str:
        """``"yes"``, ``"NO"``, or ``"yes (<= tol)"`` for a float-derived kernel's rounding (``lp_oracle``)."""
        if self.within_kernel_tolerance:
            return f"yes (<= {self.tolerance:g})"
        return "yes" if self.lossless else "NO"


@dataclass(frozen=True)
class DraftTable:
    """Every single draft of positive probability with its rows (vectorised gather).

    Attributes
    ----------
    tokens : ndarray, shape [m, L], int64
        The drafts ``x`` with ``q(x) > 0``, in lexicographic order.
    probs : ndarray, shape [m], object or float64
        ``q(x)``.
    draft_rows : ndarray, shape [m, L, n]
        ``q(. | x^t)``, t = 0..L-1.
    target_rows : ndarray, shape [m, L+1, n]
        ``p(. | x^t)``, t = 0..L.
    """

    tokens: np.ndarray
    probs: np.ndarray
    draft_rows: np.ndarray
    target_rows: np.ndarray

    @classmethod
    def from_instance(cls, instance: Instance) -> DraftTable:
        """Gather the support of q on V^L and every row along it from the instance tables."""
        p, q, L = instance.target, instance.draft, instance.L
        q_joint = q.joint(L)
        tokens = np.argwhere(q_joint > 0).astype(np.int64).reshape(-1, L)
        probs = q_joint[tuple(tokens.T)]

        def gather(model: TabularAR, depth: int) -> np.ndarray:
            levels = [model.level(t)[tuple(tokens[:, :t].T)] for t in range(depth)]
            return np.stack([np.broadcast_to(lv, (len(tokens), model.n)) for lv in levels], axis=1)

        return cls(tokens, probs, gather(q, L), gather(p, L + 1))


def count_draft_tuples(num_drafts_support: int, num_drafts: int, multisets: bool, *, cap: int | None = None) -> int:
    """Ordered tuples ``m^K`` or multisets ``C(m + K - 1, K)`` of ``m`` single drafts.

    With ``cap``, a count above it is returned as ``cap``, decided by logarithms before any
    big integer is built (``K = 10**9`` costs nothing).
    """
    m, K = num_drafts_support, num_drafts
    if cap is not None and m > 1:
        log_count = math.lgamma(m + K) - math.lgamma(K + 1) - math.lgamma(m) if multisets else K * math.log(m)
        if log_count > math.log(cap) + 1:
            return cap
    count = math.comb(m + K - 1, K) if multisets else m**K
    return count if cap is None else min(count, cap)


def _work_text(work: int) -> str:
    """Kernel work with its time estimate (~10 us per unit)."""
    seconds = work * 1e-5
    when = f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"
    return f"{_count_text(work)} units of kernel work (about {when})" if work < ESTIMATE_CAP else "over 10^18 units"


def _count_text(count: int) -> str:
    """``count`` in digits, or as ``~10^d`` when it has more than 15 digits (huge ints cannot always be printed)."""
    if count >= ESTIMATE_CAP:
        return "over 10^18"
    return str(count) if count < 10**15 else f"~10^{math.log10(count):.0f}"


def _tuples(m: int, K: int, multisets: bool) -> tuple[np.ndarray, np.ndarray]:
    """Index tuples [T, K] and their multiplicities [T] (1 for ordered tuples)."""
    if multisets:
        idx = np.array(list(itertools.combinations_with_replacement(range(m), K)), dtype=np.int64)
        idx = idx.reshape(-1, K)
        # multiplicity K! / prod(count!) ; prod(count!) = prod of run positions in sorted rows
        run = np.ones(len(idx), dtype=np.int64)
        fact = np.ones(len(idx), dtype=np.int64)
        for j in range(1, K):
            run = np.where(idx[:, j] == idx[:, j - 1], run + 1, 1)
            fact *= run
        return idx, math.factorial(K) // fact
    grids = np.unravel_index(np.arange(m**K, dtype=np.int64), (m,) * K)
    return np.stack(grids, axis=1).astype(np.int64).reshape(-1, K), np.ones(m**K, dtype=np.int64)


def validity_defect(target: TabularAR, law: Mapping[tuple[int, ...], Scalar], L: int) -> Scalar:
    r"""Validity defect of an output law (THEORY.md section 2).

    .. math::
        \frac12\sum_{y\in V^{L+1}}\Big|\sum_{m=1}^{L+1} a(y^m)\,p(y_{m+1..L+1}\mid y^m)
        - p(y)\Big|

    Exactly 0 iff "O, then fresh sampling from p" has law p on V^{L+1} (stateless
    losslessness).

    Parameters
    ----------
    target : TabularAR
        p, depth >= L.
    law : mapping of tuple of int to Fraction or float
        ``a(o)`` for outputs of length 1..L+1.
    L : int
        Draft length.

    Returns
    -------
    Fraction or float
        Exact when the target and every law value are exact.

    Raises
    ------
    ValueError
        An output of length 0 or > L + 1, a token outside the vocabulary, a target table
        shallower than L, or ``law`` not a distribution (NaN, negative, not summing to 1).
    """
    n = target.n
    if target.depth < L:
        raise ValueError(f"validity_defect: target depth {target.depth} < L = {L}")
    check_distribution(law.values(), "law")
    exact = target.exact and all(isinstance(v, Fraction | int) for v in law.values())
    by_len = [zeros_like_kind((n,) * m, exact) for m in range(L + 2)]
    for o, prob in law.items():
        if not 1 <= len(o) <= L + 1 or any(not 0 <= t < n for t in o):
            raise ValueError(f"validity_defect: output {o} is not 1..{L + 1} tokens of 0..{n - 1}")
        by_len[len(o)][o] += prob if exact else float(prob)
    levels = [target.level(t) if exact else np.asarray(target.level(t), dtype=np.float64) for t in range(L + 1)]
    left = by_len[1]
    for m in range(1, L + 1):
        left = left[..., None] * levels[m] + by_len[m + 1]
    right = target.joint(L + 1)
    if not exact:
        right = np.asarray(right, dtype=np.float64)
    total = sum_exact(np.abs(left - right))
    return total / 2


def expected_accepted(law: Mapping[tuple[int, ...], Scalar]) -> Scalar:
    r""":math:`E[\tau] = \sum_o a(o)(|o| - 1)` (exact for Fractions)."""
    values = list(law.values())
    if values and all(isinstance(v, Fraction | int) for v in values):
        return sum((v * (len(o) - 1) for o, v in law.items()), Fraction(0))
    return math.fsum(float(v) * (len(o) - 1) for o, v in law.items())


def _enumerate_tuples(
    verifier: Verifier,
    table: DraftTable,
    K: int,
    exact: bool,
    diag: dict[str, Any],
    per_kernel: int = 1,
    max_work: int | None = None,
) -> tuple[dict[tuple[int, ...], Scalar], int]:
    """The law averaged tuple by tuple (multisets when symmetric), grouped by law key; fills ``diag``.

    The kernel work (groups x ``per_kernel``) is checked against ``max_work`` after the cheap
    grouping and before any kernel runs.
    """
    m = len(table.tokens)
    idx, mult = _tuples(m, K, verifier.symmetric)
    weights = table.probs[idx]
    tuple_prob = weights.prod(axis=1) if len(idx) else weights.sum(axis=1)
    tuple_prob = tuple_prob * (mult.astype(object) if exact else mult)

    # group by law key (default keys are the index tuples themselves: no grouping needed)
    groups: dict[Any, list[Any]] = {}
    default_key = type(verifier).law_key is Verifier.law_key
    singles = [tuple(int(v) for v in row) for row in table.tokens]
    for row, w in zip(idx.tolist(), tuple_prob.tolist(), strict=True):
        key = tuple(row) if default_key else verifier.law_key(tuple(singles[i] for i in row))
        entry = groups.get(key)
        if entry is None:
            groups[key] = [row, w]
        else:
            entry[1] = entry[1] + w

    if max_work is not None and len(groups) * per_kernel > max_work:
        L, n = table.tokens.shape[1], table.target_rows.shape[2]
        kind = "draft multisets" if verifier.symmetric else "ordered draft tuples"
        raise EnumerationTooLargeError(
            f"n={n}, L={L}, K={K}: {_count_text(len(groups))} kernels (over {_count_text(len(idx))} {kind}) "
            f"x K x (L+1) x n = {_work_text(len(groups) * per_kernel)}, above max_work={max_work}"
        )
    zero: Scalar = Fraction(0) if exact else 0.0
    law: dict[tuple[int, ...], Scalar] = {}
    quiet = True if len(groups) < PROGRESS_MIN_KERNELS and len(groups) * per_kernel < PROGRESS_MIN_WORK else None
    with progress(len(groups), f"{verifier.name} K={K}", quiet=quiet, unit="kernel") as bar:
        for row, w in groups.values():
            batch = VerifyInput(table.tokens[row], table.draft_rows[row], table.target_rows[row], exact)
            for o, prob in verifier.outcome_law_checked(batch).items():
                law[o] = law.get(o, zero) + w * prob
            d = verifier.last_diagnostics
            if d.get("clamped", 0):
                diag["clamped"] += d["clamped"]
                diag["clamped_draft_mass"] += w
            if d.get("residual_fallbacks", 0):
                diag["residual_fallbacks"] += d["residual_fallbacks"]
                diag["fallback_draft_mass"] += w
            bar.update()
    return law, len(groups)


@dataclass(frozen=True)
class ExactPlan:
    """What :func:`run_exact` will enumerate and average, checked against the limits before any kernel runs.

    Built by :func:`plan_exact`; a plan that exists passed every limit that can be decided
    before the kernels run (the tuple route still checks ``max_work`` after grouping by
    :meth:`~spectr_gbv.reference.Verifier.law_key`).

    Attributes
    ----------
    verifier : Verifier
        The resolved verifier.
    instance : Instance
        The instance (exact or float64).
    K : int
        Drafts per iteration, >= 1.
    table : DraftTable
        The m drafts of positive probability with their rows.
    multisets : bool
        Draft multisets (a ``symmetric`` verifier) rather than ordered tuples.
    num_draft_tuples : int
        Ordered tuples ``m^K`` or multisets ``C(m + K - 1, K)``, capped at
        :data:`~spectr_gbv.simulate.structured.ESTIMATE_CAP`.
    per_kernel : int
        Work units of one kernel evaluation on the tuple route, ``K x (L + 1) x n``.
    route : str
        ``"structured"`` (the verifier's declared shape, :mod:`spectr_gbv.simulate.structured`)
        or ``"tuples"`` (every tuple or multiset, grouped by law key).
    structured_kernels : int or None
        The structured path's kernel estimate (capped), or None when it does not apply.
    structured_step : int
        Work units of one structured kernel evaluation (``(L + 1) x n`` for ``draft_scan``,
        else ``K x (L + 1) x n``); 0 on the tuple route.
    max_tuples, max_work : int
        The limits the run keeps to (:func:`simulate_exact`).
    tuple_refusal : str or None
        On the structured route, the :class:`EnumerationTooLargeError` message the tuple route
        would raise if the structured path gives up at run time; None when that route is allowed.
    """

    verifier: Verifier
    instance: Instance
    K: int
    table: DraftTable
    multisets: bool
    num_draft_tuples: int
    per_kernel: int
    route: str
    structured_kernels: int | None
    structured_step: int
    max_tuples: int
    max_work: int
    tuple_refusal: str | None


def _resolve_verifier(method: Any) -> Verifier:
    """A registered name's verifier, or a user's rule (:func:`~spectr_gbv.reference.user_rules.resolve_rule`)."""
    if isinstance(method, str) and method in available_methods():
        return get_verifier(method)
    _, resolved = resolve_rule(method)
    return resolved if resolved is not None else get_verifier(method)


def _tuple_refusal(
    plan_count: int,
    m: int,
    n: int,
    L: int,
    K: int,
    multisets: bool,
    max_tuples: int,
    shape: str | None,
    estimate: int | None,
) -> str | None:
    """The tuple route's refusal message when ``plan_count`` exceeds ``max_tuples``, else None."""
    if plan_count <= max_tuples:
        return None
    kind = "draft multisets" if multisets else "ordered draft tuples"
    path = ""
    if estimate is not None:
        need = "over 10^18" if estimate >= ESTIMATE_CAP else _count_text(estimate)
        path = f"; the {shape} path would need {need} kernel evaluations"
    return (
        f"n={n}, L={L}, K={K}: {_count_text(plan_count)} {kind} over {m} drafts of positive probability "
        f"exceed the limit {max_tuples}{path}"
    )


def plan_exact(
    instance: Instance,
    method: Any,
    num_drafts: int,
    *,
    max_tuples: int = MAX_DRAFT_TUPLES,
    fast: bool = True,
    max_work: int = MAX_KERNEL_WORK,
) -> ExactPlan:
    """Resolve the verifier, count what one exact iteration enumerates, choose the route and check the limits.

    Parameters are those of :func:`simulate_exact`. The structured route is chosen when
    ``fast``, the verifier declares a shape, the instance is exact and the shape's kernel
    estimate is at most ``max_tuples``; otherwise the tuple route.

    Returns
    -------
    ExactPlan

    Raises
    ------
    ValueError
        Unknown method, K < 1.
    TypeError
        ``instance`` is not an :class:`~spectr_gbv.core.Instance`.
    EnumerationTooLargeError
        The structured route's work above ``max_work``, or the tuple route's count above
        ``max_tuples`` (the message names n, L, K, the count and the time estimate).
    """
    verifier = _resolve_verifier(method)
    K = num_drafts
    if not isinstance(K, int | np.integer) or isinstance(K, bool) or K < 1:
        raise ValueError(f"num_drafts (K) must be an int >= 1, got {K!r}")
    K = int(K)
    if not isinstance(instance, Instance):
        raise TypeError(f"instance: expected an Instance, got {type(instance).__name__}")
    n, L = instance.n, instance.L
    table = DraftTable.from_instance(instance)
    m, multisets = len(table.tokens), verifier.symmetric
    count = count_draft_tuples(m, K, multisets, cap=ESTIMATE_CAP)
    per_kernel = K * (L + 1) * n
    estimate = structured_kernels(verifier, instance, K) if fast else None
    shape = declared_structure(verifier) if estimate is not None else None
    refusal = _tuple_refusal(count, m, n, L, K, multisets, max_tuples, shape, estimate)
    route, step = "tuples", 0
    if estimate is not None and estimate <= max_tuples:
        # a draft_scan step reads one draft; the other shapes' kernels read K (or c <= K) drafts
        step, step_text = ((L + 1) * n, "(L+1) x n") if shape == "draft_scan" else (per_kernel, "K x (L+1) x n")
        if estimate * step > max_work:
            raise EnumerationTooLargeError(
                f"n={n}, L={L}, K={K}: the {shape} path needs {_count_text(estimate)} kernel evaluations "
                f"x {step_text} = {_work_text(estimate * step)}, above max_work={max_work}"
            )
        route = "structured"
    elif refusal is not None:
        raise EnumerationTooLargeError(refusal)
    return ExactPlan(
        verifier=verifier,
        instance=instance,
        K=K,
        table=table,
        multisets=multisets,
        num_draft_tuples=count,
        per_kernel=per_kernel,
        route=route,
        structured_kernels=estimate,
        structured_step=step,
        max_tuples=max_tuples,
        max_work=max_work,
        tuple_refusal=refusal,
    )


def run_exact(plan: ExactPlan) -> ExactResult:
    """Execute a plan of :func:`plan_exact`: the output law, E[tau] and the validity defect.

    On the structured route a path that gives up at run time (its own limit, or a structure
    it cannot use) falls back to the tuple route, which raises ``plan.tuple_refusal`` if set.

    Returns
    -------
    ExactResult
        As :func:`simulate_exact` returns.

    Raises
    ------
    EnumerationTooLargeError
        The tuple route's grouped kernel work above ``plan.max_work``, or the fallback's
        refusal (above).
    """
    verifier, instance, K, table = plan.verifier, plan.instance, plan.K, plan.table
    exact, L = instance.exact, instance.L
    zero: Scalar = Fraction(0) if exact else 0.0
    diag: dict[str, Any] = {
        "clamped": 0,
        "clamped_draft_mass": zero,
        "residual_fallbacks": 0,
        "fallback_draft_mass": zero,
    }
    structured: StructuredLaw | None = None
    if plan.route == "structured":
        estimate, step = plan.structured_kernels or 0, plan.structured_step
        quiet = True if estimate < PROGRESS_MIN_KERNELS and estimate * step < PROGRESS_MIN_WORK else None
        with progress(estimate, f"{verifier.name} K={K}", quiet=quiet, unit="kernel") as bar:
            try:
                structured = structured_law(verifier, instance, table, K, plan.max_tuples, bar)
            except (StructureTooLargeError, StructureError):
                structured = None  # the tuple enumeration below decides (or refuses)
    count = plan.num_draft_tuples
    if structured is not None:
        law = structured.law
        enumeration, num_kernels = structured.structure, structured.num_kernels
        # the run was allowed, so K <= max_tuples: the exact count is a cheap big integer
        count = count_draft_tuples(len(table.tokens), K, plan.multisets)
    else:
        if plan.tuple_refusal is not None:
            raise EnumerationTooLargeError(plan.tuple_refusal)
        law, num_kernels = _enumerate_tuples(verifier, table, K, exact, diag, plan.per_kernel, plan.max_work)
        enumeration = "multiset" if plan.multisets else "ordered"

    defect = validity_defect(instance.target, law, L)
    tol = (verifier.kernel_tolerance if exact else FLOAT_DEFECT_TOL) or None
    lossless = bool(defect == 0) if tol is None else bool(defect <= tol)
    return ExactResult(
        method=verifier.name,
        K=K,
        L=L,
        n=instance.n,
        exact=exact,
        expected_accepted=expected_accepted(law),
        validity_defect=defect,
        lossless=lossless,
        tolerance=tol,
        output_law=law,
        num_draft_tuples=count,
        enumeration=enumeration,
        num_kernels=num_kernels,
        diagnostics=diag,
    )


def simulate_exact(
    instance: Instance,
    method: Any,
    num_drafts: int,
    *,
    max_tuples: int = MAX_DRAFT_TUPLES,
    fast: bool = True,
    max_work: int = MAX_KERNEL_WORK,
) -> ExactResult:
    r"""Exact output law, E[tau] and validity defect of one verification iteration.

    .. math::
        a(o) = \sum_X \prod_k q(X^{(k)})\, P(O = o\mid X),\qquad
        E[\tau] = \sum_o a(o)(|o| - 1)

    Plan, then run: :func:`plan_exact` resolves the verifier, counts what will be enumerated,
    chooses the route and checks every limit it can before a kernel runs; :func:`run_exact`
    executes that plan.

    Parameters
    ----------
    instance : Instance
        p (depth >= L, for the bonus), q (depth >= L - 1) and L; exact or float64.
    method : str, Verifier, Verifier subclass or callable
        A registered method name (:func:`~spectr_gbv.reference.get_verifier`), a
        ``"module:attribute"`` naming a user's rule, or the rule itself
        (:func:`~spectr_gbv.reference.user_rules.resolve_rule`: a plain function is enumerated
        over its random draws).
    num_drafts : int
        K >= 1.
    max_tuples : int
        Refuse to enumerate more tuples than this (default :data:`MAX_DRAFT_TUPLES`); on a
        structured path, the limit on its kernel evaluations.
    fast : bool
        Use the verifier's structured path when it has one and the instance is exact
        (default True; :mod:`spectr_gbv.simulate.structured`). False enumerates every draft
        tuple; both give the same law to the last rational digit.
    max_work : int
        Refuse a run whose kernel evaluations x K x (L + 1) x n exceed this (default
        :data:`MAX_KERNEL_WORK`), decided before any kernel runs.

    Returns
    -------
    ExactResult

    Raises
    ------
    ValueError
        Unknown method, K < 1.
    EnumerationTooLargeError
        More than ``max_tuples`` tuples, or more than ``max_work`` units of kernel work (the
        message names n, L, K, the count and the time estimate).

    References
    ----------
    THEORY.md sections 1-2 (setting, validity defect) and 6 (verifiers).

    Examples
    --------
    >>> from spectr_gbv.core import default_instance
    >>> simulate_exact(default_instance(), "mdbv", 2).expected_accepted
    Fraction(61, 36)
    """
    return run_exact(
        plan_exact(instance, method, num_drafts, max_tuples=max_tuples, fast=fast, max_work=max_work)
    )

__all__ = [
    "FLOAT_DEFECT_TOL",
    "MAX_DRAFT_TUPLES",
    "MAX_KERNEL_WORK",
    "PROGRESS_MIN_KERNELS",
    "PROGRESS_MIN_WORK",
    "DraftTable",
    "EnumerationTooLargeError",
    "ExactPlan",
    "ExactResult",
    "count_draft_tuples",
    "expected_accepted",
    "plan_exact",
    "run_exact",
    "simulate_exact",
    "validity_defect",
]
