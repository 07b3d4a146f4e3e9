"""Draft-order hypotheses of the diagnosis: a verifier that tries its drafts in an order chosen from them.

A lossless multi-draft verifier may try its i.i.d. drafts in index order or in an order drawn
independently of them; one that sorts them by their own ratios (the likeliest to pass first) is
lossy. :class:`RatioOrdered` is a reference verifier run on drafts sorted by decreasing p/q (its
exact law is the hypothesis), and :func:`conditional_fit` tests the sampled outputs given their
drafts against such a law (at L = 1 the accepted-length law is a single number, which an
acceptance bug can share with the order hypothesis; the outputs given the drafts tell them
apart). Used by :mod:`spectr_gbv.validate.checks.diagnosis`. Imports: reference, simulate,
checks.sampling.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spectr_gbv.reference.base import Verifier
from spectr_gbv.simulate.monte_carlo import combine_g_tests as combine
from spectr_gbv.simulate.monte_carlo import pooled_g_test as g_test
from spectr_gbv.validate.checks.sampling import Samples

#: Lossless algorithms whose drafts are tried in draft index order: a verifier that orders them by
#: their own ratios instead (see :class:`RatioOrdered`) is diagnosed with the ``draft_order`` locus.
ORDER_CANDIDATES: tuple[str, ...] = ("rrs", "spectr", "mdbv")

#: Largest number of distinct draft tuples :func:`conditional_fit` tests the outputs given.
MAX_CONDITIONAL_TUPLES = 2000


class RatioOrdered(Verifier):
    """``base`` run on its drafts sorted by decreasing p/q of their first token, then of their second, ...
    (stable): an order chosen from the drafts themselves, the signature of a verifier that tries the
    likeliest child first at every node of the draft tree.

    Used only for its exact law (:func:`~spectr_gbv.simulate.exact.simulate_exact`): it is lossy
    whenever the order changes the law.

    Parameters
    ----------
    base : Verifier
        A reference verifier that tries its drafts in index order (:data:`ORDER_CANDIDATES`).
    """

    name = "ratio_ordered"
    lossless = False
    symmetric = False
    citation = "a diagnosis hypothesis (drafts tried in decreasing p/q)"

    def __init__(self, base: Verifier) -> None:
        super().__init__()
        self.base = base
        self.name = f"{base.name}_ratio_ordered"  # type: ignore[misc]

    def run(self, batch: Any, prep: Any, chooser: Any) -> Any:  # pragma: no cover - the law is delegated
        raise NotImplementedError

    def outcome_law_checked(self, batch: Any) -> dict[tuple[int, ...], Any]:
        """``base``'s law on the drafts sorted by decreasing ``p(x_t) / q(x_t)``, t = 0, 1, ... in turn."""
        d, q, p = batch.drafts, batch.draft_probs, batch.target_probs
        K, L = d.shape
        ratios = [tuple(-(p[k, t, int(d[k, t])] / q[k, t, int(d[k, t])]) for t in range(L)) for k in range(K)]
        order = sorted(range(K), key=lambda k: ratios[k])  # by p/q of token 0, then 1, ...: node by node
        return self.base.outcome_law(d[order], q[order], p[order])


def conditional_fit(s: Samples, verifier: Any, prefix_only: bool = False) -> float | None:
    """p-value of the outputs given their drafts against ``verifier``'s exact law given those drafts.

    One G-test per distinct draft tuple of ``s`` (its valid outputs against
    ``verifier.outcome_law`` on the tuple's rows), combined; None when there are more than
    :data:`MAX_CONDITIONAL_TUPLES` distinct tuples or the law cannot be computed.
    ``prefix_only`` tests the accepted prefix (the output without its last token) only: what
    the acceptance rule decides.
    """
    K, L = s.bi.K, s.tables.L
    flat = s.drafts.reshape(len(s.drafts), K * L)
    uniq, inv = np.unique(flat, axis=0, return_inverse=True)
    inv = np.asarray(inv).reshape(-1)
    if len(uniq) == 0 or len(uniq) > MAX_CONDITIONAL_TUPLES:
        return None
    tests = []
    for g, row in enumerate(uniq):
        d = row.reshape(K, L)
        q, p = s.tables.rows(d)
        cut = 1 if prefix_only else 0
        law: dict[tuple[int, ...], float] = {}
        try:
            for o, v in verifier.outcome_law(d, q, p).items():
                key = tuple(int(t) for t in o)[: len(o) - cut]
                law[key] = law.get(key, 0.0) + float(v)
        except (ValueError, ArithmeticError):
            return None
        members = np.flatnonzero(inv == g)
        seen: dict[tuple[int, ...], int] = {}
        for toks, m in zip(s.tokens[members].tolist(), s.lengths[members].tolist(), strict=True):
            seen[tuple(toks[: m - cut])] = seen.get(tuple(toks[: m - cut]), 0) + 1
        keys = sorted(set(law) | set(seen))
        tests.append(g_test(np.array([seen.get(k, 0) for k in keys]), np.array([law.get(k, 0.0) for k in keys])))
    return combine(tests).p_value


__all__ = ["MAX_CONDITIONAL_TUPLES", "ORDER_CANDIDATES", "RatioOrdered", "conditional_fit"]
