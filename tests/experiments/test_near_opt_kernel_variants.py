"""The kernel's proportional score split (bench/experiments/near_opt_kernel_variants.py) equals the exact reference.

The checks of tests/gpu/kernels/test_kernel_near_opt_bv.py, for the research log's proportional
split (candidate C4c): :func:`~spectr_gbv.gpu.kernels.node_split.split_node_rule` with
:data:`KERNEL_PROPORTIONAL` on 60 random score-law nodes (d, the share and the moments of every
child's law) and :func:`~spectr_gbv.gpu.kernels.near_opt_bv.score_selection` on random exact
instances equal the reference with :data:`~bench.experiments.near_opt_variants.PROPORTIONAL`
(:func:`~bench.experiments.near_opt_variants.proportional_rule`) within 1e-9.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from bench.experiments.near_opt_kernel_variants import KERNEL_PROPORTIONAL  # noqa: E402
from bench.experiments.near_opt_variants import PROPORTIONAL  # noqa: E402
from tests.gpu.kernels.test_kernel_near_opt_bv import check_score_node_rule, check_score_selection  # noqa: E402


def test_proportional_node_rule_and_child_laws_equal_the_exact_reference():
    check_score_node_rule(KERNEL_PROPORTIONAL, "ratio", PROPORTIONAL)


@pytest.mark.parametrize(("n", "K", "seed"), [(3, 2, 5), (4, 3, 11), (3, 4, 23), (4, 2, 40)])
def test_proportional_score_selection_equals_the_reference_score_tree(n, K, seed):
    check_score_selection(KERNEL_PROPORTIONAL, "ratio", PROPORTIONAL, n, K, seed)


def test_proportional_split_takes_the_ratio_priority_only():
    from spectr_gbv.gpu.kernels.node_split import check_split

    assert check_split(KERNEL_PROPORTIONAL, None) == "ratio"
    with pytest.raises(ValueError, match="priority must be one of ratio with split='proportional'"):
        check_split(KERNEL_PROPORTIONAL, "hedge")
