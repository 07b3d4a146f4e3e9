"""CLI faults: a closed stdout pipe, an unwritable stdout, long exact values, over-long runs."""

from __future__ import annotations

import errno
import io
import json
import os
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from spectr_gbv.cli.common import EXIT_OUTPUT_ERROR, MAX_EXACT_DIGITS, UsageError, exact_output
from spectr_gbv.cli.main import main
from spectr_gbv.core.instance import default_instance
from spectr_gbv.ledger.report import build_report
from spectr_gbv.simulate.estimate import RunTooLongError, StageEstimate, check_estimate, history_views

DATA = Path(__file__).resolve().parents[1] / "data"

# a verifier that always emits the first draft token L + 1 times: a wrong output law
FAILING_VERIFIER = '''
def verify(draft_tokens, draft_probs, target_probs, rng):
    return [int(draft_tokens[0][0])] * (len(draft_tokens[0]) + 1)
'''


def _cli(args: list[str], cwd: Path, stdout: object) -> subprocess.Popen:
    code = "import sys; from spectr_gbv.cli.main import main; sys.exit(main())"
    env = {**os.environ, "SPECTR_GBV_QUIET": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=stdout, stderr=subprocess.PIPE, cwd=cwd, env=env
    )


def test_verdict_survives_a_closed_stdout_pipe(tmp_path: Path) -> None:
    """`validate ... | head -1` of a failing verifier exits 1, not 0 (the reader closed the pipe)."""
    (tmp_path / "h3_failing_verifier.py").write_text(FAILING_VERIFIER)
    args = [
        "validate",
        "h3_failing_verifier:verify",
        "--budget",
        "quick",
        "--no-probes",
        "--no-search",
        "--isolation",
        "thread",
        "--instance",
        str(DATA / "lp_rounding_instance.json"),
    ]
    proc = _cli(args, tmp_path, subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the report is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1
    assert "Traceback" not in err and "BrokenPipeError" not in err


def test_closed_pipe_keeps_a_zero_status_quiet(tmp_path: Path) -> None:
    proc = _cli(["bound", "--no-lp"], tmp_path, subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0
    assert err == ""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_stdout_on_a_full_device_is_one_line(tmp_path: Path) -> None:
    """`report > /dev/full`: one line on stderr and exit 74, not a raw OSError traceback."""
    with open("/dev/full", "w") as full:
        proc = _cli(["bound", "--no-lp"], tmp_path, full)
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == EXIT_OUTPUT_ERROR
    assert err == "spectr-gbv bound: error: cannot write to stdout: No space left on device\n"


class _FailingStream(io.StringIO):
    def __init__(self, exc: OSError) -> None:
        super().__init__()
        self.exc = exc

    def write(self, text: str) -> int:
        raise self.exc


@pytest.mark.parametrize(
    "exc, status, message",
    [
        (OSError(errno.ENOSPC, "No space left on device"), EXIT_OUTPUT_ERROR, "No space left on device"),
        (BrokenPipeError(errno.EPIPE, "Broken pipe"), 0, None),
    ],
    ids=["ENOSPC", "EPIPE"],
)
def test_write_failures_map_to_the_exit_status(monkeypatch, capsys, exc, status, message) -> None:
    monkeypatch.setattr(sys, "stdout", _FailingStream(exc))
    assert main(["bound", "--no-lp", "--json"]) == status
    err = capsys.readouterr().err
    if message is None:
        assert err == ""
    else:
        assert err == f"spectr-gbv bound: error: cannot write to stdout: {message}\n"


def test_help_on_a_full_stdout_is_not_a_silent_success(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "stdout", _FailingStream(OSError(errno.ENOSPC, "No space left on device")))
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == EXIT_OUTPUT_ERROR
    assert capsys.readouterr().err == "spectr-gbv: error: cannot write to stdout: No space left on device\n"


def test_simulate_prints_exact_values_past_4300_digits(capsys) -> None:
    """`simulate --methods spectr --K 8 --horizon 14 --json` printed Python's 4300-digit ValueError."""
    assert main(["simulate", "--methods", "spectr", "--K", "8", "--horizon", "14", "--json", "--quiet"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    num, den = row["expected_calls"].split("/")
    assert max(len(num), len(den)) > 4300
    assert sys.get_int_max_str_digits() == 4300  # restored after the output
    with exact_output("unused"):  # exact: block_efficiency is N / expected_calls
        be = 14 / Fraction(int(num), int(den))
        assert row["block_efficiency"] == f"{be.numerator}/{be.denominator}"


def test_exact_output_refuses_absurd_values() -> None:
    huge = Fraction(10 ** (MAX_EXACT_DIGITS + 5) + 1, 3)
    with pytest.raises(UsageError, match=r"^an exact value has over 100000 decimal digits \(MAX_EXACT_DIGITS\)"):
        with exact_output("lower --horizon"):
            str(huge)
    with exact_output("unused"):
        assert len(str(Fraction(10**5000 + 1, 7))) > 5000


def test_report_at_the_cli_maxima_is_refused_with_an_estimate(capsys) -> None:
    """`report --K 8 --horizon 16` ran for about an hour with no estimate."""
    assert main(["report", "--K", "8", "--horizon", "16"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spectr-gbv report: error: estimated at least ~")
    assert re.search(r"min \(longest: .*K=8[,:] 65536 kernels at ~[0-9.e+]+ ms each\)", err), err
    assert "above the limit of ~10 min; lower --K / --horizon" in err


def test_build_report_checks_its_estimate_before_running() -> None:
    with pytest.raises(RunTooLongError, match=r"^estimated at least ~0 s \(longest: .*K=1[,:] .*\), above the limit"):
        build_report(default_instance(), [1], horizon=0, max_seconds=1e-9)


def test_check_estimate_names_the_longest_stage() -> None:
    stages = [StageEstimate("a K=1", 30.0, "x"), StageEstimate("b K=2", 700.0, "65536 kernels at ~10 ms each")]
    assert check_estimate(stages[:1], 600.0, "hint") == 30.0
    with pytest.raises(RunTooLongError) as info:
        check_estimate(stages, 600.0, "lower --K")
    assert str(info.value) == (
        "estimated at least ~12 min (longest: b K=2, 65536 kernels at ~10 ms each), above the limit of ~10 min; "
        "lower --K"
    )


def test_history_views_bound() -> None:
    inst = default_instance()  # n = 2, depth 2: views (), (a), (a, b)
    assert [history_views(inst, N) for N in (1, 2, 3, 16)] == [1, 3, 7, 7]


def test_a_slow_sampled_kernel_is_stopped_at_the_cap() -> None:
    """Timing one kernel of near_opt_bv at K = 8 on a float instance took minutes before the estimate returned."""
    import time

    from spectr_gbv.simulate import estimate

    finished: list[bool] = []
    assert estimate._timed(lambda: (time.sleep(30), finished.append(True)), 0.2) == 0.2
    assert finished == []  # stopped by the timer inside the kernel
