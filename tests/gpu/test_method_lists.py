"""The gpu layer's method lists are read from the method table and equal the lists the code held before.

The tuples below are the hand-written ones of the previous code (kernels/api.py, kernels/expected.py,
decoding/decoder.py, bench/config.py, cli/bench.py and the decoder adapters), kept here verbatim.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from spectr_gbv.cli import bench as cli_bench  # noqa: E402
from spectr_gbv.core.methods import METHOD_TABLE, method_spec  # noqa: E402
from spectr_gbv.gpu.decoding import decoder  # noqa: E402
from spectr_gbv.gpu.kernels import api, expected  # noqa: E402
from spectr_gbv.gpu.kernels.ar import verify_ar  # noqa: E402
from spectr_gbv.gpu.kernels.bv import verify_bv  # noqa: E402
from spectr_gbv.gpu.kernels.gbv_multipath import verify_gbv_multipath  # noqa: E402
from spectr_gbv.gpu.kernels.mdbv import verify_mdbv  # noqa: E402
from spectr_gbv.gpu.kernels.near_opt_bv import verify_near_opt_bv  # noqa: E402
from spectr_gbv.gpu.kernels.optimal_multidraft import verify_optimal_multidraft  # noqa: E402
from spectr_gbv.gpu.kernels.released import verify_spectr_gbv_released  # noqa: E402
from spectr_gbv.gpu.kernels.rrs import verify_rrs  # noqa: E402
from spectr_gbv.gpu.kernels.sd import verify_sd  # noqa: E402
from spectr_gbv.gpu.kernels.spectr import verify_spectr  # noqa: E402
from spectr_gbv.gpu.kernels.traversal import verify_traversal  # noqa: E402
from spectr_gbv.realpair import config as bench_config  # noqa: E402
from spectr_gbv.validate.generation.adapters import spectr_decoder  # noqa: E402

OLD_LOSSLESS = (
    "ar",
    "sd",
    "bv",
    "spectr",
    "rrs",
    "gbv_multipath",
    "mdbv",
    "traversal",
    "optimal_multidraft",
    "near_opt_bv",
)
OLD_KERNEL_METHODS = (*OLD_LOSSLESS, "spectr_gbv_released")
OLD_KERNELS = {
    "ar": verify_ar,
    "sd": verify_sd,
    "bv": verify_bv,
    "spectr": verify_spectr,
    "rrs": verify_rrs,
    "gbv_multipath": verify_gbv_multipath,
    "mdbv": verify_mdbv,
    "traversal": verify_traversal,
    "optimal_multidraft": verify_optimal_multidraft,
    "near_opt_bv": verify_near_opt_bv,
    "spectr_gbv_released": verify_spectr_gbv_released,
}
OLD_EXPECTED = ("sd", "bv", "gbv_multipath", "mdbv", "near_opt_bv")
# the bench listed mdbv before gbv_multipath; the table (one order everywhere) has gbv_multipath first
OLD_BENCH_METHODS = ("ar", "sd", "bv", "spectr", "rrs", "mdbv", "gbv_multipath")
OLD_BENCH_METHODS += ("traversal", "optimal_multidraft", "near_opt_bv")
OLD_BENCH_DEFAULT = ("ar", "sd", "bv", "spectr", "rrs", "mdbv", "gbv_multipath")


def test_kernel_lists_equal_the_old_ones():
    assert api.KERNEL_METHODS == OLD_KERNEL_METHODS
    assert api.LOSSY_METHODS == frozenset({"spectr_gbv_released"})
    assert api.KERNELS == OLD_KERNELS and tuple(api.KERNELS) == OLD_KERNEL_METHODS
    assert expected.EXPECTED_METHODS == OLD_EXPECTED
    assert {m: f.__name__ for m, f in expected._LAWS.items()} == {m: f"_law_{m}" for m in OLD_EXPECTED}


def test_decoder_and_adapter_lists_equal_the_old_ones():
    assert decoder.LOSSLESS_METHODS == OLD_LOSSLESS
    assert decoder.LOSSY_METHODS == ("spectr_gbv_released",)
    assert decoder.SINGLE_DRAFT_METHODS == ("sd", "bv")
    assert spectr_decoder.DECODER_LOSSLESS_METHODS == OLD_LOSSLESS
    assert spectr_decoder.SINGLE_PATH_METHODS == ("ar", "sd", "bv")


def test_bench_lists_are_the_old_ones_in_table_order():
    table_order = [m.name for m in METHOD_TABLE]
    for new, old in ((bench_config.METHODS, OLD_BENCH_METHODS), (bench_config.DEFAULT_METHODS, OLD_BENCH_DEFAULT)):
        assert sorted(new) == sorted(old) and list(new) == sorted(new, key=table_order.index)
    assert bench_config.METHODS == OLD_LOSSLESS
    assert bench_config.DEFAULT_METHODS == ("ar", "sd", "bv", "spectr", "rrs", "gbv_multipath", "mdbv")
    assert bench_config.SINGLE_DRAFT == ("sd", "bv")
    assert cli_bench.METHOD_NAMES == bench_config.METHODS


@pytest.mark.parametrize("method", OLD_LOSSLESS)
def test_grid_shape_is_the_benchs_old_rule(method):
    """The old bench rule: K = 1 for ar, sd and bv; L = 0 for ar."""
    k = 1 if method in ("ar", "sd", "bv") else 5
    n = 0 if method == "ar" else 7
    assert method_spec(method).grid_shape(5, 7) == (k, n)
    (point,) = {p for p in bench_config.build_grid([method], [5], [7], [0.5], (5, 7, 0.5)) if p.method == method}
    assert (point.num_drafts, point.draft_length) == (k, n)
