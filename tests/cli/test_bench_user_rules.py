"""``spectr-gbv bench --methods`` with a user's rule (tests/gpu/own_kernels.py), tiny models injected."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spectr_gbv.realpair import runner as benchmark  # noqa: E402
from spectr_gbv.realpair.config import PRESETS, build_grid  # noqa: E402
from tests.cli.test_bench_cli import run_cli, tiny  # noqa: E402, F401 - the tiny-model fixture

MOD = "tests.gpu.own_kernels"
SMALL = ["--datasets", "cpython", "--prompts", "1", "--max-new-tokens", "6", "--K", "1,2", "--L", "2", "--T", "1.0"]
SMALL += ["--quiet", "--threads", "1", "--device", "cpu", "--no-peer", "--no-predict", "--no-lossless", "--json"]


@pytest.mark.usefixtures("tiny")
def test_a_user_rule_runs_beside_the_registered_ones(capsys, tmp_path):
    argv = ["bench", *SMALL, "--methods", f"sd,{MOD}:copy_sd", "--out", str(tmp_path), "--draft", "truncated:1"]
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    rows = {(r["method"], r["num_drafts"], r["draft_length"]): r for r in json.loads(out)["rows"]}
    assert list(rows) == [("ar", 1, 0), ("sd", 1, 2), (f"{MOD}:copy_sd", 1, 2), (f"{MOD}:copy_sd", 2, 2)]
    sd, copy = rows[("sd", 1, 2)], rows[(f"{MOD}:copy_sd", 1, 2)]
    assert copy["accepted_hist"] == sd["accepted_hist"]  # same seed, same kernel: the same decoding
    assert f"rule: {MOD}:copy_sd: torch rule (kernel signature), no lossless claim" in err
    assert f"warning: method '{MOD}:copy_sd': the rule's losslessness is unverified" in err


@pytest.mark.parametrize(
    "methods, message",
    [
        (f"mdbv,{MOD}:missing", f"--methods: method '{MOD}:missing': module '{MOD}' has no attribute 'missing'"),
        (f"{MOD}:three_args", f"--methods: method '{MOD}:three_args': a rule takes (inputs, uniforms)"),
        (
            f"{MOD}:lossy_rule",
            f"--methods: method '{MOD}:lossy_rule' is lossy (it declares lossless = False); the bench runs lossless",
        ),
        ("sd,khisti_is", "--methods: unknown or empty khisti_is; valid: ar, sd, bv, spectr, rrs, gbv_multipath,"),
    ],
)
def test_bad_user_rules_exit_2_with_one_line(capsys, monkeypatch, methods, message):
    def never(*args, **kwargs):
        raise AssertionError("models must not be loaded for a bad option")

    monkeypatch.setattr(benchmark, "load_models", never)
    code, out, err = run_cli(capsys, "bench", "--methods", methods)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1 and err.startswith("spectr-gbv bench: error: ")


def test_user_rules_are_never_in_the_presets_and_follow_the_registered_methods_on_the_grid():
    assert all(":" not in m for cfg in PRESETS.values() for m in (*cfg.methods, *cfg.lossless_methods))
    grid = build_grid([f"{MOD}:copy_sd", "sd", "x:y"], [1, 3], [2], [1.0], centre=(3, 2, 1.0))
    assert [p.key[:3] for p in grid] == [
        ("ar", 1, 0),
        ("sd", 1, 2),
        (f"{MOD}:copy_sd", 1, 2),
        (f"{MOD}:copy_sd", 3, 2),
        ("x:y", 1, 2),
        ("x:y", 3, 2),
    ]
    with pytest.raises(ValueError, match="unknown method.s. nope; valid: .*, or 'module:attribute' naming"):
        build_grid(["nope"], [1], [2], [1.0])
