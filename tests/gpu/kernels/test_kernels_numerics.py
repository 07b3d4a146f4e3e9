"""Deterministic quantities of the kernels against the reference layer's computation.

Acceptance weights (BV's w_i and h_i against the float64 reference and against exact
rationals; SD's min(1, p/q)), multi-path's selected path and skewed law, SpecTr's rho and the
released rule's raw weights are compared entry by entry (batches of different draft tuples in
one call); then long blocks: L = 64 with drafted tokens of probability ~1e-3 (joint
probabilities ~1e-192, zero in float32), where the kernels' weights must still match the
float64 reference and the emitted law must still pass the parity G-test (alpha = 1e-5,
N = 20,000, power >= 0.999 against a total-variation error of 0.05 asserted; convention
in tests/gpu/kernels/test_kernels_helpers.py). Also the categorical sampler's half-open bins and float64
CDF.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from spectr_gbv.core.instance import random_instance  # noqa: E402
from spectr_gbv.gpu.kernels import bv_weights, sd_acceptance_probs, validate_inputs  # noqa: E402
from spectr_gbv.gpu.kernels.common import sample_categorical  # noqa: E402
from spectr_gbv.gpu.kernels.gbv_multipath import select_path, skewed_rows  # noqa: E402
from spectr_gbv.gpu.kernels.kseq import kseq_rho  # noqa: E402
from spectr_gbv.gpu.kernels.released import released_weights  # noqa: E402
from spectr_gbv.reference import gbv_multipath as ref_multipath  # noqa: E402
from spectr_gbv.reference.base import validate_inputs as ref_validate  # noqa: E402
from spectr_gbv.reference.kernels import _kseq_gap, block_weights  # noqa: E402
from spectr_gbv.reference.kernels import kseq_rho as ref_kseq_rho  # noqa: E402
from spectr_gbv.reference.registry import get_verifier  # noqa: E402
from spectr_gbv.reference.spectr_gbv_released import released_weights as ref_released  # noqa: E402
from spectr_gbv.reference.spectr_gbv_released import released_whole_weight  # noqa: E402
from tests.gpu.kernels.test_kernels_helpers import (  # noqa: E402
    batch_tensors,
    emitted_counts,
    float_rows,
    g_test,
    run_kernel,
    sample_drafts,
)

FAST = settings(max_examples=15, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def float_cases(draw: st.DrawFn, max_K: int = 3) -> tuple:
    """A float64 instance and 6 draft tuples from its q (one batch of 6 different rows)."""
    n = draw(st.integers(2, 5))
    L = draw(st.integers(1, 4))
    inst = random_instance(
        n,
        L,
        draw(st.integers(0, 2**31 - 1)),
        exact=False,
        zero_prob=draw(st.sampled_from([0.0, 0.3])),
        concentration=draw(st.sampled_from([0.3, 1.0, 3.0])),
    )
    K = draw(st.integers(1, max_K))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    groups = [float_rows(inst, sample_drafts(inst, K, rng)) for _ in range(6)]
    return inst, groups


def as_batch(groups: list) -> tuple:
    drafts, q, p, _ = batch_tensors(groups, 1)
    return validate_inputs(drafts, q, p), groups


# ---------------------------------------------------------------------------- acceptance weights
@FAST
@given(case=float_cases())
def test_bv_weights_equal_the_reference_weights(case):
    _, groups = case
    inputs, _ = as_batch(groups)
    ours = bv_weights(inputs)
    for b, (d, q, p) in enumerate(groups):
        ref = block_weights(tuple(d[0]), p[0, : d.shape[1]], q[0], exact=False)
        np.testing.assert_allclose(ours.w[b].numpy(), ref.w[1:], rtol=0, atol=1e-12)
        np.testing.assert_allclose(ours.h[b].numpy(), ref.h, rtol=0, atol=1e-12)


@FAST
@given(
    n=st.integers(2, 4),
    L=st.integers(1, 4),
    seed=st.integers(0, 2**31 - 1),
    zero_prob=st.sampled_from([0.0, 0.3]),
)
def test_bv_weights_equal_the_exact_rational_weights(n, L, seed, zero_prob):
    """Exact instances: the float64 kernel's w_i, h_i are the Fraction values within 1e-12."""
    instance = random_instance(n, L, seed, exact=True, zero_prob=zero_prob)
    rng = np.random.default_rng(seed)
    groups = [float_rows(instance, sample_drafts(instance, 1, rng)) for _ in range(6)]
    inputs, _ = as_batch(groups)
    ours = bv_weights(inputs)
    for b, (d, q, p) in enumerate(groups):
        exact = block_weights(tuple(d[0]), p[0, :L], q[0], exact=True)
        assert all(isinstance(v, Fraction) for v in exact.h)
        np.testing.assert_allclose(ours.w[b].numpy(), np.array(exact.w[1:], dtype=float), rtol=0, atol=1e-12)
        np.testing.assert_allclose(ours.h[b].numpy(), np.array(exact.h, dtype=float), rtol=0, atol=1e-12)


@FAST
@given(case=float_cases())
def test_sd_acceptance_is_min_one_p_over_q(case):
    _, groups = case
    inputs, _ = as_batch(groups)
    ours = sd_acceptance_probs(inputs).numpy()
    for b, (d, q, p) in enumerate(groups):
        L = d.shape[1]
        x = d[0]
        expected = np.minimum(1.0, p[0, np.arange(L), x] / q[0, np.arange(L), x])
        np.testing.assert_allclose(ours[b], expected, rtol=0, atol=1e-15)


@FAST
@given(case=float_cases())
def test_multipath_selected_path_and_skewed_law_equal_the_reference(case):
    _, groups = case
    inputs, _ = as_batch(groups)
    K, L = inputs.K, inputs.L
    k_sel = select_path(inputs)
    b = torch.arange(inputs.B)
    rows = skewed_rows(inputs.drafts[b, k_sel], inputs.target_probs[b, k_sel, :L], inputs.draft_probs[b, k_sel], K)
    for i, g in enumerate(groups):
        batch = ref_validate(*g)
        k_ref = ref_multipath.select_path(batch)
        assert int(k_sel[i]) == k_ref
        ref_rows = ref_multipath.skewed_rows(batch, k_ref)
        np.testing.assert_allclose(rows[i].numpy(), np.stack(ref_rows), rtol=1e-10, atol=1e-13)


def _random_rows(rng: np.random.Generator, N: int, V: int, conc: float, zero: float) -> tuple:
    P = rng.dirichlet(np.full(V, conc), N)
    Q = rng.dirichlet(np.full(V, conc), N)
    P[rng.random((N, V)) < zero] = 0
    Q[rng.random((N, V)) < zero] = 0
    P[:, 0] += 1e-3  # every row keeps some mass
    Q[:, 1] += 1e-3
    return P / P.sum(1, keepdims=True), Q / Q.sum(1, keepdims=True)


@pytest.mark.parametrize(("conc", "zero"), [(1.0, 0.0), (0.5, 0.2), (3.0, 0.0)])
def test_kseq_rho_equals_the_reference_rho(conc, zero):
    rng = np.random.default_rng(17)
    P, Q = _random_rows(rng, 400, 7, conc, zero)
    k = rng.integers(1, 9, len(P))
    ours = kseq_rho(torch.tensor(P), torch.tensor(Q), torch.tensor(k)).numpy()
    for i in range(len(P)):
        ref = ref_kseq_rho(P[i], Q[i], int(k[i]), False)
        assert 1.0 <= ours[i] <= k[i]
        assert _kseq_gap(tuple(P[i]), tuple(Q[i]), int(k[i]), float(ours[i]), 1.0) >= -1e-11
        assert abs(ours[i] - ref) <= 1e-9 * ref, (i, ours[i], ref, k[i])


def test_kseq_rho_exact_ties_and_rounding_flat_cases():
    """p = q gives rho = 1 for any k (also from float32 rows whose sums are off by 1e-7)."""
    rng = np.random.default_rng(3)
    P, _ = _random_rows(rng, 50, 11, 1.0, 0.2)
    for dtype in (torch.float64, torch.float32):
        p = torch.tensor(P, dtype=dtype)
        rho = kseq_rho(p, p.clone(), torch.full((50,), 8))
        assert torch.all(rho == 1.0)
    # exact rational root (K-SEQ on the public test vector's root, k = 2)
    p = np.array([Fraction(1, 2), Fraction(1, 2)], dtype=object)
    q = np.array([Fraction(2, 3), Fraction(1, 3)], dtype=object)
    exact = float(ref_kseq_rho(p, q, 2, True))
    ours = float(kseq_rho(torch.tensor([[0.5, 0.5]]), torch.tensor([[2 / 3, 1 / 3]]), torch.tensor([2]))[0])
    assert abs(ours - exact) <= 1e-11


@FAST
@given(case=float_cases())
def test_released_raw_weights_equal_the_reference(case):
    _, groups = case
    inputs, _ = as_batch(groups)
    K, L = inputs.K, inputs.L
    h, log_P, log_Q = released_weights(inputs)
    for b, (d, q, p) in enumerate(groups):
        for j in range(K):
            P, Q = 1.0, 1.0
            for i in range(1, L + 1):
                P *= p[j, i - 1, d[j, i - 1]]
                Q *= q[j, i - 1, d[j, i - 1]]
                ref = (
                    released_whole_weight(P, Q, K, False) if i == L else ref_released(P, Q, p[j, i], q[j, i], K, False)
                )
                ours = float(h[b, j, i])
                if np.isfinite(ref) and abs(ref) < 1e6:
                    assert abs(np.clip(ours, 0, 1) - np.clip(ref, 0, 1)) <= 1e-9, (b, j, i, ours, ref)
                assert abs(np.exp(float(log_P[b, j, i])) - P) <= 1e-12 * max(P, 1e-300)


# ---------------------------------------------------------------------------- sampling
def test_categorical_bins_are_half_open_and_never_out_of_range():
    w = torch.tensor([[0.0, 0.25, 0.0, 0.75]] * 4, dtype=torch.float64)
    u = torch.tensor([0.0, 0.25, 1.0 - 2.0**-53, 0.2499999], dtype=torch.float64)
    assert sample_categorical(w, u).tolist() == [1, 3, 3, 1]  # coin 0 never picks a zero-mass token
    tail = torch.zeros(2, 8193, dtype=torch.float32)
    tail[:, :3] = torch.tensor([0.2, 0.3, 0.5])  # zero mass in the whole tail (vLLM B6)
    got = sample_categorical(tail, torch.tensor([1.0 - 2.0**-53, 0.9999999], dtype=torch.float64))
    assert got.tolist() == [2, 2]


def test_categorical_keeps_the_mass_of_many_tiny_float32_entries():
    """One token of mass 0.99 then 2^20 tokens of ~9.5e-9 (below half an ulp of 0.99 in float32):
    a float32 running sum would absorb them all; the float64 CDF puts u in (0.99, 1) among them."""
    n_tiny = 2**20
    w = torch.full((1, n_tiny + 1), 0.01 / n_tiny, dtype=torch.float32)
    w[0, 0] = 0.99
    u = torch.linspace(0.991, 0.999, 9, dtype=torch.float64)
    got = sample_categorical(w.expand(9, -1), u)
    expected = torch.round((u - 0.99) / 0.01 * n_tiny)
    assert torch.all((got - expected).abs() <= 2), (got, expected)


# ---------------------------------------------------------------------------- long blocks
def long_block_rows(L: int, V: int, K: int, seed: int) -> tuple:
    """K drafts of length L whose drafted tokens have probability ~1e-3 under p and q.

    Drafts differ from the first token on (so only the root rows are shared). p(x_t)/q(x_t) is
    in [0.9, 1], so w_i decays to ~0.04 over 64 steps (tau spreads over long prefixes), while
    the joint probabilities p(x^L), q(x^L) are ~1e-192 (0 in float32).
    """
    rng = np.random.default_rng(seed)
    drafts = rng.integers(1, V, size=(K, L))
    drafts[:, 0] = np.arange(1, K + 1)
    q = rng.dirichlet(np.ones(V), size=(K, L))
    p = rng.dirichlet(np.ones(V), size=(K, L + 1))
    for k in range(K):
        for t in range(L):
            x = drafts[k, t]
            q_mass, p_mass = 1e-3, 1e-3 * rng.uniform(0.9, 1.0)
            q[k, t] *= (1 - q_mass) / (q[k, t].sum() - q[k, t, x])
            q[k, t, x] = q_mass
            p[k, t] *= (1 - p_mass) / (p[k, t].sum() - p[k, t, x])
            p[k, t, x] = p_mass
    q[1:, 0], p[1:, 0] = q[0, 0], p[0, 0]
    q /= q.sum(-1, keepdims=True)
    p /= p.sum(-1, keepdims=True)
    return drafts.astype(np.int64), q, p


def test_long_block_weights_do_not_underflow():
    d, q, p = long_block_rows(64, 8, 1, 0)
    assert np.prod(p[0, np.arange(64), d[0]].astype(np.float32)) == 0  # the joint underflows in float32
    ref = block_weights(tuple(d[0]), p[0, :64], q[0], exact=False)
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 2e-5)):
        drafts, qt, pt, _ = batch_tensors([(d, q, p)], 1, dtype=dtype)
        ours = bv_weights(validate_inputs(drafts, qt, pt))
        assert torch.all(ours.w > 0) and torch.all(torch.isfinite(ours.h))
        np.testing.assert_allclose(ours.w[0].numpy(), ref.w[1:], rtol=tol, atol=0)
        np.testing.assert_allclose(ours.h[0].numpy(), ref.h, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    ("method", "K", "dtype"),
    [
        ("sd", 1, torch.float64),
        ("bv", 1, torch.float64),
        ("bv", 1, torch.float32),
        ("mdbv", 2, torch.float64),
        ("gbv_multipath", 2, torch.float64),
    ],
)
def test_long_block_parity(method, K, dtype):
    """L = 64: the emitted law still matches the reference (released: exponential to enumerate)."""
    d, q, p = long_block_rows(64, 8, K, 1)
    law = get_verifier(method).outcome_law(d, q, p)
    drafts, qt, pt, group = batch_tensors([(d, q, p)], 20_000, dtype=dtype)
    out = run_kernel(method, drafts, qt, pt, 9)
    assert int(out.num_accepted.max()) > 3  # the block is not cut at the first tokens
    result = g_test(law, emitted_counts(out, group, 1)[0])
    assert result.passed, f"{method} {dtype}: {result.describe()}"
    assert result.power(0.05) >= 0.999, result.describe()


def test_long_block_released_weights_in_log_space():
    """L = 64, K = 2: float32 and float64 kernels give the float64 reference's weights."""
    d, q, p = long_block_rows(64, 8, 2, 2)
    K, L = 2, 64
    for dtype in (torch.float64, torch.float32):
        drafts, qt, pt, _ = batch_tensors([(d, q, p)], 1, dtype=dtype)
        inputs = validate_inputs(drafts, qt, pt)
        h, _, _ = released_weights(inputs)
        assert torch.all(torch.isfinite(h))
        qf, pf = qt[0].double().numpy(), pt[0].double().numpy()
        for j in range(K):
            P = Q = 1.0
            for i in range(1, L + 1):
                P *= pf[j, i - 1, d[j, i - 1]]
                Q *= qf[j, i - 1, d[j, i - 1]]
                if i == L:
                    ref = released_whole_weight(P, Q, K, False)
                else:
                    ref = ref_released(P, Q, pf[j, i], qf[j, i], K, False)
                assert abs(np.clip(float(h[0, j, i]), 0, 1) - np.clip(ref, 0, 1)) <= 1e-9, (dtype, j, i)
        out = run_kernel(
            "spectr_gbv_released",
            drafts.expand(4000, -1, -1),
            qt.expand(4000, -1, -1, -1),
            pt.expand(4000, -1, -1, -1),
            0,
        )
        assert int(out.tokens.max()) < 8 and int(out.num_accepted.max()) > 3
