r"""The concave function G of a node's polymatroid, as the batched node rules read it.

A node of a verifier's draft trie has the polymatroid :math:`X \mapsto G(q(X))`, G concave
increasing on [0, 1] with G(0) = 0 and G(1) = 1. :class:`NodeLaw` is everything the node rules
of :mod:`spectr_gbv.gpu.kernels.coverage` read of G (its values, its complement, a priority
order's vertex entries), for N nodes at once in float64. Two implementations:

* :class:`CountLaw`: the node is reached by a random number M of i.i.d. drafts with law
  :math:`\pi(m)`, :math:`G(x) = \sum_m \pi(m) [1 - (1 - x)^m]` (a point mass c for
  ``optimal_multidraft``, a count law for ``near_opt_bv``'s walk); :func:`count_law` builds it
  from point masses or probabilities;
* :class:`~spectr_gbv.gpu.kernels.score_laws.ScoreLaws`: the score-law functions :math:`g_H` of
  ``near_opt_bv``'s score selection.

G and the vertices are evaluated term by term, :math:`\sum_m \pi(m) (\ldots)^m`, with
``expm1``/``log1p``, so small arguments keep their relative precision.

References
----------
:mod:`spectr_gbv.reference.coverage` (the exact rules and their functions G).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass(frozen=True)
class CountLaw:
    r"""Law of the number of drafts through each of N nodes, on its support.

    Attributes
    ----------
    exponents : Tensor, float64 [N, S]
        The counts m (>= 1) with positive probability; padding columns hold 1.
    weights : Tensor, float64 [N, S]
        :math:`\pi(m)` (rows sum to 1); padding columns hold 0.
    """

    exponents: torch.Tensor
    weights: torch.Tensor

    @staticmethod
    def point_mass(c: torch.Tensor) -> CountLaw:
        """Exactly ``c`` drafts (int [N], >= 1): one column, weight 1."""
        return CountLaw(
            c.to(torch.float64).unsqueeze(-1), torch.ones(c.shape[0], 1, dtype=torch.float64, device=c.device)
        )

    @staticmethod
    def from_probs(pi: torch.Tensor) -> CountLaw:
        """From ``pi`` float [N, M], ``pi[:, m - 1] = P(M = m)`` (rows summing to 1), compressed to the support."""
        pi = pi.to(torch.float64)
        N, M = pi.shape
        pos = pi > 0
        S = max(1, int(pos.sum(-1).max())) if N else 1
        cols = torch.sort((~pos).to(torch.int8), dim=-1, stable=True).indices[:, :S]
        keep = pos.gather(1, cols)
        m = (cols + 1).to(torch.float64)
        return CountLaw(torch.where(keep, m, 1.0), torch.where(keep, pi.gather(1, cols), 0.0))

    def __getitem__(self, rows: torch.Tensor) -> CountLaw:
        """The laws of the nodes ``rows`` (int64 or bool index)."""
        return CountLaw(self.exponents[rows], self.weights[rows])

    @property
    def multi(self) -> torch.Tensor:
        """bool [N]: some mass on m >= 2 (else G(x) = x, d = q)."""
        return ((self.exponents > 1) & (self.weights > 0)).any(-1)

    def terms(self, like: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """``(m, pi(m))`` per support column, shaped to broadcast against ``like`` [N, ...]."""
        shape = (-1,) + (1,) * (like.dim() - 1)
        for j in range(self.exponents.shape[1]):
            yield self.exponents[:, j].view(shape), self.weights[:, j].view(shape)

    def tail(self, s: torch.Tensor) -> torch.Tensor:
        r""":math:`1 - G(1 - s) = \sum_m \pi(m) s^m` (``s`` [N, ...] in [0, 1])."""
        out = torch.zeros_like(s)
        for j, (m, w) in enumerate(self.terms(s)):
            term = w * torch.pow(s, m)
            out = term if j == 0 else out + term
        return out

    def g(self, x: torch.Tensor) -> torch.Tensor:
        r"""Coverage :math:`G(x) = 1 - \sum_m \pi(m) (1 - x)^m` (``1 - x`` clamped to [0, 1]; [N, ...])."""
        return 1.0 - self.tail((1.0 - x).clamp(0.0, 1.0))

    def g_direct(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`G(x) = -\sum_m \pi(m) \operatorname{expm1}(m \log(1 - x))`, accurate for small x ([N, ...])."""
        lg = torch.log1p(-x.clamp(0.0, 1.0))
        fx = torch.zeros_like(x)
        for j, (m, w) in enumerate(self.terms(x)):
            term = w * -torch.expm1(m * lg)
            fx = term if j == 0 else fx + term
        return fx

    def vertex(self, qs: torch.Tensor, rest: torch.Tensor) -> torch.Tensor:
        r""":math:`G(1 - R + q) - G(1 - R) = \sum_m \pi(m) [R^m - (R - q)^m]` ([N, n]; R >= q the mass of y and after).

        :math:`R^m - (R - q)^m = -R^m \operatorname{expm1}(m \log(1 - q/R))`, so the tail of an
        order (tiny R, tiny q) keeps its relative precision.
        """
        frac = torch.where(rest > 0, qs / torch.where(rest > 0, rest, 1.0), 0.0).clamp(0.0, 1.0)
        lg = torch.log1p(-frac)
        vs = torch.zeros_like(qs)
        for j, (m, w) in enumerate(self.terms(qs)):
            term = w * (-torch.pow(rest, m) * torch.expm1(m * lg))
            vs = term if j == 0 else vs + term
        return torch.where(rest > 0, vs, 0.0)


class NodeLaw(Protocol):
    r"""What the node rules need of a node's concave function G (N nodes): :class:`CountLaw` or a score law.

    G is concave increasing on [0, 1] with G(0) = 0 and G(1) = 1; the polymatroid of a node is
    :math:`X \mapsto G(q(X))`. Every method maps float64 [N, ...] to the same shape.
    """

    def __getitem__(self, rows: torch.Tensor) -> NodeLaw:
        """The laws of the nodes ``rows`` (int64 or bool index)."""
        ...

    @property
    def multi(self) -> torch.Tensor:
        """bool [N]: G is not the identity (else d = q)."""
        ...

    def g(self, x: torch.Tensor) -> torch.Tensor:
        """G(x)."""
        ...

    def g_direct(self, x: torch.Tensor) -> torch.Tensor:
        """G(x), accurate relative to its value for x <= 1/2."""
        ...

    def tail(self, s: torch.Tensor) -> torch.Tensor:
        """1 - G(1 - s), accurate relative to its value."""
        ...

    def vertex(self, qs: torch.Tensor, rest: torch.Tensor) -> torch.Tensor:
        """G(1 - rest + qs) - G(1 - rest) (a priority order's vertex entry; [N, n])."""
        ...


def count_law(counts: torch.Tensor | NodeLaw) -> NodeLaw:
    """A :class:`CountLaw` from int [N] point masses or float [N, M] probabilities; a :class:`NodeLaw` as given."""
    if not isinstance(counts, torch.Tensor):
        return counts
    if counts.dim() == 1:
        return CountLaw.point_mass(counts)
    if counts.dim() == 2:
        return CountLaw.from_probs(counts)
    raise ValueError(f"counts must be int [N] or float [N, M], got shape {tuple(counts.shape)}")


__all__ = ["CountLaw", "NodeLaw", "count_law"]
