"""Verifier-level checks: registry, choosers, kernels, equivalences, sampling == exact law."""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import numpy as np
import pytest

from spectr_gbv.core import default_instance, random_instance
from spectr_gbv.reference import (
    METHODS,
    STABLE_METHOD_NAMES,
    Verifier,
    get_verifier,
    iteration_inputs,
    register,
    registry,
)
from spectr_gbv.reference.choosers import Emission, enumerate_law
from spectr_gbv.reference.gbv_multipath import skewed_rows
from spectr_gbv.reference.kernels import RHO_EXACT_TOL, _kseq_gap, kseq_rho, power_increment
from spectr_gbv.reference.spectr_gbv_released import ReleasedSpecTrGBVVerifier
from tests.reference.ref_helpers import LOSSLESS, LOSSY, law_p_value

ALPHA = 1e-4  # significance level of every goodness-of-fit test below (seeded, so stable)


# ----------------------------------------------------------------------------- registry
def test_registry_lists_every_implemented_method_in_stable_order():
    expected = [m for m in STABLE_METHOD_NAMES if m in set(LOSSLESS) | set(LOSSY)]
    assert [m for m in METHODS if m in expected] == expected
    assert list(METHODS) == [m for m in STABLE_METHOD_NAMES if m in METHODS] + [
        m for m in METHODS if m not in STABLE_METHOD_NAMES
    ]


@pytest.mark.parametrize("name", LOSSLESS + LOSSY)
def test_class_attributes(name):
    v = get_verifier(name)
    assert v.name == name
    assert v.lossless is (name in LOSSLESS)
    assert isinstance(v.symmetric, bool) and v.citation
    assert "References" in type(v).__doc__
    if not v.lossless:
        assert "LOSSY" in v.citation and "NOT lossless" in type(v).__doc__


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match=r"unknown method 'nope'; valid: ar, sd, bv"):
        get_verifier("nope")


def test_register_adds_a_method(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "METHODS", registry.METHODS)

    class Dummy(Verifier):
        name = "dummy_test_method"
        lossless = True
        symmetric = True
        citation = "test"

        def run(self, batch, prep, chooser):
            return Emission((), batch.target_probs[0, 0])

    register(Dummy)
    assert registry.METHODS[-1] == "dummy_test_method"
    assert isinstance(get_verifier("dummy_test_method"), Dummy)
    with pytest.raises(ValueError, match="already registered"):

        class Other(Dummy):
            pass

        register(Other)
    with pytest.raises(ValueError, match="expected a Verifier subclass"):
        register(int)


def test_reserved_name_message(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry._REGISTRY.pop("lp_oracle", None)
    with pytest.raises(ValueError, match="'lp_oracle' is reserved but not registered"):
        get_verifier("lp_oracle")


# ----------------------------------------------------------------------------- choosers
def test_enumeration_matches_hand_computation():
    def run(ch):
        first = ch.first_success([F(1, 2), F(1, 3)])  # 0: 1/2, 1: 1/6, None: 1/3
        tau = ch.last_success([F(1, 2), F(1, 3)])  # 2: 1/3, 1: 1/3, 0: 1/3
        flip = ch.bernoulli(F(1, 4))
        return Emission((int(flip),), np.array([F(tau + 1), F(0 if first is None else 1)], dtype=object))

    law = enumerate_law(run, exact=True)
    assert sum(law.values()) == 1
    # Z = 1 needs first != None (2/3) and has weight 1 against tau + 1
    expected_z1 = F(2, 3) * (F(1, 3) * F(1, 2) + F(1, 3) * F(1, 3) + F(1, 3) * F(1, 4))
    assert law[(0, 1)] + law[(1, 1)] == expected_z1
    assert law[(1, 0)] + law[(1, 1)] == F(1, 4)


# ----------------------------------------------------------------------------- kernels
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [2, 3, 5])
def test_kseq_rho_is_the_smallest_feasible_up_to_tolerance(seed, k):
    inst = random_instance(3, 1, seed, exact=True, zero_prob=0.2 * (seed % 2))
    p, q = inst.target.cond(()), inst.draft.cond(())
    one = F(1)
    rho = kseq_rho(p, q, k, exact=True)
    assert 1 <= rho <= k
    assert _kseq_gap(tuple(p), tuple(q), k, rho, one) >= 0
    if rho > 1:
        assert _kseq_gap(tuple(p), tuple(q), k, rho - RHO_EXACT_TOL, one) < 0
    rho_f = kseq_rho(p.astype(float), q.astype(float), k, exact=False)
    assert abs(rho_f - float(rho)) < 1e-9


@pytest.mark.parametrize("k", [1, 2, 5, 17, 60])
def test_power_increment_has_full_relative_precision(k):
    rng = np.random.default_rng(k)
    for _ in range(30):
        a, z = rng.random() * 0.9, rng.random() ** 6 * 0.1  # z down to ~1e-7: cancellation
        exact = power_increment(F(a), F(z), k, exact=True)
        got = power_increment(a, z, k, exact=False)
        assert abs(got - float(exact)) <= 1e-12 * float(exact)


def test_skewed_root_row_on_section_7():
    d, q, p = iteration_inputs(default_instance(), [[1, 0], [0, 0]])
    from spectr_gbv.reference import validate_inputs

    batch = validate_inputs(d, q, p)
    rows = skewed_rows(batch, 0)
    # rank at the root: min{1, p/q} = 3/4 for token 0, 1 for token 1 -> token 1 ranks higher
    assert list(rows[0]) == [F(2, 3) ** 2, 1 - F(2, 3) ** 2]
    # child of token 1: A = q(0) = 2/3, x = 1/3; q(.|1) = (1/2, 1/2), p(.|1) = (1/3, 2/3)
    a, x = F(2, 3), F(1, 3)
    lo = (a + x / 2) ** 2 - a**2
    assert list(rows[1]) == [lo / ((a + x) ** 2 - a**2), 1 - lo / ((a + x) ** 2 - a**2)]


# ----------------------------------------------------------------------------- equivalences
def _laws(name, inst, drafts):
    return get_verifier(name).outcome_law(*iteration_inputs(inst, drafts))


@pytest.mark.parametrize("seed", range(4))
def test_k1_reductions_per_draft(seed):
    inst = random_instance(3, 3, seed, exact=True, zero_prob=0.2)
    rng = np.random.default_rng(seed)
    q_joint = inst.draft.joint(3)
    support = [tuple(map(int, x)) for x in np.argwhere(q_joint > 0)]
    for x in [support[i] for i in rng.choice(len(support), size=4)]:
        bv = _laws("bv", inst, [x])
        assert _laws("mdbv", inst, [x]) == bv
        assert _laws("gbv_multipath", inst, [x]) == bv
        assert _laws("independent_bv", inst, [x]) == bv
        assert _laws("spectr", inst, [x]) == _laws("sd", inst, [x])
        assert _laws("rrs", inst, [x]) == _laws("sd", inst, [x])


def test_l1_mdbv_equals_rrs_per_tuple():
    inst = random_instance(3, 1, 7, exact=True)
    for drafts in itertools.product(range(3), repeat=3):
        d = [[t] for t in drafts]
        if all(inst.draft.cond(())[t] > 0 for t in drafts):
            assert _laws("mdbv", inst, d) == _laws("rrs", inst, d)


@pytest.mark.parametrize("name", [m for m in LOSSLESS + LOSSY if get_verifier(m).symmetric])
def test_symmetric_verifiers_ignore_the_draft_order(name):
    inst = random_instance(3, 2, 3, exact=True)
    drafts = [[0, 1], [2, 2], [0, 0]]
    base = _laws(name, inst, drafts)
    for perm in itertools.permutations(drafts):
        assert _laws(name, inst, list(perm)) == base


def test_independent_bv_tie_goes_to_the_first_draft():
    # p = q: every draft is accepted whole, so both drafts tie at tau = L = 1
    inst = random_instance(2, 1, 0, exact=True)
    from spectr_gbv.core import Instance

    same = Instance(inst.target, inst.target, 1)
    law = _laws("independent_bv", same, [[1], [0]])
    assert {o[0] for o in law} == {1}


def test_released_rule_counts_clamped_weights():
    class Inflated(ReleasedSpecTrGBVVerifier):
        def prepare(self, batch):
            prep = super().prepare(batch)
            prep.h_raw[0][1] = F(3, 2)  # sub-block (draft 0, length 1) leaves [0, 1]
            return prep

    v = Inflated()
    args = iteration_inputs(default_instance(), [[0, 1], [1, 0]])
    law = v.outcome_law(*args)
    assert v.last_diagnostics["clamped"] == 1
    assert v.last_out_of_range == {("h", 0, 1): F(3, 2)}
    # clamped to 1: draft 0's first token is always accepted; only draft 1 accepted whole
    # (no seen check, no agreement check) can replace it
    assert all(o[:1] == (0,) or (o[:2] == (1, 0) and len(o) == 3) for o in law)
    v.sample(*args, rng=np.random.default_rng(0))
    assert v.last_diagnostics["clamped"] == 1
    plain = get_verifier("spectr_gbv_released")
    plain.outcome_law(*args)
    assert plain.last_diagnostics["clamped"] == 0
    assert plain.last_diagnostics["clamp_evaluations"] > 0


# ----------------------------------------------------------------------------- sampling
CASES = [
    (default_instance().to_float(), [[0, 1], [0, 0], [1, 1]]),
    (random_instance(3, 2, 11, exact=False, zero_prob=0.2), None),
]


@pytest.mark.parametrize("name", LOSSLESS + LOSSY)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_samples_follow_the_exact_law(name, case):
    inst, drafts = CASES[case]
    if drafts is None:  # three drafts sampled from the instance's q, fixed by the seed
        rng = np.random.default_rng(case)
        drafts = []
        for _ in range(3):
            x = []
            for _t in range(inst.L):
                x.append(int(rng.choice(inst.n, p=inst.draft.cond(x))))
            drafts.append(x)
    args = iteration_inputs(inst, drafts)
    v = get_verifier(name)
    law = v.outcome_law(*args)
    assert abs(sum(law.values()) - 1) < 1e-12
    rng = np.random.default_rng(1234)
    samples = [v.sample(*args, rng=rng) for _ in range(2500)]
    assert law_p_value(samples, law) > ALPHA


@pytest.mark.parametrize("name", ["mdbv", "spectr", "spectr_gbv_released"])
def test_exact_inputs_sample_the_exact_law(name):
    args = iteration_inputs(default_instance(), [[1, 1], [0, 1], [1, 0]])
    v = get_verifier(name)
    law = v.outcome_law(*args)
    assert sum(law.values()) == 1 and all(isinstance(x, F) for x in law.values())
    rng = np.random.default_rng(99)
    samples = [v.sample(*args, rng=rng) for _ in range(1200)]
    assert law_p_value(samples, law) > ALPHA


def test_float_law_matches_exact_law():
    inst = default_instance()
    drafts = [[0, 1], [0, 0], [1, 1]]
    for name in LOSSLESS + LOSSY:
        exact = _laws(name, inst, drafts)
        approx = _laws(name, inst.to_float(), drafts)
        assert set(approx) == set(exact)
        assert max(abs(approx[o] - float(exact[o])) for o in exact) < 1e-9


def test_float_kseq_rho_is_one_when_p_equals_q_up_to_rounding():
    # p and q differ by 1.3e-16 in total variation (two normalisations of the same weights);
    # without the rounding slack the bisection returned rho = 1.0058 at k = 8
    import numpy as np

    from spectr_gbv.reference import kernels

    w = np.array(
        [
            0.6369616873214543,
            0.2697867137638703,
            0.04097352393619469,
            0.016527635528529094,
            0.8132702392002724,
            0.9127555772777217,
            0.6066357757671799,
        ]
    )
    p, q = w / w.sum(), (3 * w) / (3 * w).sum()
    assert not np.array_equal(p, q)
    kernels.clear_caches()
    assert kernels.kseq_rho(p, q, 8, False) == 1.0
