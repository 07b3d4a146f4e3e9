"""Progress bars: a no-op off a terminal or when quiet, a tqdm bar on the given stream otherwise."""

from __future__ import annotations

import io
import sys

import pytest

from spectr_gbv.core import progress as prog
from spectr_gbv.core.progress import QUIET_ENV, NullProgress, is_quiet, progress, set_quiet


class FakeTTY(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def not_quiet(monkeypatch):
    monkeypatch.delenv(QUIET_ENV, raising=False)
    previous = set_quiet(False)
    yield
    set_quiet(previous)


def test_no_bar_when_the_stream_is_not_a_terminal():
    stream = io.StringIO()
    with progress(10, "work", file=stream) as bar:
        bar.update(3)
        bar.set_postfix_str("stage")
    assert isinstance(bar, NullProgress)
    assert stream.getvalue() == ""


def test_a_closed_or_streamless_target_gives_no_bar():
    closed = io.StringIO()
    closed.close()
    assert isinstance(progress(3, "work", file=closed), NullProgress)
    assert isinstance(progress(3, "work", file=object()), NullProgress)  # no isatty at all


def test_bar_on_a_terminal_writes_to_that_stream():
    stream = FakeTTY()
    with progress(4, "work", file=stream) as bar:
        bar.update(2)
        bar.set_postfix_str("solving")
    assert not isinstance(bar, NullProgress)
    text = stream.getvalue()
    assert "work:" in text and "2/4" in text and "solving" in text


def test_default_stream_is_stderr_at_call_time(monkeypatch, capsys):
    fake = FakeTTY()
    monkeypatch.setattr(sys, "stderr", fake)
    with progress(2, "stderr-bar") as bar:
        bar.update(2)
    assert "stderr-bar" in fake.getvalue()
    assert capsys.readouterr().out == ""  # never stdout


def test_quiet_argument_global_switch_and_environment(monkeypatch):
    assert isinstance(progress(2, "q", file=FakeTTY(), quiet=True), NullProgress)
    assert set_quiet(True) is False
    assert is_quiet()
    assert isinstance(progress(2, "q", file=FakeTTY()), NullProgress)
    assert not isinstance(progress(2, "q", file=FakeTTY(), quiet=False), NullProgress)  # explicit False wins
    assert set_quiet(False) is True
    assert not is_quiet()
    for value, quiet in (("1", True), ("yes", True), ("0", False), ("", False), ("false", False)):
        monkeypatch.setenv(QUIET_ENV, value)
        assert is_quiet() is quiet, value
        assert isinstance(progress(2, "q", file=FakeTTY()), NullProgress) is quiet, value


def test_no_bar_without_tqdm(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm now raises ImportError
    assert isinstance(progress(2, "q", file=FakeTTY()), NullProgress)


def test_simulate_exact_shows_a_bar_only_for_many_kernels(monkeypatch):
    from spectr_gbv.core import default_instance
    from spectr_gbv.simulate import exact

    fake = FakeTTY()
    monkeypatch.setattr(sys, "stderr", fake)
    small = exact.simulate_exact(default_instance(), "mdbv", 2, fast=False)  # 16 kernels: below the threshold
    assert small.num_kernels < exact.PROGRESS_MIN_KERNELS and fake.getvalue() == ""
    monkeypatch.setattr(exact, "PROGRESS_MIN_KERNELS", 16)
    again = exact.simulate_exact(default_instance(), "mdbv", 2, fast=False)
    assert "mdbv K=2:" in fake.getvalue() and f" 0/{again.num_kernels} " in fake.getvalue()
    assert again.expected_accepted == small.expected_accepted == exact.Fraction(61, 36)
    tree = exact.simulate_exact(default_instance(), "rrs", 2)  # structured: at most 3 nodes x (2 + 4) kernels
    assert "rrs K=2:" in fake.getvalue() and " 0/18 " in fake.getvalue() and tree.enumeration == "draft_tree"


def test_lp_shows_its_stages_only_when_large(monkeypatch):
    from spectr_gbv.core import default_instance
    from spectr_gbv.theory import lp

    fake = FakeTTY()
    monkeypatch.setattr(sys, "stderr", fake)
    lp.optimal_lossless(*default_instance(), num_drafts=2, draft_length=2)
    assert fake.getvalue() == ""
    monkeypatch.setattr(lp, "LP_PROGRESS_NONZEROS", 0)
    res = lp.optimal_coupling(*default_instance(), num_drafts=2, draft_length=2)
    text = fake.getvalue()
    assert f"OT(K=2) LP, {res.nonzeros} nonzeros" in text
    assert "building" in text and "solving (HiGHS)" in text and "exact recheck" in text and "2/3" in text


@pytest.mark.parametrize("quiet", [False, True])
def test_cli_quiet_flag_silences_the_bars_for_the_run_only(monkeypatch, capsys, quiet):
    from spectr_gbv.cli.main import main
    from spectr_gbv.theory import lp

    fake = FakeTTY()
    monkeypatch.setattr(sys, "stderr", fake)
    monkeypatch.setattr(lp, "LP_PROGRESS_NONZEROS", 0)
    assert main(["bound", "--K", "1", "--json", *(["--quiet"] if quiet else [])]) == 0
    assert '"cic_bound": "13/8"' in capsys.readouterr().out
    assert ("OPT(K=1) LP" in fake.getvalue()) is not quiet
    assert not prog.is_quiet()  # restored after the command
