"""Bad input on the ``spectr-gbv`` command line (``bound``, ``simulate``, ``report``): one usage line, exit 2.

The case machinery and the classes of bad input are in ``tests/bad_input_helpers.py``; the
catalogue of classes, with the messages asserted here, is docs/bad_input.md.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from spectr_gbv.core.instance import MAX_INSTANCE_BYTES
from tests.bad_input_helpers import TMP, Case, duplicate_key_file, equals, json_file, ok, params, run_case


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
    return Case(f"cli.{argv[0]}", cls, what, lambda: _cli(*argv), ok(equals(expected)), timeout=timeout)


def _usage(command: str, text: str) -> tuple[int, str]:
    return 2, f"spectr-gbv {command}: error: {text}"


CLI: list[Case] = [
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
        ["bound", "--instance", str(TMP)],
        _usage("bound", f"instance: cannot read {TMP}: it is a directory"),
    ),
    Case(
        "cli.bound",
        "duplicate_key",
        "--instance with a duplicate key",
        lambda: _cli("bound", "--instance", duplicate_key_file()),
        ok(equals(_usage("bound", f'instance: {TMP}/dup.json: duplicate key ""'))),
    ),
    Case(
        "cli.bound",
        "control_chars",
        "--instance whose name holds ANSI escapes (printed raw)",
        lambda: _cli("bound", "--instance", json_file("ansi.json", name="evil\x1b[2J\x1b[31mred\r"), "--no-lp"),
        ok(equals((0, "Instance: evil\\x1b[2J\\x1b[31mred\\r  (n=2, L=2, exact)"))),
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



CASES = CLI


@pytest.mark.parametrize("case", params(CASES))
def test_bad_input(case: Case) -> None:
    """One entry point, one bad input: the documented error naming the argument, or the correct result."""
    run_case(case)
