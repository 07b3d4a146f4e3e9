"""Upstream behaviours of the five ported verifiers, pinned independently of the harness.

Each test calls a port of ``bench/gallery/ports`` directly, with ordinary randomness (seeded ``torch.Generator``
streams, counted over 20 calls) or with a coin forced to a value its draw can take, and asserts the tokens, the
exception, or the exact probability of the failing event under the port's own randomness. These are the facts the
harness's verdicts on the ports (``spectr-gbv validate bench.gallery.ports.<module>:verify``) are checked against.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from bench.gallery.ports import gptfast_law, gptfast_sd, litgpt_sd, mlx_lm_sd, sglang_tree, vllm_v1  # noqa: E402

CALLS = 20

# A valid row pair (sums 1 within 1e-9) that agrees up to rounding: the drafted token 0 has p = 0 < q = 5e-10, and
# p = q elsewhere, so every residual max(p - q, 0) computed in float32 or bf16 is all zero.
AGREE_Q = np.array([[[5e-10, 0.6, 0.4 - 5e-10]]])
AGREE_P = np.array([[[0.0, 0.6, 0.4 - 5e-10], [0.2, 0.3, 0.5]]])
# A drafted token 0 with p = 0 < q whose residual has mass (on token 1 only).
ZERO_Q = np.array([[[0.25, 0.25, 0.5]]])
ZERO_P = np.array([[[0.0, 0.5, 0.5], [0.2, 0.3, 0.5]]])
DRAFT0 = np.array([[0]])


def _outcomes(verify, drafts, q, p, calls: int = CALLS) -> dict[str, int]:
    """Count outputs (as strings) and raised ``RuntimeError`` over seeds 0..calls-1."""
    counts: dict[str, int] = {}
    for seed in range(calls):
        try:
            key = str(verify(drafts, q, p, torch.Generator().manual_seed(seed)))
        except RuntimeError as err:
            key = f"raises: {str(err).splitlines()[0]}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def _batched(x: np.ndarray, B: int) -> torch.Tensor:
    return torch.as_tensor(x)[None].repeat(B, *([1] * x.ndim))


# ------------------------------------------------------------------------------------------------------ torch
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_exponential_race_returns_a_zero_entry_whose_exponential_is_zero(dtype):
    # torch.multinomial(probs, 1) on CPU (LitGPT) and the races of vLLM and gpt-fast are argmax(probs / Exp(1)):
    # outputs 2..3 of the generator all zero make the second exponential 0 (a float64 uniform of 0, 2^-53)
    from spectr_gbv.validate.coins import torch_words_state

    probs = torch.tensor([1.0, 0.0, 0.0], dtype=dtype)
    gen = torch.Generator()
    gen.set_state(torch_words_state("zero", range(2, 4), seed=0))
    assert torch.empty(3, dtype=dtype).exponential_(generator=gen)[1] == 0
    gen.set_state(torch_words_state("zero", range(2, 4), seed=0))
    assert int(gptfast_sd.multinomial_sample_one_no_sync(probs, gen)) == 1  # NaN wins the argmax
    if dtype == torch.float32:
        gen.set_state(torch_words_state("zero", range(2, 4), seed=0))
        assert int(torch.multinomial(probs, 1, generator=gen)) == 1


# ------------------------------------------------------------------------------------------------------ LitGPT
def test_litgpt_raises_on_every_rejection_at_a_row_that_agrees_up_to_rounding():
    # p = 0 < q at the drafted token: discard_prob = 1 >= coin, rejected on every call; the residual is 0 / 0
    out = _outcomes(litgpt_sd.verify, DRAFT0, AGREE_Q, AGREE_P)
    assert out == {"raises: probability tensor contains either `inf`, `nan` or element < 0": CALLS}


def test_litgpt_p_zero_draft_with_residual_mass_is_rejected_and_corrected():
    # the claim "raises on a drafted token with p = 0 < q" holds only when the residual is all zero (test above)
    assert _outcomes(litgpt_sd.verify, DRAFT0, ZERO_Q, ZERO_P) == {"[1]": CALLS}


def test_litgpt_top_p_below_one_raises_on_rejection():
    q = np.array([[[0.5, 0.25, 0.25]]])
    p = np.array([[[0.25, 0.5, 0.25], [0.2, 0.3, 0.5]]])
    out = _outcomes(litgpt_sd.verify_top_p, DRAFT0, q, p)
    assert out == {"raises: probability tensor contains either `inf`, `nan` or element < 0": CALLS}
    assert not any(k.startswith("raises") for k in _outcomes(litgpt_sd.verify, DRAFT0, q, p))  # top_p = 1 runs


def test_litgpt_zero_coin_rejects_and_rejection_probability_at_the_probe_row(monkeypatch):
    # the probe row of the harness: p = q except p/q = 1 - 2^-21 at the drafted token (row sum 1 - 5.2e-10)
    qx = 5.2e-10 * 2**21
    q = np.array([[[qx, 0.5, 0.5 - qx]]])
    p = np.array([[[qx * (1 - 2**-21), 0.5, 0.5 - qx], [0.2, 0.3, 0.5]]])
    # float32 rows as the port computes them; a rejection happens iff coin <= discard_prob
    pf = torch.log(torch.as_tensor(p[0, 0])).float().softmax(-1)
    qf = torch.log(torch.as_tensor(q[0, 0])).float().softmax(-1)
    assert bool(torch.all(pf <= qf)) and pf[0] < qf[0]  # the residual is all zero in float32
    discard = float(1 - pf[0] / qf[0])
    # float32 coin k 2^-24, k uniform on 0..2^24-1: P(coin <= discard) = (floor(discard 2^24) + 1) / 2^24
    assert Fraction(int(discard * 2**24) + 1, 2**24) == Fraction(10, 2**24)  # float32 rounding: 9 ulps, not 8
    assert all(k.startswith("[0, ") for k in _outcomes(litgpt_sd.verify, DRAFT0, q, p))  # ordinary coins accept
    monkeypatch.setattr(litgpt_sd, "_coin", lambda generator: torch.zeros(1))
    assert _outcomes(litgpt_sd.verify, DRAFT0, q, p, calls=1) == {
        "raises: probability tensor contains either `inf`, `nan` or element < 0": 1
    }


# ------------------------------------------------------------------------------------------------------ gpt-fast
def test_gptfast_bf16_coin_is_the_rounded_float32_uniform():
    u32 = torch.rand(1 << 16, dtype=torch.float32, generator=torch.Generator().manual_seed(3))
    u16 = torch.rand(1 << 16, dtype=torch.bfloat16, generator=torch.Generator().manual_seed(3))
    assert torch.equal(gptfast_law.coin_model(u32), u16)
    assert gptfast_law.coin_cdf(0.0) == Fraction(2**15 + 1, 2**24)  # about 2^-9: the 0.2 % acceptance at ratio 0
    assert gptfast_law.coin_cdf(0.5) == Fraction(8454145, 2**24)  # not 1/2: the coin is a staircase
    assert gptfast_law.coin_cdf(1.0) == 1


def test_gptfast_p_zero_draft_emitted_only_through_the_zero_coin():
    assert _outcomes(gptfast_sd.verify, DRAFT0, ZERO_Q, ZERO_P) == {"[1]": CALLS}  # 0 in 20
    hits = sum(gptfast_sd.verify(DRAFT0, ZERO_Q, ZERO_P, torch.Generator().manual_seed(s))[0] == 0 for s in range(4096))
    assert hits == 7  # 4096 calls at probability (2^15 + 1) / 2^24 each: 8.0 expected


def test_gptfast_emits_probability_zero_token_at_a_row_that_agrees_up_to_rounding():
    # bf16 residual 0 / 0 = NaN, argmax of a NaN row is index 0, and p(0) = 0
    assert _outcomes(gptfast_sd.verify, DRAFT0, AGREE_Q, AGREE_P) == {"[0]": CALLS}


def test_gptfast_exact_validity_defect_at_bf16():
    from spectr_gbv.validate.battery import default_battery

    battery = {bi.kind: bi.instance for bi in default_battery(1)}
    dense = gptfast_law.exact_defect(battery["dense"])
    assert isinstance(dense, Fraction)
    assert float(dense) == pytest.approx(0.0016415804489106783, abs=1e-15)
    assert 0.0015 <= float(dense) <= 0.0034  # the range reported for gpt-fast at bf16
    assert float(gptfast_law.exact_defect(battery["wide_vocab"])) == pytest.approx(0.0024092189022394276, abs=1e-15)
    # against the bf16-rounded target (what gpt-fast's own sampling follows), the verify step's share
    assert float(gptfast_law.exact_defect(battery["dense"], "bf16")) == pytest.approx(0.001822411574469795, abs=1e-15)
    law = gptfast_law.exact_law(battery["dense"])
    assert sum(law.values()) == 1


# ------------------------------------------------------------------------------------------------------ vLLM V1
def test_vllm_p_zero_draft_never_accepted_on_ordinary_randomness(monkeypatch):
    d, q, p = _batched(DRAFT0, CALLS), _batched(ZERO_Q, CALLS), _batched(ZERO_P, CALLS)
    out = vllm_v1.verify(d, q, p, torch.Generator().manual_seed(0))
    assert out.tolist() == [[1, -1]] * CALLS  # 0 in 20: accepting needs a float64 uniform of exactly 0
    u = torch.rand(1 << 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert torch.equal(u * 2**53, torch.floor(u * 2**53))  # the 2^53-point lattice: P(u = 0) = 2^-53
    monkeypatch.setattr(vllm_v1, "generate_uniform_probs", lambda B, L, g: torch.zeros(B * L, dtype=torch.float64))
    assert vllm_v1.verify(d[:1], q[:1], p[:1], torch.Generator().manual_seed(0))[0, 0] == 0  # p(0) = 0 emitted


def test_vllm_all_zero_residual_emits_token_zero():
    d, q, p = _batched(DRAFT0, CALLS), _batched(AGREE_Q, CALLS), _batched(AGREE_P, CALLS)
    out = vllm_v1.verify(d, q, p, torch.Generator().manual_seed(0))
    assert out.tolist() == [[0, -1]] * CALLS  # argmax(0 / q) = 0, and p(0) = 0


# ------------------------------------------------------------------------------------------------------ SGLang
# The float32 sum of this row, in order, is 1 - 2^-23: a coin of 1 - 2^-24 rejects all four siblings.
ROW = [0.5227033098782227, 0.04948726460709252, 0.04687085517956508, 0.38093857033511963, 0.0]


def test_sglang_tree_layout():
    drafts = np.array([[1, 2], [1, 3], [0, 2]])
    cand, nxt, sib, rows = sglang_tree.build_tree(drafts)
    assert cand == [-1, 1, 2, 3, 0, 2]
    assert nxt == [1, 2, -1, -1, 5, -1] and sib == [-1, 4, 3, -1, -1, -1]
    assert rows == [(0, 0), (0, 1), (0, 2), (1, 2), (2, 1), (2, 2)]


def test_sglang_degenerate_residual_probability_on_ordinary_randomness():
    drafts = np.array([[0], [1], [2], [3]])
    q = np.full((4, 1, 5), 0.2)
    p = np.array([[ROW, [0.2] * 5]] * 4)
    total = np.float32(0)
    for v in ROW:
        total = np.float32(total + np.float32(v))
    assert total == np.float32(1 - 2**-23)
    # under its own randomness: P(coin > 1 - 2^-23) = 1 / 2^24 (only k = 2^24 - 1)
    assert Fraction(sum(1 for k in (2**24 - 2, 2**24 - 1) if k * 2**-24 > float(total)), 2**24) == Fraction(1, 2**24)
    out = _outcomes(sglang_tree.verify, drafts, q, p)
    assert all(k[1] in "0123" and k.count(",") == 1 for k in out)  # a sibling accepted on all 20 calls


def test_sglang_degenerate_residual_forced_coin(monkeypatch):
    drafts = np.array([[0], [1], [2], [3]])
    q = np.full((4, 1, 5), 0.2)
    p = np.array([[ROW, [0.2] * 5]] * 4)
    monkeypatch.setattr(
        sglang_tree, "draw_coins", lambda n, g: (np.full(n, 1 - 2**-24, dtype=np.float32), np.float32(0.5))
    )
    assert sglang_tree.verify(drafts, q, p, torch.Generator()) == [4]  # V - 1, of target probability 0


def test_sglang_zero_coin_accepts_probability_zero_sibling(monkeypatch):
    drafts = np.array([[0], [1]])
    q = np.array([[[0.5, 0.5, 0.0]]] * 2)
    p = np.array([[[0.0, 0.5, 0.5], [0.2, 0.3, 0.5]]] * 2)
    assert _outcomes(sglang_tree.verify, drafts, q, p).keys() <= {"[1, 0]", "[1, 1]", "[1, 2]", "[2]"}
    monkeypatch.setattr(sglang_tree, "draw_coins", lambda n, g: (np.zeros(n, dtype=np.float32), np.float32(0.5)))
    assert sglang_tree.verify(drafts, q, p, torch.Generator())[0] == 0  # 0 <= prob_acc = 0: p = 0 accepted


# ------------------------------------------------------------------------------------------------------ mlx-lm
def test_mlx_lm_sample_and_match_never_emits_probability_zero():
    assert _outcomes(mlx_lm_sd.verify, DRAFT0, ZERO_Q, ZERO_P).keys() <= {"[1]", "[2]"}
    assert _outcomes(mlx_lm_sd.verify, DRAFT0, AGREE_Q, AGREE_P).keys() <= {"[1]", "[2]"}
    one_hot = np.array([[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]])
    assert _outcomes(mlx_lm_sd.verify, np.array([[1]]), ZERO_Q, one_hot) == {"[1, 2]": CALLS}
