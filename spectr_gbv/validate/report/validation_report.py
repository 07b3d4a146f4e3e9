"""The report of one validation run: the verdict vocabulary and :class:`ValidationReport`.

The diagnoses that decide the verdict (:data:`LAW_DIAGNOSES`: a wrong output law;
:data:`ROBUSTNESS_DIAGNOSES`: a failure on a valid input), the exit statuses of
``spectr-gbv validate`` (:data:`EXIT_CODES`), the report sections, and :class:`ValidationReport`:
every check of a run, its verdict, and its rendering as text or JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from spectr_gbv.validate.report.results import CATEGORIES, CheckResult, by_severity, jsonable

#: Diagnoses of a wrong output law (the headline question: is the output law the target law?).
LAW_DIAGNOSES: tuple[str, ...] = (
    "not_lossless",
    "wrong_residual",
    "reuses_uniform",
    "efficiency_above_optimum",
    "zero_probability_token",
)
#: Diagnoses of a verifier that fails on a valid input (raises, hangs, exits, invalid output).
ROBUSTNESS_DIAGNOSES: tuple[str, ...] = (
    "raises",
    "timeout",
    "exits",
    "bad_output",
    "nan_or_out_of_vocab",
    "accepts_placeholder",
    "not_deterministic",
)
#: Exit status of ``spectr-gbv validate`` (and :attr:`ValidationReport.exit_code`).
EXIT_CODES: dict[int, str] = {
    0: "passed: no check found a wrong output law, and the verifier ran correctly on every valid input",
    1: "failed: a wrong output law, a token of target probability 0, or an exception, hang, exit or invalid "
    "output on a valid input",
    2: "usage error (bad import path, interface, level, budget, reference, conventions)",
    3: "passed the law and robustness checks, but the output differs from the named reference's conditional law",
}
#: Report sections: (title, categories).
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Law", ("exact", "statistical", "adversarial", "efficiency")),
    ("Robustness", ("structural", "robustness")),
    ("Reference", ("reference",)),
)


def _fmt(x: float | int | None, spec: str = ".3g") -> str:
    if x is None:
        return "-"
    if isinstance(x, int):
        return str(x)
    return format(x, spec)


@dataclass
class ValidationReport:
    """Everything :func:`~spectr_gbv.validate.validate` found about one verifier.

    The verdict answers one question: is the verifier's output law the target law, on every
    valid input? It fails (:attr:`passed` False, exit status 1) when a check shows a wrong
    output law, a token of target probability 0 (forced coins and degenerate residuals
    included), or an exception, hang, exit or invalid output on a valid input. A difference
    from a named reference's conditional law is not a loss of losslessness: it sets
    :attr:`matches_reference` False and exit status 3. Advisory checks (conventions the
    interface does not promise, determinism) are notes and never change the verdict.

    Attributes
    ----------
    verifier : str
        Name of the verifier (``module:function`` or its qualified name).
    interface : str
        One of :data:`~spectr_gbv.validate.interfaces.names.INTERFACES`.
    level : str
        Level requested (``"exact"`` or ``"statistical"``).
    level_used : str
        What ran: ``"exact"``, ``"statistical"`` or ``"statistical (exact unavailable: ...)"``.
    reference : str or None
        Method name (or ``NAME:VARIANT``) the verifier was compared with, if any.
    seed : int
        Seed of every random draw of the harness.
    budget : str
        ``"quick"``, ``"standard"`` or ``"thorough"``.
    checks : list of CheckResult
    settings : dict
        Significance level, Bonferroni family size, power target, sample sizes per instance,
        the sizes covered.
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

    # ------------------------------------------------------------------ verdict
    @property
    def failures(self) -> list[CheckResult]:
        """The failed checks that count (advisory ones excluded), in run order."""
        return [c for c in self.checks if c.passed is False and not c.advisory]

    @property
    def law_failures(self) -> list[CheckResult]:
        """Failures that show a wrong output law (:data:`LAW_DIAGNOSES`)."""
        return [c for c in self.failures if c.diagnosis in LAW_DIAGNOSES]

    @property
    def robustness_failures(self) -> list[CheckResult]:
        """Failures on a valid input other than the law: raises, hangs, exits, invalid outputs."""
        other = (*LAW_DIAGNOSES, "differs_from_reference")
        return [c for c in self.failures if c.diagnosis not in other]

    @property
    def passed(self) -> bool:
        """True when no check showed a wrong law or a failure on a valid input.

        Inconclusive checks, advisory notes and differences from a named reference do not fail
        a report (see :attr:`matches_reference`).
        """
        return not self.law_failures and not self.robustness_failures

    @property
    def matches_reference(self) -> bool | None:
        """None without a reference; else False when a check found a difference from its conditional law."""
        if self.reference is None:
            return None
        return not any(c.diagnosis == "differs_from_reference" for c in self.failures)

    @property
    def exit_code(self) -> int:
        """0 passed, 1 failed, 3 passed but differs from the named reference (:data:`EXIT_CODES`)."""
        if not self.passed:
            return 1
        return 3 if self.matches_reference is False else 0

    @property
    def advisories(self) -> list[CheckResult]:
        """Advisory checks (outside the verdict) that failed or are informational."""
        return [c for c in self.checks if c.advisory and c.passed is not True]

    @property
    def smallest_failure(self) -> CheckResult | None:
        """The failed check on the smallest instance (law and robustness failures before reference ones).

        Failures on the battery's (or the caller's) instances come before the adversarial
        search's, whose instance is a float one it drew; then the fewest draft tuples n^(L K)
        (:attr:`CheckResult.draft_tuples`), the smallest (n, L, K), the category order of
        :data:`CATEGORIES`, and the smallest p-value.
        """
        return _smallest([c for c in self.failures if c.diagnosis != "differs_from_reference"] or self.failures)

    @property
    def smallest_instance_failure(self) -> CheckResult | None:
        """:attr:`smallest_failure` among the failures on an instance that can be rerun.

        Probe failures (spec ``kind == "probe"``) and failures without an instance are left
        out: the result's ``instance`` always rebuilds with
        :func:`~spectr_gbv.validate.battery.instance.instance_from_spec`.
        """
        fails = [c for c in self.failures if c.instance is not None and c.instance.get("kind") != "probe"]
        return _smallest([c for c in fails if c.diagnosis != "differs_from_reference"] or fails)

    # ------------------------------------------------------------------ output
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: the header fields, the verdict, ``checks``, ``smallest_failure``."""
        small = self.smallest_failure
        return jsonable(
            {
                "verifier": self.verifier,
                "interface": self.interface,
                "level": self.level,
                "level_used": self.level_used,
                "reference": self.reference,
                "seed": self.seed,
                "budget": self.budget,
                "passed": self.passed,
                "law_passed": not self.law_failures,
                "robustness_passed": not self.robustness_failures,
                "matches_reference": self.matches_reference,
                "exit_code": self.exit_code,
                "num_checks": len(self.checks),
                "num_failed": len(self.failures),
                "num_advisory": len(self.advisories),
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

    def _summary_lines(self) -> list[str]:
        """The verdict block: the law verdict and its power, then robustness, reference, notes."""
        s = self.settings
        verdict = "PASSED" if self.passed else "FAILED"
        why = {
            0: "no check found the output law differ from the target law, and every valid input ran correctly",
            1: "a check found a wrong output law or a failure on a valid input (below)",
            3: "lossless on the inputs tried, but the output differs from the named reference's conditional law",
        }[self.exit_code]
        lines = [f"Verdict: {verdict} (exit {self.exit_code}): {why}"]

        def section(title: str, cats: tuple[str, ...]) -> list[CheckResult]:
            return [c for c in self.checks if c.category in cats and not c.advisory]

        law_fail = self.law_failures
        # a probe's wrong token (zero_probability_token) is a law failure: counted under Law
        law = section(*SECTIONS[0]) + [c for c in law_fail if c.category not in SECTIONS[0][1]]
        power = []
        ran = any(c.category in ("statistical", "exact") for c in law)
        if "tv_detected" in s and ran:
            stopped = s.get("stopped_early") or {}
            power.append(
                f"planned power >= {s.get('power_target', 0.99)} per {self._unit} against a TV error of "
                f"{s['tv_detected']:g} (family alpha {s.get('alpha_family', 1e-3):g} over {s.get('family_size', '?')} "
                "tests)" + (f"; stopped early after a rejection: {', '.join(stopped)}" if stopped else "")
            )
        if str(self.level_used).startswith("exact"):
            power.append("exact laws where the verifier declares or exposes them")
        cov = s.get("sizes_covered")
        if cov and ran:
            power.append("sizes covered: " + _sizes_line(cov))
        status = "FAIL" if law_fail else ("PASS" if any(c.passed for c in law) else "N/A")
        lines.append(
            f"  Law         {status:4}  {_count(len(law), 'check')}"
            + _failed_list(law_fail)
            + ("; " + "; ".join(power) if power else "")
        )
        rob = [c for c in section(*SECTIONS[1]) if c not in law_fail]
        rob_fail = list(self.robustness_failures)
        status = "FAIL" if rob_fail else ("PASS" if rob else "N/A")
        inconclusive = [c.name for c in rob if c.passed is None]
        lines.append(
            f"  Robustness  {status:4}  {_count(len(rob), 'check')}"
            + _failed_list(by_severity(rob_fail))
            + ("; inconclusive: " + ", ".join(inconclusive) if inconclusive else "")
        )
        if self.reference is not None:
            ref = section(*SECTIONS[2])
            status = "PASS" if self.matches_reference else "DIFF"
            lines.append(
                f"  Reference   {status:4}  {_count(len(ref), 'check')} against {self.reference}'s conditional law"
                + ("" if self.matches_reference else ": differs (not a law failure by itself)")
            )
        adv_all = [c for c in self.checks if c.advisory]
        if adv_all:
            names = ", ".join(f"{c.name} {_note_status(c)}" for c in adv_all)
            lines.append(
                f"  Notes       {len(adv_all):<4}  advisory, outside the verdict ({self._advisory_kinds}): {names}"
            )
        calls = s.get("verifier_calls")
        if isinstance(calls, int):
            what = {"self_drafting": "requests (kernel rows)"}.get(
                self.interface, "generate calls" if self._generation else "verifier calls"
            )
            inside = s.get("seconds_in_generate")
            spent = f" ({inside:.1f} s inside them, summed over workers)" if isinstance(inside, float) else ""
            lines.append(f"  {calls:,} {what} in {self.elapsed_s:.1f} s{spent}")
        if self.budget == "quick" and not self._generation and ran:
            lines.append("  Budget quick, a first look: standard (the default) plans against a TV error of 0.02")
        return lines

    @property
    def _generation(self) -> bool:
        """A report of the generation referee (``generation``, ``generation_batched``, ``self_drafting``)."""
        return self.interface.startswith("generation") or self.interface == "self_drafting"

    @property
    def _unit(self) -> str:
        return "scenario" if self._generation else "sampled instance"

    @property
    def _advisory_kinds(self) -> str:
        return "determinism" if self._generation else "conventions, determinism"

    def to_text(self) -> str:
        """Human-readable report: the verdict block, one table per section, failures, notes, settings."""
        n_diff = sum(c.diagnosis == "differs_from_reference" for c in self.failures)
        n_fail = len(self.failures) - n_diff
        n_na = sum(c.passed is None for c in self.checks)
        n_adv = sum(c.advisory and c.passed is False for c in self.checks)
        lines = [
            f"Validation of {self.verifier} (interface {self.interface}, "
            + ("" if self._generation else f"level {self.level_used}, reference {self.reference or '-'}, ")
            + f"budget {self.budget}, seed {self.seed}): "
            f"{'PASSED' if self.passed else 'FAILED'}",
            *self._summary_lines(),
            f"{len(self.checks)} checks: {len(self.checks) - n_fail - n_diff - n_na - n_adv} passed, {n_fail} failed, "
            + (f"{n_diff} differ from the reference, " if n_diff else "")
            + f"{n_adv} advisory {'note' if n_adv == 1 else 'notes'}, {n_na} not applicable/inconclusive; "
            f"{self.elapsed_s:.1f} s",
        ]
        headers = ["status", "category", "check", "statistic", "p-value", "N", "power", "diagnosis"]
        groups = [(t, [c for c in self.checks if c.category in cats and not c.advisory]) for t, cats in SECTIONS]
        groups.append(("Notes (advisory, outside the verdict)", [c for c in self.checks if c.advisory]))
        rows_all = [
            [
                _note_status(c) if c.advisory else c.status,
                c.category,
                c.name,
                _fmt(c.statistic, ".4g"),
                _fmt(c.p_value, ".3g"),
                _fmt(c.sample_size),
                _fmt(c.power, ".4f"),
                c.diagnosis,
            ]
            for _, cs in groups
            for c in cs
        ]
        widths = [max(len(h), *(len(r[i]) for r in rows_all)) if rows_all else len(h) for i, h in enumerate(headers)]
        it = iter(rows_all)
        for title, cs in groups:
            if not cs:
                continue
            lines += ["", f"{title} checks" if "Notes" not in title else title]
            lines.append("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
            for _ in cs:
                r = next(it)
                lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
        if self.failures:
            lines += ["", "Failures:"]
            for c in by_severity(self.failures):  # robustness failures ranked, most likely first
                sev = f" [severity: {c.severity_note or c.severity}]" if c.severity is not None else ""
                lines.append(f"- [{c.diagnosis}] {c.name}: {c.detail}{sev}")
                if c.instance:
                    lines.append(f"    instance: {_instance_line(c.instance)}")
            small = self.smallest_failure
            assert small is not None
            if self.exit_code == 3:  # lossless on what was tried: say what differs, there is no failing case
                diffs = [c for c in self.failures if c.diagnosis == "differs_from_reference"]
                lines += ["", f"What differs from {self.reference}'s conditional law (the law checks passed):"]
                lines += [f"- {c.name}: {_what_differs(c.detail)}" for c in diffs]
            else:
                lines += ["", f"Smallest failing case: {small.name} [{small.diagnosis}]"]
            if small.instance:
                lines.append(f"    {json.dumps(jsonable(small.instance), separators=(',', ':'))}")
        adv = self.advisories
        if adv:
            lines += ["", "Advisory notes (not part of the verdict):"]
            for c in adv:
                tag = "" if c.diagnosis == "ok" else f" ({c.diagnosis})"
                lines.append(f"- {_note_status(c)}: {c.name}{tag}: {c.detail}")
        inconclusive = [c for c in self.checks if c.passed is None and c.detail and not c.advisory]
        if inconclusive:
            lines += ["", "Not applicable / inconclusive:"]
            lines += [f"- {c.name}: {c.detail}" for c in inconclusive]
        if self.settings:
            lines += ["", "Settings:"]
            for key, value in self.settings.items():
                lines.append(f"- {key}: {json.dumps(jsonable(value), separators=(', ', ': '))}")
        if self.notes:
            lines += ["", "Notes:"]
            lines += [f"- {note}" for note in self.notes]
        return "\n".join(lines)


def _note_status(c: CheckResult) -> str:
    """An advisory check's status in words that do not read as a verdict: ``"ok"``, ``"note"`` or ``"N/A"``."""
    return {True: "ok", False: "note", None: "N/A"}[c.passed]


def _sizes_line(cov: dict[str, Any]) -> str:
    """``"n 2-6, L 1-5, K 1-4; token ids past 8 and 16 bits: V = 33,000 with ids 7, 256, ..."``."""
    text = ", ".join(f"{k} {cov[k][0]}-{cov[k][1]}" for k in ("n", "L", "K") if k in cov)
    if "vocab_size" in cov:
        ids = ", ".join(str(i) for i in cov.get("vocab_ids", []))
        text += f"; wide ids: V = {cov['vocab_size'][0]:,}, the law on ids {ids}"
        if "vocab_tv" in cov:
            text += f" (planned against a TV error of {cov['vocab_tv'][0]:g})"
    known = ("n", "L", "K", "vocab_size", "vocab_ids", "vocab_tv")
    for key, value in cov.items():  # other runs' sizes (the generation referee: pairs, V, m, settings)
        if key not in known:
            nums = isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value)
            shown = f"{value[0]}-{value[1]}" if nums else ", ".join(str(v) for v in value)
            text += ("; " if text else "") + f"{key} {shown}"
    return text


def _count(n: int, noun: str) -> str:
    """``"1 check"``, ``"2 checks"``."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _failed_list(fails: list[CheckResult], most: int = 3) -> str:
    """``"; failed: name (diagnosis), ..."`` for the verdict block (empty when none failed)."""
    if not fails:
        return ""
    names = ", ".join(f"{c.name} ({c.diagnosis})" for c in fails[:most])
    return f"; failed: {names}" + (f" and {len(fails) - most} more" if len(fails) > most else "")


def _what_differs(detail: str) -> str:
    """The part of a ``differs_from_reference`` detail that says what differs (its first sentence, after the colon)."""
    first = detail.split(". ", 1)[0]
    return first.split(": ", 1)[1] if ": " in first else first


def _smallest(fails: list[CheckResult]) -> CheckResult | None:
    """The failure to debug first: on a battery (or given) instance before the adversarial search's
    float instance, then the smallest instance (draft tuples, then (n, L, K)), category, the most
    likely failing event (severity; none stated counts as certain), p-value."""
    if not fails:
        return None
    return min(
        fails,
        key=lambda c: (
            c.category == "adversarial",
            c.draft_tuples,
            c.size_key,
            CATEGORIES.index(c.category),
            -(c.severity if c.severity is not None else 1.0),
            c.p_value if c.p_value is not None else 0.0,
        ),
    )


def _instance_line(spec: dict[str, Any]) -> str:
    """A one-line summary of an instance spec (the full JSON is in :meth:`ValidationReport.to_json`)."""
    parts = [f"{k}={spec[k]}" for k in ("kind", "name", "n", "L", "K") if k in spec]
    for key in ("drafts", "uniforms", "random"):
        if key in spec:
            parts.append(f"{key}={json.dumps(jsonable(spec[key]), separators=(',', ':'))}")
    return ", ".join(parts)


__all__ = ["EXIT_CODES", "LAW_DIAGNOSES", "ROBUSTNESS_DIAGNOSES", "SECTIONS", "ValidationReport"]
