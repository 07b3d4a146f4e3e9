"""The robustness probes on the faithful ports of public verifiers (``bench/gallery/ports``).

Each port once exposed a blind spot of the probes: LitGPT passed (its rejecting coin is the
smallest, its first coin draw 12), gpt-fast's bf16 coin blinded the all-zero-residual probe,
vLLM V1's 2**-53 zero coin failed like a 2**-9 one, mlx-lm (no coin) got "coin confirmed", and
SGLang's covering-siblings residual was never reached. Skipped where the ports are absent.
"""

from __future__ import annotations

import math

import pytest

from spectr_gbv.validate.interfaces.registry import make_adapter
from spectr_gbv.validate.isolation.guard import CallGuard
from spectr_gbv.validate.probes import coin_probes as cp
from spectr_gbv.validate.probes import free_probes as fp

pytest.importorskip("torch")


def _port(module: str, interface: str = "generic_torch"):
    mod = pytest.importorskip(f"bench.gallery.ports.{module}")
    return make_adapter(mod.verify, interface, CallGuard(30))


def _free(ad):
    return {r.name: r for r in fp.check_degenerate_rows(ad, 1, 0)}


def test_litgpt_port_fails_without_and_with_forcing():
    ad = _port("litgpt_sd")
    zt = _free(ad)["zero_target_draft"]
    assert zt.passed is False and zt.diagnosis == "raises" and "raises in 20/20" in zt.detail and zt.severity == 1.0
    deg = cp.check_degenerate_residual(ad, 1, 0)
    assert deg.passed is False and deg.diagnosis == "raises"
    coin = deg.instance["coin"]
    assert (coin["which"], coin["index"], coin["dtype"], coin["dtype_confirmed"]) == ("zero", 12, "float32", True)
    assert deg.severity == 2.0**-24


def test_gptfast_port_reports_its_bfloat16_coins():
    ad = _port("gptfast_sd")
    deg = cp.check_degenerate_residual(ad, 1, 0)
    assert deg.passed is False and deg.diagnosis == "zero_probability_token"
    assert (deg.instance["coin"]["value"], deg.instance["coin"]["dtype"]) == (1 - 2.0**-8, "bfloat16")
    assert round(math.log2(deg.severity)) == -8
    zc = cp.check_zero_coin(ad, 1, 0)
    assert zc.passed is False and zc.instance["coin"]["dtype"] == "bfloat16" and round(math.log2(zc.severity)) == -9


def test_vllm_port_zero_coin_is_float64_and_rare():
    ad = _port("vllm_v1", "batched_torch")
    zc = cp.check_zero_coin(ad, 1, 0)
    assert zc.passed is False and zc.diagnosis == "zero_probability_token"
    assert zc.instance["coin"]["dtype"] == "float64" and zc.severity == 2.0**-53
    zt = _free(ad)["zero_target_draft"]
    assert zt.diagnosis == "zero_probability_token" and zt.severity == 1.0


def test_sglang_port_covering_siblings_reached():
    res = cp.check_covering_drafts(_port("sglang_tree"), 2, 0)
    assert res.passed is False and res.diagnosis == "zero_probability_token"
    assert "emitted [4]: token 4 at position 0 has target probability 0" in res.detail
    assert res.instance["K"] == 4 and res.severity == 2.0**-24


def test_mlx_lm_port_has_no_coin_to_confirm():
    ad = _port("mlx_lm_sd")
    for check in (cp.check_zero_coin, cp.check_degenerate_residual, cp.check_covering_drafts):
        res = check(ad, 1, 0)
        assert res.passed is None and res.detail.startswith("inconclusive") and "confirmed" not in res.detail
    assert all(r.passed for r in _free(ad).values())
