r"""A researcher's own verification rule wherever a method name is accepted.

A *method* is named by a registered name of :data:`~spectr_gbv.core.methods.METHOD_TABLE`
(or one added with :func:`~spectr_gbv.reference.registry.register`), or by ``"module:attribute"``
naming one of

* a :class:`~spectr_gbv.reference.Verifier` subclass or instance (its ``outcome_law`` and
  ``sample`` are used as they are; ``structure`` declared in the class body makes the exact
  simulator fast, see :mod:`spectr_gbv.reference.structure`);
* a plain function with the generic interface of ``spectr-gbv validate``,
  ``rule(drafts [K, L] int, draft_probs [K, L, V], target_probs [K, L+1, V], rng) -> tokens``
  (the accepted prefix of one draft plus one token, length ``tau + 1``), wrapped by
  :class:`FunctionVerifier`.

A function's exact law is enumerated over its random draws: during enumeration its ``rng`` is
an :class:`EnumeratingRng`, whose ``random()`` returns a :class:`SymbolicUniform`. Each
comparison ``u < t`` with a number ``t`` forks the run into the two events ``u < t`` and
``u >= t``, with the conditional probabilities of a uniform on its current interval (exact in
Fractions), exactly as the reference classes' choosers do. ``choice`` (with or without ``p``),
``integers``, ``permutation`` and ``shuffle`` fork over their finitely many results. Any
other use of a draw (arithmetic on ``u``, ``float(u)``, ``rng.gumbel``, ...) raises
:class:`NotEnumerableError`, naming the operation: such a rule has no enumerated law, and the
callers sample it instead (Monte Carlo, with its stated sample size and confidence), calling
the function with a real :class:`numpy.random.Generator`.

References
----------
THEORY.md section 2 (a verifier is a Markov kernel from the drafts to outputs);
:mod:`spectr_gbv.reference.choosers` (the enumeration by replay).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from numbers import Integral, Real
from typing import Any

import numpy as np

from spectr_gbv.core.methods import is_registered, method_hint, method_spec
from spectr_gbv.core.numbers import Scalar
from spectr_gbv.reference.base import Verifier, VerifyInput
from spectr_gbv.reference.choosers import Chooser, Emission

#: Largest number of random draws one run of a user's function may make while enumerated.
MAX_DRAWS_PER_RUN = 10_000
#: Largest number of execution paths (runs) one enumerated law of a user's function may take.
MAX_PATHS = 200_000


class NotEnumerableError(ValueError):
    """A user rule's random draws cannot be enumerated exactly (the message names the operation)."""


class RuleRaisedError(ValueError):
    """A user's function raised while it was called (the message names the rule and the exception)."""


def _threshold(t: Any, exact: bool) -> Scalar:
    if isinstance(t, SymbolicUniform):
        raise NotEnumerableError("a comparison of two random draws (u < v)")
    if isinstance(t, np.ndarray) and t.ndim == 0:
        t = t.item()
    if isinstance(t, bool) or not isinstance(t, Real | np.floating | np.integer):
        raise NotEnumerableError(f"a comparison of a random draw with a {type(t).__name__}")
    if exact:
        if isinstance(t, Fraction):
            return t
        value = float(t)
        if not np.isfinite(value):
            return Fraction(1 if value > 0 else -1) * 2  # beyond [0, 1): decided
        return Fraction(value)
    return float(t)


class SymbolicUniform:
    """A uniform draw on [0, 1) that is never given a value: comparisons fork the enumeration.

    The draw keeps the interval [lo, hi) it is known to lie in; ``u < t`` is True with
    probability ``(t - lo) / (hi - lo)`` (clipped to [0, 1]) and narrows the interval either
    way. ``<=`` and ``<`` (and ``>=``, ``>``) have the same law (ties have probability 0).

    Raises
    ------
    NotEnumerableError
        Arithmetic, ``float(u)``, or a comparison with something other than a real number.
    """

    __slots__ = ("_chooser", "_exact", "_hi", "_lo")

    def __init__(self, chooser: Chooser, exact: bool) -> None:
        self._chooser = chooser
        self._exact = exact
        self._lo: Scalar = Fraction(0) if exact else 0.0
        self._hi: Scalar = Fraction(1) if exact else 1.0

    def _below(self, t: Any) -> bool:
        th = _threshold(t, self._exact)
        if th <= self._lo:
            return False
        if th >= self._hi:
            return True
        res = self._chooser.bernoulli((th - self._lo) / (self._hi - self._lo))
        if res:
            self._hi = th
        else:
            self._lo = th
        return res

    def __lt__(self, t: Any) -> bool:
        return self._below(t)

    __le__ = __lt__

    def __gt__(self, t: Any) -> bool:
        return not self._below(t)

    __ge__ = __gt__

    def __mul__(self, c: Any) -> ScaledUniform:
        return ScaledUniform(self, c)

    __rmul__ = __mul__

    def _refuse(self, *args: Any) -> Any:
        raise NotEnumerableError("arithmetic on a random draw (only u < t and (c * u) < t with c > 0 are enumerated)")

    __add__ = __radd__ = __sub__ = __rsub__ = __truediv__ = __rtruediv__ = _refuse
    __pow__ = __rpow__ = __neg__ = __abs__ = _refuse

    def __float__(self) -> float:
        raise NotEnumerableError("float() of a random draw")

    def __repr__(self) -> str:
        return f"SymbolicUniform([{self._lo}, {self._hi}))"


class ScaledUniform:
    """``c * u`` for a :class:`SymbolicUniform` ``u`` and a number ``c > 0``: ``c * u < t`` is ``u < t / c``.

    Raises
    ------
    NotEnumerableError
        ``c`` is not a positive real number, or any use other than a comparison.
    """

    __slots__ = ("_base", "_c")

    def __init__(self, base: SymbolicUniform, c: Any) -> None:
        if isinstance(c, SymbolicUniform | ScaledUniform):
            raise NotEnumerableError("a product of two random draws")
        c = _threshold(c, base._exact)
        if not c > 0:
            raise NotEnumerableError(f"a random draw times {c} (only positive factors are enumerated)")
        self._base, self._c = base, c

    def __lt__(self, t: Any) -> bool:
        return self._base._below(_threshold(t, self._base._exact) / self._c)

    __le__ = __lt__

    def __gt__(self, t: Any) -> bool:
        return not self.__lt__(t)

    __ge__ = __gt__

    def __float__(self) -> float:
        raise NotEnumerableError("float() of a random draw")


def _size(size: Any) -> tuple[int, ...] | None:
    if size is None:
        return None
    if isinstance(size, Integral):
        return (int(size),)
    return tuple(int(s) for s in size)


#: The attributes of :class:`EnumeratingRng` a user's function may use.
_RNG_API = frozenset({"random", "uniform", "choice", "integers", "permutation", "shuffle", "draws"})


class EnumeratingRng(np.random.Generator):
    """The ``rng`` a user's function receives while its law is enumerated.

    A :class:`numpy.random.Generator` subclass (so ``isinstance`` checks and calls such as
    ``Verifier.sample(..., rng)`` inside the function work) that supports ``random``,
    ``uniform(0, 1)``, ``choice``, ``integers``, ``permutation`` and ``shuffle`` (see the module
    docstring). Every other public attribute (``gumbel``, ``normal``, ``bit_generator``,
    ``spawn``, ...) raises :class:`NotEnumerableError`: no draw ever comes from a real bit
    generator.

    Parameters
    ----------
    chooser : Chooser
        The enumerating (or sampling) chooser of the run.
    exact : bool
        Fractions (exact instance) or floats.
    """

    def __init__(self, chooser: Chooser, exact: bool) -> None:
        super().__init__(np.random.PCG64(0))
        self._chooser = chooser
        self._exact = exact
        self.draws = 0

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("_") or name in _RNG_API:
            return object.__getattribute__(self, name)
        raise NotEnumerableError(f"rng.{name} (only random, uniform(0, 1), choice, integers, permutation, shuffle)")

    def _count(self, n: int = 1) -> None:
        self.draws += n
        if self.draws > MAX_DRAWS_PER_RUN:
            raise NotEnumerableError(f"more than {MAX_DRAWS_PER_RUN:,} random draws in one run")

    def random(self, size: Any = None, dtype: Any = None, out: Any = None) -> Any:
        """A :class:`SymbolicUniform`, or an object array of them of shape ``size``."""
        if out is not None:
            raise NotEnumerableError("rng.random(out=...)")
        shape = _size(size)
        if shape is None:
            self._count()
            return SymbolicUniform(self._chooser, self._exact)
        arr = np.empty(shape, dtype=object)
        self._count(arr.size)
        for idx in np.ndindex(*shape):
            arr[idx] = SymbolicUniform(self._chooser, self._exact)
        return arr

    def uniform(self, low: float = 0.0, high: float = 1.0, size: Any = None) -> Any:
        """``random`` when ``(low, high) = (0, 1)``; other ranges are not enumerated."""
        if (low, high) != (0, 1):
            raise NotEnumerableError(f"rng.uniform({low}, {high})")
        return self.random(size)

    def _pick(self, weights: Sequence[Scalar]) -> int:
        self._count()
        return self._chooser.categorical(weights)

    def _weights(self, n: int, p: Any) -> list[Scalar]:
        if p is None:
            return [Fraction(1) if self._exact else 1.0] * n
        ws = list(p)
        if len(ws) != n:
            raise ValueError(f"rng.choice: p has {len(ws)} entries for {n} items")
        return [Fraction(w) if self._exact and not isinstance(w, Fraction) else w for w in ws]

    def choice(self, a: Any, size: Any = None, replace: bool = True, p: Any = None, **kwargs: Any) -> Any:
        """One item of ``a`` (or of ``range(a)``), with probabilities ``p`` (default uniform)."""
        if size is not None or kwargs:
            raise NotEnumerableError("rng.choice with size or axis arguments")
        items = np.arange(int(a)) if isinstance(a, Integral) else np.asarray(a)
        i = self._pick(self._weights(len(items), p))
        return items[i]

    def integers(self, low: int, high: int | None = None, size: Any = None, endpoint: bool = False, **kw: Any) -> Any:
        """A uniform integer of ``[low, high)`` (``[0, low)`` when ``high`` is None)."""
        if size is not None or kw:
            raise NotEnumerableError("rng.integers with size or dtype arguments")
        lo, hi = (0, int(low)) if high is None else (int(low), int(high))
        hi += 1 if endpoint else 0
        return np.int64(lo + self._pick(self._weights(hi - lo, None)))

    def permutation(self, x: Any) -> np.ndarray:
        """A uniformly random permutation of ``x`` (or of ``range(x)``), one choice per position."""
        items = list(np.arange(int(x)) if isinstance(x, Integral) else np.asarray(x))
        out = []
        while items:
            out.append(items.pop(self._pick(self._weights(len(items), None))))
        return np.asarray(out)

    def shuffle(self, x: Any) -> None:
        """Shuffle the sequence ``x`` in place (uniform permutation)."""
        x[:] = self.permutation(np.asarray(x))


class FunctionVerifier(Verifier):
    """A plain function with the generic interface, as a :class:`~spectr_gbv.reference.Verifier`.

    ``fn(drafts, draft_probs, target_probs, rng) -> tokens``: ``drafts`` int64 [K, L],
    ``draft_probs`` [K, L, V] and ``target_probs`` [K, L+1, V] (numpy ``object`` arrays of
    Fractions on an exact instance, float64 otherwise), ``rng`` a
    :class:`numpy.random.Generator` (in ``sample``) or an :class:`EnumeratingRng` (in
    ``outcome_law``); ``tokens`` a sequence of ``tau + 1`` ints, the first ``tau`` a
    prefix of one draft.

    Parameters
    ----------
    fn : callable
    name : str
        Display name, ``module:qualname`` by default.

    Attributes
    ----------
    lossless : bool
        ``fn.lossless`` when the function declares it, else False (no claim).
    lossless_claimed : bool or None
        ``fn.lossless`` as declared, None when not declared.
    drafts : str
        ``fn.drafts`` when declared (``"one"``: the function reads draft 0 only, so grids run it
        at K = 1 only), else ``"many"``. The exact simulator does not trust it: every draft
        tuple is still enumerated, so a false declaration cannot hide a dependence on the
        other drafts.
    symmetric : bool
        ``fn.symmetric`` when declared (its law does not depend on the order of the drafts:
        the simulator enumerates multisets), else False.

    Raises
    ------
    ValueError
        (from ``outcome_law`` / ``sample``) an output that is not ``tau + 1`` ints with
        a drafted prefix, or an id outside the vocabulary.
    NotEnumerableError
        (from ``outcome_law``) a use of ``rng`` that cannot be enumerated.
    """

    symmetric = False
    citation = "a user's rule"
    structure = None

    def __init__(self, fn: Callable[..., Any], name: str | None = None) -> None:
        super().__init__()
        if not callable(fn):
            raise ValueError(f"rule: expected a callable, got {type(fn).__name__}")
        self.fn = fn
        self.name = name or rule_label(fn)  # type: ignore[misc]
        claimed = getattr(fn, "lossless", None)
        self.lossless_claimed: bool | None = claimed if isinstance(claimed, bool) else None
        self.lossless = bool(self.lossless_claimed)  # type: ignore[misc]
        drafts = getattr(fn, "drafts", "many")
        if drafts not in ("one", "many"):
            raise ValueError(f"rule {self.name}: drafts must be 'one' or 'many', got {drafts!r}")
        self.drafts = drafts
        self.symmetric = getattr(fn, "symmetric", False) is True  # type: ignore[misc]
        doc = (getattr(fn, "__doc__", None) or "").strip()
        self.citation = doc.splitlines()[0] if doc else "a user's rule"  # type: ignore[misc]
        self._paths = 0
        try:
            inspect.signature(fn).bind(None, None, None, None)
        except TypeError:
            raise ValueError(
                f"rule {self.name}: a function rule takes (drafts, draft_probs, target_probs, rng); "
                f"its signature is {inspect.signature(fn)}"
            ) from None
        except ValueError:  # no signature to read (a builtin): the call itself will tell
            pass

    def outcome_law_checked(self, batch: VerifyInput) -> dict[tuple[int, ...], Scalar]:
        """Exact law by enumeration of the function's draws (see the module docstring)."""
        self._paths = 0
        return super().outcome_law_checked(batch)

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """One run of ``fn`` with an :class:`EnumeratingRng` over ``chooser``."""
        self._paths += 1
        if self._paths > MAX_PATHS:
            raise NotEnumerableError(f"{self.name}: more than {MAX_PATHS:,} execution paths to enumerate")
        tokens = self._call(batch, EnumeratingRng(chooser, batch.exact))
        weights = np.zeros(batch.n, dtype=object if batch.exact else np.float64)
        weights[tokens[-1]] = batch.one
        return Emission(tokens[:-1], weights)

    def sample_checked(self, batch: VerifyInput, rng: np.random.Generator) -> tuple[int, ...]:
        """One call of ``fn`` with ``rng`` itself (no enumeration: any use of ``rng`` works)."""
        return self._call(batch, rng)

    def _call(self, batch: VerifyInput, rng: Any) -> tuple[int, ...]:
        """``fn`` on copies of the batch's arrays, its output checked; what it raises becomes one line."""
        try:
            out = self.fn(batch.drafts.copy(), batch.draft_probs.copy(), batch.target_probs.copy(), rng)
        except NotEnumerableError:
            raise
        except Exception as exc:  # noqa: BLE001 - a user's rule may raise anything: name it
            why = f"{type(exc).__name__}: {exc}".splitlines()[0]
            raise RuleRaisedError(f"rule {self.name} raised {why}") from exc
        return self._tokens(batch, out)

    def _tokens(self, batch: VerifyInput, out: Any) -> tuple[int, ...]:
        try:
            toks = tuple(int(t) for t in np.asarray(out).reshape(-1))
        except (TypeError, ValueError) as exc:
            what = f"{type(out).__name__} {out!r:.60}"
            raise ValueError(f"{self.name} returned {what}, not a sequence of token ids") from exc
        tau = len(toks) - 1
        if not 0 <= tau <= batch.L:
            raise ValueError(f"{self.name} returned {len(toks)} tokens {list(toks)}, expected 1..L+1 = {batch.L + 1}")
        if any(not 0 <= t < batch.n for t in toks):
            raise ValueError(f"{self.name} returned a token outside the vocabulary 0..{batch.n - 1}: {list(toks)}")
        if not any(batch.draft(k)[:tau] == toks[:tau] for k in range(batch.K)):
            raise ValueError(f"{self.name} returned {list(toks)}, whose first {tau} tokens are no draft's prefix")
        return toks


def rule_label(obj: Any) -> str:
    """``module:qualname`` of a function or class (of an instance: of its class)."""
    target = obj if isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__") else type(obj)
    return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', repr(target))}"


def load_rule(path: str) -> Any:
    """Import ``"module:attribute"`` (``attribute`` may be dotted), the current directory importable.

    Raises
    ------
    ValueError
        One line: not ``module:attribute``, a module that cannot be imported, a missing attribute.
    """
    if not isinstance(path, str) or path.count(":") != 1 or not all(path.split(":")):
        raise ValueError(f"method {path!r}: expected a registered name or 'module:attribute'")
    mod_name, attr = path.split(":")
    if os.getcwd() not in sys.path and "" not in sys.path:  # as ``python -m``: the current directory
        sys.path.append(os.getcwd())
    try:
        obj: Any = importlib.import_module(mod_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is a usage error
        why = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise ValueError(f"method {path!r}: cannot import module {mod_name!r} ({why})") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise ValueError(f"method {path!r}: module {mod_name!r} has no attribute {attr!r}") from exc
    return obj


def as_verifier(rule: Any, name: str | None = None) -> Verifier:
    """A :class:`~spectr_gbv.reference.Verifier` for ``rule``.

    Parameters
    ----------
    rule : Verifier, Verifier subclass, or callable
        An instance is returned as is; a subclass is instantiated (without arguments); a
        callable is wrapped in :class:`FunctionVerifier`.
    name : str, optional
        Display name of a wrapped function (default ``module:qualname``).

    Raises
    ------
    ValueError
        Anything else, or a subclass that cannot be instantiated without arguments or lacks
        ``name`` / ``lossless`` / ``symmetric``.
    """
    if isinstance(rule, Verifier):
        return rule
    if isinstance(rule, type) and issubclass(rule, Verifier):
        missing = [a for a in ("name", "lossless", "symmetric") if not hasattr(rule, a)]
        if missing:
            raise ValueError(f"rule {rule.__qualname__}: a Verifier subclass must set {', '.join(missing)}")
        try:
            return rule()
        except TypeError as exc:
            raise ValueError(f"rule {rule.__qualname__}: cannot be instantiated without arguments ({exc})") from exc
    if isinstance(rule, type):
        raise ValueError(f"rule {rule.__qualname__}: a class that is not a Verifier subclass")
    if callable(rule):
        return FunctionVerifier(rule, name)
    raise ValueError(f"rule: expected a Verifier, a Verifier subclass or a function, got {type(rule).__name__}")


@dataclass(frozen=True)
class RuleInfo:
    """What a method name or rule is, as shown beside its results.

    Attributes
    ----------
    name : str
        The row label: the registered name, or ``module:attribute`` (``module:qualname`` for
        an object passed directly).
    origin : str
        ``"registered"``, ``"verifier"`` (a user's Verifier class or instance) or
        ``"function"`` (a wrapped plain function).
    lossless_claimed : bool or None
        The rule's own claim (the table's fact for a registered method); None: no claim.
    structure : str or None
        The reading shape the exact simulator uses (declared in the class body).
    drafts : str
        ``"none"``, ``"one"`` or ``"many"``: the table's arity of a registered method; a user's
        rule's ``drafts`` attribute when it declares one (``"one"``: grids run it at K = 1),
        else ``"many"``.
    note : str
        One line for the user ("" when nothing to say): e.g. a class with ``node_step`` that
        declares no structure is simulated tuple by tuple.
    """

    name: str
    origin: str
    lossless_claimed: bool | None
    structure: str | None
    drafts: str = "many"
    note: str = ""

    def describe(self) -> str:
        """One line: name, origin, lossless claim, structure, note."""
        claim = {True: "claims lossless", False: "declared lossy", None: "no lossless claim"}[self.lossless_claimed]
        shape = f"structure {self.structure}" if self.structure else "no structure (tuple-by-tuple enumeration)"
        reads = {"none": ", reads no draft", "one": ", reads draft 0 only", "many": ""}[self.drafts]
        text = f"{self.name}: {self.origin}, {claim}, {shape}{reads}"
        return f"{text}; {self.note}" if self.note else text


def is_user_rule(method: Any) -> bool:
    """True for anything but a registered name (a ``module:attribute`` string or an object)."""
    from spectr_gbv.reference.registry import available_methods  # noqa: PLC0415 - registry imports this module

    return not (isinstance(method, str) and (is_registered(method) or method in available_methods()))


def resolve_rule(method: Any) -> tuple[RuleInfo, Verifier | None]:
    """The :class:`RuleInfo` of ``method`` and, for a user's rule, its verifier.

    Parameters
    ----------
    method : str, Verifier, Verifier subclass or callable
        A registered name (returns ``(info, None)``: the caller dispatches on the table), a
        ``"module:attribute"`` string, or the rule object itself.

    Raises
    ------
    ValueError
        One line: ``method`` is neither a str nor a rule object (a list, a number), an
        unknown name (the message lists the registered names and the ``module:attribute``
        form), an import failure, or an object that is not a rule.
    """
    from spectr_gbv.reference.registry import available_methods, get_verifier  # noqa: PLC0415

    if isinstance(method, str):
        if is_registered(method):
            spec = method_spec(method)
            return RuleInfo(method, "registered", spec.lossless, spec.structure, spec.drafts), None
        if method in available_methods():
            v = get_verifier(method)
            return _info(v, method, "registered"), None
        if ":" not in method:
            valid = ", ".join(available_methods() + ("greedy_bv", "lp_oracle"))
            own = "or 'module:attribute' naming your own rule"
            raise ValueError(f"unknown method {method!r}{method_hint(method)}; valid: {valid}, {own}")
        obj, name = load_rule(method), method
    elif isinstance(method, Verifier | type) or callable(method):
        obj, name = method, rule_label(method)
    else:
        raise ValueError(f"method: expected a method name or a rule, got {type(method).__name__} {method!r:.60}")
    verifier = as_verifier(obj, name)
    origin = "function" if isinstance(verifier, FunctionVerifier) else "verifier"
    return _info(verifier, name, origin), verifier


def _info(v: Verifier, name: str, origin: str) -> RuleInfo:
    cls = type(v)
    structure = cls.__dict__.get("structure")
    claimed = v.lossless_claimed if isinstance(v, FunctionVerifier) else getattr(v, "lossless", None)
    note = ""
    if structure is None and "node_step" in dir(cls) and origin != "function":
        note = (
            "defines node_step but declares no structure: simulated draft tuple by draft tuple; "
            "set structure = 'draft_tree' in its class body if its run walks the tree with walk_draft_tree"
        )
    drafts = getattr(v, "drafts", "many")
    drafts = drafts if drafts in ("none", "one", "many") else "many"
    return RuleInfo(name, origin, claimed if isinstance(claimed, bool) else None, structure, drafts, note)
