r"""``accepted_law`` / ``expected_accepted``: the law of tau given the drafts in closed form.

For every method of :data:`EXPECTED_METHODS`, hypothesis draws small exact instances (n 2..4,
L 1..3, zeros included), K in 1..3 and a draft tuple from q; the kernel-side law (float64)
must equal :math:`P(\tau = i) = \sum_{|o| = i + 1} P(o)` of the reference verifier's exact
conditional outcome law (Fractions), entry by entry, within 1e-9 (``near_opt_bv``'s float node rules agree with the
reference's rationals to ~1e-12). Several draft tuples share one batch, so a row-mixing bug
shows. A Monte Carlo check ties the value to the sampling kernel's own mean on a float32
batch, and the errors name their argument.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from spectr_gbv.core.instance import default_instance, random_instance  # noqa: E402
from spectr_gbv.gpu.kernels import verify  # noqa: E402
from spectr_gbv.gpu.kernels.expected import EXPECTED_METHODS, accepted_law, expected_accepted  # noqa: E402
from spectr_gbv.reference.registry import get_verifier  # noqa: E402
from tests.gpu.kernels.test_kernels_helpers import float_rows, sample_drafts  # noqa: E402

TOL = 1e-9


def exact_tau_law(method: str, instance: object, drafts: tuple) -> list[Fraction]:
    """P(tau = i | drafts), i = 0..L, of the reference verifier, from its exact outcome law."""
    out = [Fraction(0)] * (instance.L + 1)
    for o, pr in get_verifier(method).outcome_law(*float_rows(instance, drafts)).items():
        out[len(o) - 1] += pr
    return out


def exact_expected(method: str, instance: object, drafts: tuple) -> Fraction:
    """E[tau | drafts] of the reference verifier."""
    return sum((i * pr for i, pr in enumerate(exact_tau_law(method, instance, drafts))), Fraction(0))


def batch(instance: object, tuples: list) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The draft tuples' rows stacked as one float64 batch."""
    rows = [float_rows(instance, d) for d in tuples]
    d = torch.tensor(np.stack([r[0] for r in rows]))
    q = torch.tensor(np.stack([r[1] for r in rows]).astype(np.float64))
    p = torch.tensor(np.stack([r[2] for r in rows]).astype(np.float64))
    return d, q, p


@st.composite
def cases(draw: st.DrawFn) -> tuple:
    """(instance, three draft tuples of K drafts)."""
    n = draw(st.integers(2, 4))
    L = draw(st.integers(1, 3).filter(lambda x: n**x <= 64))
    zero_prob = draw(st.sampled_from([0.0, 0.3]))
    instance = random_instance(n, L, draw(st.integers(0, 2**31 - 1)), exact=True, zero_prob=zero_prob)
    K = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    return instance, [sample_drafts(instance, K, rng) for _ in range(3)]


@pytest.mark.parametrize("method", EXPECTED_METHODS)
@settings(max_examples=15, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_equals_reference_outcome_law(method: str, case: tuple) -> None:
    instance, tuples = case
    inputs = batch(instance, tuples)
    law, mean = accepted_law(method, *inputs), expected_accepted(method, *inputs)
    assert law.dtype == mean.dtype == torch.float64
    assert law.shape == (len(tuples), instance.L + 1) and mean.shape == (len(tuples),)
    for i, drafts in enumerate(tuples):
        want = exact_tau_law(method, instance, drafts)
        assert max(abs(float(g) - float(w)) for g, w in zip(law[i], want, strict=True)) <= TOL, (method, drafts)
        assert abs(float(mean[i]) - float(sum(j * w for j, w in enumerate(want)))) <= TOL


def test_mdbv_branches_on_the_default_instance() -> None:
    """MDBV's three drafts continue each other: the enumeration of its states, exactly pinned."""
    inst = default_instance()
    tuples = [((0, 1), (0, 1), (0, 0)), ((1, 1), (0, 0), (1, 0)), ((0, 0), (1, 0), (0, 1))]
    got = expected_accepted("mdbv", *batch(inst, tuples))
    for i, drafts in enumerate(tuples):
        want = exact_expected("mdbv", inst, drafts)
        assert want > 0
        assert abs(float(got[i]) - float(want)) <= TOL


@pytest.mark.parametrize("method", EXPECTED_METHODS)
def test_matches_the_sampling_kernels_mean(method: str) -> None:
    """On float32 inputs the value is the kernel's mean accepted length (z within 5 s.e.)."""
    inst = random_instance(3, 3, 11, exact=True, zero_prob=0.2)
    drafts = sample_drafts(inst, 3, np.random.default_rng(5))
    d, q, p = batch(inst, [drafts])
    q, p = q.float(), p.float()
    want = float(expected_accepted(method, d, q, p)[0])
    rows = 40_000
    out = verify(
        method,
        *(x.expand(rows, *x.shape[1:]).contiguous() for x in (d, q, p)),
        generator=torch.Generator().manual_seed(3),
    )
    tau = out.num_accepted.double()
    se = float(tau.std()) / rows**0.5
    assert abs(float(tau.mean()) - want) <= 5 * se + 1e-12, (method, float(tau.mean()), want, se)


def test_errors_name_the_argument() -> None:
    d, q, p = batch(default_instance(), [((0, 1), (1, 1))])
    with pytest.raises(ValueError, match="method must be one of"):
        expected_accepted("traversal", d, q, p)
    with pytest.raises(ValueError, match="method must be one of"):
        expected_accepted(3, d, q, p)  # type: ignore[arg-type]
    bad = q.clone()
    bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="draft_probs"):
        expected_accepted("mdbv", d, bad, p)
    with pytest.raises(ValueError, match="drafts"):
        expected_accepted("sd", d.float(), q, p)
