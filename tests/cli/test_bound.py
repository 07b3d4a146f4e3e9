import json

import pytest

from spectr_gbv.cli.main import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_bound_json_on_default_instance(capsys):
    code, out, _ = run_cli(capsys, "bound", "--K", "1,2,3", "--json")
    assert code == 0
    data = json.loads(out)
    assert (data["n"], data["L"], data["exact"], data["limit"]) == (2, 2, True, "2")
    r1, r2, r3 = data["rows"]
    assert r1 == {
        "K": 1,
        "cic_bound": "13/8",
        "cic_bound_lossless": "113/72",
        "sd": "107/72",
        "bv": "113/72",
        "prefix_relaxation": "13/8",
        "opt": pytest.approx(113 / 72, abs=1e-8),
        "ot": pytest.approx(13 / 8, abs=1e-8),
    }
    assert (r2["cic_bound"], r2["cic_bound_lossless"]) == ("401/216", "397/216")
    assert r2["opt"] == pytest.approx(71 / 36, abs=1e-8) and r2["ot"] == pytest.approx(71 / 36, abs=1e-8)
    assert (r3["cic_bound"], r3["cic_bound_lossless"], r3["opt"]) == (
        "1885/972",
        "1879/972",
        pytest.approx(2),
    )


def test_bound_text_table(capsys):
    code, out, _ = run_cli(capsys, "bound", "--K", "2", "--no-lp")
    assert code == 0
    assert "401/216 = 1.856481" in out and "397/216 = 1.837963" in out
    assert "K -> infinity limit of B, B_BV, PR: 2  (L = 2; q covers supp p on V^L)" in out


def test_bound_says_when_the_draft_does_not_cover_the_target(capsys):
    code, out, _ = run_cli(capsys, "bound", "--random", "2,2,1,0.4", "--K", "1", "--no-lp")
    assert code == 0
    assert out.rstrip().endswith(
        "limit of B, B_BV, PR: 25/13 = 1.923077  (L = 2; q does not cover supp p on V^L, so the limit is below L)"
    )
    code, out, _ = run_cli(capsys, "bound", "--random", "2,2,1,0.4", "--K", "1", "--no-lp", "--json")
    data = json.loads(out)
    assert (data["limit"], data["draft_covers_target"]) == ("25/13", False)


def test_bound_random_instance_is_exact(capsys):
    code, out, _ = run_cli(capsys, "bound", "--random", "3,2,5", "--K", "1", "--json")
    data = json.loads(out)
    assert code == 0 and data["exact"] and "/" in data["rows"][0]["cic_bound"] + "/"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["bound", "--instance", "/nonexistent.json"], "cannot read"),
        (["bound", "--K", "0"], "--K values must lie in 1..64"),
        (["bound", "--K", "a"], "--K expects comma-separated ints"),
        (["bound", "--K", "3-1"], "--K range '3-1' is empty: write it low-high"),
        (["bound", "--random", "2,2"], "--random expects n,L,seed"),
        (["bound", "--random", "4,4,0", "--K", "3"], "instance too large for the LPs"),
    ],
)
def test_bound_errors_exit_2_with_one_line(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1


def test_bound_bad_row_in_file(tmp_path, capsys):
    data = json.loads(json.dumps({"n": 2, "L": 1, "target": {"": ["1/2", "1/3"]}, "draft": {"": [1, 0]}}))
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    code, _, err = run_cli(capsys, "bound", "--instance", str(path))
    assert code == 2 and "target prefix (): row sums to 5/6, not exactly 1" in err
