"""The reference check: honest wording, ``NAME:VARIANT`` references, a raise on one instance."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from spectr_gbv.core import Instance, TabularAR, random_instance
from spectr_gbv.reference import get_verifier
from spectr_gbv.reference.variants import VARIANT_CLASSES, LowIdTiesMultiPathVerifier, RandomOrderVerifier
from spectr_gbv.simulate.exact import DraftTable, simulate_exact
from spectr_gbv.validate import validate
from spectr_gbv.validate.battery.instance import BatteryInstance
from spectr_gbv.validate.battery.tables import Tables
from spectr_gbv.validate.checks.reference import check_reference, reference_checks
from spectr_gbv.validate.interfaces.outputs import Emitted
from spectr_gbv.validate.isolation.failures import VerifierRaised, VerifierTimedOut
from spectr_gbv.validate.reference_variants import VARIANTS, parse_reference, reference_verifier, variants
from spectr_gbv.validate.report.results import DIAGNOSES

RRS = get_verifier("rrs")
#: rrs and rrs:random_order differ by TV >= 0.35 on the drafts the check picks (n = 3, L = 1).
ORDER_SENSITIVE = random_instance(3, 1, 10)
#: spectr_gbv_released and mdbv differ by TV >= 0.6 on the picked drafts (n = 2, L = 2).
RELEASED_SENSITIVE = random_instance(2, 2, 5)
QUICK: dict[str, Any] = {"budget": "quick", "probes": False, "search": False}


def specinfer_rrs(drafts: np.ndarray, q: np.ndarray, p: np.ndarray, rng: np.random.Generator) -> list[int]:
    """SpecInfer-style RRS: a uniformly random order of the drafts (children), then rrs. Exactly lossless."""
    perm = rng.permutation(drafts.shape[0])
    return list(RRS.sample(drafts[perm], q[perm], p[perm], rng))


def _tv(a: dict[Any, Any], b: dict[Any, Any]) -> float:
    return sum(abs(float(a.get(k, 0)) - float(b.get(k, 0))) for k in set(a) | set(b)) / 2


def _conditional_tv(check: Any, inst: Instance, a: str, b: str) -> float:
    d = np.array(check.instance["drafts"], dtype=np.int64)
    q, p = Tables(inst.to_float()).rows(d)
    return _tv(reference_verifier(a).outcome_law(d, q, p), reference_verifier(b).outcome_law(d, q, p))


# ---------------------------------------------------------------------------- names
def test_parse_reference_and_variants() -> None:
    assert parse_reference("rrs") == ("rrs", "draft_order")
    assert parse_reference("rrs:draft_order") == ("rrs", "draft_order")
    assert parse_reference("rrs:random_order") == ("rrs", "random_order")
    assert parse_reference("gbv_multipath:tie_low_id") == ("gbv_multipath", "tie_low_id")
    assert parse_reference("ar") == ("ar", None) and variants("ar") == {}
    assert list(variants("rrs")) == ["draft_order", "random_order"]
    assert check_reference("rrs:random_order") == "rrs:random_order" and check_reference(None) is None
    assert type(reference_verifier("rrs")) is type(RRS) and type(reference_verifier("rrs:draft_order")) is type(RRS)
    assert reference_verifier("rrs:random_order").name == "rrs:random_order"


@pytest.mark.parametrize(
    "spec, message",
    [
        ("nope", r"unknown method 'nope'; valid: .*rrs.*; variants: .*rrs:random_order"),
        ("rrs:bogus", r"unknown variant 'bogus' of 'rrs' \(its variants: rrs:draft_order, rrs:random_order\)"),
        ("ar:x", r"unknown variant 'x' of 'ar' \('ar' has no variants\)"),
    ],
)
def test_bad_reference_names_list_the_valid_ones(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_reference(spec)
    with pytest.raises(ValueError, match=message):
        validate(specinfer_rrs, reference=spec, instances=[(ORDER_SENSITIVE, 2)], **QUICK)


def test_every_documented_variant_has_a_verifier_and_no_registry_name() -> None:
    from spectr_gbv.reference.registry import STABLE_METHOD_NAMES, available_methods

    documented = {f"{n}:{v}" for n, vs in VARIANTS.items() for v in list(vs)[1:]}
    assert documented == set(VARIANT_CLASSES)
    assert not set(VARIANT_CLASSES) & (set(STABLE_METHOD_NAMES) | set(available_methods()))
    for name, cls in VARIANT_CLASSES.items():
        base = get_verifier(name.split(":")[0])
        assert cls().lossless is base.lossless is True and cls().symmetric is True
        assert cls.__doc__ and cls.citation
    assert "differs_from_reference" in DIAGNOSES


# ---------------------------------------------------------------------------- exact proofs
LOSSLESS_CASES = [(3, 2, 2, 0), (3, 2, 2, 1), (2, 2, 3, 2), (3, 1, 3, 3), (4, 1, 2, 4)]


@pytest.mark.parametrize("spec", sorted(VARIANT_CLASSES))
def test_variants_are_exactly_lossless(spec: str) -> None:
    """Validity defect exactly 0 (Fractions) on random exact instances: the variant is lossless."""
    for n, L, K, seed in LOSSLESS_CASES:
        res = simulate_exact(random_instance(n, L, seed), reference_verifier(spec), K)
        assert res.exact and res.validity_defect == 0, (spec, n, L, K, seed, res.validity_defect)
        assert sum(res.output_law.values()) == 1 and all(isinstance(v, Fraction) for v in res.output_law.values())


@pytest.mark.parametrize("spec", sorted(s for s, c in VARIANT_CLASSES.items() if issubclass(c, RandomOrderVerifier)))
def test_random_order_is_the_average_over_the_permutations(spec: str) -> None:
    """P_var(o | X) = (1/K!) sum_sigma P_base(o | X_sigma), exactly, on every ordered tuple."""
    inst, K = random_instance(3, 2, 1), 3
    table = DraftTable.from_instance(inst)
    base, var = reference_verifier(spec.split(":")[0]), reference_verifier(spec)
    differs = 0
    for row in itertools.islice(itertools.product(range(len(table.tokens)), repeat=K), 0, None, 7):
        idx = list(row)
        d, q, p = table.tokens[idx], table.draft_rows[idx], table.target_rows[idx]
        avg: dict[tuple[int, ...], Fraction] = {}
        for perm in itertools.permutations(range(K)):
            for o, v in base.outcome_law(d[list(perm)], q[list(perm)], p[list(perm)]).items():
                avg[o] = avg.get(o, Fraction(0)) + v / math.factorial(K)
        law = var.outcome_law(d, q, p)
        assert law == {o: v for o, v in avg.items() if v}
        differs += law != base.outcome_law(d, q, p)
    assert differs > 0  # a genuine variant: some tuples have another conditional law


def test_tie_low_id_breaks_equal_ratios_towards_the_smaller_token() -> None:
    # p = q: every ratio is 1, so the ranks are the tie-break alone; drafts (0,) and (1,)
    row = ["1/2", "1/2"]
    inst = Instance(TabularAR.context_free(row, depth=1), TabularAR.context_free(row, depth=0), 1)
    table = DraftTable.from_instance(inst)
    d, q, p = table.tokens, table.draft_rows, table.target_rows
    assert d.tolist() == [[0], [1]]
    high = get_verifier("gbv_multipath").outcome_law(d, q, p)
    low = LowIdTiesMultiPathVerifier().outcome_law(d, q, p)
    assert {o[0] for o in high if len(o) == 2} == {1} and {o[0] for o in low if len(o) == 2} == {0}
    assert high == {(1, 0): Fraction(1, 3), (1, 1): Fraction(1, 3), (0,): Fraction(1, 3)}
    assert low == {(0, 0): Fraction(1, 3), (0, 1): Fraction(1, 3), (1,): Fraction(1, 3)}


# ---------------------------------------------------------------------------- honest wording
def test_random_order_rrs_differs_from_rrs_but_is_not_called_lossy() -> None:
    rep = validate(specinfer_rrs, reference="rrs", instances=[(ORDER_SENSITIVE, 2)], **QUICK)
    law = [c for c in rep.checks if c.category == "statistical" and "law" in c.name]
    assert law and all(c.passed for c in law), rep.to_text()
    ref = [c for c in rep.checks if c.category == "reference"]
    assert len(ref) == 1 and ref[0].passed is False and ref[0].diagnosis == "differs_from_reference"
    assert _conditional_tv(ref[0], ORDER_SENSITIVE, "rrs", "rrs:random_order") > 0.3
    assert ref[0].detail.startswith("Differs from rrs's conditional law: ")
    assert "not by itself a loss of losslessness" in ref[0].detail and "rrs:random_order" in ref[0].detail
    assert not {"not_lossless", "wrong_residual", "reuses_uniform"} & {c.diagnosis for c in rep.checks}


def test_random_order_rrs_passes_against_rrs_random_order() -> None:
    rep = validate(specinfer_rrs, reference="rrs:random_order", instances=[(ORDER_SENSITIVE, 2)], **QUICK)
    assert rep.passed, rep.to_text()
    ref = [c for c in rep.checks if c.category == "reference"]
    assert len(ref) == 1 and ref[0].passed is True and ref[0].diagnosis == "ok"
    assert "rrs:random_order's exact law" in ref[0].detail and rep.reference == "rrs:random_order"


def test_a_lossy_reference_is_said_to_be_lossy() -> None:
    mdbv = get_verifier("mdbv")
    rep = validate(mdbv.sample, reference="spectr_gbv_released", instances=[(RELEASED_SENSITIVE, 2)], **QUICK)
    law = [c for c in rep.checks if c.category == "statistical" and "law" in c.name]
    assert law and all(c.passed for c in law), rep.to_text()
    ref = next(c for c in rep.checks if c.category == "reference")
    assert ref.passed is False and ref.diagnosis == "differs_from_reference"
    assert _conditional_tv(ref, RELEASED_SENSITIVE, "spectr_gbv_released", "mdbv") > 0.5
    assert "The reference spectr_gbv_released is itself lossy (Verifier.lossless is False)" in ref.detail
    assert (
        "a lossless verifier is expected to differ from it" in ref.detail and "A different convention" not in ref.detail
    )


# ---------------------------------------------------------------------------- robustness
class _FakeAdapter:
    """``emit`` through a reference sampler, raising on instances of vocabulary ``bad_n``."""

    def __init__(self, bad_n: int | None = None, error: Exception | None = None) -> None:
        self.bad_n, self.error = bad_n, error

    def emit(self, d: np.ndarray, q: np.ndarray, p: np.ndarray, rng: np.random.Generator, **_: Any) -> Emitted:
        if q.shape[-1] == self.bad_n:
            raise self.error or VerifierRaised("RuntimeError: kaboom at verifier.py:1")
        B, L = d.shape[0], d.shape[2]
        tokens = np.full((B, L + 1), -1, dtype=np.int64)
        lengths = np.zeros(B, dtype=np.int64)
        for b in range(B):
            out = RRS.sample(d[b], q[b], p[b], rng)
            tokens[b, : len(out)], lengths[b] = out, len(out)
        return Emitted(tokens, lengths)


BATTERY = [
    BatteryInstance("first", random_instance(3, 1, 10, exact=False), 2),
    BatteryInstance("raiser", random_instance(2, 1, 3, exact=False), 2),
    BatteryInstance("last", random_instance(3, 1, 4, exact=False), 2),
]


def test_a_raise_on_one_instance_fails_that_instance_only() -> None:
    out = reference_checks(_FakeAdapter(bad_n=2), BATTERY, "rrs", np.random.default_rng(0), 1e-4, 0.15)
    assert [c.name for c in out] == ["reference_law[first]", "reference_law[raiser]", "reference_law[last]"]
    assert [c.passed for c in out] == [True, False, True]
    assert [c.diagnosis for c in out] == ["ok", "raises", "ok"]
    assert "the verifier raised on instance 'raiser'" in out[1].detail and "kaboom" in out[1].detail
    assert out[1].instance is not None and "drafts" in out[1].instance


def test_a_timeout_still_stops_the_reference_check() -> None:
    adapter = _FakeAdapter(bad_n=2, error=VerifierTimedOut("a verifier call ran longer than the limit"))
    with pytest.raises(VerifierTimedOut):
        reference_checks(adapter, BATTERY, "rrs", np.random.default_rng(0), 1e-4, 0.15)


def test_a_raise_in_validate_is_reported_on_that_instance() -> None:
    def raises_on_binary(d: np.ndarray, q: np.ndarray, p: np.ndarray, rng: np.random.Generator) -> list[int]:
        if q.shape[-1] == 2:
            raise RuntimeError("kaboom")
        return specinfer_rrs(d, q, p, rng)

    instances = [(ORDER_SENSITIVE, 2), (random_instance(2, 1, 3), 2), (random_instance(3, 1, 4), 2)]
    rep = validate(raises_on_binary, reference="rrs:random_order", instances=instances, **QUICK)
    ref = {c.name: c for c in rep.checks if c.category == "reference"}
    assert set(ref) == {"reference_law[user0]", "reference_law[user1]", "reference_law[user2]"}
    assert ref["reference_law[user0]"].passed is True and ref["reference_law[user2]"].passed is True
    bad = ref["reference_law[user1]"]
    assert bad.passed is False and bad.diagnosis == "raises" and "instance 'user1'" in bad.detail
    assert "kaboom" in bad.detail and not rep.passed


def test_exact_level_compares_with_a_variant_exactly() -> None:
    """A declared outcome_law against rrs:random_order (TV 0 in rationals) and against rrs (differs)."""
    from spectr_gbv.reference.variants import RandomOrderRRS

    same = validate(
        RandomOrderRRS(), level="exact", reference="rrs:random_order", instances=[(ORDER_SENSITIVE, 2)], **QUICK
    )
    ref = next(c for c in same.checks if c.name == "reference_law_exact[user0]")
    assert same.level_used == "exact" and ref.passed is True and ref.statistic == 0
    other = validate(RandomOrderRRS(), level="exact", reference="rrs", instances=[(ORDER_SENSITIVE, 2)], **QUICK)
    ref = next(c for c in other.checks if c.name == "reference_law_exact[user0]")
    assert ref.passed is False and ref.diagnosis == "differs_from_reference" and ref.statistic == 0.5
    assert "differs from rrs's conditional law: the token drawn at the stop differs" in ref.detail
    assert next(c for c in other.checks if c.name == "exact_defect[user0]").passed is True


# ---------------------------------------------------------------------------- a user's rule as the reference
def test_a_user_function_is_a_reference_with_its_enumerated_law() -> None:
    """``--reference module:attribute``: a plain generic function, its law enumerated over its draws."""
    spec = "tests.validate.checks.test_reference_check:specinfer_rrs"
    assert parse_reference(spec) == (spec, None) and variants(spec) == {}
    assert reference_verifier(spec).name == spec
    rep = validate(specinfer_rrs, reference=spec, instances=[(ORDER_SENSITIVE, 2)], **QUICK)
    ref = [c for c in rep.checks if c.category == "reference"]
    assert rep.passed and len(ref) == 1 and ref[0].passed is True, rep.to_text()
    rep = validate(RRS, reference=spec, instances=[(ORDER_SENSITIVE, 2)], **QUICK)
    ref = [c for c in rep.checks if c.category == "reference"]
    assert len(ref) == 1 and ref[0].passed is False and ref[0].diagnosis == "differs_from_reference"
    assert rep.exit_code == 3


@pytest.mark.parametrize(
    "spec, message",
    [
        ("numpy:no_such_attr", r"reference: method 'numpy:no_such_attr': module 'numpy' has no attribute"),
        ("math:pi", r"reference: rule: expected a Verifier, a Verifier subclass or a function, got float"),
    ],
)
def test_bad_user_references_get_one_line(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_reference(spec)
