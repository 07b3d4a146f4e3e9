"""Every class of bad input (docs/bad_input.md) is tried, across the layers' ``test_bad_input.py`` files."""

from __future__ import annotations

from tests.bad_input_helpers import CLASSES, Case
from tests.cli.test_bad_input import CASES as CLI
from tests.core.test_bad_input import CASES as CORE
from tests.gpu.test_bad_input import CASES as GPU
from tests.reference.test_bad_input import CASES as REFERENCE
from tests.simulate.test_bad_input import CASES as SIMULATE
from tests.theory.test_bad_input import CASES as THEORY
from tests.validate.test_bad_input import CASES as VALIDATE

ALL_CASES: list[Case] = CORE + THEORY + REFERENCE + SIMULATE + CLI + GPU + VALIDATE


def test_every_class_is_tried() -> None:
    """Every bad-input class of CLASSES is tried, at several entry points; the count is fixed."""
    tried: dict[str, set[str]] = {c: set() for c in CLASSES}
    for case in ALL_CASES:
        assert case.cls in tried, f"case {case.what!r} has an unknown class {case.cls!r}"
        tried[case.cls].add(case.entry.split(".")[0])
    assert all(tried.values()), [c for c, e in tried.items() if not e]
    assert len(CLASSES) == 20
    assert len(ALL_CASES) >= 200
