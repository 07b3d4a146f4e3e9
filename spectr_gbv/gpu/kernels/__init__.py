"""Batched verification kernels (torch; CUDA when the tensors are on CUDA, CPU otherwise).

One small module per method, each the batched counterpart of a reference verifier
(:mod:`spectr_gbv.reference`) with the same method name, THEORY.md reading, tie rules and
residual fallbacks:

========================  ================================================  ============================
method                    module                                            reference
========================  ================================================  ============================
``ar``                    :mod:`~spectr_gbv.gpu.kernels.ar`                 AutoregressiveVerifier
``sd``                    :mod:`~spectr_gbv.gpu.kernels.sd`                 SpeculativeDecodingVerifier
``bv``                    :mod:`~spectr_gbv.gpu.kernels.bv` (+ ``block``)   BlockVerifier
``spectr``                :mod:`~spectr_gbv.gpu.kernels.spectr` (+ kseq)    SpecTrVerifier
``rrs``                   :mod:`~spectr_gbv.gpu.kernels.rrs`                RecursiveRejectionVerifier
``gbv_multipath``         :mod:`~spectr_gbv.gpu.kernels.gbv_multipath`      MultiPathGreedyVerifier
``mdbv``                  :mod:`~spectr_gbv.gpu.kernels.mdbv`               MultiDraftBlockVerifier
``traversal``             :mod:`~spectr_gbv.gpu.kernels.traversal`          TraversalVerifier
``optimal_multidraft``    :mod:`~.optimal_multidraft` (+ ``coverage``)      OptimalMultiDraftVerifier
``near_opt_bv``           :mod:`~.near_opt_bv` (+ ``coverage``, ``block``)  NearOptBlockVerifier
``spectr_gbv_released``   :mod:`~spectr_gbv.gpu.kernels.released` (LOSSY)   ReleasedSpecTrGBVVerifier
========================  ================================================  ============================

The method lists (:data:`KERNEL_METHODS`, :data:`~spectr_gbv.gpu.kernels.api.LOSSY_METHODS`,
:data:`EXPECTED_METHODS`) are read from :data:`spectr_gbv.core.methods.METHOD_TABLE`.

A user's rule runs wherever a kernel method does (:mod:`~spectr_gbv.gpu.kernels.rules`): a torch
rule with the kernels' signature ``rule(inputs: KernelInputs, uniforms: UniformSource) ->
VerifyOutput`` (these three names are the rule interface), or a reference rule run row by row.

Public interface: :func:`verify`, :class:`VerifyOutput`, :data:`KERNEL_METHODS`;
:func:`~spectr_gbv.gpu.kernels.expected.accepted_law` and ``expected_accepted`` give the law of tau
and E[tau | drafts] in closed form
for ``sd``, ``bv``, ``gbv_multipath``, ``mdbv`` and ``near_opt_bv`` (no sampling; for paired
comparisons on recorded drafts).

Import rule: the bottom layer of :mod:`spectr_gbv.gpu`: may import ``core``, ``theory``,
``reference`` and torch; never :mod:`~spectr_gbv.gpu.decoding`, :mod:`~spectr_gbv.gpu.models` or
:mod:`~spectr_gbv.realpair` (kernels <- decoding <- models <- bench).
"""

from spectr_gbv.gpu.kernels.api import KERNEL_METHODS, KERNELS, LOSSY_METHODS, check_method, verify
from spectr_gbv.gpu.kernels.bv import bv_weights
from spectr_gbv.gpu.kernels.common import (
    ROW_SUM_ATOL,
    KernelInputs,
    TorchUniforms,
    UniformSource,
    VerifyOutput,
    default_device,
    validate_inputs,
)
from spectr_gbv.gpu.kernels.expected import EXPECTED_METHODS, accepted_law, expected_accepted
from spectr_gbv.gpu.kernels.rules import KernelRule, UnverifiedRuleWarning, resolve_kernel_rule
from spectr_gbv.gpu.kernels.sd import sd_acceptance_probs

__all__ = [
    "EXPECTED_METHODS",
    "KERNELS",
    "KERNEL_METHODS",
    "LOSSY_METHODS",
    "ROW_SUM_ATOL",
    "KernelInputs",
    "KernelRule",
    "TorchUniforms",
    "UniformSource",
    "UnverifiedRuleWarning",
    "VerifyOutput",
    "accepted_law",
    "bv_weights",
    "check_method",
    "default_device",
    "expected_accepted",
    "resolve_kernel_rule",
    "sd_acceptance_probs",
    "validate_inputs",
    "verify",
]
