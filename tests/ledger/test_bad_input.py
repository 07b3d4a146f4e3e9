"""The progress bar of a long ``report`` run (:func:`spectr_gbv.ledger.report.build_report`)."""

from __future__ import annotations

import pytest

from spectr_gbv.core import default_instance
from tests.bad_input_helpers import FakeTTY


def test_long_report_shows_a_bar_weighted_by_its_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    """`report` showed a bar over 'steps' of very unequal length; now over estimated seconds, with the stage."""
    from spectr_gbv.core.progress import QUIET_ENV, set_quiet
    from spectr_gbv.ledger.report import build_report

    monkeypatch.delenv(QUIET_ENV, raising=False)
    stream = FakeTTY()
    monkeypatch.setattr("sys.stderr", stream)
    previous = set_quiet(False)
    try:
        build_report(default_instance(), [1], methods=("sd", "mdbv"), horizon=2, ledger="spectr_gbv")
    finally:
        set_quiet(previous)
    shown = stream.getvalue()
    assert "report:" in shown and "s est." in shown and "<" in shown  # tqdm's [elapsed<ETA]
    assert "mdbv K=1" in shown and "claims ledger" in shown
