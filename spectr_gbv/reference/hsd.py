r"""Hierarchical Speculative Decoding (HSD, Zhou et al. 2026): the paper's rule, the released one, multi-draft.

HSD verifies a draft of :math:`\gamma = L` tokens by the joint ratio :math:`r(x^t) = p(x^t)/q(x^t)`
along the draft, read backwards. Its *capped* ratio (the paper's Definitions 4-5) divides by
the largest earlier joint ratio above 1,

.. math::
    r^*(x^t) = \frac{r(x^t)}{\max\{1, \max_{1\le i<t} r(x^i)\}},

and its capped branch divergences (Definition 6) are, on the branch
:math:`\{x^t v : v\in V\}` after the accepted prefix :math:`x^t`,

.. math::
    D^+_t = \sum_v q(x^t v)\,[r^*(x^t v) - 1]^+,\qquad
    D^-_t = \sum_v q(x^t v)\,[1 - r^*(x^t v)]^+ .

Writing :math:`c_t = r(x^t)/\max\{1, \max_{i\le t} r(x^i)\}` (so that
:math:`r^*(x^t v) = c_t\,p(v|x^t)/q(v|x^t)`), the common factor :math:`q(x^t)` cancels in every
ratio: :math:`D^\pm_t / q(x^t) = \sum_v [\pm(c_t p(v|x^t) - q(v|x^t))]^+`. This module computes
that scaled form (no joint probability underflows in float64).

A short exact identity settles the comparison with block verification (BV, Sun et al. 2024):
BV's running weight :math:`w_t = \min\{1, w_{t-1} p/q\}` is
:math:`\min\{1, r(x^t)/\max_{0\le s<t} r(x^s)\}` (suffix-minimum form, the paper's own Lemma 11),
which is exactly :math:`c_t` and, at t = L, :math:`\min\{1, r^*(x^L)\}`. Hence the paper's
:math:`h_t = D^+_t/D^-_t = r_t/(r_t + 1 - w_t)`, :math:`h_L = w_L` and
:math:`P^*_{res} \propto \max\{w_t p - q, 0\}` are BV's weights term by term, and the backward
scan "accept the longest prefix whose trial succeeds" is BV's
:math:`\tau = \max\{i : \eta_i \le h_i\}`: the paper's HSD *is* BV, in law given the draft.
The gain reported over BV comes from the released implementation, which accepts the whole
draft with the *uncapped* :math:`\min\{1, r(x^L)\}` (:class:`ReleasedHierarchicalVerifier`,
not lossless).

References
----------
Zhou et al. 2026, "Overcoming Joint Intractability with Lossless Hierarchical Speculative
Decoding", arXiv 2601.05724 (ICLR 2026): Algorithm 2, Definitions 4-6, Eqs. (19)-(20),
Algorithm 3 (multi-draft); released code ZhouYuxuanYX/Hierarchical-Speculative-Decoding,
``transformers/generation/utils.py`` (``_speculative_sampling``, ``backward=True``) at commit
3b1ae00 and the paper's Listing 2. Sun et al. 2024, arXiv 2403.10444, Algorithm 2;
THEORY.md sections 3 and 6.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from spectr_gbv.core.methods import class_facts
from spectr_gbv.core.numbers import Scalar
from spectr_gbv.reference.base import DraftTuple, Verifier, VerifyInput, normalize, residual_or_fallback
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.mdbv import continue_prefix
from spectr_gbv.reference.structure import draft_probability, scan_drafts


@dataclass(frozen=True)
class HSDWeights:
    r"""HSD's quantities along one draft block of m tokens (Zhou et al. 2026, Eqs. (16)-(20)).

    Attributes
    ----------
    ratio : list, length m + 1
        Joint ratios :math:`r(x^t) = p(x^t)/q(x^t)`, ``ratio[0] = 1`` (uncapped).
    cap : list, length m + 1
        :math:`c_t = r(x^t) / \max\{1, \max_{i\le t} r(x^i)\}` (``cap[0] = 1``), the capped
        prefix ratio seen by the branch after :math:`x^t`.
    h : list, length m
        ``h[t-1]`` = :math:`h_t = D^+_t / D^-_t` for t < m (0 when :math:`D^-_t = 0`, which
        forces :math:`D^+_t = 0`), ``h[m-1]`` = :math:`h_m = \min\{1, r^*(x^m)\}`.
    """

    ratio: list[Scalar]
    cap: list[Scalar]
    h: list[Scalar]


def hsd_weights(
    tokens: Sequence[int],
    target_rows: Sequence[np.ndarray],
    draft_rows: Sequence[np.ndarray],
    exact: bool,
) -> HSDWeights:
    r"""Capped ratios and acceptance probabilities of HSD's Algorithm 2 along one block.

    Parameters
    ----------
    tokens : sequence of int, length m >= 1
        The drafted block :math:`x_1..x_m`.
    target_rows : sequence of m arrays, shape (n,), Fractions (object) or float64
        ``target_rows[t]`` = target law of the token after :math:`x^t` (the first may be any
        law, as in the multi-draft Algorithm 3).
    draft_rows : sequence of m arrays, shape (n,)
        ``draft_rows[t]`` = ``q(. | x^t)``.
    exact : bool

    Returns
    -------
    HSDWeights

    References
    ----------
    Zhou et al. 2026, arXiv 2601.05724, Definitions 4-6 and Eq. (19).
    """
    one: Scalar = Fraction(1) if exact else 1.0
    zero = one * 0
    m = len(tokens)
    ratio, cap = [one], [one]
    running_max = one  # max{1, max_{i<=t} r(x^i)}
    h: list[Scalar] = []
    for t in range(1, m + 1):
        x = tokens[t - 1]
        p_x, q_x = target_rows[t - 1][x], draft_rows[t - 1][x]
        r_t = ratio[-1] * p_x / q_x  # q_x > 0: validate_inputs refuses a drafted token of q = 0
        if t == m:
            h.append(min(one, r_t / running_max))  # min{1, r*(x^m)}: max over i < m only
        running_max = max(running_max, r_t)
        ratio.append(r_t)
        cap.append(r_t / running_max)
        if t < m:
            diff = cap[-1] * target_rows[t] - draft_rows[t]  # (q(x^t v)/q(x^t)) (r*(x^t v) - 1)
            excess = sum((v for v in diff.tolist() if v > 0), zero)
            deficit = sum((-v for v in diff.tolist() if v < 0), zero)
            h.append(excess / deficit if deficit > 0 else zero)
    return HSDWeights(ratio, cap, h)


def hsd_verify(
    chooser: Chooser,
    tokens: Sequence[int],
    target_rows: Sequence[np.ndarray],
    draft_rows: Sequence[np.ndarray],
    bonus_row: np.ndarray,
    exact: bool,
    *,
    whole_block: Scalar | None = None,
) -> tuple[int, np.ndarray]:
    r"""One backward scan of HSD (Algorithm 2) and the law of the token after the accepted prefix.

    For t = m, m-1, ..., 1 accept :math:`x^t` with probability :math:`h_t` and stop; if every
    trial fails, :math:`\tau = 0`. Then :math:`Z \sim p(.|x^m)` if :math:`\tau = m`, else
    :math:`Z \sim P^*_{res}(.|x^\tau) \propto \max\{c_\tau p(.|x^\tau) - q(.|x^\tau), 0\}`.

    Parameters
    ----------
    chooser : Chooser
    tokens, target_rows, draft_rows, exact
        As :func:`hsd_weights`.
    bonus_row : ndarray, shape (n,)
        Target law after the whole block.
    whole_block : Fraction or float, optional
        Replace :math:`h_m` by this value (the released code's uncapped
        :math:`\min\{1, r(x^m)\}`); default the paper's :math:`\min\{1, r^*(x^m)\}`.

    Returns
    -------
    tau : int
        Accepted tokens, 0..m.
    law : ndarray, shape (n,)
        Normalised law of Z.
    """
    hw = hsd_weights(tokens, target_rows, draft_rows, exact)
    m = len(tokens)
    h = list(hw.h)
    if whole_block is not None:
        h[-1] = whole_block
    first = chooser.first_success(h[::-1])  # trials at t = m, m-1, ..., 1
    tau = 0 if first is None else m - first
    if tau == m:
        return tau, bonus_row
    weights = np.maximum(hw.cap[tau] * target_rows[tau] - draft_rows[tau], 0)
    weights = residual_or_fallback(weights, target_rows[tau], exact, chooser.diagnostics, ("hsd_residual", tau))
    return tau, normalize(weights, exact)


class HierarchicalVerifier(Verifier):
    r"""Hierarchical Speculative Decoding (Algorithm 2, capped branch resampling) on the first draft.

    Reads draft 1 only (drafts 2..K are ignored). With the joint ratios
    :math:`r(x^t) = p(x^t)/q(x^t)` of the draft, the capped prefix ratio
    :math:`r^*(x^t) = r(x^t)/\max\{1, \max_{i<t} r(x^i)\}` (Definitions 4-5) and the capped
    branch divergences :math:`D^\pm_t` after :math:`x^t` (Definition 6):

    1. acceptance weights :math:`h_t = D^+_t / D^-_t` for t < L (0 when both vanish) and
       :math:`h_L = \min\{1, r^*(x^L)\}` (Eq. 19);
    2. scan backwards, t = L..1, accepting the first :math:`x^t` whose trial succeeds
       (:math:`\tau = 0` if none);
    3. emit the bonus :math:`Z \sim p(.|x^L)` if :math:`\tau = L`, else one token from the capped
       branch resampling law :math:`P^*_{res}(v|x^\tau) \propto q(x^\tau v)[r^*(x^\tau v) - 1]^+`
       (Eq. 20). Stateless: nothing is carried to the next iteration, the draft law is q.

    These are BV's weights term by term (module docstring): its outcome law given the draft
    equals ``bv``'s exactly, so it is lossless and its value is BV's
    :math:`E[\tau] = \sum_i\sum_{x^i} p(x^i)\beta(x^i)` (113/72 on THEORY.md section 7), not
    more. The paper's Theorem 7 (:math:`E[\tau]_{HSD} > E[\tau]_{BV}` for :math:`\gamma > 1`)
    does not hold for the rule the paper defines.

    References
    ----------
    Zhou et al. 2026, "Overcoming Joint Intractability with Lossless Hierarchical Speculative
    Decoding", arXiv 2601.05724, Algorithm 2, Definitions 4-6, Eqs. (19)-(20); Sun et al. 2024,
    arXiv 2403.10444, Algorithm 2; THEORY.md section 3.
    """

    name = "hsd"
    lossless, structure, citation = class_facts(name)
    symmetric = False

    def law_key(self, drafts: DraftTuple) -> tuple[int, ...]:
        """Only the first draft matters."""
        return drafts[0]

    def selected_draft_probability(self, batch: VerifyInput) -> Scalar:
        """P(first draft = x) = q(x), for ``batch`` = K copies of x (the ``selected_draft`` shape)."""
        return draft_probability(batch, 0)

    def whole_block_weight(self, batch: VerifyInput) -> Scalar | None:
        """Override of :math:`h_L`; None keeps the paper's :math:`\\min\\{1, r^*(x^L)\\}`."""
        return None

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Backward scan of draft 1, then the capped residual or the bonus token."""
        x = batch.draft(0)
        L = batch.L
        tau, law = hsd_verify(
            chooser,
            x,
            batch.target_probs[0, :L],
            batch.draft_probs[0],
            batch.target_probs[0, L],
            batch.exact,
            whole_block=self.whole_block_weight(batch),
        )
        return Emission(x[:tau], law)


class ReleasedHierarchicalVerifier(HierarchicalVerifier):
    r"""HSD as released by its authors: whole draft accepted with the UNCAPPED ratio. LOSSY.

    .. warning::
        NOT lossless: its output law differs from p on instances where an earlier joint
        ratio along the draft exceeds 1 and the final one does not (e.g. L = 2, tested in
        ``tests/reference/test_hsd.py``). Kept to measure the released code; do not use it
        to generate text.

    Identical to :class:`HierarchicalVerifier` (the capped :math:`h_t`, t < L, and the capped
    residual, as in the released ``cummax`` code) except for the whole-draft test: the released
    code compares a uniform with ``(p_i / q_i).cumprod()[-1]``, i.e.
    :math:`h_L = \min\{1, r(x^L)\}` instead of the paper's :math:`\min\{1, r^*(x^L)\}`. Since
    :math:`r(x^L) \ge r^*(x^L)`, it accepts more, and the resampling terms that the paper's proof
    (Lemma 8) adds on top of the accepted mass then overshoot :math:`p(x^L)`.

    Documented deviation: where :math:`D^-_t = 0` (t < L) the released code divides 0 by 0
    (NaN, then a failing ``torch.multinomial``); here :math:`h_t = 0` as in the authors'
    ``algorithm_clean.py`` (``nan_to_num``).

    References
    ----------
    Zhou et al. 2026, arXiv 2601.05724, Listing 2 (``probability_ratio``); released code
    ZhouYuxuanYX/Hierarchical-Speculative-Decoding, ``transformers/generation/utils.py``
    (``_speculative_sampling`` with ``backward=True``, one draft) at commit 3b1ae00.
    """

    name = "hsd_released"
    lossless, structure, citation = class_facts(name)
    symmetric = False

    def whole_block_weight(self, batch: VerifyInput) -> Scalar:
        """The released :math:`h_L = \\min\\{1, r(x^L)\\}` (uncapped joint ratio of draft 1)."""
        ratio = batch.one
        for t, x in enumerate(batch.draft(0)):
            ratio = ratio * batch.target_probs[0, t, x] / batch.draft_probs[0, t, x]
        return min(batch.one, ratio)


class MultiDraftHierarchicalVerifier(Verifier):
    r"""HSD with recursive rejection over K drafts (the paper's Algorithm 3).

    Keep the accepted prefix P (empty) and the target law R at position :math:`|P| + 1`
    (:math:`p(.|\emptyset)`). For k = 1..K in order: skip draft k unless it starts with P; else
    run HSD's backward scan (Algorithm 2) on its remaining tokens with the first target row
    R and p after it (ratios restart after P); extend P; if it reached L, stop; else set R to
    the capped resampling law :math:`P^*_{res}(.|P)` (line 29: it becomes the new target
    distribution). Finally :math:`Z \sim R` (the bonus row after L accepted tokens).

    Since each scan is BV's (see :class:`HierarchicalVerifier`), this is ``mdbv`` in law:
    lossless, K = 1 is ``hsd`` = ``bv``, and E[tau] = 61/36 (K = 2) on THEORY.md section 7.

    References
    ----------
    Zhou et al. 2026, arXiv 2601.05724, Appendix G, Algorithm 3 (with recursive reject
    sampling with replacement, Yang et al. 2024); THEORY.md section 6 (MDBV).
    """

    name = "hsd_multidraft"
    lossless, structure, citation = class_facts(name)
    symmetric = False

    def scan_step(
        self, batch: VerifyInput, k: int, prefix: tuple[int, ...], law: np.ndarray, chooser: Chooser
    ) -> tuple[tuple[int, ...], np.ndarray]:
        """HSD scan of draft ``k`` (which starts with ``prefix``) continuing ``prefix``.

        Parameters
        ----------
        batch : VerifyInput
        k : int
            Draft index; ``batch.draft(k)`` starts with ``prefix``, ``len(prefix) < L``.
        prefix : tuple of int
        law : ndarray, shape (n,)
            Target law R at position ``len(prefix) + 1``.
        chooser : Chooser

        Returns
        -------
        prefix : tuple of int
            Extended accepted prefix.
        law : ndarray, shape (n,)
            Capped resampling law at the stop, or ``p(. | x^L)`` after L tokens.
        """
        return continue_prefix(hsd_verify, batch, k, prefix, law, chooser)

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Scan the drafts in order, extending the accepted prefix with HSD."""
        return scan_drafts(batch, self.scan_step, chooser)


__all__ = [
    "HSDWeights",
    "HierarchicalVerifier",
    "MultiDraftHierarchicalVerifier",
    "ReleasedHierarchicalVerifier",
    "hsd_verify",
    "hsd_weights",
]
