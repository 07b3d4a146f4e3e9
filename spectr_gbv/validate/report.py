"""Results of :func:`spectr_gbv.validate.validate`: one :class:`CheckResult` per check, collected
in a :class:`ValidationReport` that prints as text or JSON.

A check passes (``passed=True``), fails (``False``, with a diagnosis tag saying what is wrong)
or is not applicable / inconclusive (``None``: an input the verifier refused, an exact level
the verifier does not support, a check skipped after the verifier hung). A report passes when
no check failed.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

#: Categories of checks, in report order.
CATEGORIES: tuple[str, ...] = (
    "structural",
    "robustness",
    "exact",
    "statistical",
    "adversarial",
    "reference",
    "efficiency",
)

#: Fixed vocabulary of diagnosis tags (machine-readable: what is wrong; "ok" when nothing is).
DIAGNOSES: tuple[str, ...] = (
    "not_lossless",
    "wrong_residual",
    "accepts_placeholder",
    "zero_probability_token",
    "nan_or_out_of_vocab",
    "not_deterministic",
    "raises",
    "timeout",
    "bad_output",
    "reuses_uniform",
    "efficiency_above_optimum",
    "ok",
)


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check of a verifier.

    Attributes
    ----------
    name : str
        Check name, e.g. ``"end_to_end_law[dense]"``.
    category : str
        One of :data:`CATEGORIES`.
    passed : bool or None
        True (passed), False (failed: ``diagnosis`` says why), None (not applicable or
        inconclusive; ``detail`` says why).
    statistic : float or None
        Test statistic (G statistic, z score, validity defect, ...), ``detail`` names it.
    p_value : float or None
        p-value of a statistical test (None for deterministic checks).
    sample_size : int or None
        Verifier calls (or samples) the check used.
    power : float or None
        Guaranteed power of the test against a total-variation error of ``tv`` (stated in
        ``detail`` and in the report settings) at the test's Bonferroni level.
    instance : dict or None
        JSON spec that rebuilds the instance: ``{"kind", "name", "n", "L", "K", "instance":
        <instance JSON of docs>, ...}``, plus ``"drafts"`` (``[K][L]`` ids) or ``"uniforms"``
        when the check used fixed ones.
    detail : str
        One or a few human-readable sentences.
    diagnosis : str
        One of :data:`DIAGNOSES`; ``"ok"`` unless the check failed.

    Raises
    ------
    ValueError
        Unknown category or diagnosis, or a failed check tagged ``"ok"``.
    """

    name: str
    category: str
    passed: bool | None
    statistic: float | None = None
    p_value: float | None = None
    sample_size: int | None = None
    power: float | None = None
    instance: dict[str, Any] | None = None
    detail: str = ""
    diagnosis: str = "ok"

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"category: {self.category!r} is not one of {', '.join(CATEGORIES)}")
        if self.diagnosis not in DIAGNOSES:
            raise ValueError(f"diagnosis: {self.diagnosis!r} is not one of {', '.join(DIAGNOSES)}")
        if self.passed is False and self.diagnosis == "ok":
            raise ValueError(f"diagnosis: failed check {self.name!r} needs a diagnosis other than 'ok'")

    @property
    def status(self) -> str:
        """``"PASS"``, ``"FAIL"`` or ``"N/A"`` (inconclusive / not applicable)."""
        return {True: "PASS", False: "FAIL", None: "N/A"}[self.passed]

    @property
    def size_key(self) -> tuple[float, float, float]:
        """``(n, L, K)`` of the check's instance (infinite when it has none), to order failures."""
        inst = self.instance or {}
        return tuple(float(inst.get(k, math.inf)) for k in ("n", "L", "K"))  # type: ignore[return-value]

    @property
    def draft_tuples(self) -> float:
        """n^(L K), the number of draft tuples of the check's instance (infinite when it has none).

        The size a person debugging the failure has to read: (n, L, K) = (3, 1, 2) has 9 draft
        tuples, (2, 5, 2) has 1,024.
        """
        n, L, K = self.size_key
        return n ** (L * K) if math.isfinite(n + L + K) else math.inf

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (non-finite floats become the strings ``"inf"``, ``"-inf"``, ``"nan"``)."""
        return _jsonable(asdict(self))


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalar
        return _jsonable(obj.item())
    return obj


def _fmt(x: float | int | None, spec: str = ".3g") -> str:
    if x is None:
        return "-"
    if isinstance(x, int):
        return str(x)
    return format(x, spec)


@dataclass
class ValidationReport:
    """Everything :func:`~spectr_gbv.validate.validate` found about one verifier.

    Attributes
    ----------
    verifier : str
        Name of the verifier (``module:function`` or its qualified name).
    interface : str
        ``"generic"``, ``"chain"`` or ``"hf"``.
    level : str
        Level requested (``"exact"`` or ``"statistical"``).
    level_used : str
        What ran: ``"exact"``, ``"statistical"`` or ``"statistical (exact unavailable: ...)"``.
    reference : str or None
        Stable method name the verifier was compared with, if any.
    seed : int
        Seed of every random draw of the harness.
    budget : str
        ``"quick"``, ``"standard"`` or ``"thorough"``.
    checks : list of CheckResult
    settings : dict
        Significance level, Bonferroni family size, power target, sample sizes per instance.
    notes : list of str
        Remarks on how the run went (fallbacks, skipped checks).
    elapsed_s : float
        Wall time of the run in seconds.
    """

    verifier: str
    interface: str
    level: str
    level_used: str
    reference: str | None
    seed: int
    budget: str
    checks: list[CheckResult] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def passed(self) -> bool:
        """True when no check failed (inconclusive checks do not fail a report)."""
        return not any(c.passed is False for c in self.checks)

    @property
    def failures(self) -> list[CheckResult]:
        """The failed checks, in run order."""
        return [c for c in self.checks if c.passed is False]

    @property
    def smallest_failure(self) -> CheckResult | None:
        """The failed check on the smallest instance.

        Smallest: fewest draft tuples n^(L K) (:attr:`CheckResult.draft_tuples`), then smallest
        (n, L, K), then the category order of :data:`CATEGORIES`, then the smallest p-value.
        """
        fails = self.failures
        if not fails:
            return None
        return min(
            fails,
            key=lambda c: (
                c.draft_tuples,
                c.size_key,
                CATEGORIES.index(c.category),
                c.p_value if c.p_value is not None else 0.0,
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: the header fields, ``passed``, ``checks``, ``smallest_failure``."""
        small = self.smallest_failure
        return _jsonable(
            {
                "verifier": self.verifier,
                "interface": self.interface,
                "level": self.level,
                "level_used": self.level_used,
                "reference": self.reference,
                "seed": self.seed,
                "budget": self.budget,
                "passed": self.passed,
                "num_checks": len(self.checks),
                "num_failed": len(self.failures),
                "smallest_failure": small.to_dict() if small else None,
                "settings": self.settings,
                "notes": list(self.notes),
                "elapsed_s": self.elapsed_s,
                "checks": [c.to_dict() for c in self.checks],
            }
        )

    def to_json(self) -> str:
        """:meth:`to_dict` as an indented JSON string."""
        return json.dumps(self.to_dict(), indent=2)

    def to_text(self) -> str:
        """Human-readable report: verdict, one line per check, failures in detail, settings."""
        n_fail = len(self.failures)
        n_na = sum(c.passed is None for c in self.checks)
        verdict = "PASSED" if self.passed else "FAILED"
        lines = [
            f"Validation of {self.verifier} (interface {self.interface}, level {self.level_used}, "
            f"reference {self.reference or '-'}, budget {self.budget}, seed {self.seed}): {verdict}",
            f"{len(self.checks)} checks: {len(self.checks) - n_fail - n_na} passed, {n_fail} failed, "
            f"{n_na} not applicable/inconclusive; {self.elapsed_s:.1f} s",
            "",
        ]
        headers = ["status", "category", "check", "statistic", "p-value", "N", "power", "diagnosis"]
        rows = [
            [
                c.status,
                c.category,
                c.name,
                _fmt(c.statistic, ".4g"),
                _fmt(c.p_value, ".3g"),
                _fmt(c.sample_size),
                _fmt(c.power, ".4f"),
                c.diagnosis,
            ]
            for c in self.checks
        ]
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
        lines.append("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
        for r in rows:
            lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
        if self.failures:
            lines += ["", "Failures:"]
            for c in self.failures:
                lines.append(f"- [{c.diagnosis}] {c.name}: {c.detail}")
                if c.instance:
                    lines.append(f"    instance: {_instance_line(c.instance)}")
            small = self.smallest_failure
            assert small is not None
            lines += ["", f"Smallest failing case: {small.name} [{small.diagnosis}]"]
            if small.instance:
                lines.append(f"    {json.dumps(_jsonable(small.instance), separators=(',', ':'))}")
        inconclusive = [c for c in self.checks if c.passed is None and c.detail]
        if inconclusive:
            lines += ["", "Not applicable / inconclusive:"]
            lines += [f"- {c.name}: {c.detail}" for c in inconclusive]
        if self.settings:
            lines += ["", "Settings:"]
            for key, value in self.settings.items():
                lines.append(f"- {key}: {json.dumps(_jsonable(value), separators=(', ', ': '))}")
        if self.notes:
            lines += ["", "Notes:"]
            lines += [f"- {note}" for note in self.notes]
        return "\n".join(lines)


def _instance_line(spec: dict[str, Any]) -> str:
    """A one-line summary of an instance spec (the full JSON is in :meth:`ValidationReport.to_json`)."""
    parts = [f"{k}={spec[k]}" for k in ("kind", "name", "n", "L", "K") if k in spec]
    for key in ("drafts", "uniforms", "random"):
        if key in spec:
            parts.append(f"{key}={json.dumps(_jsonable(spec[key]), separators=(',', ':'))}")
    return ", ".join(parts)


__all__ = ["CATEGORIES", "DIAGNOSES", "CheckResult", "ValidationReport"]
