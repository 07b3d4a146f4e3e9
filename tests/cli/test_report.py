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
        "61/36 = 1.694444",
        "577/324 = 1.780864",
        "107/72 = 1.486111",
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
    } in rows
    assert {
        "method": "mdbv",
        "K": 3,
        "expected_accepted": "577/324",
        "validity_defect": "0",
        "lossless": True,
    } in rows
    assert {
        "method": "sd",
        "K": 2,
        "expected_accepted": "107/72",
        "validity_defect": "0",
        "lossless": True,
    } in rows


def test_simulate_with_horizon(capsys):
    code, out, _ = run_cli(
        capsys, "simulate", "--methods", "bv,greedy_bv", "--K", "1", "--horizon", "4", "--json"
    )
    rows = {r["method"]: r for r in json.loads(out)}
    assert (
        rows["bv"]["block_efficiency"] == "1152/607" and rows["greedy_bv"]["block_efficiency"] == "1152/619"
    )
    code, out, _ = run_cli(capsys, "simulate", "--methods", "bv,greedy_bv", "--K", "1", "--horizon", "4")
    assert code == 0 and "BE over N=4" in out


def test_simulate_unknown_method(capsys):
    code, out, err = run_cli(capsys, "simulate", "--methods", "bogus")
    assert code == 2 and "unknown method 'bogus'" in err
