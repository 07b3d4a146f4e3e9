"""Bad input at the validate harness's entry points (``validate``, ``load_verifier``).

The case machinery and the classes of bad input are in ``tests/bad_input_helpers.py``; the
catalogue of classes is docs/bad_input.md.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.bad_input_helpers import INST, NAN, Case, err, params, run_case


def _validate(**kw: Any) -> Any:
    from spectr_gbv.testing.mutants import correct_sd
    from spectr_gbv.validate import validate

    verify = kw.pop("verify", correct_sd)
    return validate(verify, **kw)


def _load(path: str, interface: str = "generic") -> Any:
    from spectr_gbv.validate import load_verifier

    return load_verifier(path, interface)


VALIDATE: list[Case] = [
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
        lambda: _load("spectr_gbv.testing.mutants"),
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
        lambda: _load("spectr_gbv.testing.mutants:nope"),
        err("nope"),
    ),
    Case(
        "load_verifier",
        "wrong_type",
        "unknown interface",
        lambda: _load("spectr_gbv.testing.mutants:correct_sd", "grpc"),
        err("grpc"),
    ),
]


CASES = VALIDATE


@pytest.mark.parametrize("case", params(CASES))
def test_bad_input(case: Case) -> None:
    """One entry point, one bad input: the documented error naming the argument, or the correct result."""
    run_case(case)
