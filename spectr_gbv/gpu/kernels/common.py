"""Shared pieces of the verification kernels: inputs, checks, uniforms, sampling, output.

Layout of one batched verification (THEORY.md sections 1-2), for B independent rows, K drafts
of L tokens over a vocabulary of V tokens:

* ``drafts`` : int64 [B, K, L], ``drafts[b, k, t] = X^(b,k)_{t+1}``;
* ``draft_probs`` : float [B, K, L, V], ``draft_probs[b, k, t] = q(. | X^(b,k)_{1:t})``;
* ``target_probs`` : float [B, K, L+1, V], ``target_probs[b, k, t] = p(. | X^(b,k)_{1:t})``
  (row L is the bonus position).

Every kernel is written against a :class:`UniformSource` (one fresh uniform per random
decision, never reused) so tests can inject fixed uniforms (coin = 0 edge cases); the public
entry point :func:`spectr_gbv.gpu.kernels.verify` uses :class:`TorchUniforms` on a
``torch.Generator``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch

#: Largest allowed ``|sum(row) - 1|`` of a probability row, by dtype (float32 rows of a large
#: vocabulary from a softmax are off by ~1e-6; float64 matches the reference layer's
#: :data:`~spectr_gbv.core.numbers.FLOAT_ROW_ATOL`).
ROW_SUM_ATOL: dict[torch.dtype, float] = {torch.float32: 1e-4, torch.float64: 1e-9}


def default_device() -> torch.device:
    """``cuda`` when :func:`torch.cuda.is_available`, else ``cpu`` (the run-time device choice).

    Returns
    -------
    torch.device
    """
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@dataclass
class VerifyOutput:
    """Result of one batched verification.

    Attributes
    ----------
    tokens : Tensor, int64 [B, L+1]
        Emitted tokens: the accepted prefix ``X^(b, k)_{1:tau}`` of draft
        ``k = draft_index[b]``, then the token ``Z`` the verifier sampled itself, then ``-1``
        padding (positions ``tau+1..L``).
    num_accepted : Tensor, int64 [B]
        tau, in ``0..L``.
    draft_index : Tensor, int64 [B]
        A draft whose first ``tau`` tokens are the accepted prefix (the row of the target KV
        cache to keep). The method modules document which one (the lowest-index draft through
        the final node for the tree methods; ``0`` for ``ar``, ``sd``, ``bv`` and whenever a
        method stops with ``tau = 0`` without selecting a draft).
    diagnostics : dict of str to Tensor
        0-d int64 tensors on the input device (no host sync): ``residual_fallbacks`` (rows whose
        residual was identically zero in floating point and replaced by the target row, as the
        reference layer does) and method-specific counts documented per method.
    """

    tokens: torch.Tensor
    num_accepted: torch.Tensor
    draft_index: torch.Tensor
    diagnostics: dict[str, torch.Tensor] = field(default_factory=dict)


@dataclass(frozen=True)
class KernelInputs:
    """Validated inputs of one batched verification (see the module docstring for layouts).

    Attributes
    ----------
    drafts : Tensor, int64 [B, K, L]
    draft_probs : Tensor, float32/float64 [B, K, L, V]
    target_probs : Tensor, same dtype, [B, K, L+1, V]
    """

    drafts: torch.Tensor
    draft_probs: torch.Tensor
    target_probs: torch.Tensor

    @property
    def B(self) -> int:  # noqa: N802 - the papers' names
        """Batch rows."""
        return int(self.drafts.shape[0])

    @property
    def K(self) -> int:  # noqa: N802
        """Drafts per row."""
        return int(self.drafts.shape[1])

    @property
    def L(self) -> int:  # noqa: N802
        """Draft length."""
        return int(self.drafts.shape[2])

    @property
    def V(self) -> int:  # noqa: N802
        """Vocabulary size."""
        return int(self.target_probs.shape[-1])

    @property
    def device(self) -> torch.device:
        """Device of every tensor."""
        return self.target_probs.device

    @property
    def dtype(self) -> torch.dtype:
        """Probability dtype (float32 or float64)."""
        return self.target_probs.dtype


# ---------------------------------------------------------------------------- uniforms
class UniformSource(Protocol):
    """Where a kernel's uniforms come from: ``source(*shape)`` -> float64 uniforms in [0, 1).

    Each call must return fresh, independent uniforms; a kernel calls it once per group of
    decisions (e.g. one [B, L] tensor for block verification's eta, one [B] tensor for the
    final token) and never uses one uniform for two decisions.
    """

    def __call__(self, *shape: int) -> torch.Tensor: ...  # noqa: D102


class TorchUniforms:
    """Uniforms in [0, 1) from :func:`torch.rand` with an optional generator (float64).

    Parameters
    ----------
    device : torch.device
        Device of the returned tensors; must equal the generator's device.
    generator : torch.Generator, optional
        None uses the device's default generator.
    """

    def __init__(self, device: torch.device, generator: torch.Generator | None = None) -> None:
        self.device = device
        self.generator = generator

    def __call__(self, *shape: int) -> torch.Tensor:
        """Fresh uniforms of ``shape`` (float64, on ``device``)."""
        return torch.rand(shape, generator=self.generator, device=self.device, dtype=torch.float64)


# ---------------------------------------------------------------------------- validation
def _first_index(mask: torch.Tensor) -> list[int]:
    return [int(i) for i in mask.nonzero()[0].tolist()]


def _fmt(idx: list[int]) -> str:
    return "[" + ", ".join(map(str, idx)) + "]"


def _check_tensor(x: object, name: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    return x


def validate_inputs(
    drafts: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    generator: torch.Generator | None = None,
    *,
    allow_empty_drafts: bool = False,
) -> KernelInputs:
    """Check the three tensors of one batched verification (one host sync when valid).

    Parameters
    ----------
    drafts : Tensor, int64 [B, K, L]
    draft_probs : Tensor, float32 or float64 [B, K, L, V]
    target_probs : Tensor, same dtype, [B, K, L+1, V]
    generator : torch.Generator, optional
        Must live on the tensors' device.
    allow_empty_drafts : bool
        Accept ``L = 0`` (used by ``ar``, which reads ``target_probs[:, 0, 0]`` only).

    Returns
    -------
    KernelInputs

    Raises
    ------
    ValueError
        Naming the argument: not a tensor; ``drafts`` not int64 or not 3-d with ``B, K >= 1``
        and ``L >= 1``; probabilities not float32/float64, of different dtypes, or of the wrong
        shape; tensors (or the generator) on different devices; a drafted id outside
        ``[0, V)`` (``-1`` placeholders included); an entry that is NaN, infinite or negative;
        a row whose sum is off 1 by more than :data:`ROW_SUM_ATOL` (1e-4 float32, 1e-9
        float64); a drafted token of draft probability 0 (named by its ``[b, k, t]`` index).
    """
    drafts = _check_tensor(drafts, "drafts")
    draft_probs = _check_tensor(draft_probs, "draft_probs")
    target_probs = _check_tensor(target_probs, "target_probs")
    if drafts.dtype != torch.int64:
        raise ValueError(f"drafts: expected dtype torch.int64, got {drafts.dtype}")
    min_L = 0 if allow_empty_drafts else 1
    if drafts.ndim != 3 or drafts.shape[0] < 1 or drafts.shape[1] < 1 or drafts.shape[2] < min_L:
        raise ValueError(f"drafts: expected shape [B, K, L] with B, K >= 1 and L >= {min_L}, got {tuple(drafts.shape)}")
    B, K, L = (int(s) for s in drafts.shape)
    for name, x in (("draft_probs", draft_probs), ("target_probs", target_probs)):
        if x.dtype not in ROW_SUM_ATOL:
            raise ValueError(f"{name}: expected dtype torch.float32 or torch.float64, got {x.dtype}")
    if draft_probs.dtype != target_probs.dtype:
        raise ValueError(f"draft_probs and target_probs: dtypes differ ({draft_probs.dtype} vs {target_probs.dtype})")
    if target_probs.ndim != 4 or tuple(target_probs.shape[:3]) != (B, K, L + 1) or target_probs.shape[3] < 1:
        raise ValueError(
            f"target_probs: expected shape [B, K, L+1, V] = [{B}, {K}, {L + 1}, V], got {tuple(target_probs.shape)}"
        )
    V = int(target_probs.shape[3])
    if tuple(draft_probs.shape) != (B, K, L, V):
        raise ValueError(
            f"draft_probs: expected shape [B, K, L, V] = [{B}, {K}, {L}, {V}], got {tuple(draft_probs.shape)}"
        )
    device = target_probs.device
    for name, x in (("drafts", drafts), ("draft_probs", draft_probs)):
        if x.device != device:
            raise ValueError(f"{name}: on device {x.device}, but target_probs is on {device}")
    if generator is not None:
        if not isinstance(generator, torch.Generator):
            raise ValueError(f"generator: expected a torch.Generator, got {type(generator).__name__}")
        if torch.device(generator.device).type != device.type:
            raise ValueError(f"generator: on device {generator.device}, but the tensors are on {device}")

    atol = ROW_SUM_ATOL[target_probs.dtype]
    ids_bad = (drafts < 0) | (drafts >= V)
    safe_ids = drafts.clamp(0, V - 1)
    drafted_q = torch.gather(draft_probs, 3, safe_ids.unsqueeze(-1)).squeeze(-1)
    checks: list[torch.Tensor] = [ids_bad.any()]
    for x in (draft_probs, target_probs):
        if x.numel() == 0:
            checks += [torch.zeros((), dtype=torch.bool, device=device)] * 2
            continue
        low, high = torch.aminmax(x)  # one pass; NaN propagates into both
        checks += [~(low >= 0) | ~torch.isfinite(high), ((x.sum(-1) - 1.0).abs() > atol).any()]
    checks.append(((drafted_q <= 0) & ~ids_bad).any())
    flags = torch.stack(checks).tolist()  # the one host sync
    if not any(flags):
        return KernelInputs(drafts, draft_probs, target_probs)

    if flags[0]:
        idx = _first_index(ids_bad)
        raise ValueError(
            f"drafts{_fmt(idx)} = {int(drafts[tuple(idx)])} is outside the vocabulary [0, {V}) "
            "(placeholder or padding ids such as -1 are not drafts)"
        )
    for j, (name, x) in enumerate((("draft_probs", draft_probs), ("target_probs", target_probs))):
        bad_value, off = flags[1 + 2 * j : 3 + 2 * j]
        if bad_value and not bool(torch.isfinite(x).all()):
            idx = _first_index(~torch.isfinite(x))
            raise ValueError(f"{name}{_fmt(idx)} = {float(x[tuple(idx)])} is not finite")
        if bad_value:
            idx = _first_index(x < 0)
            raise ValueError(f"{name}{_fmt(idx)} = {float(x[tuple(idx)])} is negative")
        if off:
            sums = x.sum(-1)
            idx = _first_index((sums - 1.0).abs() > atol)
            raise ValueError(
                f"{name}{_fmt(idx)} sums to {float(sums[tuple(idx)])!r}, not 1 within {atol:g} ({x.dtype})"
            )
    idx = _first_index(drafted_q <= 0)
    tok = int(drafts[tuple(idx)])
    raise ValueError(
        f"draft_probs{_fmt(idx + [tok])} = 0 but drafts{_fmt(idx)} = {tok}: a draft cannot contain "
        "a token of draft probability 0"
    )


# ---------------------------------------------------------------------------- helpers
def batch_arange(x: torch.Tensor) -> torch.Tensor:
    """``arange(B)`` on ``x``'s device, for advanced indexing of the batch axis."""
    return torch.arange(x.shape[0], device=x.device)


def take(rows: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``rows[..., idx[...]]``: probabilities of chosen tokens.

    Parameters
    ----------
    rows : Tensor [..., V]
    idx : Tensor, int64 [...] (same leading shape)

    Returns
    -------
    Tensor [...]
    """
    return torch.gather(rows, -1, idx.unsqueeze(-1)).squeeze(-1)


def take_many(rows: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``rows[b, idx[b, j]]``: probabilities of several chosen tokens per row.

    Parameters
    ----------
    rows : Tensor [B, V]
    idx : Tensor, int64 [B, K]

    Returns
    -------
    Tensor [B, K]
    """
    return torch.gather(rows, 1, idx)


def first_true(mask: torch.Tensor) -> torch.Tensor:
    """Index of the first True along the last axis (0 when none).

    Parameters
    ----------
    mask : Tensor, bool [..., K]

    Returns
    -------
    Tensor, int64 [...]
    """
    return torch.argmax(mask.to(torch.int8), dim=-1)


def residual_or_fallback(weights: torch.Tensor, fallback: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Residual weights, or ``fallback`` in rows where they are all zero (reference rule).

    The reference layer (:func:`spectr_gbv.reference.base.residual_or_fallback`) replaces a
    float residual that is identically zero (a branch of probability ~1e-16, e.g. ``p = q`` up
    to rounding) by the target row at that position; this is the batched version.

    Parameters
    ----------
    weights : Tensor [B, V], non-negative
    fallback : Tensor [B, V], a probability row per batch row

    Returns
    -------
    weights : Tensor [B, V]
    used : Tensor, bool [B]
        Rows where the fallback was taken.
    """
    used = ~(weights > 0).any(-1)
    return torch.where(used.unsqueeze(-1), fallback, weights), used


def sample_categorical(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw: index ``i`` with probability ``weights[i] / sum(weights)``.

    ``i`` = the first index with ``u * total < cumsum(weights)[i]`` (half-open bins, so a
    zero-weight token is never drawn, also for ``u = 0``: SGLang bug class B10). When rounding
    puts ``u * total`` at or past the last cumulative sum, the last index of positive weight
    is returned, never ``V`` or a default id (vLLM B5/B6, FlashInfer's ``V - 1``). The
    cumulative sums are formed in float64 whatever the input dtype, so float32 rows of a large
    vocabulary do not lose the mass of their many tiny entries to rounding.

    Parameters
    ----------
    weights : Tensor, float [B, V]
        Non-negative, each row with a positive entry (callers apply
        :func:`residual_or_fallback` first).
    u : Tensor, float64 [B]
        Fresh uniforms in [0, 1), one per row.

    Returns
    -------
    Tensor, int64 [B], in ``[0, V)``.
    """
    cdf = torch.cumsum(weights, dim=-1, dtype=torch.float64)
    threshold = (u * cdf[:, -1]).unsqueeze(-1)
    idx = torch.searchsorted(cdf, threshold, right=True).squeeze(-1)
    V = weights.shape[-1]
    positions = torch.arange(V, device=weights.device)
    last_positive = torch.where(weights > 0, positions, -1).amax(-1)
    return torch.where(idx >= V, last_positive, idx).clamp_min(0)


def assemble(drafts: torch.Tensor, draft_index: torch.Tensor, tau: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Emitted tokens ``X^(b, draft_index)_{1:tau} + (Z,)`` padded with ``-1`` to length L+1.

    Parameters
    ----------
    drafts : Tensor, int64 [B, K, L]
    draft_index, tau, z : Tensor, int64 [B]

    Returns
    -------
    Tensor, int64 [B, L+1]
    """
    B, _, L = drafts.shape
    b = batch_arange(drafts)
    chosen = drafts[b, draft_index]  # [B, L]
    pos = torch.arange(L + 1, device=drafts.device)
    out = torch.full((B, L + 1), -1, dtype=torch.int64, device=drafts.device)
    out[:, :L] = torch.where(pos[:L] < tau.unsqueeze(-1), chosen, -1)
    out[b, tau] = z
    return out


def count(mask: torch.Tensor) -> torch.Tensor:
    """Number of True entries as a 0-d int64 tensor (no host sync)."""
    return mask.sum(dtype=torch.int64)
