"""Diagnosis of a failed law test: which part of the verifier is wrong.

A failed law test on :class:`~spectr_gbv.validate.checks.sampling.Samples` is diagnosed from
the accepted-length law (the law of tau), tested against the exact law of the named reference
(or, without one, of each known lossless algorithm), with its power stated:

* it fits one at power >= :data:`POWER_TARGET` against the budget's TV error: the acceptance is
  right and the emitted tokens are not, ``wrong_residual`` (``reuses_uniform`` when moreover
  the corrections follow a residual drawn with the uniform that decided the rejection);
* it fits one, but on too few samples to say so (an early sequential stop): ``not_lossless``,
  "inconclusive at power ...";
* every candidate is rejected: ``not_lossless``, "the acceptance rule is wrong", or "the drafts
  are tried in an order that depends on them" when it fits a candidate run on drafts sorted by
  their ratios (:class:`RatioOrdered`) and the outputs given their drafts fit that candidate's
  conditional law too (:func:`conditional_fit`).

Each explanation opens with a phrase of :data:`LOCI`; :func:`locus_of` reads it back.
Imports: reference, simulate, battery, sampling, reference_variants.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from spectr_gbv.simulate.exact import EnumerationTooLargeError, simulate_exact
from spectr_gbv.simulate.monte_carlo import combine_g_tests as combine
from spectr_gbv.simulate.monte_carlo import g_test_power
from spectr_gbv.simulate.monte_carlo import pooled_g_test as g_test
from spectr_gbv.validate.battery.instance import BatteryInstance
from spectr_gbv.validate.checks.draft_order import (
    MAX_CONDITIONAL_TUPLES,
    ORDER_CANDIDATES,
    RatioOrdered,
    conditional_fit,
)
from spectr_gbv.validate.checks.sampling import Samples
from spectr_gbv.validate.reference_variants import reference_verifier

#: Power the accepted-length test needs (against the budget's TV error in the law of tau) for a fit to count as a match.
POWER_TARGET = 0.99
#: Lossless algorithms tried when a failure is diagnosed without a named reference.
CANDIDATES_SINGLE: tuple[str, ...] = ("sd", "bv")
CANDIDATES_MULTI: tuple[str, ...] = ("sd", "bv", "mdbv", "spectr", "rrs", "gbv_multipath")

_LAWS: dict[tuple[str, str], np.ndarray | None] = {}


def instance_key(bi: BatteryInstance) -> str:
    """A cache key of a battery instance: its spec as sorted-key JSON.

    The spec is :meth:`~spectr_gbv.validate.battery.instance.BatteryInstance.spec`.
    """
    return json.dumps(bi.spec(), sort_keys=True)


def accepted_length_law(bi: BatteryInstance, method: str) -> np.ndarray | None:
    """Exact law of tau for ``method`` on ``bi`` (float), or None when it cannot be enumerated."""
    key = (instance_key(bi), method)
    if key not in _LAWS:
        _LAWS[key] = _accepted_law(bi, method)
    return _LAWS[key]


def _accepted_law(bi: BatteryInstance, method: str) -> np.ndarray | None:
    return _accepted_law_of(bi, reference_verifier(method))


#: The part of the verifier a failed law test points at (the phrase each diagnosis detail opens
#: its explanation with): what :func:`locus_of` reads back.
LOCI: dict[str, str] = {
    "acceptance": "the acceptance rule is wrong",
    "draft_order": "the drafts are tried in an order that depends on them",
    "residual": "the token drawn at the stop position (residual or bonus) has the wrong law",
    "inconclusive": "the diagnosis is inconclusive",
    "uniform_reuse": "the correction depends on the uniform that decided the rejection",
}


def _accepted_law_of(bi: BatteryInstance, verifier: Any) -> np.ndarray | None:
    try:
        res = simulate_exact(bi.float_instance, verifier, bi.K, max_tuples=20_000)
    except (EnumerationTooLargeError, ValueError):
        return None
    law = np.zeros(bi.instance.L + 1)
    for o, prob in res.output_law.items():
        law[len(o) - 1] += float(prob)
    return law


def ordered_length_law(bi: BatteryInstance, method: str) -> np.ndarray | None:
    """Exact law of tau for ``method`` with its drafts in decreasing p/q (:class:`RatioOrdered`), cached."""
    key = (instance_key(bi), f"{method}:ratio_ordered")
    if key not in _LAWS:
        _LAWS[key] = _accepted_law_of(bi, RatioOrdered(reference_verifier(method)))
    return _LAWS[key]


@dataclass(frozen=True)
class LengthFit:
    """The accepted-length law of the samples against one algorithm's exact one.

    Attributes
    ----------
    method : str
    p_value : float
        G-test of the observed law of tau against the algorithm's.
    power : float
        Power of that test against a TV error ``tv`` in the law of tau, at its level and N.
    """

    method: str
    p_value: float
    power: float

    def text(self, N: int, tv: float) -> str:
        """``"'sd' (p = 0.41; power 0.99 against a TV error of 0.05 in the law of tau, N = 8,000)"``."""
        return (
            f"{self.method!r} (p = {self.p_value:.3g}; power {self.power:.2g} against a TV error of {tv:g} "
            f"in the law of tau, N = {N:,})"
        )


def length_fits(s: Samples, reference: str | None, alpha_test: float, tv: float) -> list[LengthFit]:
    """The accepted-length law of ``s`` against each candidate lossless algorithm's exact law.

    Candidates: the named reference when it is lossless, else :data:`CANDIDATES_SINGLE` /
    ``CANDIDATES_MULTI``; those whose law cannot be enumerated are left out.
    """
    counts = np.bincount(s.all_lengths - 1, minlength=s.bi.instance.L + 1)
    N = int(counts.sum())
    ref_ok = reference is not None and reference_verifier(reference).lossless
    candidates = (reference,) if ref_ok else (CANDIDATES_SINGLE if s.bi.K == 1 else CANDIDATES_MULTI)
    out = []
    for method in candidates:
        law = accepted_length_law(s.bi, method)
        if law is None:
            continue
        t = g_test(counts, law)
        out.append(LengthFit(method, t.p_value, g_test_power(N, max(t.df, 1), alpha_test, tv) if N else 0.0))
    return out


def matching_algorithm(s: Samples, reference: str | None, alpha_test: float, tv: float = 0.05) -> str | None:
    """The candidate whose accepted-length law fits the samples at power >= :data:`POWER_TARGET` against ``tv``.

    A lossy reference (``spectr_gbv_released``) is not a candidate: matching it locates no loss.
    A fit on too few samples to tell (power below the target) is no match.
    """
    for fit in length_fits(s, reference, alpha_test, tv):
        if fit.p_value >= alpha_test and fit.power >= POWER_TARGET:
            return fit.method
    return None


def reuse_signature(s: Samples, alpha_test: float) -> bool:
    """True when SD-type corrections follow "residual drawn with the rejecting uniform".

    For every output that stopped at j < L (a rejection of draft 0's token x at j, ratio
    ``r = p(x)/q(x)``), the correction drawn by inverse CDF of the normalised residual ``c``
    with the same uniform, conditioned to [r, 1), has law ``|[C_{i-1}, C_i) cap [r, 1)| / (1 - r)``.
    The signature holds when that law fits (p >= 0.01) and the correct residual does not.
    """
    L, n = s.tables.L, s.tables.n
    stop = s.lengths <= L
    if stop.sum() < 50:
        return False
    idx = np.flatnonzero(stop)
    j = s.lengths[idx] - 1
    drafts0 = s.drafts[idx, 0]
    q_rows, p_rows = s.tables.rows(drafts0)
    rows = np.arange(len(idx))
    q = q_rows[rows, j]
    p = p_rows[rows, j]
    x = drafts0[rows, j]
    r = np.clip(p[rows, x] / np.maximum(q[rows, x], 1e-300), 0.0, 1.0)
    res = np.maximum(p - q, 0.0)
    tot = res.sum(axis=1, keepdims=True)
    ok = (tot[:, 0] > 0) & (r < 1 - 1e-9)
    res = res[ok] / tot[ok]
    r = r[ok]
    z = s.tokens[idx[ok], j[ok]]
    cdf_hi = np.cumsum(res, axis=1)
    cdf_lo = cdf_hi - res
    reuse = np.clip(np.minimum(cdf_hi, 1.0) - np.maximum(cdf_lo, r[:, None]), 0.0, None) / (1 - r[:, None])
    # cells: (position, prefix, token) through a hashed key; expected = sum of per-sample laws
    key = j[ok] * (n ** (L + 1)) + s.tables.prefix_index(
        np.where(np.arange(L)[None, :] < j[ok][:, None], drafts0[ok], 0)
    )
    uniq, inv = np.unique(key, return_inverse=True)
    obs = np.zeros((len(uniq), n))
    np.add.at(obs, (inv, z), 1)
    exp_ok = np.zeros((len(uniq), n))
    exp_reuse = np.zeros((len(uniq), n))
    np.add.at(exp_ok, inv, res)
    np.add.at(exp_reuse, inv, reuse)
    t_ok = combine([g_test(obs[c], exp_ok[c]) for c in range(len(uniq))])
    t_reuse = combine([g_test(obs[c], exp_reuse[c]) for c in range(len(uniq)) if exp_reuse[c].sum() > 0])
    return t_ok.p_value < alpha_test and t_reuse.p_value >= 0.01


def diagnose(
    s: Samples, reference: str | None, alpha_test: float, reuse_seen: bool, tv: float = 0.05
) -> tuple[str, str]:
    """Diagnosis tag and explanation for a failed law test on ``s``.

    Parameters
    ----------
    s : Samples
    reference : str or None
        The named reference (only it is a candidate when lossless).
    alpha_test : float
        The level of the accepted-length tests.
    reuse_seen : bool
        The chain probe saw the deciding uniform reused.
    tv : float
        TV error in the law of tau the stated power is against.

    Returns
    -------
    (str, str)
        The tag and a sentence that opens with one of :data:`LOCI`'s phrases: ``wrong_residual``
        when the accepted-length law fits a candidate at power >= :data:`POWER_TARGET` (the
        residual locus); ``not_lossless`` with the acceptance locus when every candidate's law
        of tau is rejected, the draft-order locus when moreover it fits a candidate run on drafts
        ordered by their ratios (:class:`RatioOrdered`), and the inconclusive locus when a fit
        has too little power to tell; ``reuses_uniform`` for a reused uniform.
    """
    if reuse_seen:
        return "reuses_uniform", LOCI["uniform_reuse"]
    N = len(s.all_lengths)
    fits = length_fits(s, reference, alpha_test, tv)
    lossy = f" (the reference {reference!r} is itself lossy: not used to locate the loss)" if reference else ""
    if reference and reference_verifier(reference).lossless:
        lossy = ""
    other = s.invalid - len(s.zero_token_lengths)
    invalid = (
        f" (or the {other} invalid outputs excluded from this test bias it: fix the structural failures first)"
        if other > 0
        else ""
    )
    fitting = [f for f in fits if f.p_value >= alpha_test]
    powered = [f for f in fitting if f.power >= POWER_TARGET]
    prefixes: dict[str, float | None] = {}
    for f in powered:  # the acceptance is right only if the accepted prefixes given the drafts fit too
        prefixes[f.method] = conditional_fit(s, reference_verifier(f.method), prefix_only=True)
    refuted = {m for m, pv in prefixes.items() if pv is not None and pv < alpha_test}
    fits = [f for f in fits if f.method not in refuted]
    fitting = [f for f in fitting if f.method not in refuted]
    powered = [f for f in powered if f.method not in refuted]
    if powered:
        fit = powered[0]
        given = prefixes.get(fit.method)
        also = "" if given is None else f", as do the accepted prefixes given the drafts (p = {given:.3g})"
        if fit.method == "sd" and reuse_signature(s, alpha_test):
            return "reuses_uniform", (
                f"{LOCI['uniform_reuse']}: the accepted-length law matches {fit.text(N, tv)} and the corrections "
                "follow a residual drawn with the uniform that decided the rejection"
            )
        return "wrong_residual", (
            f"{LOCI['residual']}: the accepted-length law matches {fit.text(N, tv)}{also}; the emitted tokens do not"
        )
    if fitting:
        fit = max(fitting, key=lambda f: f.p_value)
        return "not_lossless", (
            f"{LOCI['inconclusive']} at power {fit.power:.2g}: the accepted-length law is consistent with "
            f"{fit.text(N, tv)}, but {N:,} samples are too few to tell a wrong acceptance rule from a wrong token "
            f"at the stop; rerun this instance at a larger budget{lossy}{invalid}"
        )
    rejected = ", ".join(f"{f.method!r} p = {f.p_value:.3g}" for f in fits if f.method not in refuted)
    rejected += "".join(f", {m!r}'s accepted prefixes given the drafts p = {prefixes[m]:.3g}" for m in sorted(refuted))
    rejected = rejected.lstrip(", ") or "no candidate could be enumerated"
    order = _order_fit(s, reference, alpha_test, tv) if s.bi.K > 1 else None
    given = None if order is None else conditional_fit(s, RatioOrdered(reference_verifier(order.method)))
    if order is not None and given is not None and given < alpha_test:  # the outputs given the drafts say no
        order = None
    if order is not None and order.power >= POWER_TARGET:
        return "not_lossless", (
            f"{LOCI['draft_order']}: the accepted-length law matches {order.text(N, tv)} run on the drafts in "
            f"decreasing p/q, as do the outputs given the drafts (p = {given:.3g}), and differs from every lossless "
            f"candidate's ({rejected}); try the drafts in index order or in an order drawn independently of "
            f"them{invalid}"
        )
    if order is not None:
        return "not_lossless", (
            f"{LOCI['inconclusive']} at power {order.power:.2g}: the accepted-length law differs from every lossless "
            f"candidate's ({rejected}), so the acceptance is wrong, and is consistent with {order.text(N, tv)} run "
            f"on the drafts in decreasing p/q, but {N:,} samples are too few to say whether the drafts are tried in "
            f"an order that depends on them{invalid}"
        )
    return "not_lossless", (
        f"{LOCI['acceptance']}: the accepted-length law differs from that of every known lossless algorithm "
        f"tried ({rejected}){lossy}{invalid}"
    )


def _order_fit(s: Samples, reference: str | None, alpha_test: float, tv: float) -> LengthFit | None:
    """The best-fitting draft-order hypothesis (:data:`ORDER_CANDIDATES` on ratio-ordered drafts), or None."""
    methods = [m for m in ORDER_CANDIDATES if not reference or m == reference.split(":")[0]]
    counts = np.bincount(s.all_lengths - 1, minlength=s.bi.instance.L + 1)
    N = int(counts.sum())
    best: LengthFit | None = None
    for method in methods:
        law = ordered_length_law(s.bi, method)
        if law is None:
            continue
        t = g_test(counts, law)
        if t.p_value >= alpha_test and (best is None or t.p_value > best.p_value):
            best = LengthFit(method, t.p_value, g_test_power(N, max(t.df, 1), alpha_test, tv) if N else 0.0)
    return best


def locus_of(tag: str, detail: str) -> str:
    """The part of the verifier a failed check's diagnosis points at: a key of :data:`LOCI`, or the tag.

    ``wrong_residual`` is ``"residual"``, ``reuses_uniform`` ``"uniform_reuse"``,
    ``efficiency_above_optimum`` ``"acceptance"``; a ``not_lossless`` detail is read for the
    phrases of :data:`LOCI` (``"law"`` when it names none: an exact defect, an adversarial
    confirmation without a diagnosis); any other tag is returned as is.
    """
    if tag == "wrong_residual":
        return "residual"
    if tag == "reuses_uniform":
        return "uniform_reuse"
    if tag == "efficiency_above_optimum":
        return "acceptance"
    if tag != "not_lossless":
        return tag
    low = detail.lower()
    for key in ("inconclusive", "draft_order", "acceptance", "residual"):
        if LOCI[key] in low:
            return key
    return "law"


__all__ = [
    "CANDIDATES_MULTI",
    "CANDIDATES_SINGLE",
    "LOCI",
    "ORDER_CANDIDATES",
    "LengthFit",
    "RatioOrdered",
    "MAX_CONDITIONAL_TUPLES",
    "accepted_length_law",
    "conditional_fit",
    "diagnose",
    "instance_key",
    "length_fits",
    "locus_of",
    "matching_algorithm",
    "ordered_length_law",
    "reuse_signature",
]
