"""The exact paired replay scripts (bench/paired_kernels.py --exact, bench/near_opt_real_pair_probe.py).

On a small saved record (so nothing is decoded): the Parquet values are the closed-form
E[tau | drafts] of every method, and the probe's counts are those values' counts.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch

from spectr_gbv.gpu.kernels import expected_accepted

BENCH = Path(__file__).resolve().parents[2] / "bench"
METHODS = ("sd", "mdbv", "gbv_multipath", "near_opt_bv")


def _script(name: str) -> object:
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _record(n: int, K: int, L: int, V: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(7)
    out = []
    for _ in range(n):
        q = torch.softmax(2.0 * torch.randn(1, K, L, V, generator=g, dtype=torch.float64), -1)
        p = torch.softmax(2.0 * torch.randn(1, K, L + 1, V, generator=g, dtype=torch.float64), -1)
        drafts = torch.multinomial(q.reshape(-1, V), 1, generator=g).reshape(1, K, L)
        out.append((drafts, q, p))
    return out


def test_exact_replay_writes_the_closed_form_and_the_probe_counts_it(tmp_path: Path, capsys) -> None:
    record = _record(5, K=3, L=3, V=5)
    rec, table = tmp_path / "rec.pt", tmp_path / "paired.parquet"
    torch.save(record, rec)
    argv = ["--methods", ",".join(METHODS), "--exact", "--reps", "2", "--L", "3"]
    _script("paired_kernels").main([*argv, "--record", str(rec), "--out", str(table)])
    printed = capsys.readouterr().out
    assert "5 recorded iterations" in printed and "mean P(tau >= i)" in printed
    rows = pq.read_table(table).to_pylist()
    assert len(rows) == 5 * len(METHODS) and all(r["exact"] for r in rows)
    want = {m: [float(expected_accepted(m, *it)[0]) for it in record] for m in METHODS}
    for r in rows:
        assert r["tau"] == pytest.approx(want[r["method"]][r["iteration"]], abs=1e-12)

    _script("near_opt_real_pair_probe").main(["--record", str(rec), "--parquet", str(table)])
    printed = capsys.readouterr().out
    same = sum(abs(a - b) < 0.005 for a, b in zip(want["near_opt_bv"], want["gbv_multipath"], strict=True))
    assert f"equals gbv_multipath within 0.005 on {same} of 5 iterations" in printed
    total = sum(want["near_opt_bv"]) - sum(want["mdbv"])
    assert f"minus mdbv: total {total:+.3f} tokens" in printed
    assert printed.count("worst: iteration") == 4 and "peel: " in printed
