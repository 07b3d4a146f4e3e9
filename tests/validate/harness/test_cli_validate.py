"""``spectr-gbv validate``: exit statuses 0 / 1 / 2, text and JSON output."""

from __future__ import annotations

import json
import sys

import pytest

from spectr_gbv.cli.main import main

MDBV = "spectr_gbv.reference.mdbv:MultiDraftBlockVerifier"
RELEASED = "spectr_gbv.reference.spectr_gbv_released:ReleasedSpecTrGBVVerifier"


def test_lossless_verifier_exits_0(capsys):
    assert main(["validate", MDBV, "--level", "exact", "--budget", "quick"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        f"Validation of {MDBV} (interface generic, level exact, reference -, budget quick, seed 0): PASSED"
    )
    assert "exact_defect[long_block]" in out and "adversarial_search" in out


def test_the_shipped_example_passes_quick_with_notes_not_failures(capsys):
    """The README's first validate command: a PASSED report with no alarming word and nothing on stderr."""
    assert main(["validate", "spectr_gbv.examples.textbook_sd:verify", "--budget", "quick"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "FAIL" not in out and "Traceback" not in out
    assert (
        "Notes       3     advisory, outside the verdict (conventions, determinism): determinism ok, "
        "placeholder_ids[zero_rows] note, placeholder_ids[copied_rows] note"
    ) in out
    assert "41 checks: 39 passed, 0 failed, 2 advisory notes, 0 not applicable/inconclusive" in out
    assert "- note: placeholder_ids[zero_rows] (accepts_placeholder): drafts padded with -1 ids" in out
    assert "declare it with --conventions vllm" in out
    assert "against a TV error of 0.1" in out and "Budget quick, a first look" in out


def test_a_module_in_the_current_directory_is_found(capsys, tmp_path, monkeypatch):
    """As ``python -m`` does, the CLI imports the verifier's module from the current directory."""
    (tmp_path / "my_cwd_verifier.py").write_text(
        "from spectr_gbv.testing.mutants import CORRECT\n\nverify = CORRECT['sd']\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert main(["validate", "my_cwd_verifier:verify", "--budget", "quick", "--reference", "sd"]) == 0
    assert "PASSED" in capsys.readouterr().out.splitlines()[0]


def test_lossy_verifier_exits_1_with_json(capsys):
    code = main(["validate", RELEASED, "--level", "exact", "--budget", "quick", "--reference", "mdbv", "--json"])
    assert code == 1
    data = json.loads(capsys.readouterr().out)
    assert data["passed"] is False and data["verifier"] == RELEASED and data["reference"] == "mdbv"
    assert data["smallest_failure"]["diagnosis"] in {"not_lossless", "wrong_residual", "efficiency_above_optimum"}
    failed = {c["name"] for c in data["checks"] if c["passed"] is False}
    assert "exact_defect[dense]" in failed and "reference_law_exact[dense]" in failed


@pytest.mark.parametrize(
    "argv, message",
    [
        (["validate", "no_such_module_xyz:f"], "cannot import module 'no_such_module_xyz'"),
        (["validate", "nocolon"], "bad verifier path 'nocolon'"),
        (["validate", MDBV, "--interface", "tree"], "unknown interface 'tree'; valid: generic, chain, hf"),
        (["validate", MDBV, "--reference", "nope"], "unknown method 'nope'"),
        (["validate", MDBV, "--level", "fuzzy"], "level: expected one of exact, statistical"),
        (["validate", MDBV, "--budget", "huge"], "budget: expected one of quick, standard, thorough"),
    ],
)
def test_usage_errors_exit_2_with_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("spectr-gbv validate: error: ") and message in err


def test_no_probes_no_search_flags(capsys):
    argv = ["validate", MDBV, "--level", "exact", "--budget", "quick", "--no-probes", "--no-search", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    names = {c["name"] for c in data["checks"]}
    assert "adversarial_search" not in names and "zero_coin" not in names and "exact_defect[dense]" in names
    assert any("probes skipped" in n for n in data["notes"])


def test_cli_help_names_match_the_harness():
    # the CLI keeps copies for --help (start-up without the harness); they must not drift
    from spectr_gbv.cli import validate as cli_validate
    from spectr_gbv.validate import INTERFACES
    from spectr_gbv.validate.harness.options import BUDGETS, CONVENTIONS, LEVELS

    assert cli_validate.INTERFACES == INTERFACES
    assert (cli_validate.LEVELS, cli_validate.BUDGETS, cli_validate.CONVENTIONS) == (LEVELS, BUDGETS, CONVENTIONS)


def test_instance_flag_reruns_a_saved_failure(capsys, tmp_path):
    """The smallest failing case of a JSON report, saved to a file, reruns alone with --instance."""
    always = "spectr_gbv.testing.mutants:always_accept"
    args = ["--budget", "quick", "--no-probes", "--no-search"]
    assert main(["validate", always, *args, "--json"]) == 1
    spec = json.loads(capsys.readouterr().out)["smallest_failure"]["instance"]
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    assert main(["validate", always, *args, "--instance", str(tmp_path / "spec.json")]) == 1
    out = capsys.readouterr().out
    assert "end_to_end_law[user0]" in out and "not_lossless" in out
    assert f"K {spec['K']}-{spec['K']}" in out  # the spec's K
    # a plain instance JSON file takes --K; --K alone is a usage error
    inst = tmp_path / "inst.json"
    inst.write_text(json.dumps(spec["instance"]))
    assert main(["validate", MDBV, *args, "--instance", str(inst), "--K", "3"]) == 0
    assert "K 3-3" in capsys.readouterr().out
    assert main(["validate", MDBV, "--K", "3"]) == 2
    assert main(["validate", MDBV, "--instance", str(tmp_path / "missing.json")]) == 2


def test_instance_flag_reruns_a_wide_vocabulary_failure(capsys, tmp_path):
    from spectr_gbv.validate.battery import default_battery  # noqa: PLC0415

    (wide,) = [b for b in default_battery() if b.kind == "wide_vocab"]
    (tmp_path / "wide.json").write_text(json.dumps(wide.spec(drafts=[[0]])))
    args = ["--budget", "quick", "--no-probes", "--no-search", "--instance", str(tmp_path / "wide.json")]
    assert main(["validate", "spectr_gbv.testing.mutants:uint8_id_lookup", *args]) == 1
    out = capsys.readouterr().out
    assert "end_to_end_law[wide_vocab]" in out and "V = 33,000" in out
    assert main(["validate", "spectr_gbv.examples.textbook_sd:verify", *args]) == 0
