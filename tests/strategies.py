"""Hypothesis strategies shared by the test suite: small random instances."""

from __future__ import annotations

from hypothesis import strategies as st

from spectr_gbv.core.instance import Instance, random_instance


@st.composite
def instances(
    draw: st.DrawFn,
    n: tuple[int, int] = (2, 3),
    L: tuple[int, int] = (1, 3),
    exact: bool = True,
    max_cells: int = 27,
) -> Instance:
    """A random instance with n, L in the given ranges (n**L <= max_cells), zeros included."""
    n_ = draw(st.integers(*n))
    L_ = draw(st.integers(*L).filter(lambda x: n_**x <= max_cells))
    seed = draw(st.integers(0, 2**31 - 1))
    zero_prob = draw(st.sampled_from([0.0, 0.2, 0.4]))
    return random_instance(n_, L_, seed, exact=exact, zero_prob=zero_prob)
