"""Candidates of the adversarial search: random restarts and local moves.

:class:`Candidate` (a scored battery instance), :func:`random_candidate` (Dirichlet rows at
several concentrations, some entries zeroed), and the local moves :func:`sharpen` (rows raised
to 1/T), :func:`disagree` (q moved toward disagreement with p) and :func:`tie` (p >= q on all
children but one, so their ratios tie at 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spectr_gbv.core.instance import Instance
from spectr_gbv.core.tabular import TabularAR
from spectr_gbv.validate.battery.instance import BatteryInstance


@dataclass
class Candidate:
    """A scored instance of the search."""

    bi: BatteryInstance
    score: float

    @property
    def size(self) -> tuple[int, int, int]:
        """(n, L, K)."""
        return (self.bi.instance.n, self.bi.instance.L, self.bi.K)


def _levels(model: TabularAR, depth: int) -> list[np.ndarray]:
    return [np.asarray(model.level(t), dtype=np.float64) for t in range(depth + 1)]


def _build(p: list[np.ndarray], q: list[np.ndarray], L: int, name: str) -> Instance:
    def norm(levels: list[np.ndarray]) -> list[np.ndarray]:
        out = []
        for lv in levels:
            lv = np.where(lv > 1e-12, lv, 0.0)
            out.append(lv / lv.sum(axis=-1, keepdims=True))
        return out

    return Instance(
        TabularAR.from_levels(norm(p), name="target"), TabularAR.from_levels(norm(q), name="draft"), L, name=name
    )


def random_candidate(n: int, L: int, rng: np.random.Generator) -> Instance:
    """A random float instance (Dirichlet rows, concentration 0.3, 1 or 3, some zeros)."""
    conc = float(rng.choice([0.3, 1.0, 3.0]))
    zero = float(rng.choice([0.0, 0.0, 0.3]))

    def level(t: int) -> np.ndarray:
        w = rng.dirichlet(np.full(n, conc), size=n**t)
        mask = rng.random(w.shape) < zero
        mask[mask.all(axis=1), 0] = False
        w = np.where(mask, 0.0, w) + 1e-12 * ~mask
        return (w / w.sum(axis=1, keepdims=True)).reshape((n,) * t + (n,))

    return _build([level(t) for t in range(L + 1)], [level(t) for t in range(L)], L, f"adversarial(n={n}, L={L})")


def sharpen(inst: Instance, temperature: float) -> Instance:
    """Both models' rows raised to ``1/temperature`` and renormalised."""
    L = inst.L
    p = [lv ** (1 / temperature) for lv in _levels(inst.target, L)]
    q = [lv ** (1 / temperature) for lv in _levels(inst.draft, L - 1)]
    return _build(p, q, L, f"{inst.name}, T={temperature:g}")


def disagree(inst: Instance, lam: float) -> Instance:
    """q tilted away from p: ``q' ~ q (q / max(p, 1e-3))^lam``."""
    L = inst.L
    p = _levels(inst.target, L)
    q = [lv * (lv / np.maximum(p[t], 1e-3)) ** lam for t, lv in enumerate(_levels(inst.draft, L - 1))]
    return _build(p, q, L, f"{inst.name}, tilt={lam:g}")


def tie(inst: Instance) -> Instance:
    """p rebuilt from q so that ratios tie: p = q with half the mass of q's worst token moved to the others.

    At every draft depth t < L, the token of smallest ``p/q`` (ties: lowest id) keeps half its
    q mass and the other half is spread over the other tokens in proportion to q, so all of
    them have the same ratio > 1 (clamped: a tie at 1); the first row of each depth t >= 1
    (prefix 0...0) gets p = q. The bonus depth L keeps p.
    """
    L = inst.L
    p = [lv.copy() for lv in _levels(inst.target, L)]
    q = _levels(inst.draft, L - 1)
    for t in range(L):
        rows_p, rows_q = p[t].reshape(-1, p[t].shape[-1]), q[t].reshape(-1, q[t].shape[-1])
        for i, (pr, qr) in enumerate(zip(rows_p, rows_q, strict=True)):
            if t > 0 and i == 0:
                pr[:] = qr
                continue
            ratio = np.where(qr > 0, pr / np.maximum(qr, 1e-300), np.inf)
            loser = int(np.argmin(ratio))
            moved, rest = qr[loser] / 2, 1.0 - qr[loser]
            if rest <= 0:
                pr[:] = qr
                continue
            pr[:] = qr * (1 + moved / rest)
            pr[loser] = qr[loser] - moved
    return _build(p, q, L, f"{inst.name}, tied")


__all__ = ["Candidate", "disagree", "random_candidate", "sharpen", "tie"]
