"""Bad input at the theory layer's entry points (bounds, lp, bound_table).

The case machinery and the classes of bad input are in ``tests/bad_input_helpers.py``; the
catalogue of classes, with the messages asserted here, is docs/bad_input.md.
"""

from __future__ import annotations

import math
from fractions import Fraction as F
from typing import Any

import numpy as np
import pytest

from spectr_gbv.core import TabularAR
from spectr_gbv.theory import bounds, lp
from spectr_gbv.theory.table import bound_table
from tests.bad_input_helpers import FLOAT, INST, NAN, P3, Case, P, Q, equals, err, msg, ok, params, run_case


def _table(n: int, row: list[Any], depth: int, name: str = "target") -> TabularAR:
    return TabularAR.context_free(row, depth, name=name)


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



THEORY_GUARDS: list[Case] = [
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
        ok(equals(bounds.cic_bound(FLOAT.target, FLOAT.draft, 3, 2))),
    ),
]


CASES = THEORY + THEORY_GUARDS


@pytest.mark.parametrize("case", params(CASES))
def test_bad_input(case: Case) -> None:
    """One entry point, one bad input: the documented error naming the argument, or the correct result."""
    run_case(case)
