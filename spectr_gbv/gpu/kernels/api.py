"""The public entry point of the verification kernels: :func:`verify` by method name or rule.

The method lists are read from :data:`spectr_gbv.core.methods.METHOD_TABLE` (its ``kernel`` and
``lossless`` fields); a user's rule is resolved by :mod:`spectr_gbv.gpu.kernels.rules`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from spectr_gbv.core.methods import method_spec, methods_where
from spectr_gbv.gpu.kernels.common import TorchUniforms, VerifyOutput, validate_inputs
from spectr_gbv.gpu.kernels.rules import KernelFn, KernelRule, import_kernel, kernel_methods, resolve_kernel_rule

#: Registered methods with a torch kernel (:data:`~spectr_gbv.core.methods.METHOD_TABLE`): the
#: lossless ones, then the lossy ones (``allow_lossy=True``), each in table order.
KERNEL_METHODS: tuple[str, ...] = kernel_methods()

#: Kernel methods whose output law is not the target's (THEORY.md section 6, 6a).
LOSSY_METHODS: frozenset[str] = frozenset(methods_where(kernel=True, lossless=False))

#: Method name -> kernel taking validated inputs and a uniform source (the table's ``kernel`` paths).
KERNELS: dict[str, KernelFn] = {m: import_kernel(str(method_spec(m).kernel)) for m in KERNEL_METHODS}


def check_method(method: str | KernelRule | Callable[..., object], allow_lossy: bool = False) -> KernelFn:
    """The kernel of ``method``, refusing lossy methods (and rules declared lossy) unless ``allow_lossy``.

    Parameters
    ----------
    method : str, KernelRule or callable
        One of :data:`KERNEL_METHODS`, or a user's rule (:func:`~spectr_gbv.gpu.kernels.rules.resolve_kernel_rule`:
        ``"module:attribute"``, a torch rule ``(inputs, uniforms) -> VerifyOutput``, a reference rule).
    allow_lossy : bool

    Returns
    -------
    callable (KernelInputs, UniformSource) -> VerifyOutput

    Raises
    ------
    ValueError
        Unknown method or one that is neither a ``str`` nor a rule (the message lists
        :data:`KERNEL_METHODS`), a callable of another signature, or a lossy method (a rule
        with ``lossless = False``) without ``allow_lossy=True``.
    """
    if isinstance(method, str) and method in KERNELS:
        if method in LOSSY_METHODS and not allow_lossy:
            raise ValueError(
                f"method {method!r} is lossy (its output law is not the target's; THEORY.md section 6a): "
                "pass allow_lossy=True to run it for measurement"
            )
        return KERNELS[method]
    rule = resolve_kernel_rule(method)
    if rule.lossless_claimed is False and not allow_lossy:
        raise ValueError(rule.lossy_refusal())
    return rule.kernel


def verify(
    method: str | KernelRule | Callable[..., object],
    drafts: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    *,
    generator: torch.Generator | None = None,
    allow_lossy: bool = False,
) -> VerifyOutput:
    r"""Verify K drafts per batch row with a lossless (or, on request, the released lossy) rule.

    Each batch row b is one speculative-decoding iteration: drafts ``X^(b, 1..K)`` of L
    tokens, their draft conditionals q and target conditionals p. The verifier emits an
    accepted prefix of one draft (tau tokens) and one token it samples itself; for every input
    the law of the emitted tokens equals the reference layer's
    ``get_verifier(method).outcome_law`` of that row (checked by the parity tests).

    Parameters
    ----------
    method : str, KernelRule or callable
        One of :data:`KERNEL_METHODS`: ``ar`` (one token from ``target_probs[:, 0, 0]``), ``sd``
        and ``bv`` (draft 0 only; K may be > 1), ``spectr``, ``rrs``, ``gbv_multipath``,
        ``mdbv``, ``traversal``, ``optimal_multidraft``, ``near_opt_bv``; ``spectr_gbv_released`` only with
        ``allow_lossy=True``. Or a user's rule (:mod:`spectr_gbv.gpu.kernels.rules`): a torch
        rule ``rule(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput``, a
        reference rule (run row by row on the CPU), or ``"module:attribute"`` naming one.
    drafts : Tensor, int64 [B, K, L]
        ``drafts[b, k, t] = X^(b,k)_{t+1}``; every id in ``[0, V)`` (no ``-1`` placeholders).
        ``L = 0`` is accepted for ``ar`` only.
    draft_probs : Tensor, float32 or float64 [B, K, L, V]
        ``draft_probs[b, k, t] = q(. | X^(b,k)_{1:t})``: the law the token ``drafts[b, k, t]``
        was actually drawn from (one-hot for a greedy draft).
    target_probs : Tensor, same dtype, [B, K, L+1, V]
        ``target_probs[b, k, t] = p(. | X^(b,k)_{1:t})``, row L is the bonus position. Rows of
        drafts that share a prefix must agree there (not checked; the kernels read the
        lowest-index draft's row).
    generator : torch.Generator, optional
        On the tensors' device; every random decision uses a fresh uniform from it. None uses
        the device's default generator.
    allow_lossy : bool
        Required for ``spectr_gbv_released`` and for a rule declaring ``lossless = False``.

    Returns
    -------
    VerifyOutput
        ``tokens`` int64 [B, L+1] (prefix, Z, then -1), ``num_accepted`` int64 [B],
        ``draft_index`` int64 [B], ``diagnostics`` (0-d int64 tensors).

    Raises
    ------
    ValueError
        Unknown method, an object that is not a rule, or (without ``allow_lossy``) a lossy
        method (see :func:`check_method`); any input problem listed in
        :func:`~spectr_gbv.gpu.kernels.common.validate_inputs` (wrong type, dtype, shape or
        device; drafted ids outside ``[0, V)``; NaN/inf/negative entries; rows not summing to 1
        within 1e-4 (float32) or 1e-9 (float64); a drafted token of draft probability 0).

    References
    ----------
    THEORY.md sections 2, 3, 6 and 6a; the method modules of :mod:`spectr_gbv.gpu.kernels`
    cite each paper and algorithm.

    Examples
    --------
    >>> import torch
    >>> p = torch.tensor([[[[0.25, 0.75], [0.5, 0.5]]]], dtype=torch.float64)  # [1, 1, 2, 2]
    >>> q = torch.tensor([[[[0.5, 0.5]]]], dtype=torch.float64)  # [1, 1, 1, 2]
    >>> out = verify("bv", torch.tensor([[[1]]]), q, p, generator=torch.Generator().manual_seed(0))
    >>> out.tokens.shape, int(out.num_accepted[0])
    (torch.Size([1, 2]), 1)
    """
    kernel = check_method(method, allow_lossy)
    inputs = validate_inputs(drafts, draft_probs, target_probs, generator, allow_empty_drafts=method == "ar")
    return kernel(inputs, TorchUniforms(inputs.device, generator))
