"""Bad input at the reference verifiers (``get_verifier(...).sample`` / ``outcome_law``, check_method).

The case machinery and the classes of bad input are in ``tests/bad_input_helpers.py``; the
catalogue of classes, with the messages asserted here, is docs/bad_input.md.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction as F
from typing import Any

import numpy as np
import pytest

from spectr_gbv.core import default_instance
from spectr_gbv.reference import get_verifier, iteration_inputs
from spectr_gbv.reference.registry import check_method
from tests.bad_input_helpers import (
    DP,
    DQ,
    INF,
    NAN,
    Case,
    D,
    Raises,
    check_prefix_of,
    err,
    msg,
    ok,
    params,
    run_case,
)

DX, DQX, DPX = iteration_inputs(default_instance(), [[0, 1], [1, 1]])  # exact


def _with(arr: np.ndarray, idx: tuple[int, ...], value: Any) -> np.ndarray:
    out = np.array(arr, copy=True)
    out[idx] = value
    return out


def _row_pair(arr: np.ndarray, idx: tuple[int, ...], values: list[float]) -> np.ndarray:
    out = np.array(arr, copy=True)
    out[idx] = values
    return out


def _law_equal(expected: dict[tuple[int, ...], Any], tol: float = 1e-12) -> Callable[[Any], None]:
    def check(law: Any) -> None:
        assert set(law) == set(expected)
        for k, v in expected.items():
            assert abs(float(law[k]) - float(v)) <= tol, (k, law[k], v)

    return check


def _sample(method: str, d: Any, q: Any, p: Any) -> Any:
    return get_verifier(method).sample(d, q, p, np.random.default_rng(0))


def _law(method: str, d: Any, q: Any, p: Any) -> Any:
    return get_verifier(method).outcome_law(d, q, p)


REF_BAD: list[tuple[str, str, tuple[Any, Any, Any], Raises]] = [
    ("nan", "NaN in draft_probs", (D, _with(DQ, (0, 0, 0), NAN), DP), err("draft_probs", "not finite")),
    ("nan", "NaN in target_probs", (D, DQ, _with(DP, (1, 2, 1), NAN)), err("target_probs", "not finite")),
    ("inf", "inf in target_probs", (D, DQ, _with(DP, (0, 0, 0), INF)), err("target_probs", "not finite")),
    (
        "negative",
        "negative draft_probs entry",
        (D, _row_pair(DQ, (0, 1), [-0.5, 1.5]), DP),
        err("draft_probs", "negative"),
    ),
    (
        "unnormalised",
        "target row summing to 1.5",
        (D, DQ, _row_pair(DP, (0, 0), [1.0, 0.5])),
        err("target_probs", "sums to"),
    ),
    (
        "unnormalised",
        "exact draft row summing to 2",
        (DX, _row_pair(DQX, (1, 1), [F(1), F(1)]), DPX),
        err("draft_probs", "sums to 2"),
    ),
    ("wrong_shape", "target_probs with L rows instead of L + 1", (D, DQ, DP[:, :2]), err("target_probs", "shape")),
    ("wrong_shape", "drafts of 1 dimension", (D[0], DQ, DP), err("drafts", "shape")),
    (
        "vocab_mismatch",
        "target_probs over 3 tokens, draft_probs over 2",
        (D, DQ, np.concatenate([DP, np.zeros((2, 3, 1))], axis=2)),
        err("target_probs", "shape"),
    ),
    ("K_zero", "K = 0 drafts", (D[:0], DQ[:0], DP[:0]), err("drafts", "K >= 1")),
    ("L_zero", "L = 0 drafts", (D[:, :0], DQ[:, :0], DP[:, :1]), err("drafts", "L >= 1")),
    ("id_out_of_range", "draft id 2 with n = 2", (_with(D, (1, 0), 2), DQ, DP), err("drafts[1, 0]", "vocabulary")),
    ("id_out_of_range", "placeholder id -1", (_with(D, (0, 1), -1), DQ, DP), err("drafts[0, 1]", "vocabulary")),
    (
        "fp16",
        "float16 rows that are not exact in binary",
        (np.array([[0]]), np.array([[[0.1, 0.9]]], np.float16), np.array([[[0.3, 0.7], [0.5, 0.5]]], np.float16)),
        err("draft_probs", "sums to"),
    ),
    ("wrong_type", "draft_probs of strings", (D, DQ.astype(str), DP), err("draft_probs", "dtype")),
]

_FP16_EXACT = (
    np.array([[0]]),
    np.array([[[0.5, 0.5]]], np.float16),
    np.array([[[0.25, 0.75], [0.5, 0.5]]], np.float16),
)
# sd on draft [0]: accept w.p. (1/4)/(1/2) = 1/2, then bonus [1/2, 1/2]; else residual [0, 1/4] -> token 1
_FP16_EXPECTED = {(0, 0): 0.25, (0, 1): 0.25, (1,): 0.5}

REFERENCE: list[Case] = []
for _cls, _what, _args, _exp in REF_BAD:
    for _api, _fn in (("sample", _sample), ("outcome_law", _law)):
        REFERENCE.append(Case(f"reference.mdbv.{_api}", _cls, _what, lambda fn=_fn, a=_args: fn("mdbv", *a), _exp))
for _method in ("sd", "bv", "spectr", "rrs", "gbv_multipath", "independent_bv", "spectr_gbv_released"):
    REFERENCE.append(
        Case(
            f"reference.{_method}.outcome_law",
            "nan",
            "NaN in target_probs",
            lambda m=_method: _law(m, D, DQ, _with(DP, (0, 1, 0), NAN)),
            err("target_probs"),
        )
    )
    REFERENCE.append(
        Case(
            f"reference.{_method}.outcome_law",
            "fp16",
            "float16 rows exact in binary",
            lambda m=_method: _law(m, *_FP16_EXACT),
            ok(
                lambda law, m=_method: _law_equal(
                    _law(m, _FP16_EXACT[0], *(np.asarray(a, np.float64) for a in _FP16_EXACT[1:]))
                )(law)
            ),
        )
    )
REFERENCE += [
    Case(
        "reference.sd.sample",
        "fp16",
        "float16 rows exact in binary (law checked exactly)",
        lambda: _law("sd", *_FP16_EXACT),
        ok(_law_equal(_FP16_EXPECTED)),
    ),
    Case(
        "reference.sd.sample",
        "wrong_type",
        "rng given as an int",
        lambda: get_verifier("sd").sample(D, DQ, DP, 0),
        err("rng"),
    ),
    Case(
        "reference.mdbv.sample",
        "K_huge",
        "K = 600 identical drafts (result = the K = 1 law's support)",
        lambda: _sample("mdbv", np.repeat(D[:1], 600, 0), np.repeat(DQ[:1], 600, 0), np.repeat(DP[:1], 600, 0)),
        ok(lambda out: check_prefix_of(out, (0, 1))),
        timeout=60.0,
    ),
]



REFERENCE_GUARDS: list[Case] = [
    Case(
        "get_verifier",
        "wrong_type",
        "name = ['sd'] (unhashable type: 'list')",
        lambda: get_verifier(["sd"]),  # type: ignore[arg-type]
        msg("name must be a method name (a str), got list ['sd']", exc=TypeError),
    ),
    Case(
        "get_verifier",
        "wrong_type",
        "name = None",
        lambda: get_verifier(None),  # type: ignore[arg-type]
        msg("name must be a method name (a str), got NoneType None", exc=TypeError),
    ),
    Case(
        "check_method",
        "wrong_type",
        "name = 3",
        lambda: check_method(3),  # type: ignore[arg-type]
        msg("name must be a method name (a str), got int 3", exc=TypeError),
    ),
]


CASES = REFERENCE + REFERENCE_GUARDS


@pytest.mark.parametrize("case", params(CASES))
def test_bad_input(case: Case) -> None:
    """One entry point, one bad input: the documented error naming the argument, or the correct result."""
    run_case(case)
