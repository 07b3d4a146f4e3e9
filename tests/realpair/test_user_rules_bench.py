"""A user's rule in the real-pair law test and in the paired replay (bench/paired_kernels.py --methods).

``copy_sd`` (tests/gpu/own_kernels.py) is ``verify_sd`` behind a user's name: with one seed the law
test and the replay must give exactly what ``sd`` gives.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pq = pytest.importorskip("pyarrow.parquet")

from spectr_gbv.realpair.real_lossless import first_tokens_law_test  # noqa: E402
from tests.gpu.test_paired_replay_scripts import _record, _script  # noqa: E402
from tests.gpu.tiny_models import perturbed_copy, tiny_llama  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::spectr_gbv.gpu.kernels.rules.UnverifiedRuleWarning")

MOD = "tests.gpu.own_kernels"


def test_the_law_test_takes_a_user_rule_and_gives_what_sd_gives():
    target = tiny_llama(16, seed=0, num_layers=2, initializer_range=0.25)
    draft = perturbed_copy(target, seed=50, scale=0.12)
    prompt = torch.tensor([1, 2])
    sd = first_tokens_law_test(target, draft, prompt, "sd", 1, 3, 1.0, 2000, 1, seed=7)
    own = first_tokens_law_test(target, draft, prompt, f"{MOD}:copy_sd", 1, 3, 1.0, 2000, 1, seed=7)
    assert own.method == f"{MOD}:copy_sd" and sd.passed
    assert (own.g_statistic, own.p_value, own.dof, own.bins) == (sd.g_statistic, sd.p_value, sd.dof, sd.bins)
    with pytest.raises(ValueError, match="is lossy"):
        first_tokens_law_test(target, draft, prompt, f"{MOD}:lossy_rule", 1, 3, 1.0, 10, 1, seed=7)


def test_the_paired_replay_takes_a_user_rule(tmp_path: Path, capsys) -> None:
    rec, table = tmp_path / "rec.pt", tmp_path / "paired.parquet"
    torch.save(_record(4, K=2, L=3, V=5), rec)
    argv = ["--methods", f"sd,{MOD}:copy_sd", "--baseline", "sd", "--reps", "3", "--L", "3"]
    _script("paired_kernels").main([*argv, "--record", str(rec), "--out", str(table)])
    assert f"| {MOD}:copy_sd | " in capsys.readouterr().out
    rows = pq.read_table(table).to_pylist()
    by = {(r["method"], r["iteration"]): r["tau"] for r in rows}
    assert len(rows) == 8 and all(by[("sd", i)] == by[(f"{MOD}:copy_sd", i)] for i in range(4))


@pytest.mark.parametrize(
    "methods, message",
    [
        (f"sd,{MOD}:three_args", f"error: --methods: method '{MOD}:three_args': a rule takes (inputs, uniforms)"),
        (
            f"{MOD}:lossy_rule",
            f"error: --methods: method '{MOD}:lossy_rule' is lossy (it declares lossless = False); the replay",
        ),
        ("nope", "error: --methods: method: unknown kernel method 'nope'; valid: ar, sd,"),
    ],
)
def test_the_paired_replay_refuses_a_bad_rule_in_one_line(tmp_path: Path, capsys, methods, message) -> None:
    with pytest.raises(SystemExit) as exc:
        _script("paired_kernels").main(["--methods", methods, "--record", str(tmp_path / "never.pt")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "never.pt").exists()


def test_a_bench_sweep_task_runs_a_user_rule_as_sd():
    """One task of ``spectr-gbv sweep bench`` (run_point, no Ray) with ``copy_sd``: sd's counts, its own label."""
    from dataclasses import replace

    from spectr_gbv.realpair.config import PRESETS
    from spectr_gbv.realpair.sweep_task import BenchSweep, run_point
    from tests.sweep.bench_models import MODELS, PROMPTS

    config = replace(PRESETS["quick"], methods=("sd", f"{MOD}:copy_sd"), num_prompts=2, max_new_tokens=8)
    config = replace(config, peer=False, predict=False, lossless=False).with_axes((1, 2), (2,), (1.0,))
    sweep = BenchSweep(config, MODELS, PROMPTS)
    points = {p.key: p for p in sweep.points()}
    assert (f"{MOD}:copy_sd", 2, 2, 1.0) in points and ("sd", 2, 2, 1.0) not in points
    sd = run_point(sweep, points[("sd", 1, 2, 1.0)])
    own = run_point(sweep, points[(f"{MOD}:copy_sd", 1, 2, 1.0)])
    assert [r["method"] for r in own] == [f"{MOD}:copy_sd"] * len(config.datasets)
    for a, b in zip(sd, own, strict=True):
        assert (a["accepted_hist"], a["tokens_emitted"], a["target_calls"]) == (
            b["accepted_hist"],
            b["tokens_emitted"],
            b["target_calls"],
        )
