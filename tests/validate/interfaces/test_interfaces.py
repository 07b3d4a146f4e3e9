"""Adapters of the validate harness: output reading, the call guard, load_verifier, the HF adapter."""

from __future__ import annotations

import time

import numpy as np
import pytest

from spectr_gbv.core import default_instance
from spectr_gbv.reference import get_verifier
from spectr_gbv.validate import INTERFACES, load_verifier
from spectr_gbv.validate.battery import WIDE_VOCAB_IDS, WIDE_VOCAB_SIZE, default_battery
from spectr_gbv.validate.battery.instance import battery_instance_from_spec, instance_from_spec
from spectr_gbv.validate.battery.tables import Tables
from spectr_gbv.validate.checks.structural import classify
from spectr_gbv.validate.interfaces.outputs import read_padded, read_sequence
from spectr_gbv.validate.interfaces.registry import make_adapter
from spectr_gbv.validate.isolation.failures import VerifierRaised, VerifierTimedOut
from spectr_gbv.validate.isolation.guard import CallGuard
from spectr_gbv.validate.probes.input_probes import generator_with_first_uniform


def test_interfaces_constant():
    assert INTERFACES == ("generic", "chain", "hf", "batched", "batched_torch", "generic_torch", "chain_torch")


def test_read_sequence_accepts_ints_and_flags_garbage():
    assert read_sequence([1, 2]) == ((1, 2), None)
    assert read_sequence(np.array([3, 0], dtype=np.int32)) == ((3, 0), None)
    assert read_sequence(np.array([2.0, 1.0])) == ((2, 1), None)
    assert read_sequence([float("nan")])[1][0] == "nan_or_out_of_vocab"
    assert read_sequence([1.5])[1][0] == "bad_output"
    assert read_sequence("ab")[1][0] == "bad_output"
    assert read_sequence(None)[1][0] == "bad_output"
    assert read_sequence([[1, 2]])[1][0] == "bad_output"


def test_read_padded_rows():
    out = np.array([[0, 1, -1], [2, -1, -1], [1, -1, 0], [-1, -1, -1]])
    em = read_padded(out, 4, 2)
    assert em.lengths.tolist() == [2, 1, 0, 0]
    assert em.tokens[:2].tolist() == [[0, 1, -1], [2, -1, -1]]
    assert em.problems[2][0] == "bad_output" and "after the first -1" in em.problems[2][1]
    assert em.problems[3] == ("bad_output", "output row [-1, -1, -1] emits no token")
    bad = read_padded(np.zeros((4, 2)), 4, 2)  # wrong shape
    assert set(bad.problems) == {0, 1, 2, 3}
    nan = read_padded(np.array([[0.0, np.nan, -1.0]]), 1, 2)
    assert nan.problems[0][0] == "nan_or_out_of_vocab"


def test_classify_prefix_range_and_zero_probability():
    bi = default_battery(kinds=["sparse_disjoint"])[0]
    tables = Tables(bi.float_instance)
    drafts = tables.sample_drafts(3, bi.K, np.random.default_rng(0))
    _, p = tables.rows(drafts)
    from spectr_gbv.validate.interfaces.outputs import Emitted

    tok = np.full((3, 3), -1)
    d0 = drafts[0, 0]
    tok[0, :2] = [d0[0], 9]  # id 9 outside V = 4
    tok[1, :2] = [next(v for v in range(4) if v not in drafts[1, :, 0]), 0]  # no draft starts with it
    zero_tok = int(np.flatnonzero(p[2, 0, 0] == 0)[0])  # a token p gives probability 0 at the root
    tok[2, :1] = [zero_tok]
    em = Emitted(tok, np.array([2, 2, 1]))
    found = classify(em, drafts, p)
    assert found[0][0] == "nan_or_out_of_vocab"
    assert found[1][0] == "bad_output" and "no draft's prefix" in found[1][1]
    assert found[2][0] == "zero_probability_token"


def test_generator_with_first_uniform():
    assert generator_with_first_uniform("zero", 3).random() == 0.0
    assert generator_with_first_uniform("max", 4).random() == 1 - 2**-53
    g = generator_with_first_uniform("zero", 5)
    first = g.random(3)
    assert first[0] == 0.0 and 0 < first[1] < 1 and first[1] != first[2]
    with pytest.raises(ValueError, match="which"):
        generator_with_first_uniform("one")


def test_call_guard_reports_raise_and_timeout():
    guard = CallGuard(0.3)
    assert guard.run(lambda: 41 + 1) == 42
    with pytest.raises(ZeroDivisionError):
        guard.run(lambda: 1 / 0)

    def slow() -> None:
        guard.tick()
        time.sleep(5)

    t0 = time.monotonic()
    with pytest.raises(VerifierTimedOut, match="per-call limit of 0.3 s"):
        guard.run(slow)
    assert time.monotonic() - t0 < 2
    with pytest.raises(VerifierTimedOut):  # never called again
        guard.run(lambda: 1)
    with pytest.raises(ValueError, match="time_limit_s"):
        CallGuard(0)


def test_generic_adapter_runs_a_reference_verifier_and_wraps_errors():
    inst = default_instance().to_float()
    bi = default_battery(kinds=["dense"])[0]
    tables = Tables(bi.float_instance)
    d = tables.sample_drafts(50, 2, np.random.default_rng(1))
    q, p = tables.rows(d)
    ad = make_adapter(get_verifier("mdbv"), "generic", CallGuard(5))
    em = ad.emit(d, q, p, np.random.default_rng(2))
    assert em.problems == {} and np.all((em.lengths >= 1) & (em.lengths <= 3))
    assert not classify(em, d, p)

    def boom(*args):
        raise KeyError("nope")

    bad = make_adapter(boom, "generic", CallGuard(5))
    with pytest.raises(VerifierRaised, match="KeyError"):
        bad.emit(d, q, p, np.random.default_rng(0))
    assert inst.L == 2


def test_chain_adapter_supplies_uniforms_and_batches():
    seen = []

    def chain_first_token(draft_ids, draft_probs, target_probs, uniforms):
        seen.append(uniforms.shape)
        out = np.full((draft_ids.shape[0], draft_ids.shape[1] + 1), -1)
        out[:, 0] = (uniforms[:, 0] * draft_probs.shape[-1]).astype(int)  # a deterministic map of u0
        return out

    bi = default_battery(1, kinds=["dense"])[0]
    tables = Tables(bi.float_instance)
    d = tables.sample_drafts(5000, 1, np.random.default_rng(0))
    q, p = tables.rows(d)
    ad = make_adapter(chain_first_token, "chain", CallGuard(5, isolation="thread"))  # `seen` is filled in-process
    u = np.random.default_rng(3).random((5000, 3))
    em = ad.emit(d, q, p, np.random.default_rng(0), u)
    assert seen == [(4096, 3), (904, 3)]
    assert np.array_equal(em.tokens[:, 0], (u[:, 0] * 3).astype(int)) and np.all(em.lengths == 1)


def test_load_verifier_paths_and_errors():
    fn = load_verifier("spectr_gbv.reference.sd:SpeculativeDecodingVerifier", "generic")
    assert fn.__name__ == "sample"
    assert load_verifier("numpy:array", "chain") is np.array
    for path, msg in (
        ("nocolon", "bad verifier path"),
        ("a:b:c", "bad verifier path"),
        ("no_such_module_xyz:f", "cannot import module 'no_such_module_xyz'"),
        ("numpy:no_such_attr", "has no attribute 'no_such_attr'"),
        ("numpy:pi", "expected a callable"),
    ):
        with pytest.raises(ValueError, match=msg) as exc:
            load_verifier(path, "generic")
        assert "\n" not in str(exc.value)
    with pytest.raises(ValueError, match="unknown interface 'tree'; valid: generic, chain, hf"):
        load_verifier("numpy:array", "tree")


def test_instance_specs_rebuild_the_battery():
    for bi in default_battery():
        if bi.kind == "wide_vocab":  # an (Instance, K) pair cannot carry the wide vocabulary
            with pytest.raises(ValueError, match="battery_instance_from_spec"):
                instance_from_spec(bi.spec(drafts=[[0]]))
            back = battery_instance_from_spec(bi.spec(drafts=[[0]]))
            assert back.vocab is not None and back.vocab.ids == WIDE_VOCAB_IDS and back.vocab.size == WIDE_VOCAB_SIZE
            inst, K = back.instance, back.K
        else:
            inst, K = instance_from_spec(bi.spec(drafts=[[0]]))
        assert K == bi.K and inst.target == bi.instance.target and inst.draft == bi.instance.draft
    with pytest.raises(ValueError, match="spec"):
        instance_from_spec({"K": 1})


def test_battery_kinds_are_what_they_say():
    by = {bi.kind: bi for bi in default_battery()}
    assert list(by) == [
        "dense",
        "sparse_disjoint",
        "p_equals_q",
        "low_temperature",
        "tiny_probabilities",
        "long_block",
        "tied_ratios",
        "wide_tree",
        "wide_vocab",
    ]
    assert by["wide_vocab"].vocab.size == 33000 and max(by["wide_vocab"].vocab.ids) == 32999
    assert by["sparse_disjoint"].K == 3 and by["tied_ratios"].K == 3 and by["wide_tree"].K == 4
    single = default_battery(1)
    assert all(b.K == 1 for b in single) and "wide_tree" not in {b.kind for b in single}
    sp = by["sparse_disjoint"].instance
    root_p, root_q = np.array(sp.target.cond(()), dtype=float), np.array(sp.draft.cond(()), dtype=float)
    assert np.any((root_p > 0) & (root_q == 0)) and np.any((root_q > 0) & (root_p == 0))
    pq = by["p_equals_q"].instance
    assert all(list(pq.draft.cond(x)) == list(pq.target.cond(x)) for x, _ in pq.draft.items())
    rows = [np.array(r, dtype=float) for _, r in by["low_temperature"].instance.target.items()]
    assert np.median([r.max() for r in rows]) > 0.9 and min(r.min() for r in rows) < 1e-4
    tiny = np.array(by["tiny_probabilities"].instance.target.cond(()), dtype=float)
    assert 0 < tiny.min() < 1e-5
    assert by["long_block"].instance.L == 5


def test_hf_adapter_on_transformers_speculative_sampling():
    torch = pytest.importorskip("torch")
    utils = pytest.importorskip("transformers.generation.utils")
    torch.set_num_threads(1)
    fn = utils._speculative_sampling
    bi = default_battery(1, kinds=["dense"])[0]
    tables = Tables(bi.float_instance)
    d = tables.sample_drafts(300, 1, np.random.default_rng(0))
    q, p = tables.rows(d)
    ad = make_adapter(fn, "hf", CallGuard(10))
    torch.manual_seed(123)
    before = torch.rand(1).item()
    torch.manual_seed(123)
    a = ad.emit(d, q, p, np.random.default_rng(5))
    assert torch.rand(1).item() == before  # the caller's RNG state is restored
    b = ad.emit(d, q, p, np.random.default_rng(5))
    assert np.array_equal(a.tokens, b.tokens) and a.problems == {}
    assert not classify(a, d, p)
    # p = q on a deterministic draft: everything accepted, then the bonus token
    one_hot = np.zeros((1, 1, 2, 3))
    one_hot[..., 0] = 1.0
    out = ad.emit(
        np.zeros((1, 1, 2), dtype=np.int64),
        one_hot,
        np.zeros((1, 1, 3, 3)) + one_hot[:, :, :1],
        np.random.default_rng(0),
    )
    assert out.tokens[0].tolist() == [0, 0, 0] and out.lengths.tolist() == [3]
