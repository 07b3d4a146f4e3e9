r"""Greedy block verification with a carried target-law correction (stateful, single draft).

Greedy BV (Sun et al. 2024, arXiv 2403.10444, appendix; the "GBV" of SpecTr-GBV) reaches the
prefix-maximal per-iteration value :math:`\sum_i\sum_{x^i}\min\{T(x^i), Q(x^i)\}` but is
lossless only when it carries a corrected target law into the next iteration (THEORY.md
sections 2-3). This module realises it as the stateful verifier of an explicit coupling of
the draft block X ~ q and a target block Y ~ T (T = the current target law: p at the start,
the carried law then p afterwards), built node by node on the prefix tree of V^L:

* at node u, the agreement mass ``m(u) = min{T(u), Q(u)}`` (both blocks still equal);
* the mass ``D(u) = m(u) - sum_v m(uv)`` that agrees through u but not beyond splits to
  children ``v`` with ``xdiv(v) = (Q(uv) - T(uv))^+ D/S_X`` on the draft side and
  ``ydiv(v) = (T(uv) - Q(uv))^+ D/S_Y`` on the target side (disjoint supports, so the
  blocks really differ there; the proportional split is this package's choice, any split
  with these supports gives the same per-iteration value);
* mass that has already diverged continues with the remainders
  ``Q(uv) - m(uv) - xdiv(v)`` and ``T(uv) - m(uv) - ydiv(v)``.

Given the draft x, the verifier samples the agreement depth tau, emits ``x^tau`` and the
target token ``Y_{tau+1}`` (from ydiv at ``x^tau``, or from ``T(.|x^L)`` when tau = L), and
carries the law of ``Y_{tau+2..L+1}`` (conditionals ``(T(zw) - m(zw) - ydiv_z(w)) /
(T(z) - m(z))`` down to depth L, then ``T(.|z)`` at the bonus position) as the target law of
the next iteration's first positions. The coupling has marginals q and T, so "emit, carry,
repeat" generates exactly p; only the multi-iteration block efficiency says whether carrying
state pays (:mod:`spectr_gbv.simulate.multi`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from spectr_gbv.core.numbers import Scalar, scalar_one
from spectr_gbv.core.tabular import Prefix, TabularAR


@dataclass(frozen=True)
class CarriedLaw:
    """Target law carried into the next iteration: conditionals for its first ``length`` tokens.

    Attributes
    ----------
    length : int
        Number of positions covered (1..L).
    rows : tuple of (prefix, row) pairs
        ``row`` (tuple of n probabilities) is the law of the next token after ``prefix``
        (relative to the start of the next iteration), for every prefix of length
        ``0..length-1``. Hashable, so multi-iteration dynamic programming can key on it.
    """

    length: int
    rows: tuple[tuple[Prefix, tuple[Scalar, ...]], ...]

    def as_dict(self) -> dict[Prefix, tuple[Scalar, ...]]:
        """``{prefix: row}``."""
        return dict(self.rows)


def _check(target: TabularAR, draft: TabularAR, L: int) -> None:
    if L < 1:
        raise ValueError(f"L (draft length) must be >= 1, got {L}")
    if target.n != draft.n:
        raise ValueError(f"vocabulary mismatch: target n={target.n}, draft n={draft.n}")
    if target.depth < L:
        raise ValueError(f"target law T needs depth >= L={L} (bonus position), has {target.depth}")
    if draft.depth < L - 1:
        raise ValueError(f"draft needs depth >= L-1={L - 1}, has {draft.depth}")


class GreedyCoupling:
    """The greedy coupling of draft blocks (law q) and target blocks (law T) on V^L.

    Parameters
    ----------
    target : TabularAR
        The current target law T, relative to the iteration start, depth >= L.
    draft : TabularAR
        The draft model q, relative to the iteration start, depth >= L - 1.
    L : int
        Draft length.

    Raises
    ------
    ValueError
        Vocabulary mismatch or tables too shallow.

    References
    ----------
    Sun et al. 2024, arXiv 2403.10444, appendix (greedy block verification); THEORY.md
    sections 2-3 (stateful validity, carried correction). The explicit node-by-node
    construction is this package's.
    """

    def __init__(self, target: TabularAR, draft: TabularAR, L: int) -> None:
        _check(target, draft, L)
        self.target, self.draft, self.L, self.n = target, draft, L, target.n
        self.exact = target.exact and draft.exact
        self._one = scalar_one(self.exact)

    def _t(self, u: Prefix) -> Scalar:
        return self.target.joint(len(u))[u] if u else self._one

    def _q(self, u: Prefix) -> Scalar:
        return self.draft.joint(len(u))[u] if u else self._one

    def m(self, u: Prefix) -> Scalar:
        """Agreement mass min{T(u), Q(u)} at node u (1 at the root)."""
        return min(self._t(u), self._q(u))

    def divergence(self, u: Prefix) -> tuple[np.ndarray, np.ndarray, Scalar]:
        """``(xdiv, ydiv, D)`` at node u (``|u| < L``): shape (n,) arrays and the total D."""
        zero = self._one * 0
        tu = [self._t(u + (v,)) for v in range(self.n)]
        qu = [self._q(u + (v,)) for v in range(self.n)]
        mu = [min(a, b) for a, b in zip(tu, qu, strict=True)]
        d = self.m(u) - sum(mu, zero)
        ex = [max(b - a, zero) for a, b in zip(tu, qu, strict=True)]
        ey = [max(a - b, zero) for a, b in zip(tu, qu, strict=True)]
        sx, sy = sum(ex, zero), sum(ey, zero)
        xdiv = np.array([e * d / sx if sx > 0 else zero for e in ex], dtype=object)
        ydiv = np.array([e * d / sy if sy > 0 else zero for e in ey], dtype=object)
        return xdiv, ydiv, d

    def depth_law(self, x: Sequence[int]) -> list[Scalar]:
        """``P(tau = d | X = x)`` for d = 0..L (sums to 1 when q(x) > 0).

        Raises
        ------
        ValueError
            If q(x) = 0 (x cannot be a draft) or x has the wrong length.
        """
        x = tuple(int(t) for t in x)
        if len(x) != self.L:
            raise ValueError(f"drafts: expected a block of L={self.L} tokens, got {len(x)}")
        qx = self._q(x)
        if qx <= 0:
            raise ValueError(f"drafts: block {x} has draft probability 0")
        zero = self._one * 0
        out = []
        for d in range(self.L + 1):
            if d == self.L:
                out.append(self.m(x) / qx)
                continue
            xdiv, _, _ = self.divergence(x[:d])
            w = xdiv[x[d]]
            for j in range(d + 1, self.L):
                u = x[:j]
                denom = self._q(u) - self.m(u)
                xd_j, _, _ = self.divergence(u)
                num = self._q(x[: j + 1]) - self.m(x[: j + 1]) - xd_j[x[j]]
                w = w * num / denom if denom > 0 else zero
            out.append(w / qx)
        return out

    def carried(self, z0: Prefix) -> CarriedLaw:
        """Law of the rest of the target block after the emitted prefix ``z0`` (diverged at its last token).

        Covers positions ``|z0|+1 .. L+1`` of this block, i.e. ``L + 1 - |z0|`` tokens.
        """
        length = self.L + 1 - len(z0)
        rows: list[tuple[Prefix, tuple[Scalar, ...]]] = []
        for t in range(length):
            for w in itertools.product(range(self.n), repeat=t):
                z = z0 + w
                base = tuple(self.target.cond(z))
                if len(z) >= self.L:
                    rows.append((w, base))
                    continue
                denom = self._t(z) - self.m(z)
                if denom <= 0:  # unreachable prefix: any law will do
                    rows.append((w, base))
                    continue
                _, ydiv, _ = self.divergence(z)
                row = tuple((self._t(z + (v,)) - self.m(z + (v,)) - ydiv[v]) / denom for v in range(self.n))
                rows.append((w, row))
        return CarriedLaw(length, tuple(rows))

    def outcome_law(self, x: Sequence[int]) -> dict[tuple[tuple[int, ...], CarriedLaw | None], Scalar]:
        """Exact law of (emitted tokens, carried law) given the draft block x.

        Returns
        -------
        dict mapping ``(emitted, carried)`` to its probability, where ``emitted`` is
        ``x^tau + (Y_{tau+1},)`` and ``carried`` is a :class:`CarriedLaw` (None when tau = L:
        nothing is carried past the bonus token).
        """
        x = tuple(int(t) for t in x)
        out: dict[tuple[tuple[int, ...], CarriedLaw | None], Scalar] = {}
        for d, pd in enumerate(self.depth_law(x)):
            if pd == 0:
                continue
            if d == self.L:
                for v, pv in enumerate(self.target.cond(x)):
                    if pv > 0:
                        key = (x + (v,), None)
                        out[key] = out.get(key, self._one * 0) + pd * pv
                continue
            _, ydiv, dmass = self.divergence(x[:d])
            for v in range(self.n):
                if ydiv[v] <= 0:
                    continue
                z0 = x[:d] + (v,)
                key = (z0, self.carried(z0))
                out[key] = out.get(key, self._one * 0) + pd * ydiv[v] / dmass
        return out


def target_with_carry(target: TabularAR, carried: CarriedLaw | None, depth: int) -> TabularAR:
    """The next iteration's target law T: the carried conditionals first, then ``target``'s.

    Parameters
    ----------
    target : TabularAR
        p seen from the next iteration's start (see :meth:`TabularAR.shifted`), depth >= ``depth``.
    carried : CarriedLaw or None
    depth : int
        Depth of the returned table (L for the next iteration).

    Returns
    -------
    TabularAR of the given depth.
    """
    if carried is None:
        return target if target.depth == depth else target.truncate(depth)
    rows = carried.as_dict()
    laws = {
        z: list(rows[z]) if len(z) < carried.length else list(target.cond(z))
        for t in range(depth + 1)
        for z in itertools.product(range(target.n), repeat=t)
    }
    return TabularAR(target.n, laws, depth=depth, name="target")


def sample_outcome(
    law: dict[tuple[tuple[int, ...], CarriedLaw | None], Scalar], rng: np.random.Generator
) -> tuple[tuple[int, ...], CarriedLaw | None]:
    """Draw one (emitted, carried) pair from an exact outcome law with ``rng``."""
    keys = list(law)
    probs = np.array([float(law[k]) for k in keys])
    return keys[int(rng.choice(len(keys), p=probs / probs.sum()))]


__all__ = ["CarriedLaw", "GreedyCoupling", "Fraction", "sample_outcome", "target_with_carry"]
