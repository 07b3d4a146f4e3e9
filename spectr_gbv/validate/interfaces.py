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

Every call runs in one worker thread under a per-call time limit (:class:`CallGuard`): a
verifier that raises gives :class:`VerifierRaised`, one that hangs :class:`VerifierTimedOut`
(and is never called again), so the harness reports instead of crashing.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import inspect
import queue
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Interface names accepted by :func:`~spectr_gbv.validate.validate` and the CLI.
INTERFACES: tuple[str, ...] = ("generic", "chain", "hf")

#: Rows per call of a chain verifier.
CHAIN_BATCH = 4096


# ---------------------------------------------------------------------------- call guard
class VerifierFailure(Exception):
    """The verifier could not be run: it raised (:class:`VerifierRaised`) or hung."""

    diagnosis = "raises"


class VerifierRaised(VerifierFailure):
    """The verifier raised an exception; ``row`` is the batch row, ``error`` the exception."""

    diagnosis = "raises"

    def __init__(self, message: str, error: BaseException | None = None, row: int | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.row = row


class VerifierTimedOut(VerifierFailure):
    """A call exceeded the per-call time limit; the verifier is not called again."""

    diagnosis = "timeout"


class _Abandon(BaseException):
    """Injected into a worker thread whose call timed out (stops pure-Python loops)."""


@dataclass
class _Box:
    done: threading.Event = field(default_factory=threading.Event)
    value: Any = None
    error: BaseException | None = None


class CallGuard:
    """Run verifier calls in a worker thread with a per-call time limit.

    A job (a function that makes several verifier calls) runs in one daemon worker thread;
    it calls :meth:`tick` before each verifier call. The caller waits and raises
    :class:`VerifierTimedOut` when the call in progress has run longer than ``time_limit_s``;
    the worker is then sent an asynchronous exception (which stops a pure-Python loop; a call
    blocked in C keeps its daemon thread until the process exits) and the guard refuses every
    later job.

    Parameters
    ----------
    time_limit_s : float
        Seconds one verifier call may take, > 0.

    Raises
    ------
    ValueError
        ``time_limit_s`` not a positive number.
    """

    def __init__(self, time_limit_s: float) -> None:
        if not isinstance(time_limit_s, int | float) or isinstance(time_limit_s, bool) or not time_limit_s > 0:
            raise ValueError(f"time_limit_s: expected a positive number of seconds, got {time_limit_s!r}")
        self.time_limit_s = float(time_limit_s)
        self.dead: str | None = None
        self.calls = 0
        self._jobs: queue.Queue[tuple[Callable[[], Any], _Box]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._call_start = 0.0

    def tick(self) -> None:
        """Mark the start of one verifier call (called from the job, in the worker)."""
        self._call_start = time.monotonic()
        self.calls += 1

    def _worker(self) -> None:
        while True:
            job, box = self._jobs.get()
            try:
                box.value = job()
            except BaseException as exc:  # noqa: BLE001 - everything is reported to the caller
                box.error = exc
            box.done.set()

    def run(self, job: Callable[[], Any]) -> Any:
        """Run ``job`` in the worker and return its value (re-raising its exception).

        Raises
        ------
        VerifierTimedOut
            A verifier call exceeded the limit now or in an earlier job.
        """
        if self.dead:
            raise VerifierTimedOut(self.dead)
        if self._thread is None:
            self._thread = threading.Thread(target=self._worker, name="spectr-gbv-verifier", daemon=True)
            self._thread.start()
        box = _Box()
        self._call_start = time.monotonic()
        self._jobs.put((job, box))
        poll = min(0.05, self.time_limit_s / 4)
        while not box.done.wait(poll):
            if time.monotonic() - self._call_start > self.time_limit_s:
                self.dead = (
                    f"a verifier call ran longer than the per-call limit of {self.time_limit_s:g} s; "
                    "the verifier was not called again"
                )
                self._abandon()
                raise VerifierTimedOut(self.dead)
        if box.error is not None:
            raise box.error
        return box.value

    def _abandon(self) -> None:
        thread = self._thread
        if thread is not None and thread.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(_Abandon))


def _raised(exc: BaseException, row: int | None) -> VerifierRaised:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else ""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = f"{type(exc).__name__}{': ' + msg[:200] if msg else ''}{where}"
    return VerifierRaised(text, exc, row)


# ---------------------------------------------------------------------------- outputs
@dataclass
class Emitted:
    """Emitted tokens of a batch of verifier calls, left-aligned.

    Attributes
    ----------
    tokens : ndarray, shape [B, L+1], int64
        Row b: the emitted tokens, then -1 (entries of a malformed row are -1).
    lengths : ndarray, shape [B], int64
        Number of emitted tokens (0 for a malformed row).
    problems : dict of int to (str, str)
        Row -> (diagnosis, message) for outputs that could not be read as tokens (NaN, not
        integers, wrong shape, inconsistent -1 padding, more than L+1 tokens).
    """

    tokens: np.ndarray
    lengths: np.ndarray
    problems: dict[int, tuple[str, str]] = field(default_factory=dict)


def _to_numpy(out: Any) -> Any:
    if type(out).__module__.startswith("torch"):
        try:
            return out.detach().cpu().numpy()
        except Exception:  # noqa: BLE001 - a garbage object is reported as bad output
            return out
    return out


def read_sequence(out: Any) -> tuple[tuple[int, ...] | None, tuple[str, str] | None]:
    """Read one generic verifier output as a tuple of ints.

    Returns
    -------
    (tokens, None) or (None, (diagnosis, message))
        ``nan_or_out_of_vocab`` for NaN/inf entries, ``bad_output`` for anything that is not
        a 1-D sequence of integers.
    """
    if type(out) in (list, tuple) and all(type(x) is int for x in out):
        return tuple(out), None
    out = _to_numpy(out)
    if not isinstance(out, list | tuple | np.ndarray):
        return None, ("bad_output", f"returned a {type(out).__name__}, expected a sequence of token ids")
    try:
        arr = np.asarray(out)
    except Exception as exc:  # noqa: BLE001 - ragged or odd objects
        return None, ("bad_output", f"output is not an array of ints ({type(exc).__name__})")
    if arr.ndim != 1:
        return None, ("bad_output", f"output has shape {arr.shape}, expected a 1-D sequence")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            return None, ("nan_or_out_of_vocab", f"output contains NaN or inf: {arr.tolist()}")
        if not np.all(arr == np.round(arr)):
            return None, ("bad_output", f"output contains non-integer values: {arr.tolist()}")
        return tuple(int(x) for x in arr), None
    if arr.dtype.kind in "iu":
        return tuple(int(x) for x in arr), None
    if arr.dtype == object:
        vals = []
        for x in arr:
            if isinstance(x, float) and not np.isfinite(x):
                return None, ("nan_or_out_of_vocab", f"output contains NaN or inf: {arr.tolist()}")
            if isinstance(x, bool) or not isinstance(x, int | np.integer):
                return None, ("bad_output", f"output entry {x!r} is not an int")
            vals.append(int(x))
        return tuple(vals), None
    return None, ("bad_output", f"output has dtype {arr.dtype}, expected integer token ids")


def read_padded(out: Any, B: int, L: int) -> Emitted:
    """Read a chain verifier's output [B, L+1] (-1 after the emitted tokens) into :class:`Emitted`."""
    tokens = np.full((B, L + 1), -1, dtype=np.int64)
    lengths = np.zeros(B, dtype=np.int64)
    res = Emitted(tokens, lengths)
    out = _to_numpy(out)
    try:
        arr = np.asarray(out)
    except Exception:  # noqa: BLE001
        arr = np.asarray(None, dtype=object)
    if arr.shape != (B, L + 1) or arr.dtype.kind not in "iuf":
        msg = f"output has shape {arr.shape} and dtype {arr.dtype}, expected int64 [{B}, {L + 1}]"
        res.problems = {b: ("bad_output", msg) for b in range(B)}
        return res
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr).all(axis=1)
        for b in np.flatnonzero(bad):
            res.problems[int(b)] = ("nan_or_out_of_vocab", f"output row contains NaN or inf: {arr[b].tolist()}")
        frac = np.isfinite(arr) & (arr != np.round(arr))
        for b in np.flatnonzero(frac.any(axis=1) & ~bad):
            res.problems[int(b)] = ("bad_output", f"output row contains non-integer values: {arr[b].tolist()}")
        arr = np.where(np.isfinite(arr), arr, -2).astype(np.int64)
    arr = arr.astype(np.int64)
    pad = arr == -1
    first = np.where(pad.any(axis=1), pad.argmax(axis=1), L + 1)
    after = np.arange(L + 1)[None, :] >= first[:, None]
    inconsistent = (after & ~pad).any(axis=1)
    for b in np.flatnonzero(inconsistent):
        if int(b) not in res.problems:
            res.problems[int(b)] = (
                "bad_output",
                f"output row {arr[b].tolist()}: a token after the first -1 (padding must be -1 to the end)",
            )
    for b in np.flatnonzero(first == 0):
        if int(b) not in res.problems:
            res.problems[int(b)] = ("bad_output", f"output row {arr[b].tolist()} emits no token")
    ok = np.ones(B, dtype=bool)
    ok[list(res.problems)] = False
    tokens[ok] = np.where(after[ok], -1, arr[ok])
    lengths[ok] = first[ok]
    return res


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
                raise _raised(exc, b) from exc
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
                    raise _raised(exc, lo) from exc
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
                        raise _raised(exc, b) from exc
                    try:
                        valid, n_matches = out
                        toks, problem = read_sequence(_to_numpy(valid).reshape(-1))
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
    "CallGuard",
    "ChainAdapter",
    "Emitted",
    "GenericAdapter",
    "HFAdapter",
    "VerifierFailure",
    "VerifierRaised",
    "VerifierTimedOut",
    "check_interface",
    "load_verifier",
    "make_adapter",
    "read_padded",
    "read_sequence",
    "verifier_name",
]
