"""Helpers shared by the simulate-layer tests (not a test module)."""

from __future__ import annotations

from fractions import Fraction

from spectr_gbv.core import Instance, TabularAR

LOSSLESS = ("ar", "sd", "bv", "spectr", "rrs", "gbv_multipath", "mdbv")
LOSSY = ("spectr_gbv_released", "independent_bv")


def paper_instance() -> Instance:
    """THEORY.md section 3: context-free target (1/3, 2/3), draft (2/3, 1/3), L = 2."""
    target = TabularAR.context_free(["1/3", "2/3"], depth=2, name="target")
    draft = TabularAR.context_free(["2/3", "1/3"], depth=1, name="draft")
    return Instance(target, draft, 2, "paper example")


def l1_instance(p_row, q_row) -> Instance:
    """An L = 1 instance with the given rows (target depth 1 for the bonus)."""
    target = TabularAR.context_free([Fraction(v) for v in p_row], depth=1, name="target")
    draft = TabularAR.context_free([Fraction(v) for v in q_row], depth=0, name="draft")
    return Instance(target, draft, 1, "L=1")
