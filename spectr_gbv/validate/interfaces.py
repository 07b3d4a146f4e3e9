"""Adapters that turn a verifier given in one of the interfaces into one internal callable.

Interfaces (:data:`INTERFACES`):

``generic`` (the package's own, multi-draft)
    ``verify(draft_tokens, draft_probs, target_probs, rng) -> list[int]`` with
    ``draft_tokens`` int64 [K, L], ``draft_probs`` float64 [K, L, V] (``draft_probs[k, t] =
    q(. | X^(k)_{1:t})``), ``target_probs`` float64 [K, L+1, V] (row L: the bonus position)
    and ``rng`` a :class:`numpy.random.Generator`, the only source of randomness. Returns the
    emitted tokens: the accepted prefix of one draft plus one token (length 1..L+1), as a
    list, tuple, 1-D numpy array or torch tensor of ints. The arrays are numpy (read-only);
    a verifier that raises on numpy input but runs on torch tensors is fed torch tensors
    (``torch.from_numpy`` copies, float64).
``chain`` (single draft, the layout of serving systems)
    ``verify(draft_ids, draft_probs, target_probs, uniforms) -> int64[B, L+1]`` with
    ``draft_ids`` int64 [B, L], ``draft_probs`` float64 [B, L, V], ``target_probs`` float64
    [B, L+1, V] and ``uniforms`` float64 [B, L+1] in [0, 1) (the harness always supplies
    them; a verifier may ignore them and draw its own, at the cost of the determinism check
    and of the exact level). Output row b: the emitted tokens, then -1 up to length L+1.
    Rows are batched (up to :data:`CHAIN_BATCH` per call); numpy or torch as above.
``hf``
    Hugging Face transformers' ``_speculative_sampling(candidate_input_ids, candidate_logits,
    candidate_length, new_logits, ...)`` (``transformers.generation.utils``): batch size 1,
    logits in, the global torch RNG. The adapter feeds ``candidate_input_ids`` = the draft
    [1, L] (int64), ``candidate_logits`` = log q [1, L, V] and ``new_logits`` = log p
    [1, L+1, V] in float32 with ``-inf`` for zero probabilities (softmax recovers q and p),
    ``candidate_length = L`` and ``is_done_candidate=False`` when the installed version takes
    it; it seeds torch's global RNG from the harness rng once per batch (or installs the
    ``torch_state`` given to :meth:`Adapter.emit`), restores the caller's RNG state
    afterwards, and reads ``(valid_tokens [1, m], n_matches)`` as the emitted tokens
    ``valid_tokens[0]`` (``m`` must be ``n_matches + 1``).
``batched`` (multi-draft, many iterations per call)
    ``verify(draft_tokens int64[B, K, L], draft_probs float64[B, K, L, V], target_probs
    float64[B, K, L+1, V], rng: numpy.random.Generator) -> int[B, L+1]``: row b the emitted
    tokens of iteration b, then -1 (as chain). Up to :data:`CHAIN_BATCH` rows per call.
``batched_torch``, ``generic_torch``, ``chain_torch``
    ``batched``, ``generic`` and ``chain`` with torch tensors (float64 probabilities, int64
    ids, CPU) and, instead of the numpy Generator, a CPU :class:`torch.Generator`
    (``generic_torch``, ``batched_torch``) that the harness seeds from its rng once per call
    (or, given ``torch_state``, sets once per batch); ``chain_torch`` receives its uniforms as
    a float64 tensor [B, L+1]. Outputs as a torch tensor or numpy array. Module:
    :mod:`spectr_gbv.validate.interfaces_torch`; torch is imported only for these.

Every call runs isolated from the harness under a per-call time limit
(:class:`~spectr_gbv.validate.calls.CallGuard`: a forked worker process by default), and
outputs are read by :mod:`spectr_gbv.validate.outputs`, so a verifier that raises, hangs,
exits or returns garbage is reported instead of ending the harness. Loading a verifier from
``"module:function"`` is :mod:`spectr_gbv.validate.loading` (``load_verifier``,
``UnloadableVerifier``, ``verifier_name``, ``IMPORT_TIME_LIMIT_S``: still importable from here).
"""

from __future__ import annotations

import importlib.util
import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from spectr_gbv.validate.calls import CallGuard, VerifierFailure, VerifierRaised, VerifierTimedOut, as_raised
from spectr_gbv.validate.loading import (  # noqa: F401 - IMPORT_TIME_LIMIT_S, load_verifier: re-exported from here
    IMPORT_TIME_LIMIT_S,
    UnloadableVerifier,
    as_callable,
    load_verifier,
    verifier_name,
)
from spectr_gbv.validate.outputs import Emitted, read_padded, read_sequence, to_numpy

#: Interface names accepted by :func:`~spectr_gbv.validate.validate` and the CLI.
INTERFACES: tuple[str, ...] = ("generic", "chain", "hf", "batched", "batched_torch", "generic_torch", "chain_torch")
#: Interfaces whose verifier takes torch tensors (torch needed).
TORCH_INTERFACES: tuple[str, ...] = ("hf", "batched_torch", "generic_torch", "chain_torch")

#: Rows per call of a chain or batched verifier.
CHAIN_BATCH = 4096


# ---------------------------------------------------------------------------- adapters
def _torch() -> Any:
    import torch  # noqa: PLC0415 - optional dependency, imported only for torch verifiers

    return torch


def _has_torch() -> bool:
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
            _torch()  # every harness-side import before the first timed call

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
            _torch()
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
        return tuple(np.asarray(v) if i < 3 else v for i, v in enumerate(vals))

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
            return _torch().from_numpy(np.array(arr))
        return arr

    def negotiate(self, probe: tuple[np.ndarray, np.ndarray, np.ndarray], seed: int) -> str | None:
        """Choose numpy or torch arrays with one probe batch; return a note when torch was chosen.

        The verifier is first called on numpy arrays; if that raises and torch is installed,
        torch tensors are tried, and kept when they work. Otherwise nothing changes (the
        checks then report the numpy failure). Interfaces that fix torch tensors skip this.
        """
        if self.torch_native or not _has_torch():
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


class GenericAdapter(Adapter):
    """``verify(draft_tokens [K, L], draft_probs [K, L, V], target_probs [K, L+1, V], rng)``."""

    interface = "generic"

    def _job(
        self,
        d: np.ndarray,
        q: np.ndarray,
        p: np.ndarray,
        rng: np.random.Generator,
        uniforms: np.ndarray | None,
        torch_state: Any = None,
    ) -> Callable[[], Emitted]:
        B, _, L = d.shape
        fn, conv = self.fn, self._convert
        row = self.guard.clock_row()
        rng_of = self._rng_arg(rng, B, torch_state)
        plain = self.arrays == "numpy" and not self.torch_native
        monotonic = time.monotonic

        def job() -> Emitted:
            outs = []
            append = outs.append
            b = 0
            try:
                if plain:
                    for b in range(B):
                        row[0] = monotonic()  # inlined tick() on the hot path
                        row[1] += 1
                        append(fn(d[b], q[b], p[b], rng))
                else:
                    for b in range(B):
                        args = (conv(d[b]), conv(q[b]), conv(p[b]), rng_of(b))
                        row[0] = monotonic()
                        row[1] += 1
                        append(fn(*args))
            except Exception as exc:  # noqa: BLE001 - reported as a failed check
                raise as_raised(exc, b) from exc
            res = Emitted(np.full((B, L + 1), -1, dtype=np.int64), np.zeros(B, dtype=np.int64))
            for b, out in enumerate(outs):
                toks, problem = read_sequence(out)
                if problem is not None:
                    res.problems[b] = problem
                elif not 1 <= len(toks) <= L + 1:
                    res.problems[b] = (
                        "bad_output",
                        f"emitted {len(toks)} tokens {list(toks)}, expected 1..L+1={L + 1}",
                    )
                else:
                    res.tokens[b, : len(toks)] = toks
                    res.lengths[b] = len(toks)
            return res

        return job


def _chunked(B: int, L: int, call: Callable[[int, int, int], Any], guard: CallGuard) -> Callable[[], Emitted]:
    """Job calling ``call(lo, hi, i)`` on row chunks of :data:`CHAIN_BATCH`, outputs read as padded rows."""

    def job() -> Emitted:
        parts = []
        for i, lo in enumerate(range(0, B, CHAIN_BATCH)):
            hi = min(B, lo + CHAIN_BATCH)
            try:
                out = call(lo, hi, i)
            except Exception as exc:  # noqa: BLE001
                raise as_raised(exc, lo) from exc
            parts.append((lo, read_padded(out, hi - lo, L)))
        res = Emitted(np.full((B, L + 1), -1, dtype=np.int64), np.zeros(B, dtype=np.int64))
        for lo, part in parts:
            res.tokens[lo : lo + len(part.lengths)] = part.tokens
            res.lengths[lo : lo + len(part.lengths)] = part.lengths
            res.problems.update({lo + b: v for b, v in part.problems.items()})
        return res

    return job


class ChainAdapter(Adapter):
    """``verify(draft_ids [B, L], draft_probs [B, L, V], target_probs [B, L+1, V], uniforms [B, L+1])``."""

    interface = "chain"
    family = "chain"
    single_draft = True

    def _job(
        self,
        d: np.ndarray,
        q: np.ndarray,
        p: np.ndarray,
        rng: np.random.Generator,
        uniforms: np.ndarray | None,
        torch_state: Any = None,
    ) -> Callable[[], Emitted]:
        B, _, L = d.shape
        u = rng.random((B, L + 1)) if uniforms is None else np.asarray(uniforms, dtype=np.float64)
        u.flags.writeable = False
        fn, guard, conv = self.fn, self.guard, self._convert

        def call(lo: int, hi: int, i: int) -> Any:
            args = (conv(d[lo:hi, 0]), conv(q[lo:hi, 0]), conv(p[lo:hi, 0]), conv(u[lo:hi]))
            guard.tick()
            return fn(*args)

        return _chunked(B, L, call, guard)


class BatchedAdapter(Adapter):
    """``verify(draft_tokens [B, K, L], draft_probs [B, K, L, V], target_probs [B, K, L+1, V], rng) -> [B, L+1]``."""

    interface = "batched"

    def _job(
        self,
        d: np.ndarray,
        q: np.ndarray,
        p: np.ndarray,
        rng: np.random.Generator,
        uniforms: np.ndarray | None,
        torch_state: Any = None,
    ) -> Callable[[], Emitted]:
        B, _, L = d.shape
        fn, guard, conv = self.fn, self.guard, self._convert
        rng_of = self._rng_arg(rng, -(-B // CHAIN_BATCH), torch_state)

        def call(lo: int, hi: int, i: int) -> Any:
            args = (conv(d[lo:hi]), conv(q[lo:hi]), conv(p[lo:hi]), rng_of(i))
            guard.tick()
            return fn(*args)

        return _chunked(B, L, call, guard)


class HFAdapter(Adapter):
    """transformers' ``_speculative_sampling`` (logits in, global torch RNG; batch size 1)."""

    interface = "hf"
    family = "hf"
    single_draft = True
    torch_native = True

    def __init__(self, fn: Callable[..., Any], guard: CallGuard, name: str) -> None:
        super().__init__(fn, guard, name)
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            params = {}
        self.extra: dict[str, Any] = {"is_done_candidate": False} if "is_done_candidate" in params else {}

    def _job(
        self,
        d: np.ndarray,
        q: np.ndarray,
        p: np.ndarray,
        rng: np.random.Generator,
        uniforms: np.ndarray | None,
        torch_state: Any = None,
    ) -> Callable[[], Emitted]:
        torch = _torch()
        B, _, L = d.shape
        with np.errstate(divide="ignore"):
            logq = torch.from_numpy(np.log(q[:, 0]).astype(np.float32))
            logp = torch.from_numpy(np.log(p[:, 0]).astype(np.float32))
        ids = torch.from_numpy(np.array(d[:, 0], dtype=np.int64))
        seed = int(rng.integers(0, 2**62)) if torch_state is None else None
        fn, guard, extra = self.fn, self.guard, self.extra

        def job() -> Emitted:
            res = Emitted(np.full((B, L + 1), -1, dtype=np.int64), np.zeros(B, dtype=np.int64))
            saved = torch.random.get_rng_state()
            if seed is None:
                torch.random.set_rng_state(torch_state)
            else:
                torch.manual_seed(seed)
            try:
                for b in range(B):
                    guard.tick()
                    try:
                        out = fn(ids[b : b + 1], logq[b : b + 1], L, logp[b : b + 1], **extra)
                    except Exception as exc:  # noqa: BLE001
                        raise as_raised(exc, b) from exc
                    try:
                        valid, n_matches = out
                        toks, problem = read_sequence(to_numpy(valid).reshape(-1))
                        n = int(n_matches)
                    except Exception as exc:  # noqa: BLE001
                        res.problems[b] = (
                            "bad_output",
                            f"expected (valid_tokens, n_matches), got {type(exc).__name__}",
                        )
                        continue
                    if problem is not None:
                        res.problems[b] = problem
                    elif len(toks) != n + 1 or not 1 <= len(toks) <= L + 1:
                        res.problems[b] = ("bad_output", f"valid_tokens {list(toks)} with n_matches = {n}")
                    else:
                        res.tokens[b, : len(toks)] = toks
                        res.lengths[b] = len(toks)
            finally:
                torch.random.set_rng_state(saved)
            return res

        return job


_ADAPTERS: dict[str, type[Adapter]] = {
    "generic": GenericAdapter,
    "chain": ChainAdapter,
    "hf": HFAdapter,
    "batched": BatchedAdapter,
}


def _adapter_class(interface: str) -> type[Adapter]:
    if interface in _ADAPTERS:
        return _ADAPTERS[interface]
    from spectr_gbv.validate import interfaces_torch  # noqa: PLC0415 - torch adapters, torch imported lazily

    return interfaces_torch.ADAPTERS[interface]


def check_interface(interface: str) -> str:
    """Return ``interface`` if it is one of :data:`INTERFACES`.

    Raises
    ------
    ValueError
        ``unknown interface 'x'; valid: generic, chain, hf, ...``.
    """
    if interface not in INTERFACES:
        raise ValueError(f"unknown interface {interface!r}; valid: {', '.join(INTERFACES)}")
    return interface


def make_adapter(verify: Any, interface: str, guard: CallGuard) -> Adapter:
    """Wrap ``verify`` (a callable in ``interface``) as an :class:`Adapter`.

    Parameters
    ----------
    verify : callable or UnloadableVerifier
    interface : str
        One of :data:`INTERFACES`.
    guard : CallGuard
        Runs the calls (``CallGuard(time_limit_s, isolation="process"|"thread", workers=n)``).

    Returns
    -------
    Adapter

    Raises
    ------
    ValueError
        Unknown interface, ``verify`` not callable, or a torch interface without torch.
    """
    check_interface(interface)
    if interface in TORCH_INTERFACES and not _has_torch():
        extra = " transformers" if interface == "hf" else ""
        raise ValueError(f"interface {interface!r} needs torch (pip install torch{extra})")
    if isinstance(verify, UnloadableVerifier):
        guard.fail(verify.failure)
        return _adapter_class(interface)(verify, guard, verifier_name(verify))
    fn = as_callable(verify, interface)
    return _adapter_class(interface)(fn, guard, verifier_name(fn))


__all__ = [
    "CHAIN_BATCH",
    "INTERFACES",
    "TORCH_INTERFACES",
    "Adapter",
    "BatchedAdapter",
    "ChainAdapter",
    "GenericAdapter",
    "HFAdapter",
    "check_interface",
    "make_adapter",
]
