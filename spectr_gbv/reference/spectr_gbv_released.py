"""LOSSY on purpose: the SpecTr-GBV acceptance rule as released by its authors (THEORY.md 6a)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from spectr_gbv.core.methods import class_facts
from spectr_gbv.core.numbers import Scalar, safe_divide
from spectr_gbv.reference.base import Verifier, VerifyInput
from spectr_gbv.reference.choosers import Chooser, Emission


@dataclass(frozen=True)
class _Prepared:
    joint_p: list[list[Scalar]]  # [K][L+1]: P = p(x_j^i) along draft j
    joint_q: list[list[Scalar]]  # [K][L+1]: Q = q(x_j^i)
    h_raw: list[list[Scalar | float]]  # [K][L+1]: raw h_i (index 0 unused), h_L at index L


def _ratios(P: Scalar, Q: Scalar, p_row: np.ndarray, q_row: np.ndarray, one: Scalar) -> np.ndarray:
    """``r(v) = min{1, Q q'(v) / (P p'(v))}``, 1 where ``P p'(v) = 0``."""
    return np.minimum(safe_divide(Q * q_row, P * p_row, fill=one), one)


def _cover(x: Scalar, K: int, exact: bool) -> Scalar:
    """``1 - (1 - x)^K``; in float64 as ``-expm1(K log1p(-x))`` (no cancellation for small x)."""
    if exact:
        return 1 - (1 - x) ** K
    x = float(x)
    return 1.0 if x >= 1.0 else -math.expm1(K * math.log1p(-x))


def _ratio_or_limit(num: Scalar, den: Scalar, exact: bool) -> Scalar | float:
    """``num / den``; for ``den == 0`` the limit of the released ``num / (den + 1e-20)``."""
    if den == 0:
        return math.inf if num > 0 else (-math.inf if num < 0 else (Fraction(0) if exact else 0.0))
    return num / den


def released_weights(P: Scalar, Q: Scalar, p_row: np.ndarray, q_row: np.ndarray, K: int, exact: bool) -> Scalar | float:
    r"""Raw acceptance weight of a proper sub-block (THEORY.md 6a), before clamping.

    .. math::
        h_i = \frac{\sum_v P p'(v)(1 - r(v))^K - P(1 - r_0)^K}
                   {1 - (1 - Q)^K - \sum_v P p'(v)(1 - (1 - r(v))^K)}

    with :math:`r(v) = \min\{1, Q q'(v)/(P p'(v))\}` (1 where :math:`P p'(v) = 0`) and
    :math:`r_0 = \min\{1, Q/P\}` (1 where P = 0). A zero denominator gives ``inf`` (``-inf``)
    for a positive (negative) numerator and 0 for a zero one: the limit of the released code's
    ``numerator / (denominator + 1e-20)``.
    """
    one: Scalar = Fraction(1) if exact else 1.0
    r = _ratios(P, Q, p_row, q_row, one)
    r0 = min(one, Q / P) if P > 0 else one
    mass = P * p_row
    num = sum((mass * (one - r) ** K).tolist(), one * 0) - P * (one - r0) ** K
    covers = [_cover(rv, K, exact) for rv in r.tolist()]
    den = _cover(Q, K, exact) - sum((m * c for m, c in zip(mass.tolist(), covers, strict=True)), one * 0)
    return _ratio_or_limit(num, den, exact)


def released_whole_weight(P: Scalar, Q: Scalar, K: int, exact: bool) -> Scalar | float:
    r"""Raw acceptance weight of a whole draft: :math:`h_L = P[1 - (1 - r_0)^K] / [1 - (1 - Q)^K]`.

    Same conventions as :func:`released_weights`.
    """
    one: Scalar = Fraction(1) if exact else 1.0
    r0 = min(one, Q / P) if P > 0 else one
    return _ratio_or_limit(P * _cover(r0, K, exact), _cover(Q, K, exact), exact)


class ReleasedSpecTrGBVVerifier(Verifier):
    r"""The SpecTr-GBV rule as released (junemily/SpecTr-GBV, src/engine.py @ e399f44). LOSSY.

    .. warning::
        NOT lossless: at L = 1, K = 2 its output law already differs from p (THEORY.md 6,
        6a). Kept to exercise the validity checker and to measure the bias of the released
        code; do not use it to generate text.

    Restated in THEORY.md section 6a. For a sub-block :math:`b = x_j^i` of draft j,
    P = p(x^i), Q = q(x^i) along draft j's own tokens, p' = p(.|x^i), q' = q(.|x^i).
    Proper sub-blocks (i < L) are accepted with probability :math:`h_i`
    (:func:`released_weights`), a whole draft with
    :math:`h_L = P[1 - (1 - r_0)^K] / [1 - (1 - Q)^K]`. Scan: a = 0, seen = {}; for
    j = 1..K in order: for i = a+1..L-1 skip b if b is in seen, else accept it with prob
    :math:`h_i` (a = i, remember j) or add it to seen; then accept the whole draft j with prob
    :math:`h_L` (no seen check); if accepted, a = L and stop. Draft j is never checked against
    the accepted prefix. Finally, if a < L, Z at position a+1 of the remembered draft (draft 1
    when a = 0, with P = Q = 1) :math:`\sim \mathrm{normalize}(P p'(v)(1 - r(v)^K))`; else
    :math:`Z \sim p(.|x^L)`. No state is carried.

    The quirks are kept as released: the seen set, the whole-draft test without seen check,
    P and Q along draft j's own tokens, the residual formula. h can leave [0, 1]; it is clamped
    (the released code's ``rand < h`` does the same) and every weight that left is counted:
    ``last_diagnostics`` ``["clamped"]`` (keys ``("h", j, i)``, i = L for the whole
    draft; raw values in ``last_out_of_range``). In exact arithmetic h never leaves
    [0, 1] (numerator >= 0 by Jensen, denominator - numerator
    = :math:`1-(1-Q)^K - P[1-(1-r_0)^K] \ge 0`, and a zero denominator forces a zero
    numerator), so a nonzero count flags float64 rounding only.

    One documented deviation: when the residual is identically zero (in exact arithmetic
    only at a = 0 with p(.|root) = q(.|root), which has positive probability) the released
    code would fail in ``torch.multinomial``; here Z ~ p' is used instead and counted in
    ``last_diagnostics["residual_fallbacks"]``.

    References
    ----------
    Lin et al. 2026, "SpecTr-GBV", arXiv 2604.25925; released code junemily/SpecTr-GBV,
    ``src/engine.py`` (``speculative_decoding``) at commit e399f44; THEORY.md section 6a.
    """

    name = "spectr_gbv_released"
    lossless, structure, citation = class_facts(name)
    symmetric = False

    def prepare(self, batch: VerifyInput) -> _Prepared:
        """Joint probabilities along every draft and every raw weight h."""
        K, L, exact = batch.K, batch.L, batch.exact
        one = batch.one
        joint_p, joint_q, h_raw = [], [], []
        for j in range(K):
            x = batch.draft(j)
            P, Q = [one], [one]
            for t in range(L):
                P.append(P[-1] * batch.target_probs[j, t, x[t]])
                Q.append(Q[-1] * batch.draft_probs[j, t, x[t]])
            hs: list[Scalar | float] = [one * 0]
            for i in range(1, L):
                hs.append(released_weights(P[i], Q[i], batch.target_probs[j, i], batch.draft_probs[j, i], K, exact))
            hs.append(released_whole_weight(P[L], Q[L], K, exact))
            joint_p.append(P)
            joint_q.append(Q)
            h_raw.append(hs)
        return _Prepared(joint_p, joint_q, h_raw)

    def run(self, batch: VerifyInput, prep: _Prepared, chooser: Chooser) -> Emission:
        """The released scan over drafts and sub-blocks, then the released residual."""
        K, L, exact = batch.K, batch.L, batch.exact
        diag = chooser.diagnostics
        a, sel = 0, 0
        seen: set[tuple[int, ...]] = set()
        for j in range(K):
            x = batch.draft(j)
            for i in range(a + 1, L):
                if x[:i] in seen:
                    continue
                h = diag.clamp_unit(("h", j, i), prep.h_raw[j][i], exact)
                if chooser.bernoulli(h):
                    a, sel = i, j
                else:
                    seen.add(x[:i])
            h = diag.clamp_unit(("h", j, L), prep.h_raw[j][L], exact)
            if chooser.bernoulli(h):
                a, sel = L, j
                break
        x = batch.draft(sel)
        if a == L:
            return Emission(x, batch.target_probs[sel, L])
        one = batch.one
        P, Q = prep.joint_p[sel][a], prep.joint_q[sel][a]
        p_row, q_row = batch.target_probs[sel, a], batch.draft_probs[sel, a]
        weights = P * p_row * (one - _ratios(P, Q, p_row, q_row, one) ** K)
        if not np.any(weights > 0):
            diag.note_fallback(("residual", sel, a))
            weights = p_row
        return Emission(x[:a], weights)
