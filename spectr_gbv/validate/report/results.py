"""Results of :func:`spectr_gbv.validate.validate`: one :class:`CheckResult` per check, collected
in a :class:`ValidationReport` that prints as text or JSON.

A check passes (``passed=True``), fails (``False``, with a diagnosis tag saying what is wrong)
or is not applicable / inconclusive (``None``: an input the verifier refused, a coin the probe
could not force, an exact level the verifier does not support, a check skipped after the
verifier hung). An *advisory* check is a note outside the verdict. A report passes when no
check showed a wrong output law (:data:`LAW_DIAGNOSES`) or a failure on a valid input
(:data:`ROBUSTNESS_DIAGNOSES`); exit statuses are :data:`EXIT_CODES`.

A robustness failure also carries its *severity*: the probability per call that the failing
event happens under the verifier's own randomness (:func:`severity_phrase` words it,
:func:`by_severity` ranks failures by it). It informs; it never softens the verdict.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
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
    "exits",
    "differs_from_reference",
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
    advisory : bool
        True for a check outside the verdict: a convention the interface does not promise
        (``-1`` placeholder ids unless declared), determinism. It is reported under the
        notes and never changes :attr:`ValidationReport.passed` or the exit status.
    severity : float or None
        Robustness failures: the probability, per verifier call, of the failing event under
        the verifier's own randomness on inputs like the check's (a forced coin: the
        probability of that coin value in the dtype the verifier drew it in, e.g. ``2**-53``
        for a float64 coin of exactly 0; a forcing-free probe: the observed rate). None when
        unknown or not a failure. Informational: any failure on a valid input fails the verdict.
    severity_note : str
        ``severity`` in words (:func:`severity_phrase`), with the observed count and its
        Clopper-Pearson interval for a forcing-free probe.

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
    advisory: bool = False
    severity: float | None = None
    severity_note: str = ""

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"category: {self.category!r} is not one of {', '.join(CATEGORIES)}")
        if self.diagnosis not in DIAGNOSES:
            raise ValueError(f"diagnosis: {self.diagnosis!r} is not one of {', '.join(DIAGNOSES)}")
        if self.passed is False and self.diagnosis == "ok":
            raise ValueError(f"diagnosis: failed check {self.name!r} needs a diagnosis other than 'ok'")
        if self.severity is not None and not 0.0 <= self.severity <= 1.0:
            raise ValueError(f"severity: expected a probability in [0, 1], got {self.severity!r}")

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
        return jsonable(asdict(self))


def jsonable(obj: Any) -> Any:
    """``obj`` made JSON-serialisable, recursively.

    Non-finite floats become ``"nan"``, ``"inf"`` or ``"-inf"``; dict keys become strings; tuples
    become lists; numpy scalars their Python value. Other objects are returned unchanged.
    """
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalar
        return jsonable(obj.item())
    return obj


def severity_phrase(prob: float) -> str:
    """A probability per call in words: ``"about 1 call in 2^53"``, ``"every call"``.

    Parameters
    ----------
    prob : float
        Probability in [0, 1].

    Returns
    -------
    str
        ``"every call"`` (1), ``"never observed"`` (0), ``"about 1 call in 2^k"`` below 1/64
        (k rounded to the nearest integer), else ``"about p of calls"`` (two digits).

    Raises
    ------
    ValueError
        ``prob`` outside [0, 1] or NaN.
    """
    if not 0.0 <= prob <= 1.0:
        raise ValueError(f"prob: expected a probability in [0, 1], got {prob!r}")
    if prob == 1.0:
        return "every call"
    if prob == 0.0:
        return "never observed"
    if prob < 1 / 64:
        return f"about 1 call in 2^{round(-math.log2(prob))}"
    return f"about {prob:.2g} of calls"


def by_severity(checks: list[CheckResult]) -> list[CheckResult]:
    """``checks`` with the robustness-category ones ranked by severity (most likely first).

    Checks of other categories keep their places; robustness checks are reordered among the
    slots they occupy, those without a severity last (in run order). Stable.

    Parameters
    ----------
    checks : list of CheckResult

    Returns
    -------
    list of CheckResult
    """
    slots = [i for i, c in enumerate(checks) if c.category == "robustness"]
    ranked = sorted((checks[i] for i in slots), key=lambda c: (c.severity is None, -(c.severity or 0.0)))
    out = list(checks)
    for i, c in zip(slots, ranked, strict=True):
        out[i] = c
    return out


__all__ = ["CATEGORIES", "DIAGNOSES", "CheckResult", "by_severity", "jsonable", "severity_phrase"]
