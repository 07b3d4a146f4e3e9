"""Bad input at every public entry point: a clear exception naming the argument, or a correct result.

Each case feeds one entry point one class of bad input (:data:`CLASSES`) and states what must
happen: an exception of a given type whose message contains the argument's name (and any
other words that make it clear), or a result checked against the correct value. Cases where
the package misbehaves (silent wrong result, unclear error, hang) are marked
``xfail(strict=True)`` with the reason, for the integrator to fix; they must keep failing until
the library is fixed. Calls run under a time limit (SIGALRM), so a hang fails instead of
blocking the suite.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import io
import json
import math
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction as F
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spectr_gbv.core import Instance, TabularAR, default_instance, load_instance, parse_instance, random_instance
from spectr_gbv.core.instance import MAX_INSTANCE_BYTES, DuplicateKeyError, InstanceTooLargeError
from spectr_gbv.reference import get_verifier, iteration_inputs
from spectr_gbv.reference.registry import check_method
from spectr_gbv.simulate.exact import EnumerationTooLargeError, simulate_exact, validity_defect
from spectr_gbv.simulate.monte_carlo import g_test_power, iterations_for_power, monte_carlo
from spectr_gbv.theory import bounds, lp
from spectr_gbv.theory.table import bound_table

HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_TRANSFORMERS = HAS_TORCH and importlib.util.find_spec("transformers") is not None

#: The classes of bad input tried (each case belongs to one; the last test checks them all).
CLASSES: tuple[str, ...] = (
    "nan",
    "inf",
    "negative",
    "unnormalised",
    "wrong_shape",
    "vocab_mismatch",
    "K_zero",
    "L_zero",
    "K_huge",
    "L_huge",
    "id_out_of_range",
    "fp16",
    "wrong_type",
    "too_large",
    "duplicate_key",
    "bad_file",
    "bad_seed",
    "bad_parameter",
    "control_chars",
    "huge_number",
)

NAN, INF = float("nan"), float("inf")


# ---------------------------------------------------------------------------- case machinery
@dataclass(frozen=True)
class Raises:
    """The call must raise ``exc`` with every string of ``names`` in its message."""

    exc: type[BaseException] | tuple[type[BaseException], ...]
    names: tuple[str | tuple[str, ...], ...]  # a tuple entry: any one of its strings


@dataclass(frozen=True)
class Result:
    """The call must return a value accepted by ``check`` (which asserts)."""

    check: Callable[[Any], None]


@dataclass(frozen=True)
class Case:
    entry: str
    cls: str
    what: str
    call: Callable[[], Any]
    expect: Raises | Result | Message
    needs: str | None = None  # "torch" or "transformers"
    xfail: str | None = None  # reason, when the package misbehaves
    timeout: float = 20.0


class CallTimeout(Exception):
    """The call ran past its time limit (a hang)."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`CallTimeout` in the main thread after ``seconds`` (SIGALRM)."""

    def handler(signum: int, frame: Any) -> None:
        raise CallTimeout(f"call did not return within {seconds} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def err(*names: str, exc: Any = ValueError) -> Raises:
    return Raises(exc, names)


@dataclass(frozen=True)
class Message:
    """The call must raise ``exc`` with exactly ``text`` as its message (the issue-14 classes)."""

    exc: type[BaseException] | tuple[type[BaseException], ...]
    text: str


def msg(text: str, exc: Any = ValueError) -> Message:
    return Message(exc, text)


def ok(check: Callable[[Any], None]) -> Result:
    return Result(check)


# ---------------------------------------------------------------------------- shared inputs
P, Q = default_instance()
P3 = TabularAR.random(3, 2, 0, exact=True, name="target")
FLOAT = default_instance().to_float()
D, DQ, DP = iteration_inputs(FLOAT, [[0, 1], [1, 1]])  # float64 [2, 2], [2, 2, 2], [2, 3, 2]
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


def _equals(expected: Any) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        assert value == expected

    return check


def _table(n: int, row: list[Any], depth: int, name: str = "target") -> TabularAR:
    return TabularAR.context_free(row, depth, name=name)


def _instance_json(**overrides: Any) -> dict[str, Any]:
    data = default_instance().to_dict()
    data.update(overrides)
    return data


def _bad_target_row(row: list[Any]) -> dict[str, Any]:
    data = default_instance().to_dict()
    data["target"] = dict(data["target"])
    data["target"]["0"] = row
    return data


# ---------------------------------------------------------------------------- core
CORE = [
    Case(
        "TabularAR",
        "nan",
        "NaN entry",
        lambda: TabularAR(2, {"": [NAN, 1.0]}, name="target"),
        err("target", "not finite"),
    ),
    Case(
        "TabularAR",
        "inf",
        "inf entry",
        lambda: TabularAR(2, {"": [INF, 0.0]}, name="target"),
        err("target", "not finite"),
    ),
    Case(
        "TabularAR",
        "negative",
        "negative entry",
        lambda: TabularAR(2, {"": ["-1/2", "3/2"]}, name="target"),
        err("target", "negative"),
    ),
    Case(
        "TabularAR",
        "unnormalised",
        "row sums to 11/10",
        lambda: TabularAR(2, {"": ["1/2", "3/5"]}, name="draft"),
        err("draft", "sums to 11/10"),
    ),
    Case(
        "TabularAR",
        "unnormalised",
        "float row off by 1e-6",
        lambda: TabularAR(2, {"": [0.5, 0.500001]}, name="draft"),
        err("draft", "sums to"),
    ),
    Case(
        "TabularAR",
        "wrong_shape",
        "row of 3 entries for n = 2",
        lambda: TabularAR(2, {"": ["1/3", "1/3", "1/3"]}, name="target"),
        err("target", "3 entries", "n = 2"),
    ),
    Case(
        "TabularAR",
        "wrong_shape",
        "missing prefix",
        lambda: TabularAR(2, {"": [1, 0], "0": [1, 0]}, name="target"),
        err("target", "missing law for prefix (1,)"),
    ),
    Case(
        "TabularAR",
        "wrong_shape",
        "empty vocabulary n = 0",
        lambda: TabularAR(0, {"": []}, name="target"),
        err("target", "n"),
    ),
    Case(
        "TabularAR",
        "id_out_of_range",
        "prefix token 2 with n = 2",
        lambda: TabularAR(2, {"": [1, 0], "2": [1, 0]}, name="target"),
        err("target", "outside the vocabulary"),
    ),
    Case(
        "TabularAR",
        "fp16",
        "float16 row that is exact in binary",
        lambda: TabularAR(2, {"": np.array([0.25, 0.75], dtype=np.float16)}, name="target").cond(()).tolist(),
        ok(_equals([0.25, 0.75])),
    ),
    Case(
        "TabularAR",
        "fp16",
        "float16 row rounded off 1 (0.1 + 0.9 in fp16)",
        lambda: TabularAR(2, {"": np.array([0.1, 0.9], dtype=np.float16)}, name="target"),
        err("target", "sums to"),
    ),
    Case(
        "TabularAR",
        "wrong_type",
        "row given as a string",
        lambda: TabularAR(2, {"": "1/2,1/2"}, name="target"),
        err("target", "row"),
    ),
    Case(
        "TabularAR.from_levels",
        "wrong_shape",
        "level 1 of shape (3, 2)",
        lambda: TabularAR.from_levels([np.array([0.5, 0.5]), np.full((3, 2), 0.5)], name="draft"),
        err("draft", "levels[1]"),
    ),
    Case(
        "TabularAR.random",
        "L_huge",
        "depth 40 (2^41 rows)",
        lambda: TabularAR.random(2, 40, 0),
        err("depth"),
        timeout=2.0,
    ),
    Case(
        "random_instance",
        "L_huge",
        "L = 40",
        lambda: random_instance(2, 40, 0),
        err("L"),
        timeout=2.0,
    ),
    Case("random_instance", "L_zero", "L = 0", lambda: random_instance(2, 0, 0), err("L")),
    Case(
        "random_instance",
        "wrong_shape",
        "empty vocabulary n = 0",
        lambda: random_instance(0, 2, 0),
        err("n"),
    ),
    Case("Instance", "L_zero", "L = 0", lambda: Instance(P, Q, 0), err("L", ">= 1")),
    Case("Instance", "L_huge", "L = 100 on depth-2 tables", lambda: Instance(P, Q, 100), err("target", "L=100")),
    Case(
        "Instance",
        "vocab_mismatch",
        "n = 3 target, n = 2 draft",
        lambda: Instance(P3, Q, 2),
        err("vocabulary mismatch", "target", "draft"),
    ),
    Case(
        "Instance",
        "wrong_type",
        "target given as a dict",
        lambda: Instance({"": [1]}, Q, 2),  # type: ignore[arg-type]
        err("target", exc=(TypeError, ValueError)),
    ),
    Case(
        "parse_instance",
        "nan",
        "NaN in a target row",
        lambda: parse_instance(_bad_target_row([NAN, 1.0])),
        err("target", "not finite"),
    ),
    Case(
        "parse_instance",
        "inf",
        "inf in a target row",
        lambda: parse_instance(_bad_target_row([INF, 0.0])),
        err("target", "not finite"),
    ),
    Case(
        "parse_instance",
        "negative",
        "negative target entry",
        lambda: parse_instance(_bad_target_row(["-1", "2"])),
        err("target", "negative"),
    ),
    Case(
        "parse_instance",
        "unnormalised",
        "target row sums to 2",
        lambda: parse_instance(_bad_target_row([1, 1])),
        err("target", "sums to 2"),
    ),
    Case(
        "parse_instance",
        "wrong_shape",
        "target row of 3 entries",
        lambda: parse_instance(_bad_target_row(["1/3", "1/3", "1/3"])),
        err("target", "3 entries"),
    ),
    Case(
        "parse_instance",
        "vocab_mismatch",
        "n = 3 with rows of 2",
        lambda: parse_instance(_instance_json(n=3)),
        err("entries", "n = 3"),
    ),
    Case("parse_instance", "L_zero", "L = 0", lambda: parse_instance(_instance_json(L=0)), err("L")),
    Case(
        "parse_instance", "L_huge", "n = 2, L = 40", lambda: parse_instance(_instance_json(L=40)), err("L=40", "rows")
    ),
    Case(
        "parse_instance",
        "id_out_of_range",
        "prefix key '2'",
        lambda: parse_instance(_instance_json(target={**default_instance().to_dict()["target"], "2": [1, 0]})),
        err("target", "outside the vocabulary"),
    ),
    Case(
        "parse_instance", "wrong_type", "n given as a string", lambda: parse_instance(_instance_json(n="2")), err("n")
    ),
]


# ---------------------------------------------------------------------------- theory
BOUND_FUNCS = {
    "cic_bound": lambda p, q, k, l: bounds.cic_bound(p, q, k, l),
    "cic_bound_lossless": lambda p, q, k, l: bounds.cic_bound_lossless(p, q, k, l),
    "prefix_relaxation": lambda p, q, k, l: bounds.prefix_relaxation(p, q, k, l),
    "sd_expected_accepted": lambda p, q, k, l: bounds.sd_expected_accepted(p, q, l),
    "bv_expected_accepted": lambda p, q, k, l: bounds.bv_expected_accepted(p, q, l),
    "cic_limit": lambda p, q, k, l: bounds.cic_limit(p, q, l),
}
TAKES_K = ("cic_bound", "cic_bound_lossless", "prefix_relaxation")

THEORY: list[Case] = []
for _name, _f in BOUND_FUNCS.items():
    THEORY += [
        Case(f"bounds.{_name}", "L_zero", "draft_length 0", lambda f=_f: f(P, Q, 1, 0), err("draft_length")),
        Case(
            f"bounds.{_name}",
            "L_huge",
            "draft_length 50 on depth-2 tables",
            lambda f=_f: f(P, Q, 1, 50),
            err("draft_length", "depth"),
        ),
        Case(
            f"bounds.{_name}",
            "vocab_mismatch",
            "n = 3 target, n = 2 draft",
            lambda f=_f: f(P3, Q, 1, 2),
            err("vocabulary mismatch", "target", "draft"),
        ),
        Case(
            f"bounds.{_name}",
            "wrong_type",
            "target given as an array",
            lambda f=_f: f(np.eye(2), Q, 1, 2),
            err("target", exc=TypeError),
        ),
    ]
    if _name in TAKES_K:
        THEORY += [
            Case(f"bounds.{_name}", "K_zero", "num_drafts 0", lambda f=_f: f(P, Q, 0, 2), err("num_drafts")),
            Case(f"bounds.{_name}", "K_huge", "num_drafts 10**9", lambda f=_f: f(P, Q, 10**9, 2), err("num_drafts")),
        ]
THEORY += [
    Case(
        "bounds.cic_bound",
        "fp16",
        "float16 tables (exact in binary)",
        lambda: bounds.cic_bound(
            _table(2, list(np.array([0.25, 0.75], np.float16)), 2),
            _table(2, list(np.array([0.5, 0.5], np.float16)), 2, "draft"),
            2,
            2,
        ),
        ok(
            lambda v: math.isclose(
                v, float(bounds.cic_bound(_table(2, ["1/4", "3/4"], 2), _table(2, ["1/2", "1/2"], 2, "draft"), 2, 2))
            )
        ),
    ),
    Case(
        "bounds.l1_optimum",
        "wrong_shape",
        "rows of lengths 2 and 3",
        lambda: bounds.l1_optimum([F(1, 2), F(1, 2)], [F(1, 3)] * 3, 1),
        err("target_row", "draft_row"),
    ),
    Case(
        "bounds.l1_optimum",
        "K_zero",
        "num_drafts 0",
        lambda: bounds.l1_optimum([F(1, 2)] * 2, [F(1, 2)] * 2, 0),
        err("num_drafts"),
    ),
    Case(
        "bounds.l1_optimum",
        "nan",
        "NaN in target_row",
        lambda: bounds.l1_optimum([NAN, 1.0], [0.5, 0.5], 1),
        err("target_row"),
    ),
    Case(
        "bounds.l1_optimum",
        "negative",
        "negative draft_row entry",
        lambda: bounds.l1_optimum([0.5, 0.5], [-0.5, 1.5], 1),
        err("draft_row"),
    ),
    Case(
        "bounds.l1_optimum",
        "unnormalised",
        "target_row summing to 2",
        lambda: bounds.l1_optimum([1.0, 1.0], [0.5, 0.5], 1),
        err("target_row"),
    ),
    Case(
        "bounds.l1_optimum",
        "fp16",
        "float16 rows exact in binary",
        lambda: bounds.l1_optimum(np.array([0.25, 0.75], np.float16), np.array([0.5, 0.5], np.float16), 2)[0],
        ok(lambda v: math.isclose(float(v), float(bounds.l1_optimum([F(1, 4), F(3, 4)], [F(1, 2)] * 2, 2)[0]))),
    ),
    Case("lp.optimal_lossless", "K_zero", "num_drafts 0", lambda: lp.optimal_lossless(P, Q, 0, 2), err("num_drafts")),
    Case(
        "lp.optimal_lossless", "L_zero", "draft_length 0", lambda: lp.optimal_lossless(P, Q, 1, 0), err("draft_length")
    ),
    Case(
        "lp.optimal_lossless",
        "L_huge",
        "draft_length 3 on depth-2 tables",
        lambda: lp.optimal_lossless(P, Q, 1, 3),
        err("target", "depth"),
    ),
    Case(
        "lp.optimal_lossless",
        "K_huge",
        "num_drafts 10000 (LP too large)",
        lambda: lp.optimal_lossless(P, Q, 10000, 2),
        err("K=10000", "max_nonzeros", exc=lp.LPTooLargeError),
    ),
    Case(
        "lp.optimal_lossless",
        "vocab_mismatch",
        "n = 3 target, n = 2 draft",
        lambda: lp.optimal_lossless(P3, Q, 1, 2),
        err("vocabulary mismatch"),
    ),
    Case("lp.optimal_coupling", "K_zero", "num_drafts 0", lambda: lp.optimal_coupling(P, Q, 0, 2), err("num_drafts")),
    Case(
        "lp.optimal_coupling",
        "K_huge",
        "num_drafts 10**9",
        lambda: lp.optimal_coupling(P, Q, 10**9, 2),
        err("num_drafts"),
    ),
    Case(
        "lp.optimal_coupling",
        "wrong_type",
        "draft given as None",
        lambda: lp.optimal_coupling(P, None, 1, 2),
        err("draft", exc=TypeError),
    ),
]


# ---------------------------------------------------------------------------- reference verifiers
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
        ok(lambda out: _check_prefix_of(out, (0, 1))),
        timeout=60.0,
    ),
]


def _check_prefix_of(out: tuple[int, ...], draft: tuple[int, ...]) -> None:
    assert 1 <= len(out) <= len(draft) + 1 and out[:-1] == draft[: len(out) - 1] and out[-1] in (0, 1)


# ---------------------------------------------------------------------------- simulate
INST = default_instance()
SIMULATE = [
    Case("simulate_exact", "K_zero", "num_drafts 0", lambda: simulate_exact(INST, "mdbv", 0), err("num_drafts")),
    Case(
        "simulate_exact",
        "K_huge",
        "num_drafts 10**6",
        lambda: simulate_exact(INST, "mdbv", 10**6),
        err("K=1000000", "limit"),
    ),
    Case(
        "simulate_exact",
        "K_huge",
        "num_drafts 5000, tuple path",
        lambda: simulate_exact(INST, "mdbv", 5000, fast=False),
        err("K=5000", "exceed the limit", exc=EnumerationTooLargeError),
    ),
    Case(
        "simulate_exact",
        "K_huge",
        "num_drafts 5000, draft-tree path",
        lambda: simulate_exact(INST, "rrs", 5000),
        err(
            "K=5000", "exceed the limit 200000; the draft_tree path would need over 10^18", exc=EnumerationTooLargeError
        ),
    ),
    Case("simulate_exact", "wrong_type", "method given as an int", lambda: simulate_exact(INST, 3, 2), err("method")),
    Case(
        "simulate_exact",
        "wrong_type",
        "instance given as a dict",
        lambda: simulate_exact(INST.to_dict(), "sd", 1),
        err("instance", exc=(TypeError, ValueError)),
    ),
    Case(
        "validity_defect",
        "L_huge",
        "L = 5 on a depth-2 target",
        lambda: validity_defect(P, {(0,): F(1)}, 5),
        err("depth", "L = 5"),
    ),
    Case(
        "validity_defect",
        "id_out_of_range",
        "output token 2 with n = 2",
        lambda: validity_defect(P, {(2,): F(1)}, 2),
        err("output (2,)"),
    ),
    Case(
        "validity_defect",
        "nan",
        "NaN probability in the law",
        lambda: validity_defect(P, {(0,): NAN, (1,): 0.5}, 2),
        err("law"),
    ),
    Case(
        "validity_defect",
        "negative",
        "negative probability in the law",
        lambda: validity_defect(P, {(0,): F(-1, 2), (1,): F(3, 2)}, 2),
        err("law"),
    ),
    Case("monte_carlo", "K_zero", "num_drafts 0", lambda: monte_carlo(INST, "mdbv", 0, 100), err("num_drafts")),
    Case("monte_carlo", "nan", "alpha = nan", lambda: monte_carlo(INST, "sd", 1, 100, alpha=NAN), err("alpha")),
    Case(
        "monte_carlo",
        "nan",
        "confidence = nan",
        lambda: monte_carlo(INST, "sd", 1, 100, confidence=NAN),
        err("confidence"),
    ),
    Case(
        "monte_carlo",
        "K_huge",
        "num_drafts 10**7",
        lambda: monte_carlo(INST, "sd", 10**7, 100),
        err("num_drafts"),
        timeout=5.0,
    ),
    Case("g_test_power", "K_zero", "df 0", lambda: g_test_power(1000, 0, 1e-3), err("df")),
    Case("g_test_power", "nan", "alpha = nan", lambda: g_test_power(1000, 3, NAN), err("alpha")),
    Case(
        "g_test_power",
        "negative",
        "num_samples = -5",
        lambda: g_test_power(-5, 3, 1e-3),
        err("num_samples"),
    ),
    Case(
        "g_test_power",
        "nan",
        "tv = nan",
        lambda: g_test_power(1000, 3, 1e-3, tv=NAN),
        err("tv"),
    ),
    Case(
        "iterations_for_power",
        "negative",
        "tv = 0 (no effect to detect)",
        lambda: iterations_for_power(3, 1e-3, 0.0),
        err("tv"),
        timeout=3.0,
    ),
]


# ---------------------------------------------------------------------------- issue 14: files and guards
_TMP = Path(tempfile.mkdtemp(prefix="spectr_bad_input_"))
atexit.register(shutil.rmtree, _TMP, True)
_DEFAULT_JSON = default_instance().to_dict()


def _file(name: str, content: str | bytes) -> str:
    """Write ``content`` to a file of the module's temporary folder and return its path."""
    path = _TMP / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return str(path)


def _json_file(filename: str, **overrides: Any) -> str:
    return _file(filename, json.dumps({**_DEFAULT_JSON, **overrides}))


def _duplicate_key_file() -> str:
    # a second "" in target: json's last-one-wins would change B(1) from 13/8 to 57/40
    target = json.dumps(_DEFAULT_JSON["target"])[:-1] + ', "": ["1/4", "3/4"]}'
    text = f'{{"name": "dup", "n": 2, "L": 2, "target": {target}, "draft": {json.dumps(_DEFAULT_JSON["draft"])}}}'
    return _file("dup.json", text)


def _sparse_file() -> str:
    path = _TMP / "sparse.json"
    with path.open("wb") as fh:
        fh.truncate(MAX_INSTANCE_BYTES + 1)  # a sparse file: no disk used
    return str(path)


def _target_row(row: list[Any]) -> Any:
    return parse_instance({**_DEFAULT_JSON, "target": {**_DEFAULT_JSON["target"], "": row}})


def _exactly(expected: F) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        assert isinstance(value, F) and value == expected, value

    return check


def _b1(inst: Instance) -> Any:
    return bounds.cic_bound(inst.target, inst.draft, 1, inst.L)


T = _TMP
CORE_GUARDS = [
    Case(
        "random_instance",
        "too_large",
        "n = 10**6, L = 1 (10**12 entries, few rows)",
        lambda: random_instance(10**6, 1, 0),
        msg(
            "n=1000000, L=1: 1000001000000 entries per table (~100.0 TB), above MAX_RANDOM_ENTRIES=10000000 "
            "(or MAX_RANDOM_ROWS=2000000 prefixes)"
        ),
        timeout=2.0,
    ),
    Case(
        "random_instance",
        "too_large",
        "n = 16, L = 5 (17.9M entries per table, 458 s through the CLI)",
        lambda: random_instance(16, 5, 0),
        msg(
            "n=16, L=5: 17895696 entries per table (~1.8 GB), above MAX_RANDOM_ENTRIES=10000000 "
            "(or MAX_RANDOM_ROWS=2000000 prefixes)"
        ),
        timeout=2.0,
    ),
    Case(
        "random_instance",
        "too_large",
        "L = 10**9 (the count itself must not be built)",
        lambda: random_instance(2, 10**9, 0),
        msg(
            "n=2, L=1000000000: over 4.6e18 entries per table (~461168601.8 TB), above MAX_RANDOM_ENTRIES=10000000 "
            "(or MAX_RANDOM_ROWS=2000000 prefixes)"
        ),
        timeout=2.0,
    ),
    Case(
        "random_instance",
        "nan",
        "zero_prob = nan (behaved as 0)",
        lambda: random_instance(2, 2, 0, zero_prob=NAN),
        msg("zero_prob must be a number in [0, 1], got nan"),
    ),
    Case(
        "random_instance",
        "bad_parameter",
        "zero_prob = 1.5",
        lambda: random_instance(2, 2, 0, zero_prob=1.5),
        msg("zero_prob must be a number in [0, 1], got 1.5"),
    ),
    Case(
        "random_instance",
        "bad_seed",
        "seed = -1 (numpy's message)",
        lambda: random_instance(2, 2, -1),
        msg("seed must be an int >= 0 or None, got -1"),
    ),
    Case(
        "random_instance",
        "bad_seed",
        "seed = '0'",
        lambda: random_instance(2, 2, "0"),
        msg("seed must be an int >= 0 or None, got '0'"),
    ),
    Case(
        "random_instance",
        "bad_seed",
        "seed = 1.5",
        lambda: random_instance(2, 2, 1.5),
        msg("seed must be an int >= 0 or None, got 1.5"),
    ),
    Case(
        "random_instance",
        "bad_parameter",
        "concentration = -1 (numpy's message)",
        lambda: random_instance(2, 2, 0, concentration=-1),
        msg("concentration must be a finite number > 0, got -1"),
    ),
    Case(
        "random_instance",
        "inf",
        "concentration = inf",
        lambda: random_instance(2, 2, 0, concentration=INF),
        msg("concentration must be a finite number > 0, got inf"),
    ),
    Case(
        "random_instance",
        "L_huge",
        "depth below L",
        lambda: random_instance(2, 2, 0, depth=1),
        msg("depth must be an int >= L = 2, got 1"),
    ),
    Case(
        "TabularAR.random",
        "bad_seed",
        "seed = -1",
        lambda: TabularAR.random(2, 1, -1),
        msg("seed must be an int >= 0 or None, got -1"),
    ),
    Case(
        "load_instance",
        "duplicate_key",
        'a second "" in target (silently changed B(1) from 13/8 to 57/40)',
        lambda: load_instance(_duplicate_key_file()),
        msg(f'instance: {T}/dup.json: duplicate key ""', exc=DuplicateKeyError),
    ),
    Case(
        "load_instance",
        "bad_file",
        "/dev/zero (raw MemoryError)",
        lambda: load_instance("/dev/zero"),
        msg(
            f"instance: /dev/zero has over {MAX_INSTANCE_BYTES} bytes, above MAX_INSTANCE_BYTES={MAX_INSTANCE_BYTES}",
            exc=InstanceTooLargeError,
        ),
        timeout=5.0,
    ),
    Case(
        "load_instance",
        "too_large",
        "a file one byte over MAX_INSTANCE_BYTES",
        lambda: load_instance(_sparse_file()),
        msg(
            f"instance: {T}/sparse.json has {MAX_INSTANCE_BYTES + 1} bytes, above "
            f"MAX_INSTANCE_BYTES={MAX_INSTANCE_BYTES}",
            exc=InstanceTooLargeError,
        ),
    ),
    Case(
        "load_instance",
        "bad_file",
        "a binary file (UnicodeDecodeError without the file name)",
        lambda: load_instance(_file("bin.json", b"\xff\xfe\x00\x01")),
        msg(f"instance: {T}/bin.json is not UTF-8 text (byte 0xff at offset 0)"),
    ),
    Case(
        "load_instance",
        "bad_file",
        "a directory",
        lambda: load_instance(T),
        msg(f"instance: cannot read {T}: it is a directory"),
    ),
    Case(
        "load_instance",
        "bad_file",
        "an empty file",
        lambda: load_instance(_file("empty.json", "")),
        msg(f"instance: {T}/empty.json is not valid JSON (Expecting value: line 1 column 1 (char 0))"),
    ),
    Case(
        "load_instance",
        "bad_file",
        "a path with a NUL byte",
        lambda: load_instance("a\x00b.json"),
        msg("instance: cannot read a\\x00b.json: embedded null byte"),
    ),
    Case(
        "load_instance",
        "control_chars",
        "a missing non-UTF-8 path with an escape (surrogates, ANSI)",
        lambda: load_instance(os.fsdecode(b"/nonexistent/\xff\x1b[31m.json")),
        msg("instance: cannot read /nonexistent/\\udcff\\x1b[31m.json: No such file or directory"),
    ),
    Case(
        "load_instance",
        "bad_file",
        "a JSON array at the top level",
        lambda: load_instance(_file("array.json", "[1, 2]")),
        msg(f"instance: top level must be a JSON object (in {T}/array.json)"),
    ),
    Case(
        "load_instance",
        "bad_file",
        "100000 nested arrays (RecursionError)",
        lambda: load_instance(_file("deep.json", "[" * 100000 + "]" * 100000)),
        msg(
            f"instance: {T}/deep.json is not a usable JSON instance (maximum recursion depth exceeded while "
            "decoding a JSON array from a unicode string)"
        ),
    ),
    Case(
        "load_instance",
        "nan",
        "NaN literal in the file",
        lambda: load_instance(_json_file("nan.json", target={**_DEFAULT_JSON["target"], "": [NAN, 1.0]})),
        msg(f"target prefix (): probability nan is not finite (in {T}/nan.json)"),
    ),
    Case(
        "load_instance",
        "inf",
        "Infinity literal in the file",
        lambda: load_instance(_json_file("inf.json", target={**_DEFAULT_JSON["target"], "": [INF, 0.0]})),
        msg(f"target prefix (): probability inf is not finite (in {T}/inf.json)"),
    ),
    Case(
        "load_instance",
        "huge_number",
        "n with 5000 digits (int max-str-digits ValueError)",
        lambda: load_instance(_file("hugeint.json", json.dumps(_DEFAULT_JSON).replace('"n": 2', '"n": ' + "9" * 5000))),
        msg(
            f"instance: {T}/hugeint.json is not a usable JSON instance (Exceeds the limit (4300 digits) for integer "
            "string conversion: value has 5000 digits; use sys.set_int_max_str_digits() to increase the limit)"
        ),
    ),
    Case(
        "load_instance",
        "L_huge",
        "L = 10**9 in the file (the row count itself hung)",
        lambda: load_instance(_json_file("Lhuge.json", L=10**9)),
        msg(f"instance: n=2, L=1000000000 needs over 4.6e18 rows per model (limit 2000000) (in {T}/Lhuge.json)"),
        timeout=2.0,
    ),
    Case(
        "load_instance",
        "control_chars",
        "a name with ANSI escapes and a carriage return (escaped at load)",
        lambda: load_instance(_json_file("ansi.json", name="evil\x1b[2J\x1b[31mred\r")).name,
        ok(_equals("evil\\x1b[2J\\x1b[31mred\\r")),
    ),
    Case(
        "load_instance",
        "control_chars",
        "a Unicode name (kept as is)",
        lambda: load_instance(_json_file("uni.json", name="θ-数-instance")).name,
        ok(_equals("θ-数-instance")),
    ),
    Case(
        "parse_instance",
        "wrong_type",
        "a name given as an int (used as its str)",
        lambda: parse_instance({**_DEFAULT_JSON, "name": 123}).name,
        ok(_equals("123")),
    ),
    Case(
        "parse_instance",
        "wrong_type",
        "L given as the float 2.0",
        lambda: parse_instance({**_DEFAULT_JSON, "L": 2.0}),
        msg("instance: L must be an int >= 1, got 2.0"),
    ),
    Case(
        "parse_instance",
        "id_out_of_range",
        'probability "1/0"',
        lambda: _target_row(["1/0", "1"]),
        msg("target prefix (): cannot parse probability '1/0'"),
    ),
    Case(
        "parse_instance",
        "too_large",
        'probability "1e-99999999" (a 10**8-digit integer)',
        lambda: _target_row(["1e-99999999", "1"]),
        msg("target prefix (): probability '1e-99999999' has an exponent beyond +-1000"),
        timeout=2.0,
    ),
    Case(
        "parse_instance",
        "too_large",
        "a probability string of 303 characters",
        lambda: _target_row(["1/2" + " " * 300, "1/2"]),
        msg("target prefix (): probability string of 303 characters (limit 200)"),
    ),
    Case(
        "parse_instance",
        "wrong_type",
        "booleans as probabilities",
        lambda: _target_row([True, False]),
        msg("target prefix (): probability True is a bool, not a number"),
    ),
    Case(
        "parse_instance",
        "unnormalised",
        'an entry "3/2" above 1 (with "-1/2")',
        lambda: _target_row(["3/2", "-1/2"]),
        msg("target prefix (): probability '3/2' is above 1"),
    ),
    Case(
        "parse_instance",
        "huge_number",
        "an int entry 10**400",
        lambda: _target_row([10**400, 0]),
        msg("target prefix (): probability (an int of 1329 bits) is above 1"),
    ),
    Case(
        "parse_instance",
        "wrong_type",
        'numbers as strings ("0.25", " 3/4 ") are exact',
        lambda: _b1(_target_row(["0.25", " 3/4 "])),
        ok(lambda v: (isinstance(v, F), v == _b1(_target_row([F(1, 4), F(3, 4)])))[0]),
    ),
    Case(
        "Instance",
        "L_huge",
        "a draft table too shallow for L",
        lambda: Instance(P, Q.truncate(0), 2),
        msg("draft needs laws at prefixes of length 0..L-1=1; it has depth 0"),
    ),
]

THEORY_GUARDS = [
    Case(
        "bound_table",
        "K_zero",
        "K list with a 0 (checked before any work)",
        lambda: bound_table(INST, [1, 0], with_lp=False),
        msg("num_drafts (K) must be an int in 1..10000, got 0"),
    ),
    Case(
        "bound_table",
        "wrong_type",
        "K = True",
        lambda: bound_table(INST, [True], with_lp=False),
        msg("num_drafts (K) must be an int in 1..10000, got True"),
    ),
    Case(
        "bound_table",
        "fp16",
        "shared per-level sums equal the bound functions (float instance)",
        lambda: bound_table(FLOAT, [1, 3], with_lp=False)[1].cic_bound,
        ok(_equals(bounds.cic_bound(FLOAT.target, FLOAT.draft, 3, 2))),
    ),
]

REFERENCE_GUARDS = [
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

SIMULATE_GUARDS = [
    Case(
        "simulate_exact",
        "too_large",
        "n = 300, L = 1, rrs K = 2: ~12 min of structured kernels (ran 10+ min silently)",
        lambda: simulate_exact(_n300(), "rrs", 2),
        msg(
            "n=300, L=1, K=2: the draft_tree path needs 59780 kernel evaluations x K x (L+1) x n = 71736000 units "
            "of kernel work (about 12 min), above max_work=10000000",
            exc=EnumerationTooLargeError,
        ),
        timeout=10.0,
    ),
    Case(
        "simulate_exact",
        "too_large",
        "n = 300, L = 1, mdbv K = 2 on the tuple path (59536 tuples, under MAX_DRAFT_TUPLES)",
        lambda: simulate_exact(_n300(), "mdbv", 2, fast=False),
        msg(
            "n=300, L=1, K=2: 59536 kernels (over 59536 ordered draft tuples) x K x (L+1) x n = 71443200 units of "
            "kernel work (about 12 min), above max_work=10000000",
            exc=EnumerationTooLargeError,
        ),
        timeout=20.0,
    ),
    Case(
        "simulate_exact",
        "K_huge",
        "K = 10**9 on the tuple path (m**K itself hung)",
        lambda: simulate_exact(INST, "mdbv", 10**9, fast=False),
        msg(
            "n=2, L=2, K=1000000000: over 10^18 ordered draft tuples over 4 drafts of positive probability exceed "
            "the limit 200000",
            exc=EnumerationTooLargeError,
        ),
        timeout=2.0,
    ),
    Case(
        "simulate_exact",
        "K_huge",
        "K = 10**9, ar (selected_draft path: 4 kernels on 10**9 copies)",
        lambda: simulate_exact(INST, "ar", 10**9),
        msg(
            "n=2, L=2, K=1000000000: the selected_draft path needs 4 kernel evaluations x K x (L+1) x n = "
            "24000000000 units of kernel work (about 4000 min), above max_work=10000000",
            exc=EnumerationTooLargeError,
        ),
        timeout=2.0,
    ),
    Case(
        "simulate_exact",
        "K_huge",
        "K = 10**9, ar multisets on the tuple path",
        lambda: simulate_exact(INST, "ar", 10**9, fast=False),
        msg(
            "n=2, L=2, K=1000000000: over 10^18 draft multisets over 4 drafts of positive probability exceed "
            "the limit 200000",
            exc=EnumerationTooLargeError,
        ),
        timeout=2.0,
    ),
    Case(
        "simulate_exact",
        "wrong_type",
        "num_drafts = True",
        lambda: simulate_exact(INST, "mdbv", True),
        msg("num_drafts (K) must be an int >= 1, got True"),
    ),
    Case(
        "monte_carlo",
        "bad_seed",
        "seed = -1 (numpy's message)",
        lambda: monte_carlo(INST, "sd", 1, 100, seed=-1),
        msg("seed must be an int >= 0 or None, got -1"),
    ),
    Case(
        "monte_carlo",
        "bad_seed",
        "seed = '0'",
        lambda: monte_carlo(INST, "sd", 1, 100, seed="0"),
        msg("seed must be an int >= 0 or None, got '0'"),
    ),
    Case(
        "monte_carlo",
        "bad_seed",
        "seed = 1.5",
        lambda: monte_carlo(INST, "sd", 1, 100, seed=1.5),
        msg("seed must be an int >= 0 or None, got 1.5"),
    ),
    Case(
        "monte_carlo",
        "wrong_type",
        "instance given as a dict",
        lambda: monte_carlo({}, "sd", 1, 100),  # type: ignore[arg-type]
        msg("instance: expected an Instance, got dict", exc=TypeError),
    ),
]


_N300: list[Instance] = []


def _n300() -> Instance:
    """The n = 300, L = 1 exact instance of issue 14, built on first use (~1.5 s)."""
    if not _N300:
        _N300.append(random_instance(300, 1, 0))
    return _N300[0]


# ---------------------------------------------------------------------------- cli
def _cli(*argv: str) -> tuple[int, str]:
    """Run ``spectr-gbv argv``; return the exit status and the last line of stderr (or of stdout's first)."""
    from spectr_gbv.cli.main import main

    err, out = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            rc = main(list(argv))
    except SystemExit as exc:  # argparse's own errors
        rc = int(exc.code or 0)
    lines = err.getvalue().strip().splitlines() or out.getvalue().splitlines()[:1]
    return rc, lines[-1] if lines else ""


def _cli_case(what: str, cls: str, argv: list[str], expected: tuple[int, str], timeout: float = 20.0) -> Case:
    return Case(f"cli.{argv[0]}", cls, what, lambda: _cli(*argv), ok(_equals(expected)), timeout=timeout)


def _usage(command: str, text: str) -> tuple[int, str]:
    return 2, f"spectr-gbv {command}: error: {text}"


CLI = [
    _cli_case(
        "--K 1-3000000000 (expanded before its bounds check: MemoryError)",
        "too_large",
        ["bound", "--K", "1-3000000000", "--no-lp"],
        _usage("bound", "--K values must lie in 1..64, got '1-3000000000'"),
        timeout=2.0,
    ),
    _cli_case(
        "--K 1-100000000 (4 GB for 29 s)",
        "too_large",
        ["simulate", "--K", "1-100000000"],
        _usage("simulate", "--K values must lie in 1..8, got '1-100000000'"),
        timeout=2.0,
    ),
    _cli_case("--K 0", "K_zero", ["bound", "--K", "0"], _usage("bound", "--K values must lie in 1..64, got '0'")),
    _cli_case(
        "--K 2-1",
        "K_zero",
        ["bound", "--K", "2-1"],
        _usage("bound", "--K range '2-1' is empty: write it low-high (e.g. 1-4)"),
    ),
    _cli_case(
        "--K 1,,2",
        "wrong_type",
        ["bound", "--K", "1,,2"],
        _usage("bound", "--K expects comma-separated ints (e.g. 1,2,3 or 1-4), got '1,,2'"),
    ),
    _cli_case(
        "--K -1",
        "negative",
        ["bound", "--K", "-1"],
        _usage("bound", "--K expects comma-separated ints (e.g. 1,2,3 or 1-4), got '-1'"),
    ),
    _cli_case(
        "--random 16,5,0 --no-lp (458 s, 3.7 GB)",
        "too_large",
        ["bound", "--random", "16,5,0", "--no-lp"],
        _usage(
            "bound",
            "--random 16,5,0: n=16, L=5 needs 35791392 exact table entries for p and q (~3.6 GB, ~429 s to draw), "
            "above the --random limit 2500000 (e.g. n=16, L=4 or n=2, L=18)",
        ),
        timeout=2.0,
    ),
    _cli_case(
        "--random 3,3",
        "wrong_shape",
        ["bound", "--random", "3,3"],
        _usage("bound", "--random expects n,L,seed[,zero_prob] (ints, then a float), got '3,3'"),
    ),
    _cli_case(
        "--random 2,2,-1",
        "bad_seed",
        ["bound", "--random", "2,2,-1"],
        _usage("bound", "seed must be an int >= 0 or None, got -1"),
    ),
    _cli_case(
        "--random 2,2,0,nan",
        "nan",
        ["bound", "--random", "2,2,0,nan"],
        _usage("bound", "--random: need n >= 1, L >= 1, 0 <= zero_prob < 1; got '2,2,0,nan'"),
    ),
    _cli_case(
        "--random 2,0,0",
        "L_zero",
        ["bound", "--random", "2,0,0"],
        _usage("bound", "--random: need n >= 1, L >= 1, 0 <= zero_prob < 1; got '2,0,0'"),
    ),
    _cli_case(
        "--random '' (silently the default instance)",
        "wrong_type",
        ["bound", "--random", ""],
        _usage("bound", "--random expects n,L,seed[,zero_prob] (ints, then a float), got ''"),
    ),
    _cli_case(
        "--instance '' (silently the default instance)",
        "bad_file",
        ["bound", "--instance", ""],
        _usage("bound", "--instance: the path is empty"),
    ),
    _cli_case(
        "--instance /dev/zero (raw MemoryError)",
        "bad_file",
        ["bound", "--instance", "/dev/zero"],
        _usage(
            "bound",
            f"instance: /dev/zero has over {MAX_INSTANCE_BYTES} bytes, above MAX_INSTANCE_BYTES={MAX_INSTANCE_BYTES}",
        ),
        timeout=5.0,
    ),
    _cli_case(
        "--instance a directory",
        "bad_file",
        ["bound", "--instance", str(T)],
        _usage("bound", f"instance: cannot read {T}: it is a directory"),
    ),
    Case(
        "cli.bound",
        "duplicate_key",
        "--instance with a duplicate key",
        lambda: _cli("bound", "--instance", _duplicate_key_file()),
        ok(_equals(_usage("bound", f'instance: {T}/dup.json: duplicate key ""'))),
    ),
    Case(
        "cli.bound",
        "control_chars",
        "--instance whose name holds ANSI escapes (printed raw)",
        lambda: _cli("bound", "--instance", _json_file("ansi.json", name="evil\x1b[2J\x1b[31mred\r"), "--no-lp"),
        ok(_equals((0, "Instance: evil\\x1b[2J\\x1b[31mred\\r  (n=2, L=2, exact)"))),
    ),
    _cli_case(
        "--samples 0",
        "K_zero",
        ["simulate", "--samples", "0"],
        _usage("simulate", "--samples must be >= 100, got 0"),
    ),
    _cli_case(
        "--samples -1",
        "negative",
        ["simulate", "--samples", "-1"],
        _usage("simulate", "--samples must be >= 100, got -1"),
    ),
    _cli_case(
        "--samples 1e9 (argparse's int check)",
        "wrong_type",
        ["simulate", "--samples", "1e9"],
        _usage("simulate", "argument --samples: invalid int value: '1e9'"),
    ),
    _cli_case(
        "--samples 10**10 (refused before sampling)",
        "too_large",
        ["simulate", "--samples", "10000000000", "--methods", "sd", "--K", "1"],
        _usage(
            "simulate",
            "num_drafts (K) = 1 x L = 2 x num_iterations = 10000000000 draft tokens exceed MAX_DRAFT_TOKENS = 50000000",
        ),
        timeout=2.0,
    ),
    _cli_case(
        "--samples 100 --seed -1",
        "bad_seed",
        ["simulate", "--samples", "100", "--seed", "-1"],
        _usage("simulate", "seed must be an int >= 0 or None, got -1"),
    ),
    _cli_case(
        "--seed without --samples",
        "bad_seed",
        ["simulate", "--seed", "3"],
        _usage("simulate", "--seed only applies with --samples (Monte Carlo)"),
    ),
    _cli_case(
        "--methods ','",
        "wrong_type",
        ["simulate", "--methods", ","],
        _usage("simulate", "--methods is empty"),
    ),
    _cli_case(
        "report --K 1-3000000000",
        "too_large",
        ["report", "--K", "1-3000000000"],
        _usage("report", "--K values must lie in 1..8, got '1-3000000000'"),
        timeout=2.0,
    ),
]


# ---------------------------------------------------------------------------- gpu (optional)
def _torch_inputs(**change: Any) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    base = {
        "drafts": torch.tensor(D[None]),
        "draft_probs": torch.tensor(DQ[None]),
        "target_probs": torch.tensor(DP[None]),
    }
    for key, fn in change.items():
        base[key] = fn(base[key])
    return base


def _kverify(method: str = "mdbv", **change: Any) -> Any:
    import torch

    from spectr_gbv.gpu.kernels import verify

    return verify(method, **_torch_inputs(**change), generator=torch.Generator().manual_seed(0))


def _t(values: list[float]) -> Any:
    import torch

    return torch.tensor(values, dtype=torch.float64)


def _cat_zero_column(t: Any) -> Any:
    import torch

    return torch.cat([t, t[..., :1] * 0], dim=-1)


def _tset(idx: tuple[int, ...], value: Any) -> Callable[[Any], Any]:
    def f(t: Any) -> Any:
        t = t.clone()
        t[idx] = value
        return t

    return f


GPU = [
    Case(
        "gpu.kernels.verify",
        "nan",
        "NaN target entry",
        lambda: _kverify(target_probs=_tset((0, 0, 1, 0), NAN)),
        err("target_probs"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "inf",
        "inf draft entry",
        lambda: _kverify(draft_probs=_tset((0, 1, 0, 1), INF)),
        err("draft_probs"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "negative",
        "negative draft entry",
        lambda: _kverify(draft_probs=_tset((0, 0, 0), _t([-0.5, 1.5]))),
        err("draft_probs"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "unnormalised",
        "target row summing to 1.5",
        lambda: _kverify(target_probs=_tset((0, 0, 0), _t([1.0, 0.5]))),
        err("target_probs"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "wrong_shape",
        "drafts without the batch axis",
        lambda: _kverify(drafts=lambda t: t[0]),
        err("drafts"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "vocab_mismatch",
        "target over 3 tokens",
        lambda: _kverify(target_probs=lambda t: _cat_zero_column(t)),
        err(("target_probs", "draft_probs"), "shape"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "K_zero",
        "K = 0",
        lambda: _kverify(drafts=lambda t: t[:, :0], draft_probs=lambda t: t[:, :0], target_probs=lambda t: t[:, :0]),
        err("drafts"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "L_zero",
        "L = 0 for mdbv",
        lambda: _kverify(
            drafts=lambda t: t[:, :, :0], draft_probs=lambda t: t[:, :, :0], target_probs=lambda t: t[:, :, :1]
        ),
        err("drafts"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "id_out_of_range",
        "draft id 2 with V = 2",
        lambda: _kverify(drafts=_tset((0, 1, 0), 2)),
        err("drafts"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "id_out_of_range",
        "placeholder -1",
        lambda: _kverify(drafts=_tset((0, 0, 1), -1)),
        err("drafts"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "fp16",
        "float16 probabilities",
        lambda: _kverify(draft_probs=lambda t: t.half(), target_probs=lambda t: t.half()),
        err("draft_probs"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "wrong_type",
        "numpy drafts",
        lambda: _kverify(drafts=lambda t: t.numpy()),
        err("drafts"),
        needs="torch",
    ),
    Case(
        "gpu.kernels.verify",
        "K_huge",
        "K = 2000 identical drafts (correct result)",
        lambda: _kverify(
            drafts=lambda t: t[:, :1].repeat(1, 2000, 1),
            draft_probs=lambda t: t[:, :1].repeat(1, 2000, 1, 1),
            target_probs=lambda t: t[:, :1].repeat(1, 2000, 1, 1),
        ),
        ok(lambda out: _check_prefix_of(tuple(int(v) for v in out.tokens[0] if v >= 0), (0, 1))),
        needs="torch",
    ),
]


def _tiny_lm(vocab: int, seed: int) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(1)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).eval()


def _decoder(**kw: Any) -> Any:
    from spectr_gbv.gpu import SpeculativeDecoder

    args = {"method": "mdbv", "num_drafts": 2, "draft_length": 2, "seed": 0, "device": "cpu"}
    args.update(kw)
    draft = args.pop("draft", None) or _tiny_lm(8, 1)
    return SpeculativeDecoder(_tiny_lm(8, 0), draft, **args)


GPU += [
    Case(
        "SpeculativeDecoder",
        "K_zero",
        "num_drafts 0",
        lambda: _decoder(num_drafts=0),
        err("num_drafts"),
        needs="transformers",
    ),
    Case(
        "SpeculativeDecoder",
        "L_zero",
        "draft_length 0",
        lambda: _decoder(draft_length=0),
        err("draft_length"),
        needs="transformers",
    ),
    Case(
        "SpeculativeDecoder",
        "vocab_mismatch",
        "draft with 6 logits, target 8",
        lambda: _decoder(draft=_tiny_lm(6, 1)),
        err("vocabulary mismatch"),
        needs="transformers",
    ),
    Case(
        "SpeculativeDecoder",
        "nan",
        "temperature nan",
        lambda: _decoder(temperature=NAN),
        err("temperature"),
        needs="transformers",
    ),
    Case(
        "SpeculativeDecoder",
        "negative",
        "temperature -1",
        lambda: _decoder(temperature=-1.0),
        err("temperature"),
        needs="transformers",
    ),
    Case(
        "SpeculativeDecoder.generate",
        "id_out_of_range",
        "prompt id 8 with V = 8",
        lambda: _decoder().generate([1, 8], 4),
        err("prompt_ids"),
        needs="transformers",
    ),
    Case(
        "SpeculativeDecoder.generate",
        "negative",
        "max_new_tokens -1",
        lambda: _decoder().generate([1, 2], -1),
        err("max_new_tokens"),
        needs="transformers",
    ),
    Case(
        "SpeculativeDecoder.generate",
        "wrong_shape",
        "prompt of shape [1, 1, 2]",
        lambda: _decoder().generate([[[1, 2]]], 2),
        err("prompt_ids"),
        needs="transformers",
    ),
]


# ---------------------------------------------------------------------------- validate
def _validate(**kw: Any) -> Any:
    from spectr_gbv.validate import validate
    from spectr_gbv.validate.mutants import correct_sd

    verify = kw.pop("verify", correct_sd)
    return validate(verify, **kw)


def _load(path: str, interface: str = "generic") -> Any:
    from spectr_gbv.validate import load_verifier

    return load_verifier(path, interface)


VALIDATE = [
    Case("validate", "wrong_type", "interface 'grpc'", lambda: _validate(interface="grpc"), err("interface")),
    Case("validate", "wrong_type", "level 'approximate'", lambda: _validate(level="approximate"), err("level")),
    Case("validate", "wrong_type", "budget 'huge'", lambda: _validate(budget="huge"), err("budget")),
    Case(
        "validate",
        "wrong_type",
        "reference 'nope'",
        lambda: _validate(reference="nope"),
        err("reference"),
    ),
    Case("validate", "negative", "seed -1", lambda: _validate(seed=-1), err("seed")),
    Case("validate", "wrong_type", "seed given as a string", lambda: _validate(seed="0"), err("seed")),
    Case("validate", "K_zero", "instances = []", lambda: _validate(instances=[]), err("instances")),
    Case("validate", "wrong_type", "verify not callable", lambda: _validate(verify=42), err("verify")),
    Case("validate", "nan", "time_limit_s nan", lambda: _validate(time_limit_s=NAN), err("time_limit_s")),
    Case("validate", "negative", "time_limit_s -1", lambda: _validate(time_limit_s=-1.0), err("time_limit_s")),
    Case(
        "validate",
        "wrong_type",
        "instances holding a string",
        lambda: _validate(instances=["default"]),
        err("instances"),
    ),
    Case("validate", "K_zero", "instances with K = 0", lambda: _validate(instances=[(INST, 0)]), err("K")),
    Case(
        "load_verifier",
        "wrong_type",
        "path without ':'",
        lambda: _load("spectr_gbv.validate.mutants"),
        err("module:function"),
    ),
    Case(
        "load_verifier",
        "wrong_type",
        "unknown module",
        lambda: _load("no_such_module_xyz:f"),
        err("no_such_module_xyz"),
    ),
    Case(
        "load_verifier",
        "wrong_type",
        "unknown function",
        lambda: _load("spectr_gbv.validate.mutants:nope"),
        err("nope"),
    ),
    Case(
        "load_verifier",
        "wrong_type",
        "unknown interface",
        lambda: _load("spectr_gbv.validate.mutants:correct_sd", "grpc"),
        err("grpc"),
    ),
]

ALL_CASES = CORE + CORE_GUARDS + THEORY + THEORY_GUARDS + REFERENCE + REFERENCE_GUARDS + SIMULATE
ALL_CASES += SIMULATE_GUARDS + CLI + GPU + VALIDATE


def _param(case: Case) -> Any:
    marks = []
    if case.needs == "torch" and not HAS_TORCH:
        marks.append(pytest.mark.skip(reason="torch not installed"))
    if case.needs == "transformers" and not HAS_TRANSFORMERS:
        marks.append(pytest.mark.skip(reason="torch/transformers not installed"))
    if case.xfail:
        marks.append(pytest.mark.xfail(strict=True, reason=case.xfail))
    ident = f"{case.entry}-{case.cls}-{case.what}".replace(" ", "_")
    return pytest.param(case, id=ident, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in ALL_CASES])
def test_bad_input(case: Case) -> None:
    """One entry point, one bad input: the documented error naming the argument, or the correct result."""
    with time_limit(case.timeout):
        if isinstance(case.expect, Message):
            with pytest.raises(case.expect.exc) as info:
                case.call()
            assert str(info.value) == case.expect.text
        elif isinstance(case.expect, Raises):
            with pytest.raises(case.expect.exc) as info:
                case.call()
            message = str(info.value)
            for name in case.expect.names:
                alternatives = name if isinstance(name, tuple) else (name,)
                assert any(a in message for a in alternatives), f"{name!r} not in the message {message!r}"
        else:
            case.expect.check(case.call())


def test_every_class_is_tried() -> None:
    """Every bad-input class of CLASSES is tried, at several entry points; the count is fixed."""
    tried: dict[str, set[str]] = {c: set() for c in CLASSES}
    for case in ALL_CASES:
        assert case.cls in tried, f"case {case.what!r} has an unknown class {case.cls!r}"
        tried[case.cls].add(case.entry.split(".")[0])
    assert all(tried.values()), [c for c, e in tried.items() if not e]
    assert len(CLASSES) == 20
    assert len(ALL_CASES) >= 200


class _FakeTTY(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_long_tuple_path_shows_a_progress_bar_with_an_eta(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run allowed by the work guard but above PROGRESS_MIN_WORK draws a tqdm bar (with its ETA) on a terminal."""
    from spectr_gbv.core.progress import QUIET_ENV, set_quiet
    from spectr_gbv.simulate.exact import PROGRESS_MIN_WORK

    inst = random_instance(40, 1, 0, exact=False)
    monkeypatch.delenv(QUIET_ENV, raising=False)
    stream = _FakeTTY()
    monkeypatch.setattr("sys.stderr", stream)
    previous = set_quiet(False)
    try:
        res = simulate_exact(inst, "mdbv", 2)
    finally:
        set_quiet(previous)
    assert res.enumeration == "ordered" and res.num_kernels < 2000
    assert res.num_kernels * 2 * 2 * 40 >= PROGRESS_MIN_WORK  # shown for its work, not its kernel count
    shown = stream.getvalue()
    assert "mdbv K=2" in shown and f"/{res.num_kernels}" in shown and "<" in shown  # tqdm's [elapsed<ETA]


@pytest.mark.parametrize("name", ["instances", "configs", "cases", "verify_inputs"])
def test_strategy_sizes_above_max_cells_are_refused_when_built(name: str) -> None:
    """`instances(n=8, L=(5, 6))` made hypothesis raise Unsatisfiable without naming max_cells."""
    from spectr_gbv.testing import strategies

    with pytest.raises(ValueError) as info:
        getattr(strategies, name)(n=8, L=(5, 6))  # building it, before any example is drawn
    assert str(info.value) == (
        "max_cells=64 is below the smallest table requested, n=8, L=5: n**L = 32768 cells; "
        "raise max_cells to at least 32768 or lower n / L"
    )


def test_strategy_ranges_partly_above_max_cells_draw_only_fitting_sizes() -> None:
    """A range whose large end does not fit is clipped, not filtered (no Unsatisfiable, no health check)."""
    from hypothesis import given, settings

    from spectr_gbv.testing.strategies import configs

    seen: set[tuple[int, int]] = set()

    @settings(max_examples=60, deadline=None, database=None)
    @given(configs(n=(2, 30), L=(2, 6), K=1, max_cells=16))
    def check(cfg: Any) -> None:
        assert cfg.n**cfg.L <= 16
        seen.add((cfg.n, cfg.L))

    check()
    assert seen <= {(2, 2), (2, 3), (2, 4), (3, 2), (4, 2)} and len(seen) >= 2


def test_long_report_shows_a_bar_weighted_by_its_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    """`report` showed a bar over 'steps' of very unequal length; now over estimated seconds, with the stage."""
    from spectr_gbv.core.progress import QUIET_ENV, set_quiet
    from spectr_gbv.simulate.report import build_report

    monkeypatch.delenv(QUIET_ENV, raising=False)
    stream = _FakeTTY()
    monkeypatch.setattr("sys.stderr", stream)
    previous = set_quiet(False)
    try:
        build_report(default_instance(), [1], methods=("sd", "mdbv"), horizon=2, ledger="spectr_gbv")
    finally:
        set_quiet(previous)
    shown = stream.getvalue()
    assert "report:" in shown and "s est." in shown and "<" in shown  # tqdm's [elapsed<ETA]
    assert "mdbv K=1" in shown and "claims ledger" in shown
