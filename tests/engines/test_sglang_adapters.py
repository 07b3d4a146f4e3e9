"""The SGLang adapters (``bench.engines.sglang_kernels``) replayed against recorded calls of the real SGLang code.

``tests/engines/data/sglang_chain_*.npz`` were recorded by ``bench/engines/record_sglang.py`` in the engine
environment (sglang 0.5.23, triton 3.9.0 interpreter, torch 2.13.0+cpu): the harness arrays, every keyword argument
the adapter passed to ``chain_speculative_sampling_triton`` and the output tensors the kernel wrote. Here a stand-in
module, put in ``sys.modules`` under the kernel's module name, checks that the adapter passes exactly the recorded
arguments and writes the recorded outputs; the test then checks the adapter's rows. No sglang or triton is needed.

The tree entry is a port of the 0.5.23 CUDA kernel (the release has no CPU implementation); it is pinned against
the project's earlier port of the same kernel at commit 120affb9 (``bench/gallery/ports/sglang_tree.py``): the two
agree draw for draw except where 0.5.23 changed the acceptance test (``coin < prob_acc`` and ``p(x) > 0``).
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from bench.engines import sglang_kernels as sk
from bench.gallery.ports import sglang_tree

DATA = Path(__file__).parent / "data"
CASES = ("random", "random_block", "zero_coin", "empty_residual")


def _load(name: str) -> dict[str, Any]:
    with np.load(DATA / f"sglang_chain_{name}.npz") as z:
        return {k: z[k] for k in z.files}


class _Recorded:
    """Stand-in for ``chain_speculative_sampling_triton``: checks the recorded inputs, writes the recorded outputs."""

    def __init__(self, rec: dict[str, Any]):
        self.rec = rec
        self.calls = 0

    def __call__(self, **kw: Any) -> None:
        self.calls += 1
        rec = self.rec
        assert kw.pop("threshold_single") == 1.0 and kw.pop("threshold_acc") == 1.0
        assert kw.pop("deterministic") is True
        assert kw.pop("block_verification", False) == bool(rec["block"])
        for key, value in kw.items():
            want = rec[f"in_{key}"]
            assert isinstance(value, torch.Tensor), key
            assert value.dtype == torch.from_numpy(want).dtype, key
            np.testing.assert_array_equal(value.numpy(), want, err_msg=key)
        assert set(kw) == {k[3:] for k in rec if k.startswith("in_")}
        for key in ("predicts", "accept_index", "accept_token_num"):
            kw[key].copy_(torch.from_numpy(rec[f"out_{key}"]))


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch):
    def install(rec: dict[str, Any]) -> _Recorded:
        fake = _Recorded(rec)
        mod = types.ModuleType(sk.CHAIN_MODULE)
        mod.chain_speculative_sampling_triton = fake  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, sk.CHAIN_MODULE, mod)
        return fake

    return install


@pytest.mark.parametrize("name", CASES)
def test_chain_adapter_replays_recorded_call(name: str, stand_in) -> None:
    rec = _load(name)
    fake = stand_in(rec)
    fn = sk.chain_block if bool(rec["block"]) else sk.chain
    h = {k[2:]: torch.from_numpy(v) for k, v in rec.items() if k.startswith("h_")}
    out = fn(**h)
    assert fake.calls == 1
    assert out.dtype == torch.int64
    np.testing.assert_array_equal(out.numpy(), rec["result"])
    assert json.loads(str(rec["versions"]))["sglang"] == "0.5.23"


def test_recorded_facts_of_the_real_kernel() -> None:
    zero = _load("zero_coin")["result"]
    # coin 0 on a drafted token with p = 0 < q: rejected (strict ``coin * q < p``); the correction is token 1.
    assert zero[0].tolist() == [1, -1]
    # p = q with the largest float32 coin: accepted, then the bonus token.
    assert zero[1, 0] == 3 and zero[1, 1] >= 0
    empty = _load("empty_residual")
    # q = p + 1 ulp everywhere, largest coin: rejected, relu(p - q) == 0, fallback V - 1 = 3 although p[3] = 0.
    assert empty["result"].tolist() == [[3, -1]]
    assert empty["h_target_probs"][0, 0, 3] == 0.0
    blk, tok = _load("random_block")["result"], _load("random")["result"]
    # Block verification accepts at least as many drafts as token verification on the same coins here.
    assert ((blk >= 0).sum(1) >= (tok >= 0).sum(1)).all() and ((blk >= 0).sum(1) > (tok >= 0).sum(1)).any()


def test_chain_call_layout() -> None:
    d = torch.tensor([[2, 0], [1, 1]])
    q = torch.full((2, 2, 3), 1 / 3, dtype=torch.float64)
    p = torch.full((2, 3, 3), 1 / 3, dtype=torch.float64)
    u = torch.tensor([[0.0, 0.5, 1 - 2**-60], [2**-25, 0.75, 0.25]], dtype=torch.float64)
    kw = sk.chain_call_inputs(d, q, p, u)
    assert kw["candidates"].tolist() == [[0, 2, 0], [0, 1, 1]]
    assert kw["retrive_index"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert kw["retrive_next_token"].tolist() == [[1, 2, -1], [1, 2, -1]]
    assert kw["accept_index"].tolist() == [[-1] * 3] * 2
    assert kw["uniform_samples"].tolist() == [[0.0, 0.5, 0.0], [0.0, 0.75, 0.0]]
    assert kw["uniform_samples_for_final_sampling"].tolist() == [1 - 2**-24, 0.25]
    assert kw["draft_probs"].dtype == torch.float32 and kw["draft_probs"].shape == (2, 2, 3)
    with pytest.raises(ValueError):
        sk.chain(d, q, p, None)


def test_emitted_tokens_padding() -> None:
    pred = torch.tensor([5, 6, 7, 8, 9, 10], dtype=torch.int32)
    idx = torch.tensor([[0, 1, -1], [3, -1, -1]], dtype=torch.int32)
    num = torch.tensor([1, 0], dtype=torch.int32)
    assert sk.emitted_tokens(pred, idx, num).tolist() == [[5, 6, -1], [8, -1, -1]]


def _tree_inputs(seed: int, K: int = 3, L: int = 2, V: int = 5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    d = torch.randint(0, 3, (K, L), generator=g)
    q = torch.full((K, L, V), 1 / V, dtype=torch.float64)
    p = torch.softmax(torch.randn(K, L + 1, V, generator=g, dtype=torch.float64), -1)
    return d, q, p


def test_tree_port_matches_earlier_port_on_ordinary_coins() -> None:
    for seed in range(40):
        d, q, p = _tree_inputs(seed)
        new = sk.tree_port(d, q, p, torch.Generator().manual_seed(seed))
        old = sglang_tree.verify(d, q, p, torch.Generator().manual_seed(seed))
        assert new == old, seed


def test_tree_port_zero_coin_fixed_and_empty_residual_kept() -> None:
    V = 4
    # One draft whose first token has p = 0; forced coin 0: 0.5.23 rejects it (``p(x) > 0`` is required).
    d = torch.tensor([[0]])
    p = torch.tensor([[[0.0, 0.5, 0.25, 0.25], [0.25] * 4]], dtype=torch.float64)
    kw = sk.tree_call_inputs(d, p, torch.Generator().manual_seed(0))
    kw["uniform_samples"].zero_()
    kw["uniform_samples_for_final_sampling"].fill_(0.0)
    sk.tree_target_only_port(**kw)
    assert sk.emitted_tokens(kw["predicts"], kw["accept_index"], kw["accept_token_num"]).tolist() == [[1, -1]]

    # Siblings covering p's support whose float32 sum is below 1; coin above that sum: every sibling is rejected,
    # the residual is empty and the kernel emits V - 1 (p = 0 there).
    p32 = np.float32([0.3104531, 0.524138, 0.16540891, 0.0])
    assert np.float32(np.float32(p32[0] + p32[1]) + p32[2]) < np.float32(1.0)
    d = torch.tensor([[0], [1], [2]])
    p = torch.from_numpy(np.tile(p32.astype(np.float64), (3, 2, 1)))
    kw = sk.tree_call_inputs(d, p, torch.Generator().manual_seed(0))
    kw["uniform_samples"].fill_(1 - 2**-24)
    sk.tree_target_only_port(**kw)
    out = sk.emitted_tokens(kw["predicts"], kw["accept_index"], kw["accept_token_num"])
    assert out.tolist() == [[V - 1, -1]]


def test_entries_shape() -> None:
    names = {e["name"] for e in sk.ENTRIES}
    assert {"sglang_chain", "sglang_chain_block", "sglang_tree"} <= names
    for e in sk.ENTRIES:
        assert e["expect"] in ("PASSED", "FAILED") and e["version"] == "0.5.23"
        assert e["env"] == "sglang-0.5.23" and e["target"].startswith("bench.engines.sglang_kernels:")
