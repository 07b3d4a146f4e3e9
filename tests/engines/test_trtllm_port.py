"""The TensorRT-LLM port (``bench.engines.trtllm_sampler``) pinned to facts read from the upstream source.

The release (tensorrt-llm 1.2.1) cannot be installed here (``bench/engines/envs/trtllm.sh``), so nothing was recorded
from the released code; each test pins one fact of the upstream functions (``get_rejected_indices``,
``sample_rejected``, ``_process_draft_tokens_rejection_sampling``, the batched target sampling of ``sample_async``)
with values, and the adapter's layout. The replicas below are written from the upstream text, independently of the
port's code paths, and compare generator states draw for draw.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from bench.engines import trtllm_confirm, trtllm_sampler
from bench.engines.trtllm_sampler import (
    ENTRIES,
    get_rejected_indices,
    process_draft_tokens_rejection_sampling,
    sample_rejected,
    verify,
)

V = 6


def _rows(seed: int, n: int, zeros: int = 2) -> torch.Tensor:
    """n random float64 rows over V tokens, ``zeros`` entries of each set to 0, normalised."""
    g = np.random.default_rng(seed)
    x = g.random((n, V))
    for r in range(n):
        x[r, g.choice(V, zeros, replace=False)] = 0.0
    return torch.from_numpy(x / x.sum(-1, keepdims=True))


def _f32_softmax_of_log(p: torch.Tensor) -> torch.Tensor:
    return torch.softmax(torch.log(p).to(torch.float32), dim=-1)


def test_acceptance_rule_is_u_greater_than_min_one_ratio() -> None:
    """Reject iff the float32 coin ``u > min(1, t/d)``; one ``torch.rand(L)`` for all L positions."""
    d = _f32_softmax_of_log(_rows(1, 4))
    t = _f32_softmax_of_log(_rows(2, 5))
    drafts = [int(torch.argmax(d[i])) for i in range(4)]
    for seed in range(20):
        g = torch.Generator().manual_seed(seed)
        got = get_rejected_indices(d, t, g, drafts + [0, 0])  # padded ids beyond L are ignored
        g2 = torch.Generator().manual_seed(seed)
        u = torch.rand(4, generator=g2)
        ratio = torch.stack([t[i, drafts[i]] / d[i, drafts[i]] for i in range(4)])
        expected = (u > torch.clamp(ratio, max=1.0)).nonzero()
        assert torch.equal(got, expected)
        assert torch.equal(g.get_state(), g2.get_state())
        assert got.dtype == torch.int64 and got.shape[1] == 1


def test_ratio_one_always_accepts_and_ratio_zero_always_rejects() -> None:
    """``t = d`` at the draft: accepted by every coin (u < 1); ``t = 0 < d``: rejected unless u = 0 (2^-24)."""
    d = torch.tensor([[0.25, 0.75, 0.0]], dtype=torch.float32)
    t_same = torch.tensor([[0.25, 0.75, 0.0], [0.5, 0.5, 0.0]], dtype=torch.float32)
    t_zero = torch.tensor([[0.0, 0.5, 0.5], [0.5, 0.5, 0.0]], dtype=torch.float32)
    g = torch.Generator().manual_seed(0)
    assert sum(get_rejected_indices(d, t_same, g, [0]).numel() for _ in range(200)) == 0
    assert sum(get_rejected_indices(d, t_zero, g, [0]).numel() for _ in range(200)) == 200


def test_residual_is_unnormalised_positive_part() -> None:
    """``sample_rejected`` draws from ``where(t - d > 0, t - d, 0)``: a single positive entry is always drawn."""
    d = torch.tensor([[0.5, 0.5, 0.0, 0.0]], dtype=torch.float32)
    t = torch.tensor([[0.25, 0.5, 0.0, 0.25], [0.25, 0.25, 0.25, 0.25]], dtype=torch.float32)
    g = torch.Generator().manual_seed(3)
    assert {sample_rejected(d, t, g, 0) for _ in range(50)} == {3}


def test_all_zero_residual_raises() -> None:
    """A rejection onto an all-zero float32 residual: ``torch.multinomial`` raises (no guard upstream)."""
    d = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float32)
    t = torch.tensor([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]], dtype=torch.float32)
    g = torch.Generator().manual_seed(0)
    with pytest.raises(RuntimeError, match="invalid multinomial distribution"):
        sample_rejected(d, t, g, 0)


def test_order_of_draws_per_request() -> None:
    """Draft re-sampling (L discarded multinomial draws), then ``rand(L)``, then one multinomial on a rejection."""
    L = 3
    q = _rows(5, L)
    p = _rows(6, L + 1)
    d_logits = torch.log(q).to(torch.float32)
    t_probs = _f32_softmax_of_log(p)
    drafts = [int(torch.multinomial(q[i], 1, generator=torch.Generator().manual_seed(i)).item()) for i in range(L)]
    outcomes = set()
    for seed in range(40):
        g = torch.Generator().manual_seed(seed)
        got = process_draft_tokens_rejection_sampling(d_logits, t_probs, drafts, [90, 91, 92, 93], g)
        g2 = torch.Generator().manual_seed(seed)
        d_probs = torch.softmax(d_logits / 1.0, dim=-1)
        torch.multinomial(d_probs, 1, generator=g2)  # upstream `sample` draws tokens it discards
        u = torch.rand(L, generator=g2)
        a = torch.clamp(torch.stack([t_probs[i, drafts[i]] / d_probs[i, drafts[i]] for i in range(L)]), max=1.0)
        rejected = (u > a).nonzero()
        if rejected.numel() == 0:
            expected = drafts + [93]  # the bonus: the target's own sample at row L
        else:
            k = int(rejected[0].item())
            new = torch.where(t_probs[k] - d_probs[k] > 0, t_probs[k] - d_probs[k], 0.0)
            expected = drafts[:k] + [int(torch.multinomial(new, 1, generator=g2).item())]
        assert got == expected
        assert torch.equal(g.get_state(), g2.get_state())
        outcomes.add(len(got))
    assert len(outcomes) >= 2  # both accepted prefixes and corrections were exercised


def test_adapter_layout_batched_torch() -> None:
    """``verify``: draft 0 only, target rows of all requests sampled in one call first, rows padded with -1."""
    B, K, L = 5, 2, 2
    q = torch.stack([torch.stack([_rows(10 * b + k, L) for k in range(K)]) for b in range(B)])
    p = torch.stack([torch.stack([_rows(100 + b, L + 1)] * K) for b in range(B)])
    drafts = torch.stack([torch.stack([q[b, k].argmax(-1) for k in range(K)]) for b in range(B)])
    g = torch.Generator().manual_seed(7)
    out = verify(drafts, q, p, g)
    assert out.shape == (B, L + 1) and out.dtype == torch.int64
    for row in out.tolist():
        n = sum(v >= 0 for v in row)
        assert 1 <= n <= L + 1 and row[n:] == [-1] * (L + 1 - n)
    # draft 1 is never read
    q2, drafts2 = q.clone(), drafts.clone()
    q2[:, 1] = torch.flip(q2[:, 1], dims=[-1])
    drafts2[:, 1] = (drafts2[:, 1] + 1) % V
    assert torch.equal(out, verify(drafts2, q2, p, torch.Generator().manual_seed(7)))
    # replica: one multinomial over B * (L + 1) target rows, then request by request
    g2 = torch.Generator().manual_seed(7)
    t = _f32_softmax_of_log(p[:, 0].reshape(B * (L + 1), V))
    target_tokens = torch.multinomial(t, 1, generator=g2).view(B, L + 1)
    t = t.view(B, L + 1, V)
    for b in range(B):
        emitted = process_draft_tokens_rejection_sampling(
            torch.log(q[b, 0]).to(torch.float32), t[b], drafts[b, 0].tolist(), target_tokens[b].tolist(), g2
        )
        assert out[b, : len(emitted)].tolist() == emitted
    assert torch.equal(g.get_state(), g2.get_state())


@pytest.mark.skipif(torch.cuda.is_available(), reason="the fact concerns CPU-only torch builds")
def test_upstream_pinned_copy_fails_on_cpu_only_torch() -> None:
    """Upstream copies the draft ids with ``pin_memory=True``: on a CPU-only torch that raises (the port drops it)."""
    with pytest.raises(RuntimeError, match="pin_memory"):
        torch.tensor([1, 2], dtype=torch.int32, pin_memory=True)


def test_exact_law_of_the_failures() -> None:
    """The confirmation's exact law: zero coin 2^-24 per drafted p = 0 token; all-zero residual raises."""
    q, p, x = trtllm_confirm.INSTANCES["zero_target_draft"]
    law = trtllm_confirm.exact_first_token_law(q, p, x)
    assert law.p_raise == 1 - Fraction(1, 2**24) and law.p_zero_token == Fraction(1, 2**24)
    q, p, x = trtllm_confirm.INSTANCES["zero_coin"]
    law = trtllm_confirm.exact_first_token_law(q, p, x)
    assert law.p_raise == 0 and law.p_zero_token == Fraction(1, 2**25) and law.tv == Fraction(1, 2**25)
    q, p, x = trtllm_confirm.INSTANCES["control"]
    law = trtllm_confirm.exact_first_token_law(q, p, x)
    assert law.p_raise == 0 and law.p_zero_token == 0 and 0 < law.tv < 1e-7
    assert sum(law.probs) == 1


def test_entries_schema() -> None:
    keys = {"name", "env", "target", "args", "budget", "expect", "version", "title", "analysis", "confirm"}
    for entry in ENTRIES:
        assert set(entry) == keys
        assert entry["version"] == trtllm_sampler.TRTLLM_VERSION
        assert "--budget" not in entry["args"] and "--seed" not in entry["args"]


def test_upstream_test_measurement_pieces() -> None:
    """The instance of TRT-LLM's own test, its statistic and the planted laws used on the engine-tests page."""
    q, p = trtllm_confirm.upstream_instance(0)
    assert (q > 0).sum() == 100 and (p > 0).sum() == 100
    assert abs(p.sum() - 1) < 1e-6 and abs(q.sum() - 1) < 1e-6
    p = p / p.sum()
    for rule in ("resample_target", "unnormalised_residual", "shared_coin", "scaled_accept"):
        law = trtllm_confirm.rule_law(rule, q, p, eps=0.1)
        assert abs(law.sum() - 1) < 1e-6 and (law >= 0).all()
    assert trtllm_confirm.tv(trtllm_confirm.rule_law("ideal", q, p), p) == 0
    # the unnormalised residual's overflow lands on the last token, of target probability 0 here
    unnorm = trtllm_confirm.rule_law("unnormalised_residual", q, p)
    assert p[-1] == 0 and unnorm[-1] > 0.1
    # a histogram missing a token of p > 0 gives an infinite KL: the test's assertion then fails
    counts = np.full(len(p), 10)
    counts[np.argmax(p)] = 0
    assert np.isinf(trtllm_confirm.upstream_statistic(counts, np.full(len(p), 10), p))
    assert trtllm_confirm.upstream_statistic(np.full(len(p), 10), np.full(len(p), 10), p) == 0
