"""Structural checks: what every output must satisfy, whatever the randomness.

Every emitted output must be 1..L+1 token ids in ``0..V-1`` (no NaN), its first ``m - 1``
tokens a prefix of one of the drafts, every token of positive target probability given its
prefix (a lossless verifier never emits a token p gives probability 0), and a chain output
must be padded with -1 exactly after the emitted tokens. :class:`StructuralTally` checks this
on every output the harness sees (the statistical samples included) and reports one check per
property. The probes (inputs that trigger public bugs) are in
:mod:`spectr_gbv.validate.probes`.

Robustness: a verifier that raises or hangs (per-call limit of
:class:`~spectr_gbv.validate.isolation.guard.CallGuard`) yields a failed ``runs`` check (diagnosis
``raises`` / ``timeout``, :func:`failure_result`), never a crash of the harness.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spectr_gbv.validate.battery.instance import BatteryInstance
from spectr_gbv.validate.battery.tables import Tables
from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.interfaces.outputs import Emitted
from spectr_gbv.validate.isolation.failures import VerifierFailure, VerifierTimedOut
from spectr_gbv.validate.report.results import CheckResult


def classify(emitted: Emitted, drafts: np.ndarray, target_probs: np.ndarray) -> dict[int, tuple[str, str]]:
    """Rows whose output breaks a structural rule, with (diagnosis, message).

    Parameters
    ----------
    emitted : Emitted
        Outputs of a batch (rows already unreadable are in ``emitted.problems``).
    drafts : ndarray, shape [B, K, L], int64
    target_probs : ndarray, shape [B, K, L+1, V], float64

    Returns
    -------
    dict of int to (str, str)
        ``emitted.problems`` plus: ``nan_or_out_of_vocab`` (an id outside 0..V-1),
        ``bad_output`` (the first m-1 tokens are no draft's prefix), ``zero_probability_token``
        (a token of target probability 0 given its prefix).
    """
    B, K, L = drafts.shape
    V = target_probs.shape[-1]
    out = dict(emitted.problems)
    tok, lengths = emitted.tokens, emitted.lengths
    pos = np.arange(L + 1)[None, :]
    live = pos < lengths[:, None]
    oov = live & ((tok < 0) | (tok >= V))
    for b in np.flatnonzero(oov.any(axis=1)):
        if int(b) not in out:
            out[int(b)] = ("nan_or_out_of_vocab", f"emitted {tok[b, : lengths[b]].tolist()}: an id outside 0..{V - 1}")
    accepted = pos[:, :L] < (lengths[:, None] - 1)
    eq = (tok[:, None, :L] == drafts) | ~accepted[:, None, :]
    match = eq.all(axis=2)
    k_star = match.argmax(axis=1)
    for b in np.flatnonzero(~match.any(axis=1) & (lengths > 0)):
        if int(b) not in out:
            out[int(b)] = (
                "bad_output",
                f"emitted {tok[b, : lengths[b]].tolist()}: the first {lengths[b] - 1} tokens are no draft's prefix "
                f"(drafts {drafts[b].tolist()})",
            )
    safe = np.clip(tok, 0, V - 1)
    rows = target_probs[np.arange(B), k_star]  # [B, L+1, V]
    probs = np.take_along_axis(rows, safe[:, :, None], axis=2)[:, :, 0]
    zero = live & (probs <= 0) & ~oov
    for b in np.flatnonzero(zero.any(axis=1)):
        if int(b) not in out:
            t = int(np.argmax(zero[b]))
            out[int(b)] = (
                "zero_probability_token",
                f"emitted {tok[b, : lengths[b]].tolist()}: token {int(tok[b, t])} at position {t} has target "
                "probability 0 given its prefix",
            )
    return out


_PROPERTIES = {
    # check name -> (diagnoses it collects, description)
    "ids_in_range": (("nan_or_out_of_vocab",), "every emitted id in 0..V-1, no NaN"),
    "output_format": (("bad_output",), "1..L+1 tokens, a draft prefix plus one token, -1 padding to the end"),
    "no_zero_probability_token": (("zero_probability_token",), "no emitted token of target probability 0"),
}


@dataclass
class StructuralTally:
    """Counts structural violations over every output the harness collects.

    Attributes
    ----------
    outputs : int
        Outputs inspected.
    first : dict of str to (str, dict)
        Diagnosis -> (message, instance spec) of its first occurrence.
    counts : dict of str to int
        Diagnosis -> number of violating outputs.
    """

    outputs: int = 0
    first: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, bi: BatteryInstance, drafts: np.ndarray, problems: dict[int, tuple[str, str]], total: int) -> None:
        """Record ``problems`` (from :func:`classify`) of a batch of ``total`` outputs on ``bi``."""
        self.outputs += total
        for b, (diag, msg) in sorted(problems.items()):
            self.counts[diag] = self.counts.get(diag, 0) + 1
            if diag not in self.first:
                self.first[diag] = (msg, bi.spec(drafts=drafts[b].tolist()))

    def results(self) -> list[CheckResult]:
        """One check per property (passed when no output violated it)."""
        out = []
        for name, (diags, what) in _PROPERTIES.items():
            bad = [d for d in diags if self.counts.get(d)]
            if bad:
                d = bad[0]
                msg, spec = self.first[d]
                out.append(
                    CheckResult(
                        name,
                        "structural",
                        False,
                        statistic=float(self.counts[d]),
                        sample_size=self.outputs,
                        instance=spec,
                        detail=f"{self.counts[d]} of {self.outputs} outputs violate '{what}'; first: {msg}",
                        diagnosis=d,
                    )
                )
            else:
                passed = True if self.outputs else None
                out.append(
                    CheckResult(
                        name,
                        "structural",
                        passed,
                        statistic=0.0,
                        sample_size=self.outputs,
                        detail=f"{what}: held on all {self.outputs} outputs" if self.outputs else "no outputs",
                    )
                )
        return out


def run_batch(
    adapter: Adapter,
    tables: Tables,
    bi: BatteryInstance,
    drafts: np.ndarray,
    rng: np.random.Generator,
    tally: StructuralTally | None = None,
    uniforms: np.ndarray | None = None,
) -> tuple[Emitted, dict[int, tuple[str, str]]]:
    """Run the verifier on drafts [B, K, L] of ``bi`` and classify the outputs.

    Returns
    -------
    (Emitted, problems)
        ``problems`` from :func:`classify`; also added to ``tally`` when given.

    Raises
    ------
    VerifierRaised, VerifierTimedOut
    """
    q, p = tables.rows(drafts)
    em = adapter.emit(drafts, q, p, rng, uniforms)
    problems = classify(em, drafts, p)
    if tally is not None:
        tally.add(bi, drafts, problems, len(drafts))
    return em, problems


def failure_result(name: str, category: str, err: VerifierFailure, spec: dict[str, Any] | None) -> CheckResult:
    """A failed check for a verifier that raised, timed out or exited (the error's ``diagnosis``)."""
    diag = getattr(err, "diagnosis", None) or ("timeout" if isinstance(err, VerifierTimedOut) else "raises")
    return CheckResult(name, category, False, instance=spec, detail=str(err), diagnosis=diag)


__all__ = ["StructuralTally", "classify", "failure_result", "run_batch"]
