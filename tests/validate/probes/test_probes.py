"""Probes that prove they fired: crafted coins (numpy PCG64, torch mt19937) and the forcing probes."""

from __future__ import annotations

import numpy as np
import pytest

from spectr_gbv.testing.mutants import CHAIN_CORRECT, CORRECT
from spectr_gbv.testing.mutants.correct import correct_sd
from spectr_gbv.testing.mutants.uniform_bugs import accepts_placeholder, zero_coin_accepts, zero_residual_oov
from spectr_gbv.validate.coins import coin_value, numpy_coin_generator, torch_coin_state, torch_words_state
from spectr_gbv.validate.interfaces.registry import make_adapter
from spectr_gbv.validate.isolation.guard import CallGuard
from spectr_gbv.validate.probes import coin_probes as cp
from spectr_gbv.validate.probes import input_probes as ip
from spectr_gbv.validate.probes import runner

MAX64 = 1.0 - 2.0**-53
MAX32 = 1.0 - 2.0**-24


def _generic(fn, interface="generic"):
    return make_adapter(fn, interface, CallGuard(10))


# ------------------------------------------------------------------------------- coins
@pytest.mark.parametrize("which", ["zero", "max"])
def test_numpy_coin_generator_float64_exact_at_index(which):
    want = 0.0 if which == "zero" else MAX64
    assert coin_value(which, "float64") == want
    for i in range(5):
        for seed in (0, 7, 2**40 + 3):
            draws = numpy_coin_generator(which, i, seed).random(i + 3)
            assert draws[i] == want
            assert all(draws[j] != want for j in range(i + 3) if j != i)
            # both 32-bit halves of that output are forced too
            d32 = numpy_coin_generator(which, i, seed).random(2 * i + 2, dtype=np.float32)
            assert d32[2 * i] == d32[2 * i + 1] == np.float32(1.0 - 2.0**-24 if which == "max" else 0.0)


@pytest.mark.parametrize("which", ["zero", "max"])
def test_numpy_coin_generator_float32_forces_one_half(which):
    want = np.float32(0.0 if which == "zero" else MAX32)
    assert coin_value(which, "float32") == float(want)
    for i in range(6):
        d32 = numpy_coin_generator(which, i, 3, dtype="float32").random(i + 2, dtype=np.float32)
        assert d32[i] == want
        assert d32[i ^ 1] != want  # the other half of the 64-bit word stays ordinary


def test_first_uniform_helper_and_bad_arguments():
    assert ip.generator_with_first_uniform("zero", 4).random() == 0.0
    assert ip.generator_with_first_uniform("max", 4).random() == MAX64
    with pytest.raises(ValueError, match="which"):
        numpy_coin_generator("one", 0)
    with pytest.raises(ValueError, match="index"):
        numpy_coin_generator("zero", -1)
    with pytest.raises(ValueError, match="dtype"):
        coin_value("zero", "float16")


@pytest.mark.parametrize("which", ["zero", "max"])
def test_torch_coin_state_exact_at_index(which):
    torch = pytest.importorskip("torch")
    saved = torch.get_rng_state()
    try:
        for i in (0, 1, 2, 3, 17, 622):
            for seed in (0, 11):
                state = torch_coin_state(which, i, seed)
                assert state.dtype == torch.uint8 and state.shape == (5056,)
                torch.set_rng_state(state)
                u = torch.rand(i + 4)
                assert u[i].item() == (0.0 if which == "zero" else MAX32)
                assert int((u == u[i]).sum()) == 1
                # draws one at a time (rand_like, as transformers draws its coins) and a Generator
                torch.set_rng_state(state)
                assert [torch.rand_like(torch.tensor(0.5)).item() for _ in range(i + 1)][i] == u[i].item()
                g = torch.Generator()
                g.set_state(state)
                assert torch.rand(i + 1, generator=g)[i].item() == u[i].item()
        for i in (0, 1, 5):
            torch.set_rng_state(torch_coin_state(which, i, 2, dtype="float64"))
            assert torch.rand(i + 2, dtype=torch.float64)[i].item() == (0.0 if which == "zero" else MAX64)
    finally:
        torch.set_rng_state(saved)
    with pytest.raises(ValueError, match="index"):
        torch_coin_state(which, 623)


# ------------------------------------------------------------------------------- verifiers
def extra_draw_zero_coin_accepts(draft_tokens, draft_probs, target_probs, rng):
    """The ``u <= p/q`` mutant behind one unrelated draw."""
    rng.random()
    return zero_coin_accepts(draft_tokens, draft_probs, target_probs, rng)


def extra_draw_correct_sd(draft_tokens, draft_probs, target_probs, rng):
    rng.random()
    return correct_sd(draft_tokens, draft_probs, target_probs, rng)


def own_rng_zero_coin_accepts(draft_tokens, draft_probs, target_probs, rng):
    """Ignores ``rng``: the harness cannot force its coin."""
    return zero_coin_accepts(draft_tokens, draft_probs, target_probs, np.random.default_rng(123))


def float32_coin_accepts(draft_tokens, draft_probs, target_probs, rng):
    """SD on float32 coins (``rng.random(dtype=float32)``) with ``u <= p/q``, first draft only."""
    x, q, p = np.asarray(draft_tokens)[0], np.asarray(draft_probs)[0], np.asarray(target_probs)[0]
    for t in range(len(x)):
        u = float(rng.random(dtype=np.float32))
        if u <= p[t, x[t]] / q[t, x[t]]:
            continue
        r = np.maximum(p[t] - q[t], 0.0)
        return [*x[:t].tolist(), int(np.searchsorted(np.cumsum(r / r.sum()), rng.random(), side="right"))]
    return [*x.tolist(), int(np.searchsorted(np.cumsum(p[len(x)]), rng.random(), side="right"))]


def unguarded_residual_sd(draft_tokens, draft_probs, target_probs, rng):
    """SD that crashes on an all-zero residual (ZeroDivisionError)."""
    x, q, p = np.asarray(draft_tokens)[0], np.asarray(draft_probs)[0], np.asarray(target_probs)[0]
    for t in range(len(x)):
        if rng.random() < p[t, x[t]] / q[t, x[t]]:
            continue
        r = [max(a - b, 0.0) for a, b in zip(p[t].tolist(), q[t].tolist(), strict=True)]
        total = sum(r)
        w = [v / total for v in r]  # ZeroDivisionError when the residual is all zero
        return [*x[:t].tolist(), int(np.searchsorted(np.cumsum(w), rng.random(), side="right"))]
    return [*x.tolist(), int(np.searchsorted(np.cumsum(p[len(x)]), rng.random(), side="right"))]


def strict_sums_sd(draft_tokens, draft_probs, target_probs, rng):
    """Raises on any row whose sum is off by more than 1e-12 (the probe's rows are valid)."""
    if np.any(np.abs(np.asarray(target_probs).sum(axis=-1) - 1.0) > 1e-12):
        raise ValueError("target_probs rows must sum to 1")
    return correct_sd(draft_tokens, draft_probs, target_probs, rng)


def own_uniforms_chain(draft_ids, draft_probs, target_probs, uniforms=None):
    """Chain SD that ignores the supplied uniforms."""
    u = np.random.default_rng(5).random(np.shape(uniforms))
    return CHAIN_CORRECT["sd"](draft_ids, draft_probs, target_probs, u)


# ------------------------------------------------------------------------------- probes
def test_zero_coin_forced_after_an_extra_draw():
    res = cp.check_zero_coin(_generic(extra_draw_zero_coin_accepts), 2, 0)
    assert res.passed is False and res.diagnosis == "zero_probability_token"
    assert res.instance["coin"]["index"] == 1 and res.instance["coin"]["value"] == 0.0
    assert res.instance["drafts"] == [[2, 2], [2, 2]]
    assert "draw index 1 of rng" in res.detail
    assert res.severity == 2.0**-53 and res.severity_note.startswith("about 1 call in 2^53")
    ok = cp.check_zero_coin(_generic(extra_draw_correct_sd), 2, 0)
    assert ok.passed is True and "coin confirmed: draw index 1" in ok.detail
    assert ok.instance["coin"]["dtype"] == "float64"


def test_zero_coin_float32_coins_are_forced_too():
    res = cp.check_zero_coin(_generic(float32_coin_accepts), 1, 0)
    assert res.passed is False and res.diagnosis == "zero_probability_token"
    assert res.instance["coin"]["index"] == 0


def test_own_rng_is_inconclusive_never_pass():
    ad = _generic(own_rng_zero_coin_accepts)
    for check in (cp.check_zero_coin, cp.check_degenerate_residual):
        res = check(ad, 2, 0)
        assert res.passed is None and res.detail.startswith("inconclusive: could not force the coin")
    res = cp.check_zero_coin(make_adapter(own_uniforms_chain, "chain", CallGuard(10)), 1, 0)
    assert res.passed is None and "inconclusive" in res.detail


@pytest.mark.parametrize("method", sorted(CORRECT))
def test_correct_verifiers_pass_the_probes(method):
    ad = _generic(CORRECT[method])
    for K in (1, 2):
        for check in (cp.check_zero_coin, cp.check_degenerate_residual, cp.check_nan_row):
            res = check(ad, K, 0)
            assert res.passed is True, (check.__name__, K, res.detail)
            assert "coin confirmed" in res.detail or check is cp.check_nan_row


@pytest.mark.parametrize("method", sorted(CHAIN_CORRECT))
def test_correct_chain_verifiers_pass_the_probes(method):
    ad = make_adapter(CHAIN_CORRECT[method], "chain", CallGuard(10))
    for check in (cp.check_zero_coin, cp.check_degenerate_residual, cp.check_nan_row):
        res = check(ad, 1, 0)
        assert res.passed is True, (check.__name__, res.detail)


def test_degenerate_residual_crash_fails_raises():
    res = cp.check_degenerate_residual(_generic(unguarded_residual_sd), 2, 0)
    assert res.passed is False and res.diagnosis == "raises"
    assert "crashes on an all-zero residual" in res.detail and "ZeroDivisionError" in res.detail
    assert res.instance["coin"] == {
        "source": "numpy",
        "which": "max",
        "index": 0,
        "count": 1,
        "value": MAX64,
        "dtype": "float64",
        "dtype_confirmed": False,
        "probability": 2.0**-53,
        "seed": 0,
        "replay": "rng = spectr_gbv.validate.coins.numpy_coin_generator('max', 0, seed=0)",
    }
    assert res.severity == 2.0**-53
    res = cp.check_degenerate_residual(_generic(strict_sums_sd), 1, 0)
    assert res.passed is False and res.diagnosis == "raises" and "even with ordinary coins" in res.detail
    oov = cp.check_degenerate_residual(_generic(zero_residual_oov), 1, 0)
    assert oov.passed is False and oov.diagnosis == "nan_or_out_of_vocab" and not oov.advisory


def test_degenerate_residual_input_is_valid_and_exactly_degenerate():
    res = cp.check_degenerate_residual(_generic(correct_sd), 2, 0)
    q = np.array(res.instance["draft_probs"])
    p = np.array(res.instance["target_probs"])
    assert np.all(np.abs(p.sum(axis=-1) - 1.0) <= 1e-9) and np.all(q.sum(axis=-1) == 1.0)
    assert np.all(np.maximum(p[:, 0] - q[:, 0], 0.0) == 0.0)
    assert p[0, 0, 1] / q[0, 0, 1] == runner.DEGENERATE_RATIO == 1 - 2.0**-7
    p32, q32 = p.astype(np.float32), q.astype(np.float32)  # still exactly degenerate, the ratio exact
    assert np.all(np.maximum(p32[:, 0] - q32[:, 0], 0) == 0) and p32[0, 0, 1] / q32[0, 0, 1] == np.float32(1 - 2.0**-7)
    torch = pytest.importorskip("torch")
    pb, qb = torch.tensor(p).to(torch.bfloat16), torch.tensor(q).to(torch.bfloat16)
    assert torch.all(torch.clamp(pb[:, 0] - qb[:, 0], min=0) == 0) and (pb[0, 0, 1] / qb[0, 0, 1]).item() == 1 - 2.0**-7
    assert res.instance["drafts"] == [[1], [0]] and p[0, 0, 0] == 0.0


def test_nan_row_output_is_advisory_and_raising_passes():
    res = cp.check_nan_row(_generic(zero_residual_oov), 2, 0)
    assert res.passed is False and res.advisory and res.diagnosis == "nan_or_out_of_vocab"
    ok = cp.check_nan_row(_generic(correct_sd), 2, 0)
    assert ok.passed is True and ok.detail.startswith("surfaced the fault")


def test_placeholders_declared_or_advisory():
    ad = _generic(accepts_placeholder)
    loose = ip.check_placeholders(ad, 1, 0)
    assert [r.passed for r in loose] == [False, False] and all(r.advisory for r in loose)
    assert all(r.diagnosis == "accepts_placeholder" for r in loose)
    strict = ip.check_placeholders(ad, 1, 0, declared=True)
    assert [r.passed for r in strict] == [False, False] and not any(r.advisory for r in strict)


def test_determinism_is_advisory():
    from spectr_gbv.validate.battery import default_battery
    from spectr_gbv.validate.battery.tables import Tables

    bi = default_battery()[0]
    res = ip.check_determinism(_generic(correct_sd), Tables(bi.float_instance), bi, 0, num=8)
    assert res.passed is True and res.advisory


class _NoTorchStateAdapter:
    """An hf-like adapter whose emit cannot take a torch state."""

    interface = "hf"

    def emit(self, drafts, draft_probs, target_probs, rng, uniforms=None):  # pragma: no cover - never called
        raise AssertionError("the probe must not run without a way to force the coin")


def test_hf_without_torch_state_is_inconclusive():
    res = cp.check_zero_coin(_NoTorchStateAdapter(), 1, 0)
    assert res.passed is None and "cannot install a torch RNG state" in res.detail


# ------------------------------------------------------------------------------- transformers
def test_hf_transformers_zero_coin_and_degenerate_residual():
    torch = pytest.importorskip("torch")
    utils = pytest.importorskip("transformers.generation.utils")
    transformers = pytest.importorskip("transformers")
    version = pytest.importorskip("packaging.version")
    ad = make_adapter(utils._speculative_sampling, "hf", CallGuard(10))
    res = cp.check_zero_coin(ad, 1, 0)
    if version.Version(transformers.__version__).release >= (5, 25):  # pre-releases of 5.25 too
        # 5.25.0 accepts with `r_i < probability_ratio` (5.24.0: `<=`): the same forced coin of
        # 0.0 now rejects the zero-probability token, and the probe says so
        assert res.passed is True and res.diagnosis == "ok"
        assert "draft token 2 of target probability 0 under a coin of 0: all 4 outputs valid" in res.detail
        assert "coin confirmed: draw index 0 of torch's CPU generator forced" in res.detail
        assert "float32 uniform = 0.0, dtype confirmed by the controls" in res.detail
        _degenerate_residual_and_placeholders(ad)
        return
    assert res.passed is False and res.diagnosis == "zero_probability_token"
    coin = res.instance["coin"]
    assert (coin["source"], coin["index"], coin["value"], coin["dtype"]) == ("torch", 0, 0.0, "float32")
    assert coin["dtype_confirmed"] and res.severity == 2.0**-24
    # replay the failing row directly: transformers accepts token 3, whose target probability is 0
    with np.errstate(divide="ignore"):
        logq = torch.from_numpy(np.log(np.array(res.instance["draft_probs"])).astype(np.float32))
        logp = torch.from_numpy(np.log(np.array(res.instance["target_probs"])).astype(np.float32))
    saved = torch.get_rng_state()
    try:
        torch.set_rng_state(torch_words_state("zero", range(1), seed=1000))
        valid, n = utils._speculative_sampling(torch.tensor(res.instance["drafts"]), logq, 2, logp)
    finally:
        torch.set_rng_state(saved)
    assert int(n) >= 1 and valid[0, 0].item() == 3 and res.instance["target_probs"][0][0][3] == 0.0
    _degenerate_residual_and_placeholders(ad)


def _degenerate_residual_and_placeholders(ad: object) -> None:
    """transformers (5.24.0 and 5.25.0) still divides an all-zero residual by its zero sum."""
    deg = cp.check_degenerate_residual(ad, 1, 0)
    assert deg.passed is False and deg.diagnosis == "raises"
    assert "crashes on an all-zero residual" in deg.detail and deg.instance["coin"]["dtype"] == "float32"
    ph = ip.check_placeholders(ad, 1, 0)
    assert all(r.passed is not False for r in ph) and all(r.advisory for r in ph)


# ------------------------------------------------------------------------------- forcing-free, on the reference
def test_reference_rrs_never_accepts_surely_a_token_of_residual_mass_zero():
    """rrs_node took an all-zero next residual for R = q and accepted p(x) = 0 < q(x) surely."""
    from spectr_gbv.reference import get_verifier
    from spectr_gbv.reference.rrs import rrs_node
    from spectr_gbv.validate.probes.free_probes import check_degenerate_rows, degenerate_rows

    _, q, p, _ = degenerate_rows("zero_target_draft", 2)
    accept, residuals = rrs_node(p[0, 0], q[0, 0], [0, 0], exact=False)
    assert accept == [0.0, 0.0] and residuals[-1][0] == 0.0 and residuals[-1].sum() > 0
    for name in ("rrs", "rrs_random"):
        for res in check_degenerate_rows(_generic(get_verifier(name).sample), 2, 0):
            assert res.passed is True, (name, res.detail)


# ------------------------------------------------------------------------------- words, values, severity
def test_torch_words_state_forces_a_range_and_the_values_follow_torch():
    torch = pytest.importorskip("torch")
    from spectr_gbv.validate.coins import WORDS, coin_probability, torch_word_value

    g = torch.Generator()
    g.set_state(torch_words_state("zero", range(3, 9), seed=4))
    u = torch.rand(12, generator=g)
    assert (u[3:9] == 0).all() and (u[:3] != 0).all() and (u[9:] != 0).all()
    table = {w: [torch_word_value(w, d) for d in ("float64", "float32", "bfloat16", "float16")] for w in WORDS}
    assert table["zero"] == [0.0, 0.0, 0.0, 0.0]
    assert table["max"] == [MAX64, MAX32, 0.0, 0.0]  # reduced precision rounds to 1, which becomes 0
    assert table["high"][1:] == [1 - 2.0**-9 - 2.0**-24, 1 - 2.0**-8, 1 - 2.0**-9]
    assert table["wrap"][1:] == [1 - 2.0**-10, 0.0, 1 - 2.0**-10]
    assert coin_probability(0.0, "float64") == 2.0**-53 and coin_probability(0.0, "float32") == 2.0**-24
    assert coin_probability(0.0, "bfloat16") == (2**15 + 1) * 2.0**-24  # k = 0 and the 2**15 that round to 1
    assert coin_probability(1 - 2.0**-8, "bfloat16") == 2.0**-8 - 2.0**-24  # one tie rounds to even (1)
    assert coin_probability(0.0, "float16") == (2**12 + 1) * 2.0**-24
    with pytest.raises(ValueError, match="pattern"):
        torch_words_state("one", range(2))
    with pytest.raises(ValueError, match="index"):
        torch_words_state("zero", [623])


def test_severity_field_phrase_and_ranking():
    from spectr_gbv.validate.report.results import CheckResult, by_severity, severity_phrase

    assert severity_phrase(2.0**-53) == "about 1 call in 2^53" and severity_phrase(1.0) == "every call"
    assert severity_phrase(0.4) == "about 0.4 of calls" and severity_phrase(0.0) == "never observed"
    with pytest.raises(ValueError, match="prob"):
        severity_phrase(1.5)
    with pytest.raises(ValueError, match="severity"):
        CheckResult("zero_coin", "robustness", False, diagnosis="raises", severity=2.0)
    a = CheckResult("a", "robustness", False, diagnosis="raises", severity=2.0**-53)
    b = CheckResult("b", "statistical", False, diagnosis="not_lossless")
    c = CheckResult("c", "robustness", False, diagnosis="raises")
    d = CheckResult("d", "robustness", False, diagnosis="raises", severity=0.5)
    assert [x.name for x in by_severity([a, b, c, d])] == ["d", "b", "a", "c"]
    assert a.to_dict()["severity"] == 2.0**-53 and c.to_dict()["severity"] is None


def test_failure_under_ordinary_coins_carries_the_observed_rate():
    def emits_zero(draft_tokens, draft_probs, target_probs, rng):
        return [0]  # token 0 has target probability 0 in every probe row

    res = cp.check_zero_coin(_generic(emits_zero), 1, 0)
    assert res.passed is False and res.diagnosis == "zero_probability_token"
    assert res.detail.startswith("control with ordinary coins") and res.severity == 1.0
    assert res.severity_note == "every call: 4/4 calls failed (95% Clopper-Pearson interval 0.398..1)"
