"""Forcing a probe's coin and confirming it fired: the machinery behind :mod:`spectr_gbv.validate.probes`.

Holds :class:`Forcing` (one way of forcing position 0's acceptance coin), the coin source of
each interface, the draw indices tried (:data:`FORCE_INDICES`), the controls' ratios
(:data:`CONTROL_RATIO`, :data:`DEGENERATE_RATIO`), and the private helpers the probes share:
running a probe row by row under a forcing (``_emit``), judging its rows (``_row_problem``,
``_first_problem``, ``_valid_tokens``) and building its results (``_spec``, ``_failed``,
``_inconclusive``, ``_raised``). Imports :mod:`spectr_gbv.validate.coins`, ``isolation``,
``checks.structural``, ``interfaces`` and ``report``; never the probes
(which import this module), and torch only lazily.

**Forcing a coin, and proving it was forced.** ``zero_coin`` and ``degenerate_residual`` need
the acceptance coin of position 0 to be exactly 0, or the largest uniform below 1. The coin
source depends on the interface (:mod:`spectr_gbv.validate.coins`): generic, a numpy
Generator whose 64-bit output number ``i`` is forced (``random()`` there is 0.0 or
``1 - 2**-53``, and the float32 draws ``2i, 2i + 1`` are 0.0 or ``1 - 2**-24``); hf, a torch
CPU RNG state whose float32 uniform number ``i`` is 0.0 or ``1 - 2**-24`` (``Adapter.emit(...,
torch_state=...)``); chain, the supplied uniforms (column 0, then every column). Draw indices
``i = 0..3`` are tried in turn, each first on a **control** whose outcome shows whether the
forced value decided position 0:

* zero coin: the draft token has ``p/q = 2**-30``; a correct verifier accepts it iff its coin
  is below ``2**-30`` (ordinary coins: probability about 1e-9; float32 torch coins: 2**-24),
  and the token cannot come out of the residual or the target row at a coin of 0. The probe
  proper (``p(x) = 0``) runs with the first forcing whose control accepted;
* degenerate residual: the input itself is the control: the draft token has ``p/q = 1 -
  2**-21``, which the largest coin rejects and an ordinary coin accepts with probability
  ``1 - 2**-21``; a forcing under which the verifier accepts did not reach the coin.

When no forcing is confirmed the probe is inconclusive (``passed=None``), never a pass; the
detail names the confirmed draw index, the coin value and its dtype.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import numpy as np

import spectr_gbv.validate.coins as coins
from spectr_gbv.validate.checks.structural import failure_result
from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.interfaces.outputs import Emitted
from spectr_gbv.validate.isolation.failures import VerifierFailure
from spectr_gbv.validate.report.results import CheckResult

#: Draw indices tried, in order, when forcing a coin drawn from a generator (numpy or torch).
FORCE_INDICES: tuple[int, ...] = (0, 1, 2, 3)
#: ``p/q`` of the zero-coin control's draft token (exact in float32 and float64).
CONTROL_RATIO = 2.0**-30
#: ``p/q`` of the degenerate-residual probe's draft token (below the largest float32 coin).
DEGENERATE_RATIO = 1.0 - 2.0**-21


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
        ``"zero"`` or ``"max"``.
    index : int or None
        numpy / torch: the 0-based draw index forced. chain: 0 (uniform column 0 only) or None
        (every column).
    """

    source: str
    which: str
    index: int | None

    @property
    def dtype(self) -> str:
        """``"float32"`` for torch coins and the chain's largest coin, ``"float64"`` otherwise."""
        if self.source == "torch" or (self.source == "chain" and self.which == "max"):
            return "float32"
        return "float64"

    @property
    def value(self) -> float:
        """The forced coin (chain ``"max"``: ``1 - 2**-24``, exact in float32 and float64)."""
        return coins.coin_value(self.which, self.dtype)

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
            return f"draw index {self.index} of torch's CPU generator forced (torch.rand float32 uniform = {v!r})"
        cols = "u[b, 0]" if self.index == 0 else "every u[b, t]"
        return f"supplied uniforms {cols} = {v!r} ({'float64, exact in float32' if self.which == 'max' else 'float64'})"

    def replay(self, row_seed: int) -> str:
        """How to rebuild the coin source of a row (a Python expression)."""
        if self.source == "numpy":
            return (
                f"rng = spectr_gbv.validate.coins.numpy_coin_generator({self.which!r}, {self.index}, seed={row_seed})"
            )
        if self.source == "torch":
            return (
                f"torch.set_rng_state(spectr_gbv.validate.coins.torch_coin_state({self.which!r}, {self.index}, "
                f"seed={row_seed}))"
            )
        return "the uniforms listed under 'uniforms'"

    def spec(self, row_seed: int) -> dict[str, Any]:
        """JSON fields recorded in a probe's instance spec (``seed``: the row's, None for chain)."""
        return {
            "source": self.source,
            "which": self.which,
            "index": self.index,
            "value": self.value,
            "dtype": self.dtype,
            "seed": None if self.source == "chain" else row_seed,
            "replay": self.replay(row_seed),
        }


def _coin_source(adapter: Adapter) -> str:
    """Where a verifier's coins come from: ``"chain"``, ``"torch"`` or ``"numpy"``.

    chain, chain_torch: the supplied uniforms; hf, generic_torch, batched_torch: a torch CPU
    generator (``torch_state``); generic, batched: the numpy ``rng``. An adapter attribute
    ``coin_source`` overrides.
    """
    declared = getattr(adapter, "coin_source", None)
    if declared in ("numpy", "torch", "chain"):
        return str(declared)
    if _takes_uniforms(adapter):
        return "chain"
    return "torch" if adapter.interface == "hf" or adapter.interface.endswith("_torch") else "numpy"


def _takes_uniforms(adapter: Adapter) -> bool:
    """Whether the verifier is handed uniforms (the chain interfaces)."""
    return adapter.interface.startswith("chain")


def _takes_torch_state(adapter: Adapter) -> bool:
    try:
        params = inspect.signature(adapter.emit).parameters
    except (TypeError, ValueError):
        return False
    return "torch_state" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _candidates(adapter: Adapter, which: str) -> tuple[list[Forcing], str]:
    """Forcings to try in order, and why there are none (empty string otherwise)."""
    source = _coin_source(adapter)
    if source == "chain":
        return [Forcing("chain", which, 0), Forcing("chain", which, None)], ""
    if source == "torch":
        if not _takes_torch_state(adapter):
            return [], "the adapter cannot install a torch RNG state (Adapter.emit takes no torch_state)"
        try:
            import torch  # noqa: F401, PLC0415 - only to know whether torch states can be built
        except ImportError:
            return [], "torch is not installed"
    return [Forcing(source, which, i) for i in FORCE_INDICES], ""


def _emit(
    adapter: Adapter, drafts: np.ndarray, q: np.ndarray, p: np.ndarray, forcing: Forcing | None, seed: int
) -> tuple[Emitted, np.ndarray | None]:
    """Run a probe: one call per row (row b's coin source seeded ``seed + b``), one batch for chain.

    Returns the outputs and, for chain, the uniforms supplied.

    Raises
    ------
    VerifierRaised, VerifierTimedOut
    """
    B, _, L = drafts.shape
    if _takes_uniforms(adapter):
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
            batch["rng"] = coins.numpy_coin_generator(forcing.which, forcing.index or 0, seed + b)
        else:
            batch["rng"] = np.random.default_rng([seed, b])
        if forcing is not None and forcing.source == "torch":
            batch["torch_state"] = coins.torch_coin_state(forcing.which, forcing.index or 0, seed + b)
        batches.append(batch)
    many = getattr(adapter, "emit_many", None)
    parts = many(batches) if many is not None else [adapter.emit(**batch) for batch in batches]
    em = Emitted(
        np.concatenate([e.tokens for e in parts]),
        np.concatenate([e.lengths for e in parts]),
        {b: e.problems[0] for b, e in enumerate(parts) if 0 in e.problems},
    )
    return em, None


def _spec(name: str, drafts: np.ndarray, q: np.ndarray, p: np.ndarray, **extra: Any) -> dict[str, Any]:
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


def _tile(row: np.ndarray, B: int, K: int, T: int) -> np.ndarray:
    return np.tile(np.asarray(row, dtype=np.float64), (B, K, T, 1))


def _valid_tokens(em: Emitted, b: int, V: int, max_len: int) -> tuple[str, str] | None:
    if b in em.problems:
        return em.problems[b]
    toks = em.tokens[b, : em.lengths[b]]
    if np.any((toks < 0) | (toks >= V)):
        return "nan_or_out_of_vocab", f"emitted {toks.tolist()} (an id outside 0..{V - 1})"
    if em.lengths[b] > max_len:
        return "bad_output", f"emitted {toks.tolist()}, more than {max_len} tokens"
    return None


def _row_problem(em: Emitted, b: int, drafts: np.ndarray, p: np.ndarray) -> tuple[str, str] | None:
    """Invalid output of row b: unreadable, out of range, not a draft prefix plus one, or p = 0.

    Every draft of a probe row is the same and so are its target rows, so draft 0 and
    ``p[b, 0]`` stand for all.
    """
    L, V = drafts.shape[-1], p.shape[-1]
    bad = _valid_tokens(em, b, V, L + 1)
    if bad is not None:
        return bad
    toks = em.tokens[b, : em.lengths[b]]
    if em.lengths[b] < 1:
        return "bad_output", "emitted no token"
    if not np.array_equal(toks[:-1], drafts[b, 0, : len(toks) - 1]):
        return (
            "bad_output",
            f"emitted {toks.tolist()}: not a prefix of the draft {drafts[b, 0].tolist()} plus one token",
        )
    for j, t in enumerate(toks.tolist()):
        if p[b, 0, j, t] == 0:
            return (
                "zero_probability_token",
                f"emitted {toks.tolist()}: token {t} at position {j} has target probability 0",
            )
    return None


def _first_problem(
    em: Emitted, drafts: np.ndarray, p: np.ndarray, rows: range | None = None
) -> tuple[int, tuple[str, str]] | None:
    for b in rows if rows is not None else range(len(drafts)):
        bad = _row_problem(em, b, drafts, p)
        if bad is not None:
            return b, bad
    return None


def _failed(
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
    diag, msg = diag_msg
    extra: dict[str, Any] = {}
    if forcing is not None:
        extra["coin"] = forcing.spec(seed + b)
    if u is not None:
        extra["uniforms"] = u[b].tolist()
    return CheckResult(
        name,
        "robustness",
        False,
        sample_size=n,
        instance=_spec(name, drafts[b], q[b], p[b], **extra),
        detail=f"{what}: {msg}" + (f"; {forcing.describe()}" if forcing is not None else ""),
        diagnosis=diag,
        advisory=advisory,
    )


def _inconclusive(name: str, spec: dict[str, Any], n: int, why: str) -> CheckResult:
    return CheckResult(
        name, "robustness", None, sample_size=n, instance=spec, detail=f"inconclusive: could not force the coin ({why})"
    )


def _raised(name: str, err: VerifierFailure, spec: dict[str, Any], what: str) -> CheckResult:
    res = failure_result(name, "robustness", err, spec)
    return dataclasses.replace(res, detail=f"{what}: {res.detail}")


__all__ = ["CONTROL_RATIO", "DEGENERATE_RATIO", "FORCE_INDICES", "Forcing"]
