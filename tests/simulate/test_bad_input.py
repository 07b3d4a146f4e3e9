"""Bad input at the simulate layer's entry points (simulate_exact, validity_defect, monte_carlo, ...).

The case machinery and the classes of bad input are in ``tests/bad_input_helpers.py``; the
catalogue of classes, with the messages asserted here, is docs/bad_input.md.
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from spectr_gbv.core import Instance, random_instance
from spectr_gbv.simulate.exact import EnumerationTooLargeError, simulate_exact, validity_defect
from spectr_gbv.simulate.monte_carlo import g_test_power, iterations_for_power, monte_carlo
from tests.bad_input_helpers import INST, NAN, Case, FakeTTY, P, err, msg, params, run_case

_N300: list[Instance] = []


def _n300() -> Instance:
    """The n = 300, L = 1 exact instance, built on first use."""
    if not _N300:
        _N300.append(random_instance(300, 1, 0))
    return _N300[0]


SIMULATE: list[Case] = [
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



SIMULATE_GUARDS: list[Case] = [
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




CASES = SIMULATE + SIMULATE_GUARDS


@pytest.mark.parametrize("case", params(CASES))
def test_bad_input(case: Case) -> None:
    """One entry point, one bad input: the documented error naming the argument, or the correct result."""
    run_case(case)


def test_long_tuple_path_shows_a_progress_bar_with_an_eta(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run allowed by the work guard but above PROGRESS_MIN_WORK draws a tqdm bar (with its ETA) on a terminal."""
    from spectr_gbv.core.progress import QUIET_ENV, set_quiet
    from spectr_gbv.simulate.exact import PROGRESS_MIN_WORK

    inst = random_instance(40, 1, 0, exact=False)
    monkeypatch.delenv(QUIET_ENV, raising=False)
    stream = FakeTTY()
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
