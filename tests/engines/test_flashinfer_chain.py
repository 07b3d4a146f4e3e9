"""``bench.engines.flashinfer_chain``: FlashInfer 0.7.4's chain call layout, checked on CPU with a stand-in kernel."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.engines import flashinfer_chain


def test_philox_seed_is_a_deterministic_63_bit_hash_of_the_uniforms() -> None:
    u = np.random.default_rng(0).random((4, 3))
    s = flashinfer_chain.philox_seed(u)
    assert s == flashinfer_chain.philox_seed(torch.from_numpy(u.copy()))
    assert 0 <= s < 2**63
    u2 = u.copy()
    u2[3, 2] = np.nextafter(u2[3, 2], 1.0)
    assert flashinfer_chain.philox_seed(u2) != s


def test_call_layout_dtypes_seed_and_output() -> None:
    """float32 probabilities, int32 ids, [B, L+1] int32 out with -1 padding returned as int64; seed from uniforms."""
    B, L, V = 3, 2, 5
    rng = np.random.default_rng(1)
    q = rng.dirichlet(np.ones(V), size=(B, L))
    p = rng.dirichlet(np.ones(V), size=(B, L + 1))
    ids = rng.integers(0, V, size=(B, L))
    u = rng.random((B, L + 1))
    seen = {}

    def fake(draft_probs, draft_token_ids, target_probs, *, deterministic, seed, offset):
        seen.update(dp=draft_probs, ids=draft_token_ids, tp=target_probs, det=deterministic, seed=seed, off=offset)
        out = torch.full((B, L + 1), -1, dtype=torch.int32)
        out[:, 0] = draft_token_ids[:, 0]
        return out, torch.zeros(B, dtype=torch.int32), torch.ones(B, dtype=torch.int32)

    out = flashinfer_chain.call_chain(fake, torch.device("cpu"), ids, q, p, u)
    assert seen["dp"].dtype == torch.float32 and seen["dp"].shape == (B, L, V)
    assert seen["tp"].dtype == torch.float32 and seen["tp"].shape == (B, L + 1, V)
    assert seen["ids"].dtype == torch.int32 and seen["ids"].tolist() == ids.tolist()
    assert seen["det"] is True and seen["off"] == 0 and seen["seed"] == flashinfer_chain.philox_seed(u)
    assert out.dtype == torch.int64 and out[:, 0].tolist() == ids[:, 0].tolist() and (out[:, 1:] == -1).all()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
def test_chain_refuses_without_cuda() -> None:
    with pytest.raises(RuntimeError, match="CUDA only"):
        flashinfer_chain.chain(
            np.zeros((1, 1), dtype=np.int64), np.ones((1, 1, 2)) / 2, np.ones((1, 2, 2)) / 2, np.zeros((1, 2))
        )
