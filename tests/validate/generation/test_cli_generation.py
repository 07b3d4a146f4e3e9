"""``spectr-gbv validate LOOP --interface generation``: exit statuses 0 / 1 / 2, text and JSON."""

from __future__ import annotations

import json

import pytest

from spectr_gbv.cli.main import main

LOOPS = "tests.validate.generation.loops_for_tests"
QUICK = ["--interface", "generation", "--budget", "quick", "--pairs", "far", "--quiet"]


def test_a_correct_loop_exits_0(capsys):
    assert main(["validate", f"{LOOPS}:ancestral", *QUICK]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        f"Validation of {LOOPS}:ancestral (interface generation, budget quick, seed 0): PASSED"
    )
    assert "planned power >= 0.99 per scenario against a TV error of 0.2" in out
    assert "advisory, outside the verdict (determinism): determinism ok" in out
    assert "max_new_tokens: \"each scenario's m\"" in out
    assert "sequence_law[far,p1,T=0.7,top_k=3,m=2]" in out and "time_limit_s_per_call: 60.0" in out


def test_a_wrong_loop_exits_1_with_json(capsys):
    assert main(["validate", f"{LOOPS}:wrong_temperature", *QUICK, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["passed"] is False and data["interface"] == "generation" and data["exit_code"] == 1
    assert data["verifier"] == f"{LOOPS}:wrong_temperature"
    assert data["smallest_failure"]["name"].startswith("sequence_law[far")
    for key in ("settings", "checks", "notes", "law_passed", "robustness_passed", "elapsed_s"):
        assert key in data
    assert data["settings"]["sizes_covered"]["pairs"] == ["far"]


def test_a_raising_loop_exits_1(capsys):
    assert main(["validate", f"{LOOPS}:raises", *QUICK, "--time-limit", "5"]) == 1
    out = capsys.readouterr().out
    assert "- [raises] runs: the system raised during the first calls on far,p1,T=0.7,top_k=3,m=2" in out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--level", "exact"], "--level exact: the generation interfaces test the law statistically only"),
        (["--reference", "sd"], "--reference does not apply to --interface generation"),
        (["--K", "2"], "--K does not apply to --interface generation"),
        (["--conventions", "vllm"], "--conventions does not apply to --interface generation"),
        (["--m", "9"], "m: "),
        (["--max-new-tokens", "1"], "max_new_tokens: 1 is less than m = 2"),
        (["--pairs", "nope"], "pairs: unknown reference pair 'nope'"),
        (
            ["--pairs", f"{LOOPS}:mismatched_pair"],
            "pairs: pair 'bad': models with different vocabularies (target V = 8, draft 1000, alt_draft 8)",
        ),
        (["--pairs", f"{LOOPS}:no_such_pair"], "--pairs tests.validate.generation.loops_for_tests:no_such_pair: "),
    ],
)
def test_usage_errors_exit_2_with_one_line(capsys, extra, message):
    assert main(["validate", f"{LOOPS}:ancestral", *QUICK, *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("spectr-gbv validate: error: ") and message in err


@pytest.mark.parametrize(
    "target, message",
    [
        ("no-such-adapter", "unknown adapter"),
        (f"{LOOPS}:no_seed", "no keyword parameter seed"),
        (f"{LOOPS}:nothing_here", "has no attribute 'nothing_here'"),
    ],
)
def test_bad_systems_exit_2(capsys, target, message):
    assert main(["validate", target, *QUICK]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_generation_options_need_the_generation_interface(capsys):
    assert main(["validate", "spectr_gbv.reference.mdbv:MultiDraftBlockVerifier", "--m", "2"]) == 2
    assert "--m applies to --interface generation / generation_batched / self_drafting only" in capsys.readouterr().err


def test_a_batched_adapter_under_the_single_interface_is_a_usage_error(capsys):
    assert main(["validate", "spectr-decoder-batched:mdbv", *QUICK]) == 2
    assert "declares interface 'generation_batched'" in capsys.readouterr().err


def test_a_module_that_exits_on_import_is_a_failed_run(capsys, tmp_path, monkeypatch):
    (tmp_path / "exits_on_import.py").write_text("import sys\nsys.exit(5)\n\ndef generate(*a, **k):\n    return []\n")
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "exits_on_import:generate", *QUICK]) == 1
    out = capsys.readouterr().out
    assert "- [exits] runs: on import of module 'exits_on_import'" in out


def test_an_adapter_name_without_the_generation_interface_says_so(capsys):
    assert main(["validate", "hf-assisted"]) == 2
    assert "'hf-assisted' is a generation adapter's name: add --interface generation" in capsys.readouterr().err


def test_a_custom_pair_from_the_command_line_is_tested(capsys):
    assert main(["validate", f"{LOOPS}:ancestral", *QUICK[:-3], "--pairs", f"{LOOPS}:custom_pair", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "sequence_law[mine,p0,T=1,m=2]" in out and "pairs mine; V 8-8" in out
