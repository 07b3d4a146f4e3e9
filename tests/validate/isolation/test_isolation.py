"""Isolation of the verifier under test: exits, hangs in C, raises; rng equivalence; emit_many; new interfaces."""

from __future__ import annotations

import os
import re
import sys
import textwrap

import numpy as np
import pytest

from spectr_gbv.core import random_instance
from spectr_gbv.testing.mutants import correct_mdbv, correct_sd_chain
from spectr_gbv.validate import load_verifier, validate
from spectr_gbv.validate.battery import default_battery
from spectr_gbv.validate.battery.tables import Tables
from spectr_gbv.validate.interfaces.loading import UnloadableVerifier
from spectr_gbv.validate.interfaces.registry import make_adapter
from spectr_gbv.validate.isolation.failures import VerifierExited, VerifierRaised
from spectr_gbv.validate.isolation.guard import CallGuard

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="process isolation needs os.fork")

CASE = [(random_instance(2, 1, 0), 2)]
QUICK = {"budget": "quick", "instances": CASE, "probes": False, "search": False}


def _inputs(n: int = 40, K: int = 2, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    bi = default_battery(kinds=["dense"])[0]
    tables = Tables(bi.float_instance)
    d = tables.sample_drafts(n, K, np.random.default_rng(seed))
    q, p = tables.rows(d)
    return d, q, p


def _only_failure(rep):  # noqa: ANN001, ANN202
    assert not rep.passed
    assert [(c.name, c.diagnosis) for c in rep.failures] == [("runs", rep.failures[0].diagnosis)]
    return rep.failures[0]


# ---------------------------------------------------------------------------- exits, hangs, raises
def _sys_exit(d, q, p, rng):  # noqa: ANN001, ANN202
    sys.exit(0)


def _raise_system_exit(d, q, p, rng):  # noqa: ANN001, ANN202
    raise SystemExit(5)


def _os_exit(d, q, p, rng):  # noqa: ANN001, ANN202
    os._exit(3)


def _raises(d, q, p, rng):  # noqa: ANN001, ANN202
    raise KeyError("nope")


def _gil_loop(d, q, p, rng):  # noqa: ANN001, ANN202
    re.match(r"(a+)+$", "a" * 40 + "b")  # exponential backtracking in C, the GIL held throughout
    return [0]


def test_sys_exit_is_a_failed_check_not_the_end_of_the_run():
    fail = _only_failure(validate(_sys_exit, **QUICK))
    assert fail.diagnosis == "exits" and "SystemExit(0)" in fail.detail and "sys.exit(0)" in fail.detail


def test_raise_system_exit_is_reported_with_its_code():
    fail = _only_failure(validate(_raise_system_exit, **QUICK))
    assert fail.diagnosis == "exits" and "SystemExit(5)" in fail.detail


def test_os_exit_kills_only_the_worker():
    fail = _only_failure(validate(_os_exit, **QUICK))
    assert fail.diagnosis == "exits" and "exited with status 3" in fail.detail and "os._exit(3)" in fail.detail


def test_a_verifier_that_raises_is_diagnosed_raises():
    fail = _only_failure(validate(_raises, **QUICK))
    assert fail.diagnosis == "raises" and "KeyError: 'nope'" in fail.detail


def test_a_gil_holding_c_loop_is_killed_after_the_limit():
    rep = validate(_gil_loop, time_limit_s=1.0, **QUICK)
    fail = _only_failure(rep)
    assert fail.diagnosis == "timeout" and "per-call limit of 1 s" in fail.detail and "killed" in fail.detail


def test_a_killed_worker_names_the_signal():
    def segv(d, q, p, rng):  # noqa: ANN001, ANN202
        os.kill(os.getpid(), 9)

    ad = make_adapter(segv, "generic", CallGuard(5))
    with pytest.raises(VerifierExited, match=r"killed by signal 9 \(SIGKILL\)"):
        ad.emit(*_inputs(3), np.random.default_rng(0))
    with pytest.raises(VerifierExited):  # never called again
        ad.emit(*_inputs(3), np.random.default_rng(0))


def test_thread_isolation_still_catches_system_exit():
    ad = make_adapter(_sys_exit, "generic", CallGuard(5, isolation="thread"))
    with pytest.raises(VerifierExited, match=r"SystemExit\(0\)"):
        ad.emit(*_inputs(3), np.random.default_rng(0))
    assert ad.guard.dead and ad.guard.isolation == "thread"


def test_exit_on_import_gives_a_report(tmp_path, monkeypatch):
    (tmp_path / "exits_on_import_mod.py").write_text(
        textwrap.dedent(
            """
            import sys
            sys.exit(0)
            def verify(d, q, p, rng):
                return [0]
            """
        )
    )
    (tmp_path / "fine_on_import_mod.py").write_text("from spectr_gbv.testing.mutants import correct_mdbv as verify\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fn = load_verifier("exits_on_import_mod:verify", "generic")
    assert isinstance(fn, UnloadableVerifier) and "exits_on_import_mod" not in sys.modules
    fail = _only_failure(validate(fn, **QUICK))
    assert fail.diagnosis == "exits" and "on import of module 'exits_on_import_mod'" in fail.detail
    assert "SystemExit(0)" in fail.detail
    assert validate(load_verifier("fine_on_import_mod:verify", "generic"), **QUICK).passed


def test_call_guard_arguments():
    with pytest.raises(ValueError, match="isolation"):
        CallGuard(1, isolation="fiber")
    with pytest.raises(ValueError, match="workers"):
        CallGuard(1, workers=0)
    g = CallGuard(1)
    assert g.isolation == "process" and g.workers == min(2, os.cpu_count() or 1)
    assert g.run(lambda: 41 + 1) == 42  # a closure, in a fresh fork
    with pytest.raises(ZeroDivisionError):
        g.run(lambda: 1 / 0)


# ---------------------------------------------------------------------------- equivalence
@pytest.mark.parametrize("verify", [correct_mdbv, lambda d, q, p, rng: [int(rng.integers(0, 3))] * 2])
def test_process_and_thread_give_the_same_tokens_and_rng_state(verify):
    d, q, p = _inputs()
    out = {}
    for iso in ("process", "thread"):
        ad = make_adapter(verify, "generic", CallGuard(5, isolation=iso))
        rng = np.random.default_rng(7)
        em = ad.emit(d, q, p, rng)
        out[iso] = (em.tokens, em.lengths, rng.bit_generator.state, ad.guard.calls)
    a, b = out["process"], out["thread"]
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert a[2] == b[2] and a[3] == b[3] == 40


def test_emit_many_is_sequential_emit_in_input_order():
    batches = [(*_inputs(n, seed=n), np.random.default_rng([3, n])) for n in (5, 17, 1, 30, 8)]
    ad = make_adapter(correct_mdbv, "generic", CallGuard(5, workers=2))
    ref = make_adapter(correct_mdbv, "generic", CallGuard(5, isolation="thread"))
    seq = [ref.emit(d, q, p, np.random.default_rng([3, len(d)])) for d, q, p, _ in batches]
    many = ad.emit_many([{"drafts": d, "draft_probs": q, "target_probs": p, "rng": r} for d, q, p, r in batches])
    assert [len(e.lengths) for e in many] == [5, 17, 1, 30, 8]
    for a, b in zip(many, seq, strict=True):
        assert np.array_equal(a.tokens, b.tokens) and np.array_equal(a.lengths, b.lengths)
    after = [r.random() for *_, r in batches]
    expect = [np.random.default_rng([3, len(d)]) for d, *_ in batches]
    for g, (d, q, p, _) in zip(expect, batches, strict=True):
        ref.emit(d, q, p, g)
    assert after == [g.random() for g in expect]
    with pytest.raises(ValueError, match="its own rng"):
        shared = np.random.default_rng(0)
        ad.emit_many([(*_inputs(2), shared), (*_inputs(2), shared)])


def test_emit_many_raises_the_first_failure_in_input_order():
    def picky(d, q, p, rng):  # noqa: ANN001, ANN202
        raise ValueError(f"batch rng {rng.bit_generator.state['state']['state'] % 7}")

    ad = make_adapter(picky, "generic", CallGuard(5, workers=2))
    rngs = [np.random.default_rng(i) for i in range(4)]
    with pytest.raises(VerifierRaised) as first:
        ad.emit_many([(*_inputs(1), r) for r in rngs])
    with pytest.raises(VerifierRaised) as alone:
        make_adapter(picky, "generic", CallGuard(5)).emit(*_inputs(1), np.random.default_rng(0))
    assert str(first.value).split(" at ")[0] == str(alone.value).split(" at ")[0]


# ---------------------------------------------------------------------------- new interfaces
def _batched(d, q, p, rng):  # noqa: ANN001, ANN202
    out = np.full((d.shape[0], d.shape[2] + 1), -1)
    for b in range(d.shape[0]):
        toks = correct_mdbv(d[b], q[b], p[b], rng)
        out[b, : len(toks)] = toks
    return out


def test_batched_interface_passes_on_a_correct_verifier():
    rep = validate(_batched, interface="batched", **QUICK)
    assert rep.passed, rep.to_text()


def test_torch_interfaces_pass_on_correct_verifiers():
    torch = pytest.importorskip("torch")

    def rng_of(gen):  # noqa: ANN001, ANN202
        assert isinstance(gen, torch.Generator)
        return np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=gen)))

    def generic_t(d, q, p, gen):  # noqa: ANN001, ANN202
        assert d.dtype == torch.int64 and q.dtype == p.dtype == torch.float64 and d.dim() == 2
        return torch.tensor(correct_mdbv(d.numpy(), q.numpy(), p.numpy(), rng_of(gen)))

    def batched_t(d, q, p, gen):  # noqa: ANN001, ANN202
        assert d.dim() == 3 and q.dtype == torch.float64
        return torch.from_numpy(_batched(d.numpy(), q.numpy(), p.numpy(), rng_of(gen)))

    def chain_t(d, q, p, u):  # noqa: ANN001, ANN202
        assert isinstance(u, torch.Tensor) and u.dtype == torch.float64 and u.shape == (d.shape[0], d.shape[1] + 1)
        return torch.from_numpy(np.asarray(correct_sd_chain(d.numpy(), q.numpy(), p.numpy(), u.numpy())))

    chain_case = [(random_instance(2, 1, 0), 1)]
    for fn, itf, case in (
        (generic_t, "generic_torch", CASE),
        (batched_t, "batched_torch", CASE),
        (chain_t, "chain_torch", chain_case),
    ):
        rep = validate(fn, interface=itf, **{**QUICK, "instances": case})
        assert rep.passed, (itf, rep.to_text())
        assert make_adapter(fn, itf, CallGuard(5)).single_draft is (itf == "chain_torch")


def test_torch_state_is_installed_in_the_generator():
    torch = pytest.importorskip("torch")

    def draws(d, q, p, gen):  # noqa: ANN001, ANN202
        return [int(torch.randint(0, 3, (1,), generator=gen))]

    ad = make_adapter(draws, "generic_torch", CallGuard(5))
    d, q, p = _inputs(6)
    gen = torch.Generator().manual_seed(11)
    state = gen.get_state()
    expect = [int(torch.randint(0, 3, (1,), generator=gen)) for _ in range(6)]  # one generator for the batch
    rng = np.random.default_rng(0)
    em = ad.emit(d, q, p, rng, torch_state=state)
    assert em.tokens[:, 0].tolist() == expect and rng.random() == np.random.default_rng(0).random()
    a = ad.emit(d, q, p, np.random.default_rng(4))
    b = ad.emit(d, q, p, np.random.default_rng(4))
    assert np.array_equal(a.tokens, b.tokens)  # seeded from the harness rng per call


def test_hf_torch_state_replaces_the_seed_and_is_restored():
    torch = pytest.importorskip("torch")

    def hf_like(ids, logq, n, logp, **kw):  # noqa: ANN001, ANN202
        return torch.randint(0, 3, (1, 1)), 0

    ad = make_adapter(hf_like, "hf", CallGuard(5, isolation="thread"))
    d, q, p = _inputs(5, K=1)
    gen_state = torch.Generator().manual_seed(3).get_state()
    torch.manual_seed(99)
    before = torch.random.get_rng_state()
    em = ad.emit(d, q, p, np.random.default_rng(0), torch_state=gen_state)
    assert torch.equal(torch.random.get_rng_state(), before)
    torch.random.set_rng_state(gen_state)
    assert em.tokens[:, 0].tolist() == [int(torch.randint(0, 3, (1, 1))) for _ in range(5)]


def test_a_torch_interface_without_torch_is_a_value_error(monkeypatch):
    from spectr_gbv.validate.interfaces import registry

    monkeypatch.setattr(registry, "has_torch", lambda: False)
    for itf in ("batched_torch", "generic_torch", "chain_torch", "hf"):
        with pytest.raises(ValueError, match=f"interface '{itf}' needs torch"):
            make_adapter(correct_mdbv, itf, CallGuard(5))
