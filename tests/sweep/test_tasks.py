"""One sweep task without Ray: rows equal a direct simulate, exact strings, errors become rows."""

import json
from fractions import Fraction

import pytest

from spectr_gbv.core.instance import random_instance
from spectr_gbv.core.numbers import json_value
from spectr_gbv.simulate.methods import simulate_method
from spectr_gbv.sweep.grid import grid_from_args
from spectr_gbv.sweep.schema import COLUMNS
from spectr_gbv.sweep.tasks import exact_text, run_task
from spectr_gbv.theory.bounds import cic_bound, cic_bound_lossless
from spectr_gbv.theory.lp import LPTooLargeError, optimal_coupling, optimal_lossless

METHODS = ("sd", "mdbv", "optimal_multidraft")


def test_rows_equal_a_direct_simulate():
    grid = grid_from_args(random=["3,2,4,0.3"], methods=",".join(METHODS), ks="1,2", measures="tau,bounds,opt,ot")
    (task,) = grid.tasks()
    rows = run_task(task)
    inst = random_instance(3, 2, 4, zero_prob=0.3)
    # sd reads one draft: the grid runs it at K = 1 only (MethodSpec.grid_shape)
    assert [(r["method"], r["K"]) for r in rows] == [(m, k) for m in METHODS for k in ((1,) if m == "sd" else (1, 2))]
    for r in rows:
        assert set(r) == set(COLUMNS)
        k = r["K"]
        direct = simulate_method(inst, r["method"], k)
        assert isinstance(direct.expected_accepted, Fraction)
        assert r["expected_accepted"] == json_value(direct.expected_accepted)
        assert r["expected_accepted_float"] == float(direct.expected_accepted)
        assert r["validity_defect"] == json_value(direct.validity_defect) == "0"
        assert r["lossless"] is True and r["error"] is None
        assert r["cic_bound"] == json_value(cic_bound(*inst, k, 2))
        assert r["cic_bound_lossless"] == json_value(cic_bound_lossless(*inst, k, 2))
        assert r["cic_bound_float"] == float(Fraction(r["cic_bound"]))
        assert r["opt"] == pytest.approx(optimal_lossless(*inst, k, 2).value, abs=1e-9)
        assert r["ot"] == pytest.approx(optimal_coupling(*inst, k, 2).value, abs=1e-9)
        assert (r["instance_id"], r["family"], r["n"], r["L"]) == ("random:3,2,4,0.3", "random", 3, 2)
        assert r["package_version"] == "0.1.0" and r["seconds"] >= 0


def test_measures_not_requested_are_null():
    (task,) = grid_from_args(random=["2,2,0"], methods="sd", ks="2", measures="tau").tasks()
    (r,) = run_task(task)
    assert r["expected_accepted"] is not None
    assert all(r[c] is None for c in ("opt", "ot", "cic_bound", "cic_bound_lossless", "cic_bound_float", "error"))


def test_a_failed_measure_is_null_with_its_error(monkeypatch):
    import spectr_gbv.theory.lp as lp

    def too_large(*args, **kw):
        raise LPTooLargeError("LP opt n=2, L=2, K=2 too large\nsecond line")

    monkeypatch.setattr(lp, "optimal_lossless", too_large)
    (task,) = grid_from_args(random=["2,2,0"], methods="sd,bv", ks="2", measures="bounds,opt").tasks()
    rows = run_task(task)
    assert [r["opt"] for r in rows] == [None, None]
    assert [r["error"] for r in rows] == ["opt: LPTooLargeError: LP opt n=2, L=2, K=2 too large second line"] * 2
    assert all(r["cic_bound"] is not None and r["expected_accepted"] is not None for r in rows)


def test_a_failed_simulation_is_a_row(monkeypatch):
    import spectr_gbv.simulate.methods as methods

    real = methods.simulate_method

    def refuse(instance, method, k):
        if method == "bv":
            raise ValueError("enumeration too large")
        return real(instance, method, k)

    monkeypatch.setattr(methods, "simulate_method", refuse)
    (task,) = grid_from_args(random=["2,2,0"], methods="sd,bv", ks="1", measures="bounds").tasks()
    sd, bv = run_task(task)
    assert sd["error"] is None and sd["expected_accepted"] is not None
    assert bv["error"] == "simulate: ValueError: enumeration too large"
    assert bv["expected_accepted"] is None and bv["lossless"] is None and bv["seconds"] is None
    assert bv["cic_bound"] == sd["cic_bound"]


def test_an_invalid_instance_file_is_a_row(tmp_path):
    """A file broken after the grid loaded it (the grid refuses a broken one up front): error rows, no crash."""
    (tmp_path / "bad.json").write_text(json.dumps(random_instance(2, 1, 0).to_dict()))
    (task,) = grid_from_args(instances=tmp_path, methods="mdbv", ks="1,2").tasks()
    (tmp_path / "bad.json").write_text(json.dumps({"n": 2, "L": 1, "target": {}}))
    rows = run_task(task)
    assert [(r["instance_id"], r["K"], r["n"], r["expected_accepted"]) for r in rows] == [
        ("file:bad", 1, None, None),
        ("file:bad", 2, None, None),
    ]
    assert all(r["error"].startswith("instance: ValueError: instance: missing field 'draft'") for r in rows)


def test_float_instance_strings_are_float_reprs(tmp_path):
    inst = random_instance(2, 1, 0).to_float()
    (tmp_path / "f.json").write_text(json.dumps(inst.to_dict()))
    (task,) = grid_from_args(instances=tmp_path, methods="sd", ks="1").tasks()
    (r,) = run_task(task)
    direct = simulate_method(inst, "sd", 1)
    assert r["expected_accepted"] == repr(float(direct.expected_accepted))
    assert r["expected_accepted_float"] == float(direct.expected_accepted)
    assert exact_text(Fraction(3, 1)) == "3"
