"""Searching for the draw that is a verifier's acceptance coin, and confirming it cannot be anything else.

A probe that forces a coin (:mod:`spectr_gbv.validate.probes.coin_probes`) hands this module a
**control**: a valid input whose outcome at position 0 only the acceptance coin decides, a
function ``fires(forcing)`` that runs it (True when the control came out the way the forced
coin predicts), the control's outcome under ordinary coins, and the coin values that make it
fire in each orientation (``predicates``: a verifier that accepts when ``u < p/q`` and one that
rejects when ``u <= 1 - p/q``, as LitGPT does, fire on opposite extremes). :func:`find_forcing`

1. returns nothing when the control fires under ordinary coins already (a verifier that does
   not compare a coin with ``p/q``, such as sample-and-match, cannot be confirmed: the probe is
   then inconclusive, never "confirmed");
2. tries each pattern in turn: numpy, the 64-bit outputs ``0 .. NUMPY_DRAWS - 1`` one at a time
   (a PCG64 state fixes one output); torch, output 0 alone, then every output
   ``0 .. TORCH_OUTPUTS - 1`` at once (the mt19937 state fixes 623 outputs), narrowed by
   bisection to one output (a float32, bfloat16 or float16 draw) or an aligned pair (a float64
   draw); chain, uniform column 0, then every column;
3. confirms the dtype (torch): the control runs under each word pattern of
   :data:`spectr_gbv.validate.coins.WORDS` at the found output, and the set that fires must be the
   one some dtype and orientation predicts from the values those words give in that dtype; no
   match, no confirmation. So the forced value a report names is the one the verifier saw (a
   bfloat16 verifier sees ``1 - 2**-8``, never the float32 ``1 - 2**-24``, which it rounds to 1
   and then to 0).

Raising under a forcing counts as firing while narrowing (the caller reruns the single forcing
and reports the crash); a timeout ends the search. :func:`forced_rejection` is the probe body
shared by the probes whose forced rejection meets an all-zero residual.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

import spectr_gbv.validate.coins as coins
from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.interfaces.outputs import Emitted
from spectr_gbv.validate.isolation.failures import VerifierFailure, VerifierRaised, VerifierTimedOut
from spectr_gbv.validate.probes.runner import (
    Forcing,
    failed_result,
    first_problem,
    inconclusive_result,
    probe_coin_source,
    probe_spec,
    raised_result,
    run_probe,
    takes_torch_state,
    with_observed_rate,
)
from spectr_gbv.validate.report.results import CheckResult

#: numpy: 64-bit outputs tried one at a time (PCG64 fixes one output per state).
NUMPY_DRAWS = 16
#: torch: mt19937 outputs forced at once before narrowing (even, below 623).
TORCH_OUTPUTS = 622

#: A control's firing rule per orientation: coin value -> whether the control fires.
Predicates = dict[str, Callable[[float], bool]]


@dataclasses.dataclass
class Found:
    """The outcome of :func:`find_forcing`.

    Attributes
    ----------
    forcing : Forcing or None
        The confirmed forcing (``seen`` set where the dtype was confirmed), or None.
    orientation : str or None
        The key of ``predicates`` the confirmation matched (torch) or whose rule fires at the
        forced value (numpy, chain); None when nothing was confirmed.
    tried : list of str
        Descriptions of the forcings that did not fire.
    why : str
        Why nothing was confirmed (empty when ``forcing`` is set).
    runs : int
        Control runs made.
    """

    forcing: Forcing | None = None
    orientation: str | None = None
    tried: list[str] = dataclasses.field(default_factory=list)
    why: str = ""
    runs: int = 0


def find_forcing(
    adapter: Adapter,
    patterns: tuple[str, ...],
    fires: Callable[[Forcing], bool],
    ordinary_fires: bool,
    predicates: Predicates,
) -> Found:
    """Find and confirm a forcing of position 0's acceptance coin (module docstring).

    Parameters
    ----------
    adapter : Adapter
        The verifier's adapter (its coin source: ``runner.probe_coin_source``).
    patterns : tuple of str
        The extremes to try, in order (``"zero"``, ``"max"``; torch also ``"high"``, the
        largest bfloat16 coin). numpy and chain use ``"zero"`` and ``"max"`` only.
    fires : callable
        ``fires(forcing) -> bool``: the control run under the forcing came out as the forced
        coin predicts. May raise :class:`VerifierFailure`.
    ordinary_fires : bool
        Whether the control came out that way under ordinary coins.
    predicates : dict
        Orientation name -> ``value -> bool``: the coin values that make the control fire.

    Returns
    -------
    Found

    Raises
    ------
    VerifierTimedOut, VerifierExited
        The verifier hung or ended its process.
    """
    found = Found()
    if ordinary_fires:
        found.why = (
            "the control came out the same under ordinary coins as under a forced one, so a forced coin cannot be "
            "told from the verifier's own behaviour (a verifier without an acceptance coin, sample-and-match for "
            "example)"
        )
        return found
    found.why = unavailable(adapter)
    if found.why:
        return found
    source = probe_coin_source(adapter)

    def safe(f: Forcing) -> bool:
        found.runs += 1
        try:
            return bool(fires(f))
        except VerifierRaised:
            return True

    for which in patterns:
        if source == "chain":
            if which not in ("zero", "max"):
                continue
            for f in (Forcing("chain", which, 0), Forcing("chain", which, None)):
                if safe(f):
                    found.forcing, found.orientation = f, _orientation(f, predicates)
                    return found
                found.tried.append(f.describe())
        elif source == "numpy":
            if which not in ("zero", "max"):
                continue
            for i in range(NUMPY_DRAWS):
                f = Forcing("numpy", which, i)
                if safe(f):
                    found.forcing, found.orientation = f, _orientation(f, predicates)
                    return found
            found.tried.append(f"rng draws 0..{NUMPY_DRAWS - 1} forced to {which!r} one at a time")
        else:
            hit = _narrow(which, safe)
            if hit is None:
                found.tried.append(f"torch outputs 0..{TORCH_OUTPUTS - 1} forced to word {which!r}")
                continue
            seen, orientation = _confirm_dtype(hit, safe, predicates)
            if seen is None:
                found.tried.append(
                    f"{hit.describe()}: fired, but the words that fire match no dtype's coin (not confirmed)"
                )
                continue
            found.forcing = dataclasses.replace(hit, seen=seen)
            found.orientation = orientation
            return found
    found.why = "no forcing tried decided the control: " + "; ".join(found.tried)
    return found


def unavailable(adapter: Adapter) -> str:
    """Why no coin of ``adapter`` can be forced (empty string when one can).

    Parameters
    ----------
    adapter : Adapter

    Returns
    -------
    str
        ``"the adapter cannot install a torch RNG state ..."`` or ``"torch is not installed"``
        for a verifier drawing from torch; empty otherwise.
    """
    if probe_coin_source(adapter) != "torch":
        return ""
    if not takes_torch_state(adapter):
        return "the adapter cannot install a torch RNG state (Adapter.emit takes no torch_state)"
    try:
        import torch  # noqa: F401, PLC0415 - only to know whether torch states can be built
    except ImportError:
        return "torch is not installed"
    return ""


def _narrow(which: str, safe: Callable[[Forcing], bool]) -> Forcing | None:
    """torch: output 0 alone, else every output at once narrowed by bisection; None when nothing fires."""
    single = Forcing("torch", which, 0, 1)
    if safe(single):
        return single
    lo, hi = 0, TORCH_OUTPUTS
    if not safe(Forcing("torch", which, lo, hi - lo)):
        return None
    while hi - lo > 2:
        mid = lo + (hi - lo) // 4 * 2  # an even split keeps float64 pairs together
        if safe(Forcing("torch", which, lo, mid - lo)):
            hi = mid
        elif safe(Forcing("torch", which, mid, hi - mid)):
            lo = mid
        else:  # needs outputs on both sides: report the range
            return Forcing("torch", which, lo, hi - lo)
    for i in range(lo, hi):
        if i != 0 and safe(Forcing("torch", which, i, 1)):
            return Forcing("torch", which, i, 1)
    return Forcing("torch", which, lo, hi - lo)


def _failed_run(out: tuple[Emitted, np.ndarray | None] | VerifierFailure, drafts: np.ndarray, p: np.ndarray) -> bool:
    """Whether a run raised or emitted an invalid output."""
    return isinstance(out, VerifierFailure) or first_problem(out[0], drafts, p) is not None


def _orientation(f: Forcing, predicates: Predicates) -> str | None:
    """The first orientation whose rule fires at ``f``'s value (numpy, chain: the value is known)."""
    return next((name for name, pred in predicates.items() if pred(f.value)), None)


def _confirm_dtype(
    hit: Forcing, safe: Callable[[Forcing], bool], predicates: Predicates
) -> tuple[str | None, str | None]:
    """The (dtype, orientation) whose predicted firing set matches the one seen at ``hit``'s outputs."""
    if hit.count > 2:
        return None, None
    dtypes = ("float64",) if hit.count == 2 else ("float32", "bfloat16", "float16")
    seen = {w for w in coins.WORDS if w == hit.which or safe(dataclasses.replace(hit, which=w))}
    for dtype in dtypes:
        values = {w: coins.torch_word_value(w, dtype) for w in coins.WORDS}
        for orientation, pred in predicates.items():
            if {w for w, v in values.items() if pred(v)} == seen:
                return dtype, orientation
    return None, None


def forced_rejection(
    adapter: Adapter,
    name: str,
    arrays: tuple[np.ndarray, np.ndarray, np.ndarray],
    what: str,
    patterns: tuple[str, ...],
    predicates: dict[str, Callable[[float], bool]],
    seed: int,
    rejects: bool = True,
) -> CheckResult:
    """A probe of a valid input whose forced rejection at position 0 meets an all-zero residual.

    Runs the input with ordinary coins (a raise or an invalid output there fails at once), then
    :func:`find_forcing` with the control "every row rejects (or the output is invalid)";
    judges the confirmed forcing's run.

    Parameters
    ----------
    adapter : Adapter
    name : str
        Check name.
    arrays : (drafts [B, K, L] int64, q [B, K, L, V], p [B, K, L+1, V])
        Every row the same.
    what : str
        The input in words (for the detail).
    patterns, predicates
        As :func:`find_forcing`.
    seed : int
        Row b's coin source is seeded ``seed + b``; ordinary coins ``seed + 2000``.
    rejects : bool
        True: the control fires when every row rejects (or an output is invalid). False: only
        an invalid output or a raise fires it (for inputs no correct verifier rejects, where
        only a failure can be found; the result is then a failure or not useful).

    Returns
    -------
    CheckResult
        Pass, fail (severity: the forced coin's probability), or inconclusive.

    Raises
    ------
    VerifierTimedOut, VerifierExited
    """
    drafts, q, p = arrays
    B, L = len(drafts), drafts.shape[-1]
    spec0 = probe_spec(name, drafts[0], q[0], p[0])
    why = unavailable(adapter)
    if why:
        return inconclusive_result(name, spec0, 0, why)
    try:
        em0, u0 = run_probe(adapter, drafts, q, p, None, seed + 2000)
    except VerifierFailure as err0:
        why = "raises on this valid input (rows summing to 1 within 1e-9) even with ordinary coins"
        return raised_result(name, err0, spec0, why)
    bad = first_problem(em0, drafts, p)
    if bad is not None:
        res = failed_result(name, *bad, what + " with ordinary coins", drafts, q, p, B, None, seed + 2000, u0)
        k = sum(first_problem(em0, drafts, p, range(b, b + 1)) is not None for b in range(B))
        return with_observed_rate(res, k, B)
    runs: dict[Forcing, tuple[Emitted, np.ndarray | None] | VerifierFailure] = {}

    def fires(f: Forcing) -> bool:
        try:
            runs[f] = run_probe(adapter, drafts, q, p, f, seed)
        except VerifierTimedOut:
            raise
        except VerifierFailure as err:
            runs[f] = err
            raise
        em = runs[f][0]
        bad = first_problem(em, drafts, p) is not None
        return bad or (rejects and all(em.lengths[b] < L + 1 for b in range(B)))

    ordinary = rejects and sum(int(em0.lengths[b] < L + 1) for b in range(B)) * 2 >= B
    found = find_forcing(adapter, patterns, fires, ordinary, predicates)
    calls = B + B * found.runs
    f = found.forcing
    if f is None:  # unconfirmed, but one forced draw (a value the verifier can draw) that failed still fails
        f = next((g for g, out in runs.items() if g.count == 1 and _failed_run(out, drafts, p)), None)
        if f is None:
            return inconclusive_result(name, spec0, calls, found.why)
    spec = probe_spec(name, drafts[0], q[0], p[0], coin=f.spec(seed))
    out = runs.get(dataclasses.replace(f, seen=None))
    if out is None:  # not run on its own while narrowing: run it
        try:
            out = run_probe(adapter, drafts, q, p, f, seed)
        except VerifierTimedOut:
            raise
        except VerifierFailure as err:
            out = err
        calls += B
    if isinstance(out, VerifierFailure):
        return raised_result(
            name,
            out,
            spec,
            "crashes on an all-zero residual (a valid input: it arises when p and q nearly agree and the coin "
            f"rejects; with ordinary coins, which accept, it runs; {f.describe()})",
            f,
        )
    bad = first_problem(out[0], drafts, p)
    if bad is not None:
        if out[0].lengths[bad[0]] == L + 1:  # no rejection: the forced value broke the bonus draw
            what += "; the draft was accepted and the forced draw broke the bonus token's draw"
        return failed_result(name, *bad, what, drafts, q, p, calls, f, seed, out[1])
    return CheckResult(
        name,
        "robustness",
        True,
        sample_size=calls,
        instance=spec,
        detail=(
            f"{what}: all {B} rows rejected and emitted a valid token; coin confirmed: {f.describe()}, "
            f"orientation {found.orientation or 'accept when u < p/q'} ({found.runs} run(s) under forcings)"
        ),
    )


__all__ = ["NUMPY_DRAWS", "TORCH_OUTPUTS", "Found", "find_forcing", "forced_rejection", "unavailable"]
