"""``bench/device_check.sh --dry-run``: the prepared CUDA check runs every step on the CPU at tiny shapes."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="needs bash and timeout")
def test_dry_run_passes_every_step_and_writes_the_outputs(tmp_path):
    out = tmp_path / "cuda"
    proc = subprocess.run(
        ["bash", str(ROOT / "bench" / "device_check.sh"), "--dry-run", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    summary = (out / "summary.txt").read_text()
    assert proc.returncode == 0, proc.stdout + proc.stderr + summary
    lines = summary.splitlines()
    assert [line.split()[0] for line in lines] == [
        "env",
        "tests_gpu",
        "kernel_overhead",
        "decoder_vs_hf",
        "engine_flashinfer_chain",
        "engine_vllm_mrv2",
        "engine_sglang_chain",
        "engine_trtllm_sampler",
    ]
    assert all(" rc=0 " in line for line in lines[:4])
    # the engine steps are CUDA only: the dry run skips each with one line
    assert all(line.split()[1:3] == ["skipped:", "dry"] for line in lines[4:])
    assert "passed" in (out / "tests_gpu.txt").read_text()
    assert "mdbv" in (out / "kernel_overhead.txt").read_text()
    res = json.loads((out / "decoder_vs_hf" / "results.json").read_text())
    rows = {r["config"]: r for r in res["rows"]}
    assert set(rows) == {"ar", "hf_constant", "hf_heuristic", "mdbv", "mdbv_flat"}
    assert rows["mdbv"]["scoring"] == "tree" and rows["mdbv_flat"]["scoring"] == "flat"
    assert all(r["tokens"] == 8 and r["tokens_per_s"] > 0 and r["block_efficiency"] >= 1 for r in rows.values())
    assert rows["mdbv"]["target_positions_per_token"] < rows["mdbv_flat"]["target_positions_per_token"]
    assert (out / "decoder_vs_hf" / "summary.md").read_text().startswith("# Decoder vs transformers")
