"""The adapter base class: one internal callable for a verifier, whatever its interface.

:class:`Adapter` builds the inputs of a batch of verifier calls from a battery instance, runs
them under the :class:`~spectr_gbv.validate.isolation.guard.CallGuard`, feeds torch tensors to a
verifier that refuses numpy arrays, and reads the outputs as an
:class:`~spectr_gbv.validate.interfaces.outputs.Emitted`. Each interface is a subclass
(:mod:`~spectr_gbv.validate.interfaces.numpy_adapters`, :mod:`~spectr_gbv.validate.interfaces.hf`,
:mod:`~spectr_gbv.validate.interfaces.torch_adapters`).
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from spectr_gbv.validate.interfaces.outputs import Emitted
from spectr_gbv.validate.isolation.failures import VerifierFailure, VerifierRaised, VerifierTimedOut
from spectr_gbv.validate.isolation.guard import CallGuard


# ---------------------------------------------------------------------------- adapters
def import_torch() -> Any:
    """The ``torch`` module, imported on first use (an optional dependency).

    Raises
    ------
    ImportError
        torch is not installed.
    """
    import torch  # noqa: PLC0415 - optional dependency, imported only for torch verifiers

    return torch


def has_torch() -> bool:
    """Whether torch is installed (without importing it)."""
    return importlib.util.find_spec("torch") is not None


Batch = Mapping[str, Any] | Sequence[Any]


class Adapter:
    """A verifier in one interface, run through a :class:`CallGuard`.

    Attributes
    ----------
    interface : str
        The interface name (one of :data:`INTERFACES`).
    family : str
        ``"generic"`` (generic, batched and their torch forms: an rng, K drafts), ``"chain"``
        (chain, chain_torch: supplied uniforms, K = 1) or ``"hf"``; what the checks branch on.
    name : str
        Display name of the verifier.
    single_draft : bool
        True for chain, chain_torch and hf (K = 1).
    arrays : str
        ``"numpy"`` or ``"torch"``: what the verifier is fed.
    guard : CallGuard
    """

    interface = "generic"
    family = "generic"
    single_draft = False
    #: The interface fixes torch tensors (no numpy/torch negotiation).
    torch_native = False

    def __init__(self, fn: Callable[..., Any], guard: CallGuard, name: str) -> None:
        self.fn = fn
        self.guard = guard
        self.name = name
        self.arrays = "torch" if self.torch_native else "numpy"
        if self.torch_native:
            import_torch()  # every harness-side import before the first timed call

    # subclasses implement _job(drafts, q, p, rng, uniforms, torch_state) -> callable returning Emitted
    def _job(
        self,
        d: np.ndarray,
        q: np.ndarray,
        p: np.ndarray,
        rng: np.random.Generator,
        uniforms: np.ndarray | None,
        torch_state: Any = None,
    ) -> Callable[[], Emitted]:
        raise NotImplementedError

    def emit(
        self,
        drafts: np.ndarray,
        draft_probs: np.ndarray,
        target_probs: np.ndarray,
        rng: np.random.Generator,
        uniforms: np.ndarray | None = None,
        torch_state: Any = None,
    ) -> Emitted:
        """Run the verifier on a batch of iterations.

        The verifier runs in the guard's worker (a forked process by default); ``rng`` is
        advanced exactly as if the verifier had run in this process.

        Parameters
        ----------
        drafts : ndarray, shape [B, K, L], int64
        draft_probs : ndarray, shape [B, K, L, V], float64
        target_probs : ndarray, shape [B, K, L+1, V], float64
        rng : numpy.random.Generator
            Randomness of every call (generic, batched: passed on; chain: the uniforms are
            drawn from it unless given; hf and the torch interfaces: seeds of the torch RNG).
        uniforms : ndarray, shape [B, L+1], optional
            Chain interfaces only: the uniforms to supply (default: ``rng.random``).
        torch_state : torch.ByteTensor, optional
            A CPU RNG state (as ``torch.get_rng_state()`` returns), installed before the
            batch's first call into the RNG the verifier draws from instead of a seed from
            ``rng`` (hf: torch's global CPU generator, restored afterwards; generic_torch,
            batched_torch: the ``torch.Generator`` passed to the verifier). Ignored by the
            numpy interfaces.

        Returns
        -------
        Emitted

        Raises
        ------
        VerifierRaised, VerifierTimedOut, VerifierExited
            The verifier raised, hung, or ended its process.
        """
        return self.emit_many([(drafts, draft_probs, target_probs, rng, uniforms, torch_state)])[0]

    def emit_many(self, batches: Sequence[Batch]) -> list[Emitted]:
        """:meth:`emit` of several batches, up to ``guard.workers`` of them at once.

        Parameters
        ----------
        batches : sequence of dict or tuple
            Each ``(drafts, draft_probs, target_probs, rng[, uniforms[, torch_state]])`` or a
            dict with those keys (``uniforms``, ``torch_state`` optional), arrays as in
            :meth:`emit`. Every batch needs its own ``rng``.

        Returns
        -------
        list of Emitted
            In input order; identical to ``[emit(*b) for b in batches]`` (each rng advanced as
            by its own emit) for a verifier whose output depends only on its inputs and rng.

        Raises
        ------
        ValueError
            A batch is malformed, or two batches share an rng.
        VerifierRaised
            The first failing batch in input order (batches in flight finish; none is started;
            no batch's rng is advanced).
        VerifierTimedOut, VerifierExited
            A batch hung or ended its worker.
        """
        args = [self._batch_args(b) for b in batches]
        rngs = [a[3] for a in args]
        if len({id(r) for r in rngs}) < len(rngs):
            raise ValueError("emit_many: every batch needs its own rng (two batches share one)")
        for a in args:
            for arr in a[:3]:
                arr.flags.writeable = False
        needs = self.torch_native or self.arrays == "torch"
        if needs:
            import_torch()
        results = self.guard.call_many(self, "_emit_local", [(*a, self.arrays) for a in args], needs_torch=needs)
        out = []
        for rng, (em, state) in zip(rngs, results, strict=True):
            if rng.bit_generator.state != state:
                rng.bit_generator.state = state
            out.append(em)
        return out

    @staticmethod
    def _batch_args(batch: Batch) -> tuple[Any, ...]:
        if isinstance(batch, Mapping):
            try:
                vals = [batch[k] for k in ("drafts", "draft_probs", "target_probs", "rng")]
            except KeyError as exc:
                raise ValueError(f"emit_many: a batch dict lacks {exc.args[0]!r}") from exc
            vals += [batch.get("uniforms"), batch.get("torch_state")]
        else:
            vals = list(batch)
            if not 4 <= len(vals) <= 6:
                raise ValueError(
                    "emit_many: a batch is (drafts, draft_probs, target_probs, rng[, uniforms[, torch_state]])"
                )
            vals += [None] * (6 - len(vals))
        if not isinstance(vals[3], np.random.Generator):
            raise ValueError(f"emit_many: rng must be a numpy.random.Generator, got {type(vals[3]).__name__}")
        # asanyarray: the battery's wide rows (battery.wide.CompactRows) pickle as their few columns
        return tuple(np.asanyarray(v) if i < 3 else v for i, v in enumerate(vals))

    def _emit_local(
        self,
        d: np.ndarray,
        q: np.ndarray,
        p: np.ndarray,
        rng: np.random.Generator,
        uniforms: np.ndarray | None,
        torch_state: Any,
        arrays: str,
    ) -> tuple[Emitted, dict[str, Any]]:
        """Body of one emit, run in the guard's worker: (outputs, the advanced rng state)."""
        self.guard.clock_row()[0] = time.monotonic()  # harness work before this (a nested job) is not timed
        for arr in (d, q, p):
            if arr.flags.writeable:
                arr.flags.writeable = False
        self.arrays = arrays
        em = self._job(d, q, p, rng, uniforms, torch_state)()
        return em, rng.bit_generator.state

    def _convert(self, arr: np.ndarray) -> Any:
        if self.arrays == "torch":
            return import_torch().from_numpy(np.array(arr))
        return arr

    def negotiate(self, probe: tuple[np.ndarray, np.ndarray, np.ndarray], seed: int) -> str | None:
        """Choose numpy or torch arrays with one probe batch; return a note when torch was chosen.

        The verifier is first called on numpy arrays; if that raises and torch is installed,
        torch tensors are tried, and kept when they work. Otherwise nothing changes (the
        checks then report the numpy failure). Interfaces that fix torch tensors skip this.
        """
        if self.torch_native or not has_torch():
            return None
        try:
            self.emit(*probe, np.random.default_rng(seed))
            return None
        except VerifierTimedOut:
            return None
        except VerifierRaised as numpy_err:
            self.arrays = "torch"
            try:
                self.emit(*probe, np.random.default_rng(seed))
            except VerifierFailure:
                self.arrays = "numpy"
                return None
            return f"the verifier raised on numpy arrays ({numpy_err}); it is fed torch tensors"

    def _rng_arg(self, rng: np.random.Generator, calls: int, torch_state: Any) -> Callable[[int], Any]:
        """The rng argument of call i: the numpy ``rng`` (torch interfaces override)."""
        return lambda i: rng


__all__ = ["Adapter", "has_torch", "import_torch"]
