"""Adapters that turn a verifier given in one of three interfaces into one internal callable.

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
    it; it seeds torch's global RNG from the harness rng once per batch (restoring the
    caller's RNG state afterwards) and reads ``(valid_tokens [1, m], n_matches)`` as the
    emitted tokens ``valid_tokens[0]`` (``m`` must be ``n_matches + 1``).

Every call runs in one worker thread under a per-call time limit
(:class:`~spectr_gbv.validate.calls.CallGuard`), and outputs are read by
:mod:`spectr_gbv.validate.outputs`, so a verifier that raises, hangs or returns garbage is
reported instead of crashing the harness.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from spectr_gbv.validate.calls import CallGuard, VerifierFailure, VerifierRaised, VerifierTimedOut, as_raised
from spectr_gbv.validate.outputs import Emitted, read_padded, read_sequence, to_numpy

#: Interface names accepted by :func:`~spectr_gbv.validate.validate` and the CLI.
INTERFACES: tuple[str, ...] = ("generic", "chain", "hf")

#: Rows per call of a chain verifier.
CHAIN_BATCH = 4096


# ---------------------------------------------------------------------------- adapters
def _torch() -> Any:
    import torch  # noqa: PLC0415 - optional dependency, imported only for torch verifiers

    return torch


def _has_torch() -> bool:
    return importlib.util.find_spec("torch") is not None


class Adapter:
    """A verifier in one interface, run through a :class:`CallGuard`.

    Attributes
    ----------
    interface : str
    name : str
        Display name of the verifier.
    single_draft : bool
        True for chain and hf (K = 1).
    arrays : str
        ``"numpy"`` or ``"torch"``: what the verifier is fed (generic and chain).
    guard : CallGuard
    """

    interface = "generic"
    single_draft = False

    def __init__(self, fn: Callable[..., Any], guard: CallGuard, name: str) -> None:
        self.fn = fn
        self.guard = guard
        self.name = name
        self.arrays = "numpy"

    # subclasses implement _job(drafts, q, p, rng, uniforms) -> callable returning Emitted
    def _job(
        self, d: np.ndarray, q: np.ndarray, p: np.ndarray, rng: np.random.Generator, uniforms: np.ndarray | None
    ) -> Callable[[], Emitted]:
        raise NotImplementedError

    def emit(
        self,
        drafts: np.ndarray,
        draft_probs: np.ndarray,
        target_probs: np.ndarray,
        rng: np.random.Generator,
        uniforms: np.ndarray | None = None,
    ) -> Emitted:
        """Run the verifier on a batch of iterations.

        Parameters
        ----------
        drafts : ndarray, shape [B, K, L], int64
        draft_probs : ndarray, shape [B, K, L, V], float64
        target_probs : ndarray, shape [B, K, L+1, V], float64
        rng : numpy.random.Generator
            Randomness of every call (generic: passed on; chain: the uniforms are drawn from
            it unless given; hf: seeds torch's global RNG).
        uniforms : ndarray, shape [B, L+1], optional
            Chain interface only: the uniforms to supply (default: ``rng.random``).

        Returns
        -------
        Emitted

        Raises
        ------
        VerifierRaised, VerifierTimedOut
            The verifier raised or hung.
        """
        for arr in (drafts, draft_probs, target_probs):
            arr.flags.writeable = False
        return self.guard.run(self._job(drafts, draft_probs, target_probs, rng, uniforms))

    def _convert(self, arr: np.ndarray) -> Any:
        if self.arrays == "torch":
            return _torch().from_numpy(np.array(arr))
        return arr

    def negotiate(self, probe: tuple[np.ndarray, np.ndarray, np.ndarray], seed: int) -> str | None:
        """Choose numpy or torch arrays with one probe batch; return a note when torch was chosen.

        The verifier is first called on numpy arrays; if that raises and torch is installed,
        torch tensors are tried, and kept when they work. Otherwise nothing changes (the
        checks then report the numpy failure).
        """
        if self.interface == "hf" or not _has_torch():
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


class GenericAdapter(Adapter):
    """``verify(draft_tokens [K, L], draft_probs [K, L, V], target_probs [K, L+1, V], rng)``."""

    interface = "generic"

    def _job(
        self, d: np.ndarray, q: np.ndarray, p: np.ndarray, rng: np.random.Generator, uniforms: np.ndarray | None
    ) -> Callable[[], Emitted]:
        B, _, L = d.shape
        fn, guard, conv = self.fn, self.guard, self._convert

        torch_arrays = self.arrays == "torch"
        monotonic = time.monotonic

        def job() -> Emitted:
            outs = []
            append = outs.append
            b = 0
            try:
                if torch_arrays:
                    for b in range(B):
                        args = (conv(d[b]), conv(q[b]), conv(p[b]))
                        guard._call_start = monotonic()  # noqa: SLF001
                        append(fn(*args, rng))
                else:
                    for b in range(B):
                        guard._call_start = monotonic()  # noqa: SLF001 - inlined tick() on the hot path
                        append(fn(d[b], q[b], p[b], rng))
            except Exception as exc:  # noqa: BLE001 - reported as a failed check
                guard.calls += b + 1  # the calls made, the raising one included
                raise as_raised(exc, b) from exc
            guard.calls += B
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


class ChainAdapter(Adapter):
    """``verify(draft_ids [B, L], draft_probs [B, L, V], target_probs [B, L+1, V], uniforms [B, L+1])``."""

    interface = "chain"
    single_draft = True

    def _job(
        self, d: np.ndarray, q: np.ndarray, p: np.ndarray, rng: np.random.Generator, uniforms: np.ndarray | None
    ) -> Callable[[], Emitted]:
        B, _, L = d.shape
        u = rng.random((B, L + 1)) if uniforms is None else np.asarray(uniforms, dtype=np.float64)
        u.flags.writeable = False
        fn, guard, conv = self.fn, self.guard, self._convert

        def job() -> Emitted:
            parts = []
            for lo in range(0, B, CHAIN_BATCH):
                hi = min(B, lo + CHAIN_BATCH)
                args = (conv(d[lo:hi, 0]), conv(q[lo:hi, 0]), conv(p[lo:hi, 0]), conv(u[lo:hi]))
                guard.tick()
                try:
                    out = fn(*args)
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


class HFAdapter(Adapter):
    """transformers' ``_speculative_sampling`` (logits in, global torch RNG; batch size 1)."""

    interface = "hf"
    single_draft = True

    def __init__(self, fn: Callable[..., Any], guard: CallGuard, name: str) -> None:
        super().__init__(fn, guard, name)
        self.arrays = "torch"
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            params = {}
        self.extra: dict[str, Any] = {"is_done_candidate": False} if "is_done_candidate" in params else {}

    def _job(
        self, d: np.ndarray, q: np.ndarray, p: np.ndarray, rng: np.random.Generator, uniforms: np.ndarray | None
    ) -> Callable[[], Emitted]:
        torch = _torch()
        B, _, L = d.shape
        with np.errstate(divide="ignore"):
            logq = torch.from_numpy(np.log(q[:, 0]).astype(np.float32))
            logp = torch.from_numpy(np.log(p[:, 0]).astype(np.float32))
        ids = torch.from_numpy(np.array(d[:, 0], dtype=np.int64))
        seed = int(rng.integers(0, 2**62))
        fn, guard, extra = self.fn, self.guard, self.extra

        def job() -> Emitted:
            res = Emitted(np.full((B, L + 1), -1, dtype=np.int64), np.zeros(B, dtype=np.int64))
            saved = torch.random.get_rng_state()
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


_ADAPTERS: dict[str, type[Adapter]] = {"generic": GenericAdapter, "chain": ChainAdapter, "hf": HFAdapter}


def check_interface(interface: str) -> str:
    """Return ``interface`` if it is one of :data:`INTERFACES`.

    Raises
    ------
    ValueError
        ``unknown interface 'x'; valid: generic, chain, hf``.
    """
    if interface not in INTERFACES:
        raise ValueError(f"unknown interface {interface!r}; valid: {', '.join(INTERFACES)}")
    return interface


def verifier_name(verify: Any) -> str:
    """Display name ``module:qualname`` of a callable (or its repr)."""
    owner = getattr(verify, "__self__", None)
    if owner is not None and not isinstance(owner, type) and hasattr(owner, "name"):
        return f"{type(owner).__module__}:{type(owner).__qualname__}.{getattr(verify, '__name__', 'sample')}"
    mod = getattr(verify, "__module__", None)
    qual = getattr(verify, "__qualname__", None)
    return f"{mod}:{qual}" if mod and qual else repr(verify)[:80]


def as_callable(verify: Any, interface: str) -> Callable[..., Any]:
    """The callable behind ``verify``: a reference :class:`~spectr_gbv.reference.Verifier`
    instance or subclass (generic interface) becomes its bound ``sample``.

    Raises
    ------
    ValueError
        ``verify`` is not callable.
    """
    from spectr_gbv.reference.base import Verifier  # noqa: PLC0415 - keeps import time low

    if interface == "generic":
        if isinstance(verify, type) and issubclass(verify, Verifier):
            verify = verify()
        if isinstance(verify, Verifier):
            return verify.sample
    if not callable(verify):
        raise ValueError(f"verify: expected a callable in the {interface!r} interface, got {type(verify).__name__}")
    return verify


def make_adapter(verify: Any, interface: str, guard: CallGuard) -> Adapter:
    """Wrap ``verify`` (a callable in ``interface``) as an :class:`Adapter`.

    Raises
    ------
    ValueError
        Unknown interface, ``verify`` not callable, or ``interface="hf"`` without torch.
    """
    check_interface(interface)
    fn = as_callable(verify, interface)
    if interface == "hf" and not _has_torch():
        raise ValueError("interface 'hf' needs torch (pip install torch transformers)")
    return _ADAPTERS[interface](fn, guard, verifier_name(fn))


def load_verifier(path: str, interface: str) -> Callable[..., Any]:
    """Import a verifier from ``"module:function"`` (``function`` may be dotted).

    Parameters
    ----------
    path : str
        ``"package.module:name"``; ``name`` may be a function, a callable object, or (generic
        interface) a reference :class:`~spectr_gbv.reference.Verifier` instance or subclass,
        whose ``sample`` is used.
    interface : str
        One of :data:`INTERFACES`.

    Returns
    -------
    callable

    Raises
    ------
    ValueError
        One line: unknown interface, a path without ``:``, a module that cannot be imported,
        a missing attribute, or an object that is not callable.

    Examples
    --------
    >>> fn = load_verifier("spectr_gbv.reference.sd:SpeculativeDecodingVerifier", "generic")
    >>> fn.__name__
    'sample'
    """
    check_interface(interface)
    if not isinstance(path, str) or path.count(":") != 1 or not all(path.split(":")):
        raise ValueError(f"bad verifier path {path!r}: expected 'module:function'")
    mod_name, attr = path.split(":")
    try:
        obj: Any = importlib.import_module(mod_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is a usage error
        raise ValueError(f"cannot import module {mod_name!r}: {type(exc).__name__}: {exc}".splitlines()[0]) from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise ValueError(f"module {mod_name!r} has no attribute {attr!r}") from exc
    return as_callable(obj, interface)


__all__ = [
    "CHAIN_BATCH",
    "INTERFACES",
    "Adapter",
    "ChainAdapter",
    "GenericAdapter",
    "HFAdapter",
    "check_interface",
    "load_verifier",
    "make_adapter",
    "verifier_name",
]
