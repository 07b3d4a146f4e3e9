"""Forcing a probe's coin: the machinery behind :mod:`spectr_gbv.validate.probes`.

Holds :class:`Forcing` (one way of forcing position 0's acceptance coin: its source, pattern,
forced draws, the value the verifier saw and how often its own randomness draws that value),
the coin source of each interface, the controls' ratios (:data:`CONTROL_RATIO`,
:data:`DEGENERATE_RATIO`), and the private helpers the probes share: running a probe row by
row under a forcing (``run_probe``), judging its rows (``row_problem``, ``first_problem``,
``token_problem``) and building its results (``probe_spec``, ``failed_result``, ``inconclusive_result``,
``raised_result``; a failure under a forcing carries the forced value's probability as its
severity). Imports :mod:`spectr_gbv.validate.coins`, ``isolation``, ``checks.structural``,
``interfaces`` and ``report``; never the probes (which import this module), and torch only
lazily. The search for the forced draw and its confirmation are in
:mod:`spectr_gbv.validate.probes.search`.

Coin sources (:mod:`spectr_gbv.validate.coins`): generic and batched, a numpy Generator whose
64-bit output number ``i`` is forced (``random()`` there is 0.0 or ``1 - 2**-53``, and the
float32 draws ``2i, 2i + 1`` are 0.0 or ``1 - 2**-24``); hf and the torch interfaces, a torch
CPU RNG state whose 32-bit outputs are forced to a word pattern (``Adapter.emit(...,
torch_state=...)``); chain, the supplied uniforms (column 0, then every column).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import numpy as np
from scipy.stats import binomtest

import spectr_gbv.validate.coins as coins
from spectr_gbv.validate.checks.structural import failure_result
from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.interfaces.outputs import Emitted
from spectr_gbv.validate.isolation.failures import VerifierFailure
from spectr_gbv.validate.report.results import CheckResult, severity_phrase

#: ``p/q`` of the zero-coin control's draft token (exact in float32 and float64).
CONTROL_RATIO = 2.0**-30
#: ``p/q`` of the degenerate-residual probe's draft token: below the largest coin of every dtype
#: (bfloat16: ``1 - 2**-8``) and exact in each, so the largest coin rejects it, and so does a coin of
#: 0 under the rule ``reject when u <= 1 - p/q``; ordinary coins reject it with probability ``2**-7``.
DEGENERATE_RATIO = 1.0 - 2.0**-7


# ------------------------------------------------------------------------------ coin forcing
@dataclasses.dataclass(frozen=True)
class Forcing:
    """One way of forcing the acceptance coin of position 0.

    Attributes
    ----------
    source : str
        ``"numpy"`` (the ``rng`` Generator passed to the verifier), ``"torch"`` (the torch CPU
        RNG state installed by ``Adapter.emit(..., torch_state=...)``) or ``"chain"`` (the
        supplied uniforms).
    which : str
        ``"zero"`` or ``"max"``; torch: a pattern of :data:`spectr_gbv.validate.coins.WORDS`
        (``"zero"``, ``"max"``, ``"high"``, ``"wrap"``).
    index : int or None
        numpy: the 64-bit output forced (``random()`` draw number). torch: the first 32-bit
        mt19937 output forced. chain: 0 (uniform column 0 only) or None (every column).
    count : int
        torch: outputs ``index .. index + count - 1`` are forced (a range while searching; 1 for
        a float32 / bfloat16 / float16 draw, 2 for a float64 draw). 1 otherwise.
    seen : str or None
        The dtype of the coin as the verifier used it, confirmed by which forcings decided the
        control (:mod:`spectr_gbv.validate.probes.search`); None when not established.
    """

    source: str
    which: str
    index: int | None
    count: int = 1
    seen: str | None = None

    @property
    def dtype(self) -> str:
        """The confirmed dtype; else float32 for a single torch output and the chain's largest coin, float64."""
        if self.seen is not None:
            return self.seen
        if (self.source == "torch" and self.count == 1) or (self.source == "chain" and self.which == "max"):
            return "float32"
        return "float64"

    @property
    def value(self) -> float:
        """The forced coin in :attr:`dtype` (chain ``"max"``: ``1 - 2**-24``, exact in float32 and float64)."""
        if self.source == "torch":
            return coins.torch_word_value(self.which, self.dtype)
        return coins.coin_value(self.which, "float32" if self.source == "chain" and self.which == "max" else "float64")

    @property
    def probability(self) -> float:
        """How often the verifier's own randomness draws :attr:`value`: the severity of a failure it causes.

        chain: assumes the caller draws float64 uniforms.
        """
        if self.source == "chain":
            return 2.0**-53 if self.which == "zero" else 2.0**-24
        return coins.coin_probability(self.value, self.dtype)

    def describe(self) -> str:
        """One phrase: what was forced, its value and dtype."""
        v = self.value
        if self.source == "numpy":
            v32 = coins.coin_value(self.which, "float32")
            i = self.index or 0
            return (
                f"draw index {i} of rng forced (64-bit output number {i}: random() = {v!r}, float64; "
                f"random(dtype=float32) draws {2 * i}, {2 * i + 1} = {v32!r})"
            )
        if self.source == "torch":
            i = self.index or 0
            outs = f"output {i}" if self.count == 1 else f"outputs {i}..{i + self.count - 1}"
            what = "" if self.seen is None else ", dtype confirmed by the controls"
            if self.count == 2 and self.seen == "float64":
                draw = f"float64 draw {i // 2}"
            elif self.count == 1:
                draw = f"draw index {i}"
            else:
                draw = "a range of draws"
            return (
                f"{draw} of torch's CPU generator forced ({outs} = word {coins.WORDS[self.which]:#010x}, "
                f"{self.which!r}: torch.rand {self.dtype} uniform = {v!r}{what})"
            )
        cols = "u[b, 0]" if self.index == 0 else "every u[b, t]"
        return f"supplied uniforms {cols} = {v!r} ({'float64, exact in float32' if self.which == 'max' else 'float64'})"

    def replay(self, row_seed: int) -> str:
        """How to rebuild the coin source of a row (a Python expression)."""
        if self.source == "numpy":
            return (
                f"rng = spectr_gbv.validate.coins.numpy_coin_generator({self.which!r}, {self.index}, seed={row_seed})"
            )
        if self.source == "torch":
            i = self.index or 0
            return (
                f"torch.set_rng_state(spectr_gbv.validate.coins.torch_words_state({self.which!r}, "
                f"range({i}, {i + self.count}), seed={row_seed}))"
            )
        return "the uniforms listed under 'uniforms'"

    def state(self, row_seed: int) -> Any:
        """The coin source of a row: a numpy Generator (numpy) or a torch RNG state (torch); None for chain."""
        if self.source == "numpy":
            return coins.numpy_coin_generator(self.which, self.index or 0, row_seed)
        if self.source == "torch":
            i = self.index or 0
            return coins.torch_words_state(self.which, range(i, i + self.count), row_seed)
        return None

    def spec(self, row_seed: int) -> dict[str, Any]:
        """JSON fields recorded in a probe's instance spec (``seed``: the row's, None for chain)."""
        return {
            "source": self.source,
            "which": self.which,
            "index": self.index,
            "count": self.count,
            "value": self.value,
            "dtype": self.dtype,
            "dtype_confirmed": self.seen is not None,
            "probability": self.probability,
            "seed": None if self.source == "chain" else row_seed,
            "replay": self.replay(row_seed),
        }


def probe_coin_source(adapter: Adapter) -> str:
    """Where a verifier's coins come from: ``"chain"``, ``"torch"`` or ``"numpy"``.

    chain, chain_torch: the supplied uniforms; hf, generic_torch, batched_torch: a torch CPU
    generator (``torch_state``); generic, batched: the numpy ``rng``. An adapter attribute
    ``coin_source`` overrides.
    """
    declared = getattr(adapter, "coin_source", None)
    if declared in ("numpy", "torch", "chain"):
        return str(declared)
    if takes_uniforms(adapter):
        return "chain"
    return "torch" if adapter.interface == "hf" or adapter.interface.endswith("_torch") else "numpy"


def takes_uniforms(adapter: Adapter) -> bool:
    """Whether the verifier is handed uniforms (the chain interfaces)."""
    return adapter.interface.startswith("chain")


def takes_torch_state(adapter: Adapter) -> bool:
    """Whether the adapter's ``emit`` accepts a ``torch_state`` keyword (or any keyword)."""
    try:
        params = inspect.signature(adapter.emit).parameters
    except (TypeError, ValueError):
        return False
    return "torch_state" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def run_probe(
    adapter: Adapter, drafts: np.ndarray, q: np.ndarray, p: np.ndarray, forcing: Forcing | None, seed: int
) -> tuple[Emitted, np.ndarray | None]:
    """Run a probe: one call per row (row b's coin source seeded ``seed + b``), one batch for chain.

    Returns the outputs and, for chain, the uniforms supplied.

    Raises
    ------
    VerifierRaised, VerifierTimedOut
    """
    B, _, L = drafts.shape
    if takes_uniforms(adapter):
        u = np.random.default_rng([seed, 5]).random((B, L + 1))
        if forcing is not None:
            if forcing.index == 0:
                u[:, 0] = forcing.value
            else:
                u[:] = forcing.value
        return adapter.emit(drafts, q, p, np.random.default_rng(seed), u), u
    batches = []
    for b in range(B):
        batch: dict[str, Any] = {"drafts": drafts[b : b + 1], "draft_probs": q[b : b + 1], "target_probs": p[b : b + 1]}
        if forcing is not None and forcing.source == "numpy":
            batch["rng"] = forcing.state(seed + b)
        else:
            batch["rng"] = np.random.default_rng([seed, b])
        if forcing is not None and forcing.source == "torch":
            batch["torch_state"] = forcing.state(seed + b)
        batches.append(batch)
    many = getattr(adapter, "emit_many", None)
    parts = many(batches) if many is not None else [adapter.emit(**batch) for batch in batches]
    em = Emitted(
        np.concatenate([e.tokens for e in parts]),
        np.concatenate([e.lengths for e in parts]),
        {b: e.problems[0] for b, e in enumerate(parts) if 0 in e.problems},
    )
    return em, None


def probe_spec(name: str, drafts: np.ndarray, q: np.ndarray, p: np.ndarray, **extra: Any) -> dict[str, Any]:
    """A probe's instance spec: the arrays of one row (``drafts`` [K, L], ``q`` [K, L, V], ``p`` [K, L+1, V])."""
    K, L = drafts.shape
    return {
        "kind": "probe",
        "name": name,
        "n": int(q.shape[-1]),
        "L": int(L),
        "K": int(K),
        "drafts": drafts.tolist(),
        "draft_probs": q.tolist(),
        "target_probs": p.tolist(),
        **extra,
    }


def tile_row(row: np.ndarray, B: int, K: int, T: int) -> np.ndarray:
    """One probability row ``[V]`` repeated to float64 ``[B, K, T, V]`` (a probe's q or p arrays)."""
    return np.tile(np.asarray(row, dtype=np.float64), (B, K, T, 1))


def token_problem(em: Emitted, b: int, V: int, max_len: int) -> tuple[str, str] | None:
    """Why row ``b``'s output is unreadable, has an id outside ``0..V-1`` or more than ``max_len`` tokens.

    Returns
    -------
    tuple of str or None
        ``(diagnosis, message)``, or None when the tokens are readable, in range and not too many.
    """
    if b in em.problems:
        return em.problems[b]
    toks = em.tokens[b, : em.lengths[b]]
    if np.any((toks < 0) | (toks >= V)):
        return "nan_or_out_of_vocab", f"emitted {toks.tolist()} (an id outside 0..{V - 1})"
    if em.lengths[b] > max_len:
        return "bad_output", f"emitted {toks.tolist()}, more than {max_len} tokens"
    return None


def row_problem(em: Emitted, b: int, drafts: np.ndarray, p: np.ndarray) -> tuple[str, str] | None:
    """Invalid output of row b: unreadable, out of range, not a draft prefix plus one, or p = 0.

    The emitted tokens but the last must be a prefix of some draft k of row b, and every
    emitted token must have positive target probability along that draft (``p[b, k]``).
    """
    L, V = drafts.shape[-1], p.shape[-1]
    bad = token_problem(em, b, V, L + 1)
    if bad is not None:
        return bad
    toks = em.tokens[b, : em.lengths[b]]
    if em.lengths[b] < 1:
        return "bad_output", "emitted no token"
    n = len(toks) - 1
    ks = [k for k in range(drafts.shape[1]) if np.array_equal(toks[:-1], drafts[b, k, :n])]
    if not ks:
        which = (
            f"the draft {drafts[b, 0].tolist()}"
            if all(np.array_equal(d, drafts[b, 0]) for d in drafts[b])
            else f"any draft of {drafts[b].tolist()}"
        )
        return "bad_output", f"emitted {toks.tolist()}: not a prefix of {which} plus one token"
    for j, t in enumerate(toks.tolist()):
        if p[b, ks[0], j, t] == 0:
            return (
                "zero_probability_token",
                f"emitted {toks.tolist()}: token {t} at position {j} has target probability 0",
            )
    return None


def first_problem(
    em: Emitted, drafts: np.ndarray, p: np.ndarray, rows: range | None = None
) -> tuple[int, tuple[str, str]] | None:
    """The first row (of ``rows``, default all) with an invalid output (:func:`row_problem`).

    Returns
    -------
    tuple or None
        ``(b, (diagnosis, message))``, or None when every row is valid.
    """
    for b in rows if rows is not None else range(len(drafts)):
        bad = row_problem(em, b, drafts, p)
        if bad is not None:
            return b, bad
    return None


def failed_result(
    name: str,
    b: int,
    diag_msg: tuple[str, str],
    what: str,
    drafts: np.ndarray,
    q: np.ndarray,
    p: np.ndarray,
    n: int,
    forcing: Forcing | None,
    seed: int,
    u: np.ndarray | None,
    advisory: bool = False,
) -> CheckResult:
    """A failed robustness check for row ``b`` of a probe, with the row as its instance spec.

    ``diag_msg`` is ``(diagnosis, message)``, ``what`` the situation (detail ``"{what}: {message}"``),
    ``n`` the sample size; with ``forcing`` the spec records the coin and the severity is the forced
    value's probability, with ``u`` (chain) the uniforms of the row. ``advisory`` marks a check outside the verdict.
    """
    diag, msg = diag_msg
    extra: dict[str, Any] = {}
    if forcing is not None:
        extra["coin"] = forcing.spec(seed + b)
    if u is not None:
        extra["uniforms"] = u[b].tolist()
    res = CheckResult(
        name,
        "robustness",
        False,
        sample_size=n,
        instance=probe_spec(name, drafts[b], q[b], p[b], **extra),
        detail=f"{what}: {msg}" + (f"; {forcing.describe()}" if forcing is not None else ""),
        diagnosis=diag,
        advisory=advisory,
    )
    return with_forced_severity(res, forcing)


def with_observed_rate(res: CheckResult, k: int, n: int, confidence: float = 0.95) -> CheckResult:
    """``res`` with the observed failure rate ``k/n`` under ordinary randomness as its severity.

    The note gives the count and the two-sided Clopper-Pearson interval (``scipy.stats.binomtest``).
    """
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    note = (
        f"{severity_phrase(k / n)}: {k}/{n} calls failed "
        f"({confidence:.0%} Clopper-Pearson interval {ci.low:.3g}..{ci.high:.3g})"
    )
    return dataclasses.replace(res, severity=k / n, severity_note=note)


def with_forced_severity(res: CheckResult, forcing: Forcing | None) -> CheckResult:
    """``res`` with the severity of a failure caused by ``forcing``'s coin (unchanged without one)."""
    if forcing is None or res.passed is not False:
        return res
    prob = forcing.probability
    dtype = forcing.dtype if forcing.seen is not None or forcing.source != "torch" else f"{forcing.dtype}, assumed"
    note = f"{severity_phrase(prob)}: the forced coin {forcing.value!r} ({dtype}) has probability {prob:.3g} per draw"
    if forcing.source == "chain":
        note += " when the caller draws float64 uniforms"
    return dataclasses.replace(res, severity=prob, severity_note=note)


def inconclusive_result(name: str, spec: dict[str, Any], n: int, why: str) -> CheckResult:
    """An inconclusive robustness check (``passed`` None): the coin could not be forced, for ``why``."""
    return CheckResult(
        name, "robustness", None, sample_size=n, instance=spec, detail=f"inconclusive: could not force the coin ({why})"
    )


def raised_result(
    name: str, err: VerifierFailure, spec: dict[str, Any], what: str, forcing: Forcing | None = None
) -> CheckResult:
    """A failed robustness check for a verifier that raised (or hung) on a probe, with ``forcing``'s severity."""
    res = failure_result(name, "robustness", err, spec)
    return with_forced_severity(dataclasses.replace(res, detail=f"{what}: {res.detail}"), forcing)


__all__ = [
    "CONTROL_RATIO",
    "DEGENERATE_RATIO",
    "Forcing",
    "failed_result",
    "first_problem",
    "inconclusive_result",
    "probe_coin_source",
    "probe_spec",
    "raised_result",
    "row_problem",
    "run_probe",
    "takes_torch_state",
    "takes_uniforms",
    "tile_row",
    "token_problem",
    "with_forced_severity",
    "with_observed_rate",
]
