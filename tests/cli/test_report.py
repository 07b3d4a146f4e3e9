import json

from spectr_gbv.cli.main import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_report_text_on_default(capsys):
    code, out, _ = run_cli(capsys, "report")
    assert code == 0
    for needle in (
        "1.694444",  # the table prints 6 decimals; exact fractions with --detail (tests/cli/test_report_text.py)
        "1.780864",
        "1.486111",
        "113/72 = 1.569444",
        "[FAILS] lossless",
        "[HOLDS] monotone_bound",
        "Multi-iteration",
        "spectr_gbv_released *",
    ):
        assert needle in out, needle


def test_report_json(capsys):
    code, out, _ = run_cli(capsys, "report", "--K", "2", "--horizon", "3", "--json")
    data = json.loads(out)
    rows = {r["method"]: r for r in data["rows"]}
    assert rows["mdbv"] == {
        "method": "mdbv",
        "K": 2,
        "expected_accepted": "61/36",
        "validity_defect": "0",
        "lossless": True,
        "tolerance": None,
    }
    assert rows["spectr_gbv_released"]["lossless"] is False
    assert data["bounds"][0]["cic_bound"] == "401/216"
    assert [c["verdict"] for c in data["claims"]][-1] == "fails"
    assert {m["method"] for m in data["multi_iteration"]} >= {"bv", "greedy_bv"}


def test_simulate_json_rows(capsys):
    code, out, _ = run_cli(capsys, "simulate", "--methods", "sd,bv,mdbv", "--K", "2,3", "--json")
    assert code == 0
    rows = json.loads(out)
    assert {
        "method": "mdbv",
        "K": 2,
        "expected_accepted": "61/36",
        "validity_defect": "0",
        "lossless": True,
        "tolerance": None,
    } in rows
    assert {
        "method": "mdbv",
        "K": 3,
        "expected_accepted": "577/324",
        "validity_defect": "0",
        "lossless": True,
        "tolerance": None,
    } in rows
    assert {
        "method": "sd",
        "K": 2,
        "expected_accepted": "107/72",
        "validity_defect": "0",
        "lossless": True,
        "tolerance": None,
    } in rows


def test_simulate_with_horizon(capsys):
    code, out, _ = run_cli(capsys, "simulate", "--methods", "bv,greedy_bv", "--K", "1", "--horizon", "4", "--json")
    rows = {r["method"]: r for r in json.loads(out)}
    assert rows["bv"]["block_efficiency"] == "1152/607" and rows["greedy_bv"]["block_efficiency"] == "1152/619"
    code, out, _ = run_cli(capsys, "simulate", "--methods", "bv,greedy_bv", "--K", "1", "--horizon", "4")
    assert code == 0 and "BE over N=4" in out


def test_simulate_unknown_method(capsys):
    code, out, err = run_cli(capsys, "simulate", "--methods", "bogus")
    assert code == 2 and "unknown method 'bogus'" in err


import pytest  # noqa: E402


@pytest.mark.parametrize(
    "argv, message",
    [
        (["simulate", "--samples", "500", "--horizon", "3"], "--horizon applies to exact simulation only"),
        (["simulate", "--samples", "10"], "--samples must be >= 100"),
        (["simulate", "--seed", "3"], "--seed only applies with --samples"),
        (["simulate", "--K", "1,,2"], "--K expects comma-separated ints"),
        (["report", "--random", "2,2,0,1.5"], "0 <= zero_prob < 1"),
    ],
)
def test_option_misuse_is_an_error(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and message in err and out == ""


def test_monte_carlo_cli_states_inconclusive_power(capsys):
    code, out, _ = run_cli(capsys, "simulate", "--methods", "mdbv", "--K", "2", "--samples", "300")
    assert code == 0 and "inconclusive" in out and "give power 0.99" in out


def test_closed_pipe_is_quiet():
    import subprocess
    import sys

    cmd = f"{sys.executable} -m spectr_gbv.cli.main bound --json --no-lp | head -c 1"
    proc = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=60)
    assert proc.stdout == "{" and "Traceback" not in proc.stderr


def test_report_ledger_selection(capsys):
    code, out, _ = run_cli(capsys, "report", "--ledger", "field", "--horizon", "0", "--detail")
    assert code == 0
    assert "Field ledger" in out and "Claims ledger (SpecTr-GBV" not in out
    for needle in (
        "[HOLDS] bv_optimal",
        "[FAILS] hsd_beats_bv",
        "[HOLDS] traversal",
        "[HOLDS] kseq_approximation",
        "[HOLDS] optimal_multidraft",
        "[FAILS] gbv_multipath",
        "K=4: 110/81 = 1.358025",
        "reproduce: spectr-gbv report --random",
    ):
        assert needle in out, needle
    code, out, _ = run_cli(capsys, "report", "--ledger", "spectr_gbv", "--horizon", "0")
    assert "Claims ledger (SpecTr-GBV" in out and "Field ledger" not in out


def test_report_json_has_both_ledgers(capsys):
    code, out, _ = run_cli(capsys, "report", "--K", "2", "--horizon", "0", "--json")
    data = json.loads(out)
    assert [c["key"] for c in data["claims"]][0] == "monotone_bound"
    field = {c["key"]: c for c in data["field_claims"]}
    assert field["gbv_multipath"]["verdict"] == "fails"
    assert field["gbv_multipath"]["values"] == {"1": "113/72", "2": "67/36", "3": "14/9", "4": "110/81"}
    assert field["hsd_beats_bv"]["values"]["hsd_released"] == {"expected_accepted": "13/8", "defect": "1/18"}


def test_report_unknown_ledger_is_a_usage_error(capsys):
    import pytest

    with pytest.raises(SystemExit) as exc:
        main(["report", "--ledger", "nope"])
    assert exc.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err
