"""``spectr-gbv simulate --methods`` with a user's own rules: a line per rule, exact rows, sampled fallback, errors."""

from __future__ import annotations

import json

import pytest

from spectr_gbv.cli.main import main

OWN = "tests.simulate.own_rules:"


def test_user_rules_run_beside_registered_ones(capsys):
    assert main(["simulate", "--methods", f"sd,{OWN}sd_copy,{OWN}TreeRRS", "--K", "1,2", "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [
        f"Rule {OWN}sd_copy: function, claims lossless, no structure (tuple-by-tuple enumeration), reads draft 0 only",
        f"Rule {OWN}TreeRRS: verifier, claims lossless, structure draft_tree",
    ]
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in lines[5:]}
    assert rows[("sd", "2")] == rows[(f"{OWN}sd_copy", "2")] == ["107/72", "=", "1.486111", "0", "yes"]
    assert rows[(f"{OWN}TreeRRS", "2")] == ["59/36", "=", "1.638889", "0", "yes"]  # rrs's exact value


def test_json_rows_of_user_rules_are_exact(capsys):
    assert main(["simulate", "--methods", f"rrs,{OWN}TreeRRS,{OWN}accept_all", "--K", "2", "--json"]) == 0
    rows = {r["method"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[f"{OWN}TreeRRS"] == {**rows["rrs"], "method": f"{OWN}TreeRRS"}
    assert (rows[f"{OWN}accept_all"]["expected_accepted"], rows[f"{OWN}accept_all"]["validity_defect"]) == ("2", "5/24")
    assert rows[f"{OWN}accept_all"]["lossless"] is False


def test_a_rule_that_cannot_be_enumerated_is_sampled_and_says_so(capsys):
    argv = ["simulate", "--methods", f"sd,{OWN}gumbel_first", "--K", "1", "--fallback-samples", "400"]
    assert main([*argv, "--quiet"]) == 0
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if line.strip().startswith(f"{OWN}gumbel_first  1")]
    assert "0.0000 [0.0000, 0.0000] sampled, not exact" in row and row.endswith("not rejected")
    (note,) = [line for line in out.splitlines() if line.startswith(f"{OWN}gumbel_first: sampled, not exact")]
    assert "(rng.gumbel " in note and "400 Monte Carlo iterations per K" in note
    assert "99% confidence interval" in note and "alpha = 0.001 (power " in note
    assert main([*argv, "--json"]) == 0
    sd, gumbel = json.loads(capsys.readouterr().out)
    assert sd["expected_accepted"] == "107/72" and "exact" not in sd  # registered rows unchanged
    assert (gumbel["exact"], gumbel["samples"], gumbel["expected_accepted"], gumbel["ci"]) == (False, 400, 0.0, [0, 0])
    assert gumbel["validity_defect"] is None and gumbel["why_sampled"].startswith("rng.gumbel")


def test_monte_carlo_form_takes_user_rules(capsys):
    assert main(["simulate", "--methods", f"sd,{OWN}sd_copy", "--K", "1", "--samples", "300", "--json"]) == 0
    sd, mine = json.loads(capsys.readouterr().out)
    assert mine["method"] == f"{OWN}sd_copy" and mine["expected_accepted"] == sd["expected_accepted"]  # same seed


@pytest.mark.parametrize(
    ("methods", "message"),
    [
        ("sd,foo", "unknown method 'foo'; valid: ar, sd, bv"),
        ("sd,nomod_xyz:rule", "method 'nomod_xyz:rule': cannot import module 'nomod_xyz' (ModuleNotFoundError"),
        (f"sd,{OWN}nope", f"method '{OWN}nope': module 'tests.simulate.own_rules' has no attribute 'nope'"),
        (f"{OWN}NOT_A_RULE", f"method '{OWN}NOT_A_RULE': rule: expected a Verifier, a Verifier subclass or a function"),
        ("sd,a:b:c", "method 'a:b:c': expected a registered name or 'module:attribute'"),
        (" , ", "--methods is empty"),
    ],
)
def test_bad_methods_give_one_line_and_exit_2(capsys, methods, message):
    assert main(["simulate", "--methods", methods, "--K", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert "\n" not in err and err.startswith(f"spectr-gbv simulate: error: {message}")
