"""The shipped example verifier: textbook speculative sampling (spectr_gbv.examples.textbook_sd)."""

from __future__ import annotations

import numpy as np
import pytest

from spectr_gbv.core import random_instance
from spectr_gbv.examples.textbook_sd import verify


class ScriptedRng:
    """Returns the given uniforms from ``random()``; ``choice`` records its law and returns its argmax."""

    def __init__(self, *uniforms: float) -> None:
        self.uniforms = list(uniforms)
        self.laws: list[np.ndarray] = []

    def random(self) -> float:
        return self.uniforms.pop(0)

    def choice(self, n: int, p: np.ndarray) -> int:
        self.laws.append(np.asarray(p, dtype=np.float64))
        assert len(p) == n
        return int(np.argmax(p))


def inputs(q_rows, p_rows, drafts):
    """K = 1 arrays from rows: drafts [1, L], q [1, L, V], p [1, L+1, V]."""
    return np.array([drafts], dtype=np.int64), np.array([q_rows], dtype=float), np.array([p_rows], dtype=float)


Q = [0.5, 0.5]
P = [0.25, 0.75]
BONUS = [0.1, 0.9]


def test_accepts_strictly_below_p_over_q_then_draws_the_bonus_from_row_L():
    d, q, p = inputs([Q], [P, BONUS], [0])  # ratio p/q of token 0 = 1/2
    rng = ScriptedRng(np.nextafter(0.5, 0.0))
    assert verify(d, q, p, rng) == [0, 1]
    assert len(rng.laws) == 1 and np.array_equal(rng.laws[0], BONUS)


def test_a_coin_equal_to_p_over_q_rejects_and_draws_the_normalised_residual():
    d, q, p = inputs([Q], [P, BONUS], [0])
    rng = ScriptedRng(0.5)
    assert verify(d, q, p, rng) == [1]
    assert np.array_equal(rng.laws[0], [0.0, 1.0])  # max(p - q, 0) = (0, 1/4), normalised


def test_an_all_zero_residual_falls_back_to_p():
    q_row, p_row = [0.5, 0.5, 0.0], [0.5 - 1e-12, 0.5, 0.0]  # p <= q everywhere: residual all zero
    d, q, p = inputs([q_row], [p_row, [0.0, 0.0, 1.0]], [0])
    rng = ScriptedRng(1 - 2**-53)  # rejects: p/q = 1 - 2e-12
    assert verify(d, q, p, rng) == [1]
    np.testing.assert_allclose(rng.laws[0], np.array(p_row) / sum(p_row), rtol=0, atol=1e-15)


def test_reads_draft_zero_only():
    d, q, p = inputs([Q, Q], [P, P, BONUS], [0, 0])
    d2 = np.concatenate([d, [[1, 1]]])
    q2 = np.concatenate([q, np.full((1, 2, 2), np.nan)])  # garbage rows for draft 1
    p2 = np.concatenate([p, np.full((1, 3, 2), np.nan)])
    for u in (0.1, 0.7):
        assert verify(d2, q2, p2, ScriptedRng(u, u)) == verify(d, q, p, ScriptedRng(u, u))


def test_knows_nothing_about_placeholder_ids():
    # a -1 id is an ordinary index (the last token): the textbook rule accepts it when p/q says so
    d, q, p = inputs([Q, Q], [P, P, BONUS], [0, -1])
    assert verify(d, q, p, ScriptedRng(0.1, 0.1)) == [0, -1, 1]


def test_same_generator_seed_same_output():
    inst = random_instance(3, 3, 1)
    rng = np.random.default_rng(5)
    drafts = rng.integers(0, 3, size=(2, 3))
    q = rng.dirichlet(np.ones(3), size=(2, 3))
    p = rng.dirichlet(np.ones(3), size=(2, 4))
    outs = [verify(drafts, q, p, np.random.default_rng(s)) for s in range(20)]
    assert outs == [verify(drafts, q, p, np.random.default_rng(s)) for s in range(20)]
    assert all(1 <= len(o) <= 4 and all(0 <= t < inst.n for t in o) for o in outs)


@pytest.mark.parametrize("name", ["textbook", "released"])
def test_passes_the_statistical_harness_where_a_lossy_rule_fails(name):
    from spectr_gbv.reference import get_verifier
    from spectr_gbv.validate import validate

    fn = verify if name == "textbook" else get_verifier("spectr_gbv_released").sample  # defect 6/25 here
    rep = validate(fn, budget="quick", probes=False, search=False, instances=[(random_instance(2, 1, 0), 2)])
    assert rep.passed is (name == "textbook")
