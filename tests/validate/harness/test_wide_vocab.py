"""Token ids past 8 and 16 bits: the battery's ``wide_vocab`` instance against id-narrowing bugs.

Before, the battery stopped at n = 6 and passed a verifier that stores ids as uint8 or int16;
``wide_vocab`` shows its 4 tokens as ids 7, 256, 32,768 and 32,999 of V = 33,000.
"""

from __future__ import annotations

import numpy as np
import pytest

import spectr_gbv.testing.mutants as M
from spectr_gbv.examples.textbook_sd import verify as textbook
from spectr_gbv.validate import validate
from spectr_gbv.validate.battery import KINDS, default_battery


def test_the_default_battery_holds_wide_vocab() -> None:
    assert "wide_vocab" in KINDS
    assert [bi.V for bi in default_battery() if bi.kind == "wide_vocab"] == [33000]
    assert [bi.V for bi in default_battery(1) if bi.kind == "wide_vocab"] == [33000]  # chain and hf too


@pytest.mark.parametrize("name", ["uint8_id_lookup", "int16_id_buffer"])
def test_id_narrowing_mutants_fail_at_quick_on_wide_vocab(name: str) -> None:
    fn = M.VOCAB_MUTANTS[name]
    report = validate(
        fn, budget="quick", seed=0, probes=False, search=False, instances=default_battery(kinds=["wide_vocab"])
    )
    assert not report.passed and report.exit_code == 1
    fails = report.law_failures
    assert fails and {c.diagnosis for c in fails} == {fn.bug} == {"not_lossless"}
    assert all(c.instance is not None and c.instance["vocab_size"] == 33000 for c in fails)
    # lossless on small ids: the same mutant passes an instance whose ids stay below 256
    small = validate(fn, budget="quick", seed=0, probes=False, search=False, instances=default_battery(kinds=["dense"]))
    assert small.passed, small.to_text()


def test_the_mutants_break_only_past_their_type() -> None:
    q = np.zeros((1, 1, 33000))
    p = np.zeros((1, 2, 33000))
    q[0, 0, [255, 256]] = 0.5
    p[0, 0, [255, 256]] = 0.5
    p[0, 1, 0] = 1.0
    rng = np.random.default_rng(0)
    # p = q: SD accepts every draft; uint8 reads id 256 at 0 (0/0) and never accepts it
    assert M.uint8_id_lookup(np.array([[255]]), q, p, rng) == [255, 0]
    assert M.uint8_id_lookup(np.array([[256]]), q, p, rng) != [256, 0]
    q[0, 0, [32767, 32768]], p[0, 0, [32767, 32768]] = 0.5, 0.5
    q[0, 0, [255, 256]] = p[0, 0, [255, 256]] = 0.0
    assert M.int16_id_buffer(np.array([[32767]]), q, p, rng) == [32767, 0]
    assert M.int16_id_buffer(np.array([[32768]]), q, p, rng) != [32768, 0]


def test_the_textbook_example_passes_wide_vocab() -> None:
    report = validate(
        textbook, budget="quick", seed=0, probes=False, search=False, instances=default_battery(kinds=["wide_vocab"])
    )
    assert report.passed, report.to_text()
    e2e = next(c for c in report.checks if c.name == "end_to_end_law[wide_vocab]")
    assert (
        e2e.passed
        and e2e.sample_size == report.settings["samples_per_instance"]["wide_vocab"]
        and "against TV 0.3" in e2e.detail  # quick: 3 x its TV of 0.1 (0.1 at standard)
        and e2e.power >= 0.99
    )
    assert "wide ids: V = 33,000, the law on ids 7, 256, 32768, 32999" in report.to_text()
