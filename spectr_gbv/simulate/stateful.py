r"""Exact one-iteration simulation of the stateful greedy BV, and the per-iteration step laws.

Greedy BV with a carried correction (:mod:`spectr_gbv.reference.greedy_bv`) needs the whole
current target law T and draft table, not only rows along the drafts, so it runs here on
tabular instances rather than through the row-based :class:`~spectr_gbv.reference.Verifier`
interface. With K > 1 drafts it verifies the first draft only (it is a single-draft method).

Its validity is checked in the stateful sense of THEORY.md section 2: the emitted tokens,
then the carried law, then fresh sampling from p must have law p on V^{L+1}. The same law
completed with p alone (dropping the carry) shows the bias of greedy BV without correction.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable

import numpy as np

from spectr_gbv.core.instance import Instance
from spectr_gbv.core.numbers import Scalar, scalar_one, sum_exact, zeros_like_kind
from spectr_gbv.reference.greedy_bv import CarriedLaw, GreedyCoupling, target_with_carry
from spectr_gbv.simulate.exact import FLOAT_DEFECT_TOL, ExactResult, expected_accepted, simulate_exact
from spectr_gbv.simulate.multi import StepFn, StepLaw

StatefulLaw = dict[tuple[tuple[int, ...], CarriedLaw | None], Scalar]


def instance_at(instance: Instance, history: tuple[int, ...]) -> Instance:
    """The instance seen after ``history``: p and q shifted (Markov reading beyond their depth)."""
    L = instance.L
    return Instance(instance.target.shifted(history, L), instance.draft.shifted(history, L), L, instance.name)


def greedy_iteration_law(instance: Instance, carried: CarriedLaw | None = None) -> StatefulLaw:
    """Exact law of (emitted tokens, carried law) of one greedy-BV iteration.

    Parameters
    ----------
    instance : Instance
        p and q seen from the iteration start (depth >= L).
    carried : CarriedLaw or None
        The correction carried from the previous iteration (None: the target law is p).

    Returns
    -------
    dict ``{(emitted, carried'): probability}``, exact when the instance is.

    References
    ----------
    Sun et al. 2024, arXiv 2403.10444, appendix; THEORY.md sections 2-3.
    """
    L = instance.L
    T = target_with_carry(instance.target, carried, L)
    coupling = GreedyCoupling(T, instance.draft, L)
    q_joint = instance.draft.joint(L)
    zero = scalar_one(instance.exact) * 0
    law: StatefulLaw = {}
    for x in itertools.product(range(instance.n), repeat=L):
        qx = q_joint[x]
        if qx <= 0:
            continue
        for key, prob in coupling.outcome_law(x).items():
            law[key] = law.get(key, zero) + qx * prob
    return law


def stateful_validity_defect(instance: Instance, law: StatefulLaw, *, corrected: bool = True) -> Scalar:
    r"""Validity defect of a stateful law: emitted, then carried law, then p, against p on V^{L+1}.

    .. math::
        \tfrac12\sum_{y\in V^{L+1}} |P(\text{emitted} \cdot \text{carried} \cdot p = y) - p(y)|

    Parameters
    ----------
    instance : Instance
        p (depth >= L) from the iteration start (the carried law into this iteration, if any,
        is not modelled: use it from a fresh start).
    law : dict
        Output of :func:`greedy_iteration_law`.
    corrected : bool
        False drops the carried law (continues with p alone): greedy BV without correction.

    Returns
    -------
    Fraction or float
    """
    L, n, p = instance.L, instance.n, instance.target
    block = zeros_like_kind((n,) * (L + 1), instance.exact)
    for (emitted, carried), prob in law.items():
        rows = carried.as_dict() if (carried is not None and corrected) else {}
        rest = L + 1 - len(emitted)
        for w in itertools.product(range(n), repeat=rest):
            pw = prob
            for j in range(rest):
                row = rows[w[:j]] if w[:j] in rows else p.cond(emitted + w[:j])
                pw = pw * row[w[j]]
            block[emitted + w] += pw
    return sum_exact(np.abs(block - p.joint(L + 1))) / 2


def simulate_greedy_exact(instance: Instance, num_drafts: int = 1) -> ExactResult:
    """One iteration of greedy BV with carried correction from a fresh start, as an :class:`ExactResult`.

    ``validity_defect`` is the stateful defect (0 when lossless); ``diagnostics`` adds
    ``uncorrected_defect``, the defect of the same emissions continued with p alone.

    Raises
    ------
    ValueError
        K < 1 or a bad instance.
    """
    if not isinstance(num_drafts, int) or num_drafts < 1:
        raise ValueError(f"num_drafts (K) must be an int >= 1, got {num_drafts!r}")
    law = greedy_iteration_law(instance)
    emitted: dict[tuple[int, ...], Scalar] = {}
    for (o, _), prob in law.items():
        emitted[o] = emitted.get(o, prob * 0) + prob
    defect = stateful_validity_defect(instance, law)
    uncorrected = stateful_validity_defect(instance, law, corrected=False)
    tol = None if instance.exact else FLOAT_DEFECT_TOL
    return ExactResult(
        method="greedy_bv",
        K=num_drafts,
        L=instance.L,
        n=instance.n,
        exact=instance.exact,
        expected_accepted=expected_accepted(emitted),
        validity_defect=defect,
        lossless=defect == 0 if instance.exact else float(defect) <= FLOAT_DEFECT_TOL,
        tolerance=tol,
        output_law=emitted,
        num_draft_tuples=int(np.count_nonzero(np.asarray(instance.draft.joint(instance.L)) > 0)),
        enumeration="single draft (stateful)",
        num_kernels=len(law),
        diagnostics={"uncorrected_defect": uncorrected, "stateful": True},
    )


def stateless_step(instance: Instance, method: str, num_drafts: int) -> StepFn:
    """``step(history, None)`` of a stateless verifier, for :func:`.multi.multi_iteration`."""

    def step(history: tuple[int, ...], state: Hashable) -> StepLaw:
        law = simulate_exact(instance_at(instance, history), method, num_drafts).output_law
        return {(o, None): prob for o, prob in law.items()}

    return step


def greedy_step(instance: Instance) -> StepFn:
    """``step(history, carried)`` of greedy BV with carried correction."""

    def step(history: tuple[int, ...], state: Hashable) -> StepLaw:
        assert state is None or isinstance(state, CarriedLaw)
        return dict(greedy_iteration_law(instance_at(instance, history), state))

    return step
