"""``ValidateOptions`` (the options of a run, keyword or object form) and the phase protocol of the harness."""

from __future__ import annotations

import dataclasses
import json

import pytest

from spectr_gbv.core import random_instance
from spectr_gbv.reference import get_verifier
from spectr_gbv.validate import ValidateOptions, validate
from spectr_gbv.validate.harness import phases
from spectr_gbv.validate.harness.options import BUDGETS, CONVENTIONS, LEVELS
from spectr_gbv.validate.harness.state import RunContext

SMALL = {
    "level": "exact",
    "budget": "quick",
    "instances": [(random_instance(2, 1, 0), 2)],
    "search": False,
    "isolation": "thread",
    "quiet": True,
}


def _json(rep) -> dict:
    out = json.loads(rep.to_json())
    out.pop("elapsed_s", None)
    return out


def test_keyword_form_and_options_form_give_identical_reports() -> None:
    verify = get_verifier("spectr_gbv_released").sample
    by_keywords = validate(verify, **SMALL)
    by_options = validate(verify, options=ValidateOptions(**SMALL))
    assert _json(by_keywords) == _json(by_options)
    assert by_keywords.to_text().split("\n")[:3] == by_options.to_text().split("\n")[:3]
    assert not by_options.passed and by_options.smallest_failure.diagnosis == "not_lossless"


def test_options_and_keywords_together_raise() -> None:
    with pytest.raises(ValueError, match="^options: pass either"):
        validate(get_verifier("mdbv").sample, options=ValidateOptions(budget="quick"), level="exact")


def test_options_are_frozen_and_normalised() -> None:
    opts = ValidateOptions(level="exact", conventions="vllm", seed=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.level = "statistical"  # type: ignore[misc]
    assert opts.conventions == ("vllm",) and opts.seed == 3 and opts.interface == "generic"
    assert ValidateOptions.field_names()[:3] == ("interface", "level", "reference")


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"interface": "nope"}, "unknown interface 'nope'"),
        ({"level": "fast"}, "level: expected one of exact, statistical, got 'fast'"),
        ({"budget": "huge"}, "budget: expected one of quick, standard, thorough, got 'huge'"),
        ({"seed": -1}, "seed: expected an int >= 0, got -1"),
        ({"seed": True}, "seed: expected an int >= 0, got True"),
        ({"reference": 3}, "reference: expected a method name or None, got int"),
        ({"conventions": "sglang"}, "conventions: unknown 'sglang'; valid: vllm"),
        ({"conventions": 5}, "conventions: expected names among vllm, got 5"),
    ],
)
def test_options_check_their_arguments_with_the_same_messages(kw, message) -> None:
    with pytest.raises(ValueError, match=message):
        ValidateOptions(**kw)
    with pytest.raises(ValueError, match=message):  # the keyword form raises the same, before any call
        validate(get_verifier("mdbv").sample, **kw)


def test_an_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'levle'"):
        validate(get_verifier("mdbv").sample, levle="exact")


def test_option_names() -> None:
    assert LEVELS == ("exact", "statistical") and BUDGETS == ("quick", "standard", "thorough")
    assert CONVENTIONS == ("vllm",)


def test_the_phases_run_in_order() -> None:
    assert [p.name for p in phases.PHASES] == ["runs", "probes", "exact", "statistical", "reference", "search"]
    assert all(isinstance(p, phases.Phase) for p in phases.PHASES)


def test_a_finished_phase_ends_the_run_quietly() -> None:
    seen: list[str] = []

    class Record:
        def __init__(self, name: str, finish: bool = False) -> None:
            self.name, self.finish = name, finish

        def run(self, context: RunContext) -> None:
            seen.append(self.name)
            context.finished = self.finish

    class Context:
        finished = False

    phases.run_phases(Context(), [Record("a"), Record("b", finish=True), Record("c")])  # type: ignore[arg-type]
    assert seen == ["a", "b"]
