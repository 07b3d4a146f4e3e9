"""Diagnosis of a failed law test: which part of the verifier is wrong.

A failed law test on :class:`~spectr_gbv.validate.checks.sampling.Samples` is diagnosed
``wrong_residual`` when the accepted-length law is consistent with the exact law of the named
reference (or, without one, of a known lossless algorithm) but the emitted tokens are not,
``reuses_uniform`` when moreover the corrections follow the law of a residual drawn with the
uniform that decided the rejection, and ``not_lossless`` otherwise. Imports: simulate, battery,
sampling, reference_variants.
"""

from __future__ import annotations

import json

import numpy as np

from spectr_gbv.simulate.exact import EnumerationTooLargeError, simulate_exact
from spectr_gbv.simulate.monte_carlo import combine_g_tests as combine
from spectr_gbv.simulate.monte_carlo import pooled_g_test as g_test
from spectr_gbv.validate.battery.instance import BatteryInstance
from spectr_gbv.validate.checks.sampling import Samples
from spectr_gbv.validate.reference_variants import reference_verifier

#: Lossless algorithms tried when a failure is diagnosed without a named reference.
CANDIDATES_SINGLE: tuple[str, ...] = ("sd", "bv")
CANDIDATES_MULTI: tuple[str, ...] = ("sd", "bv", "mdbv", "spectr", "rrs", "gbv_multipath")

_LAWS: dict[tuple[str, str], np.ndarray | None] = {}


def _key(bi: BatteryInstance) -> str:
    return json.dumps(bi.spec(), sort_keys=True)


def accepted_length_law(bi: BatteryInstance, method: str) -> np.ndarray | None:
    """Exact law of tau for ``method`` on ``bi`` (float), or None when it cannot be enumerated."""
    key = (_key(bi), method)
    if key not in _LAWS:
        _LAWS[key] = _accepted_law(bi, method)
    return _LAWS[key]


def _accepted_law(bi: BatteryInstance, method: str) -> np.ndarray | None:
    try:
        res = simulate_exact(bi.float_instance, reference_verifier(method), bi.K, max_tuples=20_000)
    except (EnumerationTooLargeError, ValueError):
        return None
    law = np.zeros(bi.instance.L + 1)
    for o, prob in res.output_law.items():
        law[len(o) - 1] += float(prob)
    return law


def matching_algorithm(s: Samples, reference: str | None, alpha_test: float) -> str | None:
    """The named lossless reference (or a known lossless algorithm) whose accepted-length law fits the samples.

    A lossy reference (``spectr_gbv_released``) is not a candidate: matching it locates no loss.
    """
    tau = s.lengths - 1
    counts = np.bincount(tau, minlength=s.bi.instance.L + 1)
    ref_ok = reference is not None and reference_verifier(reference).lossless
    candidates = (reference,) if ref_ok else (CANDIDATES_SINGLE if s.bi.K == 1 else CANDIDATES_MULTI)
    for method in candidates:
        law = accepted_length_law(s.bi, method)
        if law is not None and g_test(counts, law).p_value >= alpha_test:
            return method
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


def diagnose(s: Samples, reference: str | None, alpha_test: float, reuse_seen: bool) -> tuple[str, str]:
    """Diagnosis tag and explanation for a failed law test on ``s``."""
    if reuse_seen:
        return "reuses_uniform", "the correction depends on the uniform that decided the rejection"
    method = matching_algorithm(s, reference, alpha_test)
    if method is None:
        if reference and reference_verifier(reference).lossless:
            why = (
                f"the output law is not the target's, and the accepted-length law does not match that of the "
                f"reference {reference!r}: the acceptance rule differs from the reference's (the law test, not "
                "this difference, shows the loss)"
            )
        else:
            lossy = f" (the reference {reference!r} is itself lossy: not used to locate the loss)" if reference else ""
            why = (
                f"the accepted-length law does not match that of any known lossless algorithm{lossy}: "
                "the acceptance rule is wrong"
            )
        if s.invalid:
            why += (
                f" (or the {s.invalid} invalid outputs excluded from this test bias it: fix the structural "
                "failures first)"
            )
        return "not_lossless", why
    if method == "sd" and reuse_signature(s, alpha_test):
        return "reuses_uniform", (
            "the acceptance matches 'sd' and the corrections follow a residual drawn with the uniform that "
            "decided the rejection"
        )
    return "wrong_residual", (
        f"the accepted-length law matches {method!r} but the emitted tokens do not: the token drawn at the "
        "stop position (residual or bonus) has the wrong law"
    )


__all__ = [
    "CANDIDATES_MULTI",
    "CANDIDATES_SINGLE",
    "accepted_length_law",
    "diagnose",
    "matching_algorithm",
    "reuse_signature",
]
