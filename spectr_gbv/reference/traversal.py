r"""Traversal verification (Weng et al. 2025) on the trie of K i.i.d. drafts.

The draft tree is verified leaf to root: nodes are tested in post-order, each with a
sequence-level acceptance weight (block verification's :math:`w`), and every rejection updates
the parent's target residual, draft law and weight before the next test. The whole test
sequence is deterministic given that all earlier tests failed, so :meth:`TraversalVerifier.prepare` computes it
once and :meth:`TraversalVerifier.run` takes a single ``chooser.first_success``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spectr_gbv.core.methods import class_facts
from spectr_gbv.core.numbers import Scalar
from spectr_gbv.reference.base import Verifier, VerifyInput
from spectr_gbv.reference.choosers import Chooser, Emission


@dataclass(frozen=True)
class DraftTrie:
    """The trie of distinct draft prefixes, children in order of first appearance.

    Attributes
    ----------
    children : dict of tuple of int to list of int
        Node (a prefix) -> next tokens of its children, ordered by the lowest index of a draft
        through each child (first appearance in draft order).
    first : dict of tuple of int to int
        Node -> the lowest draft index through it (whose rows are read there).
    """

    children: dict[tuple[int, ...], list[int]]
    first: dict[tuple[int, ...], int]


def draft_trie(batch: VerifyInput) -> DraftTrie:
    """Build the trie of ``batch``'s drafts (a repeated prefix or draft is one node).

    Parameters
    ----------
    batch : VerifyInput

    Returns
    -------
    DraftTrie
        O(K L) nodes, built in O(K L^2) tuple hashing.
    """
    children: dict[tuple[int, ...], list[int]] = {(): []}
    first: dict[tuple[int, ...], int] = {(): 0}
    for k in range(batch.K):
        x = batch.draft(k)
        for t in range(batch.L):
            child = x[: t + 1]
            if child not in first:
                first[child] = k
                children[x[:t]].append(x[t])
                children[child] = []
    return DraftTrie(children, first)


@dataclass(frozen=True)
class TraversalPlan:
    """The deterministic schedule of one traversal: tests in order, and what each emits.

    Attributes
    ----------
    tests : list of scalars
        Acceptance probability of the i-th tested node given that tests ``0..i-1`` failed
        (nodes whose probability is 0 are left out: they are rejected surely).
    nodes : list of tuple of int
        The i-th tested node (a draft prefix of length 1..L).
    laws : list of ndarray, shape (n,)
        Law of Z when the i-th test succeeds: ``p(. | x^L)`` at a leaf, else the node's
        residual after all its children were rejected.
    root_law : ndarray, shape (n,)
        Law of Z when every test fails (the root's final residual, or the target row at the
        root for a float residual that rounded to zero).
    root_fallback : bool
        Whether ``root_law`` is that fallback.
    """

    tests: list[Scalar]
    nodes: list[tuple[int, ...]]
    laws: list[np.ndarray]
    root_law: np.ndarray
    root_fallback: bool


def traversal_plan(batch: VerifyInput) -> TraversalPlan:
    r"""Run traversal verification's deterministic part on the draft trie of ``batch``.

    Post-order DFS over :func:`draft_trie` (children in first-appearance order). A child c of
    a node u enters with :math:`w_c = \min\{1, w_u M_b^u(c) / M_s^u(c)\}` (the root has
    :math:`w = 1`, :math:`M_b = p(.|u)`, :math:`M_s = q(.|u)` at first). A node is tested,
    with probability :math:`w_u`, after all its children were rejected; on its rejection the
    parent v is updated with :math:`d = \max\{w_v M_b^v - M_s^v, 0\}`, :math:`r = \sum d`:

    .. math::
        w_v \leftarrow \frac{r}{r + 1 - w_v}\ (0 \text{ if the denominator is } 0),\quad
        M_b^v \leftarrow d / r,\quad
        M_s^v \leftarrow \mathrm{normalize}(M_s^v \text{ with the rejected token set to } 0).

    Parameters
    ----------
    batch : VerifyInput

    Returns
    -------
    TraversalPlan

    Notes
    -----
    O(V) work per rejected child (one residual and one renormalisation), at most K L + 1
    nodes: O(K L V) per iteration, plus O(K L^2) to build the trie. Exact on Fractions.
    """
    exact, L = batch.exact, batch.L
    one = batch.one
    zero = one * 0
    trie = draft_trie(batch)
    tests: list[Scalar] = []
    nodes: list[tuple[int, ...]] = []
    laws: list[np.ndarray] = []

    def total(row: np.ndarray) -> Scalar:
        return sum(row.tolist(), zero)

    def visit(u: tuple[int, ...], w_u: Scalar) -> tuple[Scalar, np.ndarray]:
        """Traverse the subtree below u (w_u > 0); return u's final weight and residual."""
        k, t = trie.first[u], len(u)
        m_b = batch.target_probs[k, t]
        if t == L:
            return w_u, m_b
        m_s = batch.draft_probs[k, t].copy()
        for c in trie.children[u]:
            w_c = min(one, w_u * m_b[c] / m_s[c]) if w_u > 0 else zero
            if w_c > 0:
                child = u + (c,)
                w_child, law_child = visit(child, w_c)
                if w_child > 0:
                    tests.append(w_child)
                    nodes.append(child)
                    laws.append(law_child)
            # child c and its subtree were rejected: update u
            d = np.maximum(w_u * m_b - m_s, zero)
            r = total(d)
            den = r + one - w_u
            w_u = r / den if den > 0 else zero
            m_b = d / r if r > 0 else d
            m_s[c] = zero
            s = total(m_s)
            m_s = m_s / s if s > 0 else m_s
        return w_u, m_b

    _, root_law = visit((), one)
    # float64 only (as base.residual_or_fallback): an all-zero root residual sits on a branch
    # of probability ~1e-16; an exact all-zero residual is kept (sampling it then raises)
    fallback = not exact and not np.any(root_law > 0)
    if fallback:
        root_law = batch.target_probs[0, 0]
    return TraversalPlan(tests, nodes, laws, root_law, fallback)


class TraversalVerifier(Verifier):
    r"""Traversal verification (leaf-to-root, sequence-level) on the trie of the K drafts.

    **Mapping of K i.i.d. drafts to the paper's tree.** The tree is the trie of the distinct
    draft prefixes: a prefix drafted several times (and a draft drawn twice) is *one* node,
    carrying every draft through it. The children of a node u are ordered by first appearance
    in draft index order, and "the q of a node" is the draft model's own conditional
    :math:`M_s = q(.|u)` (not an empirical frequency of the drafts), from which the paper's
    sampling-without-replacement update removes each rejected child in turn. With i.i.d.
    drafts this is exactly the paper's model: given the children already rejected at u, the
    next *distinct* child, when one exists, is distributed as q(.|u) renormalised off the
    rejected ones; whether one exists depends only on how many drafts through u remain, and
    rejecting a subtree has probability :math:`1 - w_c` whatever its number of drafts. The
    rows of a node are those of the lowest-index draft through it.

    **Algorithm** (all tests given that every earlier test failed). Post-order DFS from the
    first leaf. Entering a child c of u: :math:`w_c = \min\{1, w_u M_b^u(c) / M_s^u(c)\}`
    with :math:`w_{root} = 1`, :math:`M_b^u = p(.|u)`, :math:`M_s^u = q(.|u)` at first (the
    block-verification weight along the path). A node is tested after all its children were
    rejected: accept the path root..u with probability :math:`w_u`, then
    :math:`Z \sim M_b^u` (:math:`p(.|x^L)` at a leaf). On rejection of c, at its parent u with
    :math:`d = \max\{w_u M_b^u - M_s^u, 0\}`, :math:`r = \sum_v d(v)`:
    :math:`w_u \leftarrow r/(r + 1 - w_u)` (0 when the denominator is 0),
    :math:`M_b^u \leftarrow d/r`, :math:`M_s^u(c) \leftarrow 0` and renormalise. The root is
    never tested: when every node is rejected, :math:`Z \sim M_b^{root}`.

    Lossless (exact enumeration: validity defect 0 on every random instance tested, K = 1..3,
    n = 2..4, L = 1..3, with zeros). K = 1 (a chain) is block verification exactly, law per
    draft included: the chain's tests are :math:`h_L, h_{L-1}, .., h_1` from the top, the
    first success wins, which is BV's :math:`\tau = \max\{i : \eta_i \le h_i\}`. L = 1 is
    recursive rejection sampling *without* replacement at the root. Order-dependent, so
    ``symmetric = False``.

    Not optimal for i.i.d. drafts: removing a rejected child from :math:`M_s` accounts for
    the chance that a later draft repeats it, so at L = 1 the second distinct token is
    accepted with mass :math:`\sum_{v \ne c}\min\{q(v), (1 - q(c)) R(v)\}` against
    RRS-with-replacement's :math:`\sum_v \min\{q(v), R(v)\}` (``rrs`` can be strictly better).
    A with-replacement reading (keep :math:`M_s = q(.|u)`; a draft repeating a rejected child
    counts as one more sure rejection, i.e. one more parent update) was checked lossless by
    the same enumeration and accepts at least as much on every instance tried; it is not
    shipped here.

    Complexity: O(V) per rejected node (one residual and one renormalisation), at most
    K L nodes: O(K L V) per iteration, plus O(K L^2) to build the trie; one
    ``first_success`` over at most K L tests.

    References
    ----------
    Weng, Hu, Chen, Liu, Mei, Qiu, Tian, Shi 2025, "Traversal Verification for Speculative
    Tree Decoding", NeurIPS 2025, arXiv 2505.12398 (Algorithm 1: post-order traversal,
    sequence acceptance weight, residual and weight update on rejection); block verification,
    Sun et al. 2024, arXiv 2403.10444 (the K = 1 case).
    """

    name = "traversal"
    lossless, structure, citation = class_facts(name)
    symmetric = False

    def prepare(self, batch: VerifyInput) -> TraversalPlan:
        """The test schedule (:func:`traversal_plan`)."""
        return traversal_plan(batch)

    def run(self, batch: VerifyInput, prep: TraversalPlan, chooser: Chooser) -> Emission:
        """First successful test in traversal order, or the root's residual."""
        i = chooser.first_success(prep.tests)
        if i is None:
            if prep.root_fallback:
                chooser.diagnostics.note_fallback(("traversal_root_residual",))
            return Emission((), prep.root_law)
        return Emission(prep.nodes[i], prep.laws[i])


__all__ = ["DraftTrie", "TraversalPlan", "TraversalVerifier", "draft_trie", "traversal_plan"]
