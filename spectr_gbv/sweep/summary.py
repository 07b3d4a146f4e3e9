"""``spectr-gbv sweep summarize DIR``: the tables a paper needs from a sweep's Parquet table.

Per method and K: E[tau] / OPT (mean, median, worst, 10% and 90% quantiles), the gap closure
over a baseline method, the share of instances where the method is best among the lossless
methods, and the lossless violations with the worst witness; per method: the instances where
E[tau] decreases when K increases (a claim search over K). Output as markdown
(:meth:`Summary.to_markdown`), JSON (:meth:`Summary.to_json`) and PNG plots
(:meth:`Summary.write`).

Conventions, in one place:

* rows whose ``error`` is not null are ignored (and counted per method and K);
* an exact column (``expected_accepted``, ``validity_defect``) is exact when it reads ``"a"`` or
  ``"a/b"``; otherwise (the repr of a float, float64 instances) the float64 column is used;
* a registered method is lossless when the method table says so
  (:data:`~spectr_gbv.core.methods.METHOD_TABLE`, or the ``lossless`` attribute of a class added
  with :func:`~spectr_gbv.reference.registry.register`); its rows are checked for violations and
  it competes for "best among lossless";
* a user's rule (``module:attribute``, or any name the registry does not know) is credited as
  lossless only when it claims it (:func:`~spectr_gbv.reference.user_rules.resolve_rule`: a
  Verifier's ``lossless``, a function's ``lossless`` attribute; the module is imported here)
  and its measured validity defect is exactly 0 on every row of the dataset; a rule that
  claims lossless is checked for violations all the same; its claim is shown beside it
  (``Summary.rules``). A lossy method, registered or not, is never "best among lossless";
* exact values print as :func:`~spectr_gbv.core.numbers.display_value` does everywhere
  (``"1/8 = 0.125000"``; ``"~0.319407"`` when the fraction is too long to read);
* statistics are over instances: mean = ``math.fsum / n``, median = ``statistics.median``,
  worst = min, quantiles = :func:`numpy.quantile` (linear).

The summary files never go into the dataset folder: every file there must be Parquet for
pandas, pyarrow, polars and DuckDB to read it (:mod:`spectr_gbv.sweep.store`), so
:func:`summarize` and :meth:`Summary.write` refuse an output folder inside it, and the CLI's
default is the sibling folder :func:`default_summary_dir` (``runs/field`` ->
``runs/field-summary``).

pyarrow is needed to read the table (the ``sweep`` extra); matplotlib is imported only inside
:meth:`Summary.write` when plots are requested.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from spectr_gbv.core.methods import is_registered, method_spec
from spectr_gbv.core.numbers import display_value, format_value
from spectr_gbv.reference.registry import STABLE_METHOD_NAMES, available_methods, get_verifier
from spectr_gbv.sweep.store import read_table

#: Gap closure is undefined where OPT - E_baseline is at most this (the baseline reaches OPT).
GAP_TOL: float = 1e-12
#: A float64 instance's validity defect above this is a lossless violation (exact: any nonzero).
DEFECT_TOL: float = 1e-9
#: A float64 instance's E[tau] drop above this, when K grows, is a monotonicity failure (exact: any).
DROP_TOL: float = 1e-9

#: The gap closure's baseline when none is named (if the dataset has it; else its first method).
DEFAULT_BASELINE = "mdbv"

#: How a user rule's lossless claim reads in the Markdown.
_CLAIM = {True: "claims lossless", False: "declared lossy", None: "no claim"}

#: Suffix of the default summary folder, a sibling of the dataset folder (:func:`default_summary_dir`).
SUMMARY_SUFFIX = "-summary"

_EXACT = re.compile(r"^\s*[-+]?\d+(\s*/\s*\d+)?\s*$")
_COLUMNS = ("instance_id", "method", "K", "expected_accepted", "expected_accepted_float", "opt")
_COLUMNS += ("validity_defect", "validity_defect_float", "error")


def _exact(text: str | None) -> Fraction | None:
    """Fraction of an exact string ``"a"`` / ``"a/b"``; None for a float repr or null."""
    return Fraction(text.replace(" ", "")) if text is not None and _EXACT.match(text) else None


def _value(text: str | None, number: float | None) -> Fraction | None:
    """The exact value when ``text`` is exact, else the float (``number``, else ``float(text)``)."""
    exact = _exact(text)
    if exact is not None:
        return exact
    if number is None and text is not None:
        try:
            number = float(text)
        except ValueError:
            return None
    return Fraction(number) if number is not None and math.isfinite(number) else None


def _lossless(method: str) -> bool:
    """The ``lossless`` fact of a registered method (the table's, or a registered class's); False otherwise."""
    if is_registered(method):
        return method_spec(method).lossless
    if method in available_methods():
        return bool(get_verifier(method).lossless)
    return False


def _rule_claim(method: str) -> tuple[str, bool | None, str]:
    """``(origin, lossless claimed, note)`` of a method that is not registered (imported here)."""
    from spectr_gbv.reference.user_rules import resolve_rule

    try:
        info, _ = resolve_rule(method)
    except (TypeError, ValueError) as exc:
        return "unknown", None, " ".join(str(exc).split())[:200]
    return info.origin, info.lossless_claimed, info.note


def _show(text: str | None, number: float | None) -> str:
    """A stored value as :func:`~spectr_gbv.core.numbers.display_value` prints it (``~decimal`` when long)."""
    exact = _exact(text)
    if exact is not None:
        return display_value(exact)
    value = _value(text, number)
    return "-" if value is None else display_value(float(value))


def default_summary_dir(directory: str | Path) -> Path:
    """The default folder of a dataset's summary files: its sibling ``<name>-summary``.

    Parameters
    ----------
    directory : str or Path
        A sweep folder (``runs/field``).

    Returns
    -------
    Path
        ``runs/field-summary`` (built from the absolute path, so ``.`` works too).
    """
    here = Path(directory).resolve()
    return here.with_name(here.name + SUMMARY_SUFFIX)


def check_summary_dir(directory: str | Path, out: str | Path) -> None:
    """Refuse a summary folder that is the dataset folder or inside it.

    Parameters
    ----------
    directory : str or Path
        The sweep folder that is read.
    out : str or Path
        Where the summary files would go.

    Raises
    ------
    ValueError
        ``out`` is ``directory`` or a folder inside it (its Markdown, JSON and PNG files would
        make the folder unreadable as a Parquet dataset by pandas, pyarrow and polars).
    """
    data, there = Path(directory).resolve(), Path(out).resolve()
    if there == data or data in there.parents:
        raise ValueError(
            f"out: {str(out)!r} is inside the dataset folder {str(directory)!r}; summary files there would break "
            f"its Parquet readers: write them beside it (default {str(default_summary_dir(directory))!r})"
        )


def _stats(values: list[float]) -> dict[str, Any]:
    """``{"n", "mean", "median", "worst", "q10", "q90"}`` of floats (None entries when empty)."""
    if not values:
        return {"n": 0, "mean": None, "median": None, "worst": None, "q10": None, "q90": None}
    q10, q90 = (float(q) for q in np.quantile(np.asarray(values, dtype=np.float64), [0.1, 0.9]))
    mean, median = math.fsum(values) / len(values), float(statistics.median(values))
    return {"n": len(values), "mean": mean, "median": median, "worst": min(values), "q10": q10, "q90": q90}


@dataclass(frozen=True)
class Summary:
    """What :func:`summarize` found in a sweep table; see :meth:`to_json` for every key.

    Attributes
    ----------
    directory : str
        The sweep directory that was read.
    baseline : str
        The method the gap closure is measured from.
    rows, rows_ok, instances : int
        Rows read (deduplicated), rows without ``error``, distinct ``instance_id`` values.
    methods : tuple of str
        Methods present, in the registry's stable order (others after, sorted).
    ks : tuple of int
        K values present, increasing.
    errors : dict
        method -> number of rows with ``error`` not null.
    cells : tuple of dict
        One dict per (method, K) present, in (method, K) order (keys in :meth:`to_json`).
    violations : dict
        Lossless method (or user rule claiming it) -> ``{"count", "worst"}`` over all K.
    monotonicity : dict
        method -> ``{"instances", "failures", "worst"}`` (E[tau] decreasing in K).
    gap_values : dict
        method -> gap closure per (instance, K), K pooled, in (K, instance_id) order (for the
        histogram; not in the JSON).
    rules : dict
        User rule (a method the registry does not know) -> ``{"origin", "lossless_claimed",
        "rows", "nonzero_defects", "credited", "note"}``: its origin (``"verifier"``,
        ``"function"``, or ``"unknown"`` when it cannot be imported here), its own lossless
        claim (None: none), its rows with a defect, those whose defect is not exactly 0,
        whether it competes as lossless, and a note (the import error, or the rule's note).
    """

    directory: str
    baseline: str
    rows: int
    rows_ok: int
    instances: int
    methods: tuple[str, ...]
    ks: tuple[int, ...]
    errors: dict[str, int]
    cells: tuple[dict[str, Any], ...]
    violations: dict[str, dict[str, Any]]
    monotonicity: dict[str, dict[str, Any]]
    gap_values: dict[str, tuple[float, ...]] = field(repr=False, compare=False)
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The summary as JSON-ready data (floats, strings, ints, None; stable keys).

        Returns
        -------
        dict
            ``directory`` (str), ``baseline`` (str), ``rows``, ``rows_ok``, ``instances`` (int),
            ``methods`` (list of str), ``K`` (list of int), ``errors`` ({method: int}),
            ``cells`` (list, one per (method, K)), ``violations`` ({lossless method:
            {``count``, ``worst``}}), ``monotonicity`` ({method: {``instances`` (instances with
            two K or more), ``failures`` (instances where E[tau] drops), ``worst``}}), ``rules``
            ({user rule: its claim and whether it is credited, as ``Summary.rules``}).

            A cell has ``method``, ``K``, ``lossless`` (the table's fact; for a user rule: it
            is credited as lossless), ``instances`` (rows
            without error), ``errors``; ``ratio`` = E[tau] / OPT statistics {``n``, ``mean``,
            ``median``, ``worst`` (min), ``q10``, ``q90``} over rows with OPT; ``gap_closure`` =
            {``n``, ``mean``, ``median``, ``worst``, ``q10``, ``q90``, ``excluded`` (the
            baseline reaches OPT)}; ``best`` = {``contested`` (instances at this K with a lossless
            row), ``wins`` (ties shared equally), ``share`` = wins / contested} and
            ``violations`` = {``count``, ``worst``}, both None for a lossy method. A violation
            witness is {``instance_id``, ``K``, ``defect`` (the stored string), ``defect_float``};
            a monotonicity witness is {``instance_id``, ``K_from``, ``K_to``, ``drop`` (float),
            ``drop_exact`` ("a/b" or None)}. A statistic over no value is None.
        """
        return {
            "directory": self.directory,
            "baseline": self.baseline,
            "rows": self.rows,
            "rows_ok": self.rows_ok,
            "instances": self.instances,
            "methods": list(self.methods),
            "K": list(self.ks),
            "errors": dict(self.errors),
            "cells": [dict(c) for c in self.cells],
            "violations": {m: dict(v) for m, v in self.violations.items()},
            "monotonicity": {m: dict(v) for m, v in self.monotonicity.items()},
            "rules": {m: dict(v) for m, v in self.rules.items()},
        }

    def to_markdown(self) -> str:
        """A title line, the counts, and one markdown table per section.

        Returns
        -------
        str
            Sections: E[tau] / OPT, gap closure, best among lossless methods, lossless
            violations, monotonicity in K, errors. Values as :func:`~spectr_gbv.core.numbers.display_value`.
        """
        d = display_value
        lines = [
            f"# Sweep summary: {self.directory}",
            "",
            f"{self.rows} rows ({self.rows_ok} ok, {self.rows - self.rows_ok} failed), {self.instances} instances, "
            f"methods {', '.join(self.methods) or '-'}, K {', '.join(map(str, self.ks)) or '-'}.",
        ]

        def table(title: str, header: list[str], rows: list[list[Any]]) -> None:
            lines.extend(["", f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)])
            lines.extend("| " + " | ".join(str(x) for x in row) + " |" for row in rows)

        def stat_row(s: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
            return [str(s["n"])] + [d(s[k]) for k in keys]

        keys = ("mean", "median", "worst", "q10", "q90")
        if self.cells and not any(c["ratio"]["n"] for c in self.cells):
            lines += ["", "No row has OPT: the two OPT tables are empty; sweep with `--measures tau,bounds,opt`."]
        table(
            "E[tau] / OPT",
            ["method", "K", "instances", "with OPT", "mean", "median", "worst", "q10", "q90"],
            [[c["method"], c["K"], c["instances"]] + stat_row(c["ratio"], keys) for c in self.cells],
        )
        table(
            f"Gap closure over {self.baseline}: (E - E_base) / (OPT - E_base)",
            ["method", "K", "instances", "mean", "median", "worst", "q10", "q90", "excluded (base = OPT)"],
            [[c["method"], c["K"]] + stat_row(c["gap_closure"], keys) + [c["gap_closure"]["excluded"]]
             for c in self.cells],
        )  # fmt: skip
        table(
            "Best among lossless methods (a tie of n methods gives each 1/n of a win)",
            ["method", "K", "contested", "wins", "share"],
            [[c["method"], c["K"], c["best"]["contested"], f"{c['best']['wins']:g}", d(c["best"]["share"])]
             for c in self.cells if c["best"] is not None],
        )  # fmt: skip

        def witness(w: dict[str, Any] | None) -> list[str]:
            if w is None:
                return ["-", "-"]
            return [f"{w['instance_id']} (K={w['K']})", _show(w["defect"], w["defect_float"])]

        table(
            "Lossless violations (validity defect != 0)",
            ["method", "K", "violations", "worst instance", "defect"],
            [[c["method"], c["K"], c["violations"]["count"]] + witness(c["violations"]["worst"])
             for c in self.cells if c["violations"] is not None],
        )  # fmt: skip
        mono = []
        for m, v in self.monotonicity.items():
            w = v["worst"]
            where = "-" if w is None else f"{w['instance_id']} (K={w['K_from']} -> {w['K_to']})"
            drop = "-" if w is None else _show(w["drop_exact"], w["drop"])
            mono.append([m, v["instances"], v["failures"], where, drop])
        table("E[tau] decreasing in K", ["method", "instances", "failures", "worst instance", "worst drop"], mono)
        table("Errors", ["method", "failed rows"], [[m, n] for m, n in self.errors.items()])
        if self.rules:
            table(
                "User rules: claim and measured defect (credited as lossless only if claimed and 0 on every row)",
                ["method", "origin", "lossless claim", "rows", "defect != 0", "credited", "note"],
                [[m, r["origin"], _CLAIM[r["lossless_claimed"]], r["rows"], r["nonzero_defects"],
                  "yes" if r["credited"] else "no", r["note"] or "-"] for m, r in self.rules.items()],
            )  # fmt: skip
        return "\n".join(lines) + "\n"

    def write(self, out: str | Path, *, plots: bool = True) -> list[Path]:
        """Write ``summary.md``, ``summary.json`` and (``plots``) ``gap_closure.png``, ``tau_vs_k.png``.

        Parameters
        ----------
        out : str or Path
            Folder to write into (created if missing).
        plots : bool
            Also draw the PNGs (imports matplotlib, Agg backend).

        Returns
        -------
        list of Path
            The files written.

        Raises
        ------
        ValueError
            ``out`` is the summarized dataset folder or inside it (:func:`check_summary_dir`).
        """
        check_summary_dir(self.directory, out)
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.md").write_text(self.to_markdown())
        (out / "summary.json").write_text(json.dumps(self.to_json(), indent=2) + "\n")
        files = [out / "summary.md", out / "summary.json"]
        if plots:
            files += _plot(self, out)
        return files


#: The gap-closure histogram's range: values outside it (a method far below the baseline where
#: the baseline is close to OPT gives -1000s) are drawn in the end bins and counted in the legend.
GAP_PLOT_RANGE: tuple[float, float] = (-1.0, 1.0)


def _plot(summary: Summary, out: Path) -> list[Path]:
    """Histogram of gap closure per method (K pooled; not the baseline, whose closure is 0) and
    mean E[tau]/OPT against K with 10-90% bands."""
    from matplotlib.figure import Figure  # no pyplot: the Agg canvas, no global backend state
    from matplotlib.ticker import MaxNLocator

    colours = {m: f"C{i % 10}" for i, m in enumerate(summary.methods)}
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    lo, hi = GAP_PLOT_RANGE
    bins = np.linspace(lo, hi, 25)
    for m, xs in summary.gap_values.items():
        if xs and m != summary.baseline:
            lossy = "" if next(c["lossless"] for c in summary.cells if c["method"] == m) else ", lossy"
            outside = sum(1 for x in xs if not lo <= x <= hi)
            note = f", {outside} clipped" if outside else ""
            ax.hist(
                np.clip(xs, lo, hi),
                bins=bins,
                histtype="step",
                linewidth=1.5,
                color=colours[m],
                label=f"{m} (n={len(xs)}{note}{lossy})",
            )
    ax.set_xlabel(f"gap closure over {summary.baseline} (values outside [{lo:g}, {hi:g}] in the end bins)")
    ax.set_ylabel("instances x K")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    else:
        ax.text(0.5, 0.5, "no gap closure values", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(out / "gap_closure.png", dpi=120)

    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    for m in summary.methods:
        cells = [c for c in summary.cells if c["method"] == m and c["ratio"]["n"]]
        if cells:
            k = [c["K"] for c in cells]
            ax.plot(k, [c["ratio"]["mean"] for c in cells], marker="o", color=colours[m], label=m)
            lo, hi = [c["ratio"]["q10"] for c in cells], [c["ratio"]["q90"] for c in cells]
            ax.fill_between(k, lo, hi, color=colours[m], alpha=0.2)
    ax.set_xlabel("K (drafts)")
    ax.set_ylabel("E[tau] / OPT (mean, 10-90% band)")
    if summary.ks:
        ax.set_xticks(list(summary.ks))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out / "tau_vs_k.png", dpi=120)
    return [out / "gap_closure.png", out / "tau_vs_k.png"]


def summarize(
    directory: str | Path, out: str | Path | None = None, *, baseline: str | None = None, plots: bool = True
) -> Summary:
    r"""Summarize a sweep directory: the per-(method, K) tables, the violations and a claim search over K.

    .. math::
        \text{ratio} = \frac{E[\tau]}{\mathrm{OPT}(K)}, \qquad
        \text{gap closure} = \frac{E[\tau] - E_\text{base}[\tau]}{\mathrm{OPT}(K) - E_\text{base}[\tau]}

    per instance, for each (method, K). The ratio skips rows without OPT (and is 1 when
    OPT = 0 = E[tau]); the gap closure needs the baseline's row for the same (instance, K) and
    OPT - E_base > :data:`GAP_TOL` (else the instance is counted as ``excluded``). The best
    method of an (instance, K) is the largest exact E[tau] among lossless methods, ties shared
    equally, among the methods credited as lossless (see the module docstring: a user's rule
    must claim it and measure a defect of exactly 0 on every row). A lossless method's (or a
    claiming rule's) row is a violation when its exact ``validity_defect`` is not 0,
    or its float defect exceeds :data:`DEFECT_TOL`. A monotonicity failure is an instance where
    E[tau] at some K is below E[tau] at a smaller K (by more than :data:`DROP_TOL` unless both
    values are exact); the worst drop is over all pairs of K.

    Parameters
    ----------
    directory : str or Path
        A sweep directory (``part-*.parquet`` files, schema :func:`~spectr_gbv.sweep.schema.arrow_schema`).
    out : str, Path or None
        Where to write ``summary.md``, ``summary.json`` and the PNGs (:meth:`Summary.write`);
        None (default) writes nothing. Never the sweep directory or a folder inside it (the
        dataset must hold Parquet files only); the CLI's default is :func:`default_summary_dir`.
    baseline : str, optional
        The method the gap closure is measured from; a method of the dataset. Default
        :data:`DEFAULT_BASELINE` when the dataset has it, else its first method.
    plots : bool
        With ``out``, also write ``gap_closure.png`` and ``tau_vs_k.png``. False never imports
        matplotlib.

    Returns
    -------
    Summary

    Raises
    ------
    ValueError
        ``directory`` is not a folder (a folder without parts gives an empty summary), ``out``
        is inside it (checked before anything is read), or ``baseline`` is not a method of the
        dataset (the message lists the methods present; nothing is written).
    PartError
        A damaged, foreign or corrupt part (:func:`~spectr_gbv.sweep.parts.read_part`; named).
    ImportError
        pyarrow (or, for plots, matplotlib) is not installed.

    Examples
    --------
    >>> s = summarize("runs/sweep1", out="runs/sweep1-summary")  # doctest: +SKIP
    >>> print(s.to_markdown())  # doctest: +SKIP
    """
    directory = Path(directory)
    if out is not None:
        check_summary_dir(directory, out)
    table = read_table(directory)
    rows = table.select(list(_COLUMNS)).to_pylist()
    order = {m: i for i, m in enumerate(STABLE_METHOD_NAMES)}
    methods = tuple(sorted({r["method"] for r in rows}, key=lambda m: (order.get(m, len(order)), m)))
    if baseline is None:
        baseline = DEFAULT_BASELINE if DEFAULT_BASELINE in methods or not methods else methods[0]
    elif methods and baseline not in methods:
        raise ValueError(
            f"baseline: {baseline!r} is not a method of the dataset {str(directory)!r}; methods present: "
            f"{', '.join(methods)}"
        )
    registered = {m for m in methods if is_registered(m) or m in available_methods()}
    lossless = {m: _lossless(m) for m in methods}  # competes for "best among lossless"
    claimed = dict(lossless)  # checked for violations
    rules = {}
    for m in methods:
        if m not in registered:
            origin, claim, note = _rule_claim(m)
            mine = [r for r in rows if r["method"] == m and r["error"] is None]
            nonzero = sum(1 for r in mine if _value(r["validity_defect"], r["validity_defect_float"]) != 0)
            claimed[m] = claim is True
            lossless[m] = claim is True and bool(mine) and nonzero == 0
            rules[m] = {
                "origin": origin, "lossless_claimed": claim, "rows": len(mine), "nonzero_defects": nonzero,
                "credited": lossless[m], "note": note,
            }  # fmt: skip
    errors = dict.fromkeys(methods, 0)
    failed: dict[tuple[str, int], int] = {}
    ok: dict[tuple[str, int], list[dict[str, Any]]] = {}
    value: dict[tuple[str, str, int], Fraction] = {}  # (method, instance_id, K) -> E[tau]
    exact: set[tuple[str, str, int]] = set()  # the keys of value that are exact
    for r in rows:
        cell, key = (r["method"], r["K"]), (r["method"], r["instance_id"], r["K"])
        ok.setdefault(cell, [])
        if r["error"] is not None:
            errors[r["method"]] += 1
            failed[cell] = failed.get(cell, 0) + 1
            continue
        ok[cell].append(r)
        v = _value(r["expected_accepted"], r["expected_accepted_float"])
        if v is not None:
            value[key] = v
            if _exact(r["expected_accepted"]) is not None:
                exact.add(key)
    wins, contested = _best(value, lossless)
    cells, gap_values = [], {m: [] for m in methods}
    for m, k in sorted(ok, key=lambda mk: (methods.index(mk[0]), mk[1])):
        cell, gaps = _cell(m, k, sorted(ok[(m, k)], key=lambda r: r["instance_id"]), value, baseline, claimed[m])
        cell["errors"] = failed.get((m, k), 0)
        cell["lossless"] = lossless[m]
        if lossless[m]:
            n, win = contested.get(k, 0), wins.get((m, k), Fraction(0))
            cell["best"] = {"contested": n, "wins": float(win), "share": float(win / n) if n else None}
        cells.append(cell)
        gap_values[m].extend(gaps)
    summary = Summary(
        directory=str(directory),
        baseline=baseline,
        rows=len(rows),
        rows_ok=sum(len(v) for v in ok.values()),
        instances=len({r["instance_id"] for r in rows}),
        methods=methods,
        ks=tuple(sorted({r["K"] for r in rows})),
        errors=errors,
        cells=tuple(cells),
        violations=_violations_by_method(cells),
        monotonicity=_monotonicity(methods, value, exact),
        gap_values={m: tuple(xs) for m, xs in gap_values.items()},
        rules=rules,
    )
    if out is not None:
        summary.write(out, plots=plots)
    return summary


def _best(
    value: dict[tuple[str, str, int], Fraction], lossless: dict[str, bool]
) -> tuple[dict[tuple[str, int], Fraction], dict[int, int]]:
    """(method, K) -> wins (ties shared equally) and K -> contested instances, lossless methods only."""
    groups: dict[tuple[str, int], list[tuple[str, Fraction]]] = {}
    for (m, inst, k), v in value.items():
        if lossless[m]:
            groups.setdefault((inst, k), []).append((m, v))
    wins: dict[tuple[str, int], Fraction] = {}
    contested: dict[int, int] = {}
    for (_inst, k), entries in groups.items():
        contested[k] = contested.get(k, 0) + 1
        top = max(v for _, v in entries)
        winners = [m for m, v in entries if v == top]
        for m in winners:
            wins[(m, k)] = wins.get((m, k), Fraction(0)) + Fraction(1, len(winners))
    return wins, contested


def _cell(
    m: str,
    k: int,
    rows: list[dict[str, Any]],
    value: dict[tuple[str, str, int], Fraction],
    baseline: str,
    lossless: bool,
) -> tuple[dict[str, Any], list[float]]:
    """The statistics of one (method, K) over its rows without error, and its gap closure values."""
    ratios, gaps, excluded = [], [], 0
    count, worst, worst_v = 0, None, Fraction(-1)
    for r in rows:
        inst, opt = r["instance_id"], r["opt"]
        v = value.get((m, inst, k))
        if v is not None and opt is not None and math.isfinite(opt):
            if opt != 0:
                ratios.append(float(v / Fraction(opt)))
            elif v == 0:
                ratios.append(1.0)
            base = value.get((baseline, inst, k))
            if base is not None:
                if Fraction(opt) - base > GAP_TOL:
                    gaps.append(float((v - base) / (Fraction(opt) - base)))
                else:
                    excluded += 1
        text = r["validity_defect"]
        defect = _value(text, r["validity_defect_float"])
        if lossless and defect is not None and (defect != 0 if _exact(text) is not None else defect > DEFECT_TOL):
            count += 1
            if abs(defect) > worst_v:
                worst_v = abs(defect)
                worst = {
                    "instance_id": inst,
                    "K": k,
                    "defect": text or repr(float(defect)),
                    "defect_float": float(defect),
                }
    cell = {
        "method": m, "K": k, "lossless": lossless, "instances": len(rows), "errors": 0,
        "ratio": _stats(ratios), "gap_closure": {**_stats(gaps), "excluded": excluded}, "best": None,
        "violations": {"count": count, "worst": worst} if lossless else None,
    }  # fmt: skip
    return cell, gaps


def _violations_by_method(cells: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Lossless method -> ``{"count", "worst"}`` over all K (the worst by exact magnitude)."""
    result: dict[str, dict[str, Any]] = {}
    for c in cells:
        if c["violations"] is None:
            continue
        entry = result.setdefault(c["method"], {"count": 0, "worst": None})
        entry["count"] += c["violations"]["count"]
        w, old = c["violations"]["worst"], entry["worst"]
        if w is not None and (old is None or _magnitude(w) > _magnitude(old)):
            entry["worst"] = w
    return result


def _magnitude(witness: dict[str, Any]) -> Fraction:
    return abs(_value(witness["defect"], witness["defect_float"]) or Fraction(0))


def _monotonicity(
    methods: tuple[str, ...], value: dict[tuple[str, str, int], Fraction], exact: set[tuple[str, str, int]]
) -> dict[str, dict[str, Any]]:
    """Per method: instances whose E[tau] drops when K grows (worst drop over all pairs of K)."""
    series: dict[tuple[str, str], list[tuple[int, Fraction]]] = {}
    for (m, inst, k), v in value.items():
        series.setdefault((m, inst), []).append((k, v))
    result: dict[str, dict[str, Any]] = {m: {"instances": 0, "failures": 0, "worst": None} for m in methods}
    worst: dict[str, Fraction] = {}
    for (m, inst), points in sorted(series.items()):
        if len(points) < 2:
            continue
        points.sort()
        result[m]["instances"] += 1
        failed = False
        top_k, top = points[0]
        for k, v in points[1:]:
            drop = top - v
            both_exact = (m, inst, top_k) in exact and (m, inst, k) in exact
            if drop > (0 if both_exact else DROP_TOL):
                failed = True
                if m not in worst or drop > worst[m]:
                    worst[m] = drop
                    result[m]["worst"] = {
                        "instance_id": inst, "K_from": top_k, "K_to": k, "drop": float(drop),
                        "drop_exact": format_value(drop) if both_exact else None,
                    }  # fmt: skip
            if v > top:
                top_k, top = k, v
        result[m]["failures"] += failed
    return result


__all__ = [
    "DEFAULT_BASELINE",
    "DEFECT_TOL",
    "DROP_TOL",
    "GAP_TOL",
    "SUMMARY_SUFFIX",
    "Summary",
    "check_summary_dir",
    "default_summary_dir",
    "summarize",
]
