r"""A verification rule as the decoder, :func:`~spectr_gbv.gpu.kernels.verify` and the benchmark run it.

A *method* given to :class:`~spectr_gbv.gpu.SpeculativeDecoder`,
:func:`~spectr_gbv.gpu.kernels.verify`, ``spectr-gbv bench --methods``, the real-pair law test
or the paired replay is resolved here (:func:`resolve_kernel_rule`) into a :class:`KernelRule`:

* a registered name with a torch kernel (:data:`~spectr_gbv.core.methods.METHOD_TABLE`,
  ``kernel`` field): that kernel;
* a **torch rule**, the signature of the built-in kernels::

      rule(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput

  (:mod:`spectr_gbv.gpu.kernels.common`): ``inputs.drafts`` int64 [B, K, L],
  ``inputs.draft_probs`` [B, K, L, V] and ``inputs.target_probs`` [B, K, L+1, V] (float32 or
  float64, validated), ``uniforms(*shape)`` fresh float64 uniforms in [0, 1) from the
  caller's generator (draw every random decision from it, never reuse one); the output holds
  ``tokens`` int64 [B, L+1] (the accepted prefix of draft ``draft_index``, one token, then
  ``-1``), ``num_accepted`` int64 [B] and ``draft_index`` int64 [B];
* a **reference rule**: a :class:`~spectr_gbv.reference.Verifier` subclass or instance, a
  plain function with the generic interface ``fn(drafts, draft_probs, target_probs, rng) ->
  tokens`` (:func:`spectr_gbv.reference.user_rules.as_verifier`), or a name added with
  :func:`spectr_gbv.reference.registry.register`. It runs on the CPU, one batch row at a
  time, through its ``sample`` (float64 numpy rows, renormalised; rows of drafts that share a
  prefix are the lowest-index draft's, as the kernels read them) with a
  :class:`numpy.random.Generator` seeded from the caller's uniforms, so a seeded decoder is
  reproducible. It is slow: a Python loop per batch row and iteration.

Strings ``"module:attribute"`` name either kind (the current directory importable). A
function is told apart by its signature (``inspect.signature``): two positional
parameters make a torch rule, four a reference function; when both fit (``*args``), a first
parameter named ``drafts`` makes a reference function, anything else a torch rule.

A rule's ``lossless`` attribute is its claim: ``False`` needs ``allow_lossy=True`` (as the
registered lossy methods); no claim runs with an :class:`UnverifiedRuleWarning` (from the
decoder) that names the law test which checks it.

References
----------
THEORY.md section 2 (a verifier is a Markov kernel from the drafts to outputs);
:mod:`spectr_gbv.reference.user_rules` (the reference side of a user's rule).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from spectr_gbv.core.methods import import_path, is_registered, method_hint, method_spec, methods_where
from spectr_gbv.gpu.kernels.common import KernelInputs, UniformSource, VerifyOutput
from spectr_gbv.reference.base import Verifier
from spectr_gbv.reference.user_rules import as_verifier, load_rule, rule_label

KernelFn = Callable[[KernelInputs, UniformSource], VerifyOutput]

#: Where the losslessness of a user's rule is tested, named by :meth:`KernelRule.unverified_note` when
#: its caller names no law test of its own (an application that runs one passes its function's path).
LAW_TEST = "the law test of the first generated tokens (docs/verifiers.md, 'Bring your own rule')"


class UnverifiedRuleWarning(UserWarning):
    """A user's rule that makes no ``lossless`` claim runs; its output law is not checked."""


@dataclass(frozen=True)
class KernelRule:
    """One resolved verification rule with the kernel signature.

    Attributes
    ----------
    name : str
        The registered name, ``"module:attribute"`` as given, or ``module:qualname`` of an
        object passed directly (the label of decoder stats and bench rows).
    kernel : callable (KernelInputs, UniformSource) -> VerifyOutput
        What :func:`~spectr_gbv.gpu.kernels.verify` calls.
    origin : {"registered", "torch", "reference"}
        A table kernel, a user's torch rule, or a reference rule run row by row on the CPU.
    lossless_claimed : bool or None
        The table's fact for a registered name; the rule's ``lossless`` attribute otherwise
        (None: no claim).
    drafts : {"none", "one", "many"}
        How many drafts it reads (:class:`~spectr_gbv.core.methods.MethodSpec`); ``"many"``
        for a user's rule.
    """

    name: str
    kernel: KernelFn
    origin: str
    lossless_claimed: bool | None
    drafts: str = "many"

    def __call__(self, inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput:
        """Run the rule (the kernel signature)."""
        return self.kernel(inputs, uniforms)

    @property
    def registered(self) -> bool:
        """A table method (not a user's rule)."""
        return self.origin == "registered"

    def describe(self) -> str:
        """One line: name, kind, lossless claim (shown beside a user's results)."""
        kind = {
            "registered": "registered kernel",
            "torch": "torch rule (kernel signature)",
            "reference": "reference rule (CPU loop per batch row: slow)",
        }[self.origin]
        claim = {True: "claims lossless", False: "declared lossy", None: "no lossless claim"}[self.lossless_claimed]
        return f"{self.name}: {kind}, {claim}"

    def lossy_refusal(self) -> str:
        """The message refusing a lossy rule without ``allow_lossy=True``."""
        why = "THEORY.md 6a" if self.registered else "it declares lossless = False"
        return (
            f"method {self.name!r} is lossy (its output does not follow the target law; {why}); "
            "pass allow_lossy=True to run it anyway"
        )

    def unverified_note(self, law_test: str = LAW_TEST) -> str:
        """The one-line warning of a rule without a ``lossless`` claim.

        Parameters
        ----------
        law_test : str
            What the message names as the test of the rule's output law (default :data:`LAW_TEST`).
        """
        return (
            f"method {self.name!r}: the rule's losslessness is unverified (it declares no lossless attribute); "
            f"test its output law with {law_test} before trusting it"
        )


def kernel_methods() -> tuple[str, ...]:
    """Registered methods with a torch kernel: the lossless ones, then the lossy ones (table order within).

    Returns
    -------
    tuple of str
        Read from :data:`~spectr_gbv.core.methods.METHOD_TABLE` (``kernel`` and ``lossless``).
    """
    return methods_where(kernel=True, lossless=True) + methods_where(kernel=True, lossless=False)


def import_kernel(path: str) -> KernelFn:
    """The function named by a table entry's ``kernel`` field.

    Parameters
    ----------
    path : str
        ``"module:function"`` (e.g. ``"spectr_gbv.gpu.kernels.sd:verify_sd"``).

    Returns
    -------
    callable (KernelInputs, UniformSource) -> VerifyOutput

    Raises
    ------
    ImportError, AttributeError
        A table entry naming a module or function that does not exist (a packaging fault).
    """
    return import_path(path)  # type: ignore[no-any-return]


def _unknown(method: str) -> ValueError:
    if is_registered(method):
        return ValueError(
            f"method: unknown kernel method {method!r} (registered without a torch kernel: it runs in the "
            f"reference layer only, spectr-gbv simulate / sweep); valid: {', '.join(kernel_methods())}, "
            "or 'module:attribute' naming your own rule"
        )
    return ValueError(
        f"method: unknown kernel method {method!r}{method_hint(method)}; valid: {', '.join(kernel_methods())}, "
        "or 'module:attribute' naming your own rule"
    )


def _fits(sig: inspect.Signature, n: int) -> bool:
    """True when ``sig`` can be called with ``n`` positional arguments and nothing else."""
    try:
        sig.bind(*range(n))
    except TypeError:
        return False
    return True


def classify_callable(fn: Callable[..., Any], label: str) -> str:
    """``"torch"`` or ``"reference"`` for a plain callable, by its signature (see the module docstring).

    Parameters
    ----------
    fn : callable
    label : str
        The method's label, for the message.

    Returns
    -------
    str
        ``"torch"``: callable with 2 positional arguments (or no readable signature);
        ``"reference"``: with 4 (with both, when its first parameter is named ``drafts``).

    Raises
    ------
    ValueError
        One line naming ``method``: a signature that takes neither 2 nor 4 positional arguments.
    """
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to read (a builtin): the kernel interface is assumed
        return "torch"
    two, four = _fits(sig, 2), _fits(sig, 4)
    if two and four:
        first = next(iter(sig.parameters.values()), None)
        return "reference" if first is not None and first.name == "drafts" else "torch"
    if two:
        return "torch"
    if four:
        return "reference"
    raise ValueError(
        f"method {label!r}: a rule takes (inputs, uniforms) -> VerifyOutput (a torch rule) or "
        f"(drafts, draft_probs, target_probs, rng) -> tokens (a reference function); its signature is {sig}"
    )


def _claim(obj: Any) -> bool | None:
    claimed = getattr(obj, "lossless", None)
    return claimed if isinstance(claimed, bool) else None


def resolve_kernel_rule(method: Any) -> KernelRule:
    """The :class:`KernelRule` of ``method`` (see the module docstring).

    Parameters
    ----------
    method : str, KernelRule, Verifier, Verifier subclass or callable
        A registered kernel method, a name added with
        :func:`~spectr_gbv.reference.registry.register`, ``"module:attribute"``, or the rule.

    Returns
    -------
    KernelRule

    Raises
    ------
    ValueError
        One line naming ``method``: an unknown name (the message lists the kernel methods and
        the ``module:attribute`` form), a table method without a torch kernel, an import
        failure, an object that is not a rule, or a callable of another signature.
    """
    if isinstance(method, KernelRule):
        return method
    if isinstance(method, str):
        if is_registered(method):
            spec = method_spec(method)
            if spec.kernel is None:
                raise _unknown(method)
            return KernelRule(method, import_kernel(spec.kernel), "registered", spec.lossless, spec.drafts)
        from spectr_gbv.reference.registry import available_methods, get_verifier  # noqa: PLC0415

        if method in available_methods():  # a name added with register(): its reference class
            verifier = get_verifier(method)
            return KernelRule(method, reference_kernel(verifier), "reference", _claim(verifier))
        if ":" not in method:
            raise _unknown(method)
        obj, name = load_rule(method), method
    elif isinstance(method, Verifier | type) or callable(method):
        obj, name = method, rule_label(method)
    else:
        raise ValueError(
            f"method must be a str naming one kernel method, got {type(method).__name__} {method!r:.80}; "
            f"valid: {', '.join(kernel_methods())}, 'module:attribute', or a rule (inputs, uniforms) -> VerifyOutput"
        )
    if isinstance(obj, Verifier) or isinstance(obj, type):
        try:
            verifier = as_verifier(obj, name)
        except ValueError as exc:
            raise ValueError(f"method {name!r}: {exc}") from exc
        return KernelRule(name, reference_kernel(verifier), "reference", _claim(verifier))
    if not callable(obj):
        raise ValueError(f"method {name!r}: expected a torch rule, a Verifier or a function, got {type(obj).__name__}")
    if classify_callable(obj, name) == "reference":
        verifier = as_verifier(obj, name)
        return KernelRule(name, reference_kernel(verifier), "reference", _claim(obj))
    return KernelRule(name, obj, "torch", _claim(obj))


def _canonical_rows(drafts: np.ndarray, rows: np.ndarray, last: int) -> None:
    """Rows ``t < last`` of a draft that shares its first t tokens with a lower-index draft: that draft's (in place)."""
    K = drafts.shape[0]
    for k in range(1, K):
        for t in range(last):
            same = [j for j in range(k) if np.array_equal(drafts[j, :t], drafts[k, :t])]
            if not same:
                break
            rows[k, t] = rows[same[0], t]


def reference_kernel(verifier: Verifier) -> KernelFn:
    """A kernel that runs a reference rule's ``sample`` on each batch row, on the CPU.

    The probabilities are copied to float64 numpy arrays and each row renormalised (float32
    rows of a softmax sum to 1 within 1e-4, the reference layer asks 1e-9); rows of drafts
    sharing a prefix are made equal to the lowest-index draft's there. One
    :class:`numpy.random.Generator` per call is seeded from four of the caller's uniforms
    (128 bits), then used for the rows in order.

    Parameters
    ----------
    verifier : Verifier

    Returns
    -------
    callable (KernelInputs, UniformSource) -> VerifyOutput
        ``tokens`` int64 [B, L+1], ``num_accepted`` and ``draft_index`` int64 [B] (the
        lowest-index draft whose prefix was accepted) on the inputs' device; no diagnostics.

    Raises
    ------
    ValueError
        (when called) the rule's ``sample`` raised it, e.g. an output that is not ``tau + 1``
        ids with a drafted prefix.
    """

    def kernel(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput:
        seed = [int(u * 2**32) for u in uniforms(4).tolist()]
        rng = np.random.default_rng(seed)
        drafts = inputs.drafts.cpu().numpy()
        q = inputs.draft_probs.to(torch.float64).cpu().numpy().copy()
        p = inputs.target_probs.to(torch.float64).cpu().numpy().copy()
        q /= q.sum(-1, keepdims=True)
        p /= p.sum(-1, keepdims=True)
        B, K, L = drafts.shape
        tokens = np.full((B, L + 1), -1, dtype=np.int64)
        tau = np.zeros(B, dtype=np.int64)
        index = np.zeros(B, dtype=np.int64)
        for b in range(B):
            _canonical_rows(drafts[b], q[b], L)
            _canonical_rows(drafts[b], p[b], L + 1)
            out = [int(t) for t in verifier.sample(drafts[b], q[b], p[b], rng)]
            n = len(out) - 1
            tokens[b, : n + 1], tau[b] = out, n
            index[b] = next((k for k in range(K) if list(drafts[b, k, :n]) == out[:n]), 0)
        dev = inputs.device
        return VerifyOutput(
            torch.from_numpy(tokens).to(dev), torch.from_numpy(tau).to(dev), torch.from_numpy(index).to(dev)
        )

    kernel.__qualname__ = f"reference_kernel({getattr(verifier, 'name', type(verifier).__name__)})"
    return kernel


__all__ = [
    "LAW_TEST",
    "KernelFn",
    "KernelRule",
    "UnverifiedRuleWarning",
    "classify_callable",
    "import_kernel",
    "kernel_methods",
    "reference_kernel",
    "resolve_kernel_rule",
]
