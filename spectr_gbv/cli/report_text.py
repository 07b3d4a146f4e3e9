"""The text of ``spectr-gbv report``: every line at most :data:`WIDTH` columns.

The default view (about 80 lines on the default instance at K = 1, 2, 3) prints the methods
table with a phrase per method, the columns' legend, each claim's verdict with its key
evidence, the multi-iteration table and a closing summary computed from the table. The
detail view (``--detail``) adds the exact fractions, every evidence line of every claim and
the E[tokens] columns. Both wrap with a hanging indent; ``--json`` keeps everything.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

from spectr_gbv.core.methods import is_registered, method_spec, methods_where
from spectr_gbv.core.numbers import Scalar, format_value
from spectr_gbv.ledger.report import is_lossy_method

if TYPE_CHECKING:
    from spectr_gbv.ledger.claims import Claim
    from spectr_gbv.ledger.report import KSummary, Report, Standing
    from spectr_gbv.simulate.exact import ExactResult

#: Widest line the report prints (columns).
WIDTH = 100
#: Longest exact fraction the detail view prints in full (longer ones: ``~`` and 6 decimals).
MAX_FRACTION_LEN = 30
#: The bound rows under the methods table: label, BoundRow attribute, phrase.
BOUND_ROWS: tuple[tuple[str, str, str], ...] = (
    ("B", "cic_bound", "SpecTr-GBV's bound (CIC)"),
    ("B_BV", "cic_bound_lossless", "lossless analogue of B"),
    ("OPT", "opt", "LP: best stateless lossless"),
    ("OT", "ot", "LP: best coupling (ceiling)"),
)
#: Expected-token columns of the multi-iteration table in the detail view (m = 1..4).
TOKEN_COLUMNS = 4
#: Spaces :func:`_wrap` does not break at: around `` = `` and after ``K=2:``.
_GLUE = re.compile(r" = |\bK=\d+: ")
_NBSP = "\u00a0"


def _wrap(text: str, first: str = "", rest: str | None = None) -> list[str]:
    """``text`` wrapped at :data:`WIDTH` with the prefix ``first``, then ``rest`` (a hanging indent).

    ``a = b`` and ``K=2: x`` are kept on one line (no break around `` = `` or after ``K=2:``).
    """
    glued = _GLUE.sub(lambda m: m.group(0).replace(" ", _NBSP), text)
    lines = textwrap.wrap(
        glued,
        width=WIDTH,
        initial_indent=first,
        subsequent_indent=first if rest is None else rest,
        break_on_hyphens=False,
    )
    return [line.replace(_NBSP, " ") for line in lines] or [first.rstrip()]


def _dec(value: Scalar | float | None) -> str:
    """One number format: 6 decimals (below 1e-3 and nonzero: 3 significant digits); None -> ``-``."""
    if value is None:
        return "-"
    x = float(value)
    return f"{x:.6f}" if x == 0 or abs(x) >= 1e-3 else f"{x:.3e}"


def _defect_text(r: ExactResult) -> str:
    """``0`` for a defect exactly 0 (on a float64 instance: within its tolerance), else :func:`_dec`."""
    return "0" if r.validity_defect == 0 or (not r.exact and r.lossless) else _dec(r.validity_defect)


def _exact_text(value: Scalar | float | None) -> str:
    """A Fraction in full (``~`` and 6 decimals past :data:`MAX_FRACTION_LEN` characters); a float rounded."""
    if value is None:
        return "-"
    if isinstance(value, Fraction):
        text = format_value(value)
        return text if len(text) <= MAX_FRACTION_LEN else "~" + _dec(value)
    return f"{float(value):.10g}"


def _shows_defect(r: ExactResult) -> bool:
    """A defect line under the row: a defect not exactly 0 (on a float64 instance: above its tolerance)."""
    return r.validity_defect != 0 and (r.exact or not r.lossless)


def _summary_phrase(name: str) -> str:
    return method_spec(name).summary if is_registered(name) else "a user's rule"


def _grid(rows: Sequence[Sequence[str]], align: str) -> list[str]:
    """Rows of cells padded to their column widths; ``align`` has one ``<`` or ``>`` per column."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(align))]
    out = []
    for r in rows:
        cells = [c.ljust(w) if a == "<" else c.rjust(w) for c, w, a in zip(r, widths, align, strict=True)]
        out.append("  ".join(cells).rstrip())
    return out


def _k_blocks(ks: Sequence[int], name_w: int, cell_w: int, phrase_w: int) -> list[list[int]]:
    """Split ``ks`` into table blocks that fit :data:`WIDTH` (the first block carries the phrases)."""
    first = max(1, (WIDTH - name_w - 2 - phrase_w) // (cell_w + 2))
    later = max(1, (WIDTH - name_w) // (cell_w + 2))
    blocks, rest = [list(ks[:first])], list(ks[first:])
    while rest:
        blocks.append(rest[:later])
        rest = rest[later:]
    return blocks


def _methods_table(rep: Report) -> list[str]:
    """The one-iteration table: E[tau] per K, a ``defect`` line under any row not exactly lossless, the bounds."""
    methods = list(dict.fromkeys(m for m, _ in rep.results))
    names = {m: m + (" *" if is_lossy_method(m) else "") for m in methods}
    body: list[tuple[str, dict[int, str], str]] = []  # (first cell, K -> cell, phrase)
    for m in methods:
        body.append((names[m], {k: _dec(rep.results[(m, k)].expected_accepted) for k in rep.ks}, _summary_phrase(m)))
        if any(_shows_defect(rep.results[(m, k)]) for k in rep.ks):
            body.append(("  defect", {k: _defect_text(rep.results[(m, k)]) for k in rep.ks}, ""))
    bounds = [(label, {b.K: _dec(getattr(b, attr)) for b in rep.bounds}, phrase) for label, attr, phrase in BOUND_ROWS]
    name_w = max(len("method"), *(len(r[0]) for r in body + bounds))
    cell_w = max(8, *(len(c) for r in body + bounds for c in r[1].values()))
    phrase_w = max(len(r[2]) for r in body + bounds)
    out: list[str] = []
    for i, block in enumerate(_k_blocks(rep.ks, name_w, cell_w, phrase_w)):
        phrases = i == 0
        if i:
            out.append("")
        head = ["method", *(f"K={k}" for k in block)] + (["what it is"] if phrases else [])
        align = "<" + ">" * len(block) + ("<" if phrases else "")

        def row(cells: tuple[str, dict[int, str], str], block: list[int] = block, phrases: bool = phrases) -> list[str]:
            return [cells[0], *(cells[1][k] for k in block)] + ([cells[2]] if phrases else [])

        rule = ["-" * name_w, *("-" * cell_w for _ in block)] + (["-" * phrase_w] if phrases else [])
        rows = [head, rule] + [row(r) for r in body] + [rule] + [row(r) for r in bounds]
        # pad the first column and the K columns to the widths fixed above, the same in every block
        rows = [
            [r[0].ljust(name_w), *(c.rjust(cell_w) for c in r[1 : 1 + len(block)]), *r[1 + len(block) :]] for r in rows
        ]
        out += _grid(rows, align)
    return out


def _table_legend(rep: Report) -> list[str]:
    """The columns and markers of the methods table, defined once (wrapped)."""
    single = [m for m in methods_where(drafts="one") if any(m == mm for mm, _ in rep.results)]
    text = (
        "E[tau]: expected accepted draft tokens per iteration (block efficiency 1 + E[tau]); exact values: "
        "--detail, --json. defect: validity defect, the total-variation distance of the output law from the "
        "target's (0 = exactly lossless, as is a row with no defect line). * = a lossy rule (maybe not here). "
        "CIC: conditionally independent coupling."
    )
    tols = sorted({r.tolerance for r in rep.results.values() if not r.exact and r.tolerance is not None})
    if tols:
        text += f" On this float64 instance a defect within {tols[-1]:g} counts as 0 (float rounding)."
    if single:
        text += f" First draft only: {', '.join(single)}."
    text += " Methods: docs/verifiers.md. Below, each claim's key evidence (all of it: --detail; docs/findings.md)."
    out = _wrap(text)
    notes = sorted({(m, r.tolerance) for (m, _), r in rep.results.items() if r.within_kernel_tolerance})
    for m, tol in notes:
        out += _wrap(
            f"{m}: its kernel comes from a float64 LP; its nonzero defect (<= {tol:g}) is LP rounding, "
            "lossless within that tolerance."
        )
    return out


def _exact_values(rep: Report) -> list[str]:
    """Detail view: every E[tau], defect and closed-form bound as an exact fraction."""
    out = ["Exact values (~: a long fraction rounded; --json prints every value exactly):"]
    methods = list(dict.fromkeys(m for m, _ in rep.results))
    for m in methods:
        res = [rep.results[(m, k)] for k in rep.ks]
        text = f"{m}: E[tau] " + ", ".join(
            f"K={k} {_exact_text(r.expected_accepted)}" for k, r in zip(rep.ks, res, strict=True)
        )
        if all(r.validity_defect == 0 for r in res):
            text += "; defect 0 at every K"
        else:
            text += "; defect " + ", ".join(
                f"K={k} {_exact_text(r.validity_defect)}" for k, r in zip(rep.ks, res, strict=True)
            )
        out += _wrap(text, "  ", "      ")
    for label, attr, _ in BOUND_ROWS[:2]:
        out += _wrap(
            f"{label}: " + ", ".join(f"K={b.K} {_exact_text(getattr(b, attr))}" for b in rep.bounds), "  ", "      "
        )
    return out


def _ledger(title: str, claims: Sequence[Claim], *, detail: bool) -> list[str]:
    """One ledger: per claim its verdict line, then its key evidence (every line with ``detail``)."""
    out = ["", *_wrap(title)]
    for i, c in enumerate(claims, 1):
        statement = c.statement if detail or not c.short else c.short
        out += _wrap(f"{i}. [{c.verdict.upper()}] {c.key}: {statement}", "", "     ")
        for line in c.evidence if detail else c.key_lines():
            out += _wrap(line, "     - ", "       ")
    return out


def _multi_table(rep: Report, *, detail: bool) -> list[str]:
    """Multi-iteration table (E[tokens] columns with ``detail``) and its column definitions."""
    kind = "exact" if rep.instance.exact else "float64"
    out = [
        "",
        *_wrap(
            f"Multi-iteration, {kind}: N = {rep.horizon} tokens (1-draft methods at K = 1, others at the largest K)"
        ),
    ]
    m_cols = min(rep.horizon, TOKEN_COLUMNS) if detail else 0
    head = ["method", "K", "E[calls]", "BE"] + [f"E[tokens] m={m}" for m in range(1, m_cols + 1)]
    rows = [
        [r.method, str(r.K), _dec(r.expected_calls), _dec(r.block_efficiency)]
        + [_dec(t) for t in r.expected_tokens[:m_cols]]
        for r in rep.multi
    ]
    out += _grid([head, ["-" * len(h) for h in head], *rows], "<" + ">" * (len(head) - 1))
    text = (
        "E[calls]: expected target calls until N tokens exist; BE = N / E[calls], tokens per call (not 1 + "
        "E[tau]: later calls start elsewhere, the last is cut at N)."
    )
    text += (
        " E[tokens] m: expected tokens after m target calls (m iterations), not capped at N. Single-draft "
        "methods run at K = 1, the others at the largest K; the tables are read as Markov chains beyond their "
        "depth."
        if detail
        else " E[tokens] after m calls: --detail."
    )
    out += _wrap(text)
    if detail:
        for r in rep.multi:
            out += _wrap(
                f"{r.method}: E[calls] {_exact_text(r.expected_calls)}, BE {_exact_text(r.block_efficiency)}",
                "  ",
                "      ",
            )
    return out


def _standing_text(s: Standing, k: int, opt: float | None) -> str:
    """``name value (tied with n more)`` and where it stands against OPT(k)."""
    text = f"{s.method} {_dec(s.expected_accepted)}" + ("" if s.stateless else " (stateful)")
    ties = f" (tied: {', '.join(s.ties)})" if s.ties else ""
    if s.gap is None or opt is None:
        return text + ties
    if s.at_opt:
        return text + f" = OPT({k}){ties}"
    if s.gap < 0:
        return text + f" > OPT({k}) = {_dec(opt)}{ties}"
    return text + f"{ties}, {_dec(s.gap)} below OPT({k}) = {_dec(opt)} ({s.fraction:.2%} of it)"


def _summary_lines(rep: Report) -> list[str]:
    """The closing summary, computed from the table (:meth:`~spectr_gbv.ledger.report.Report.summary`)."""
    from spectr_gbv.ledger.claims import LP_TOL

    sums: list[KSummary] = rep.summary()
    if not sums:
        return []
    head = "Summary: the best lossless verifier per K here (lossy rows excluded)"
    for oracle in sorted({o for s in sums for o in s.oracles}):
        reach = [
            s.K
            for s in sums
            if s.opt is not None and abs(float(rep.results[(oracle, s.K)].expected_accepted) - s.opt) <= LP_TOL
        ]
        where = "every K" if len(reach) == len(sums) else ("K = " + ", ".join(map(str, reach)) if reach else "")
        head += f"; {oracle} solves this instance's LP" + (f" (OPT(K) at {where})" if where else "")
    if any(s.oracles for s in sums):
        head += "; without it"
    out = ["", *_wrap(head + ":")]
    for s in sums:
        d = s.best_deployable
        if d is None:
            out += _wrap(f"K={s.K}: no lossless method; OPT({s.K}) = {_dec(s.opt)}", "  ", "       ")
            continue
        text = f"K={s.K}: {_standing_text(d, s.K, s.opt)}"
        if not d.stateless and s.best_stateless is not None:
            text += f"; stateless: {_standing_text(s.best_stateless, s.K, s.opt)}"
        out += _wrap(text, "  ", "       ")
    return out


def render(rep: Report, *, detail: bool = False) -> str:
    """The text of ``spectr-gbv report``, every line at most :data:`WIDTH` columns.

    Parameters
    ----------
    rep : Report
        A built report (:func:`~spectr_gbv.ledger.report.build_report`).
    detail : bool
        False (default): the methods table with a phrase per method and its legend, each claim's
        verdict with its key evidence (:meth:`~spectr_gbv.ledger.claims.Claim.key_lines`), the
        multi-iteration E[calls] and BE, and the closing summary (about 90 lines on the default
        instance at K = 1, 2, 3). True: also the exact fractions, every claim's full statement and
        every evidence line, and the E[tokens] columns.

    Returns
    -------
    str
        Lines joined by newlines, no trailing newline; nothing is truncated (long text wraps
        with a hanging indent, K columns past the width go to a second table block).
    """
    inst = rep.instance
    out = _wrap(f"Instance {inst.name} (n={inst.n}, L={inst.L}, {'exact' if inst.exact else 'float64'})")
    kind = "exact" if inst.exact else "float64"
    out += _wrap(f"One iteration, {kind}: E[tau] per K (a defect line follows each row not exactly lossless)")
    out += _methods_table(rep)
    out += _table_legend(rep)
    if detail:
        out += ["", *_exact_values(rep)]
    for title, claims in (
        ("Claims ledger (SpecTr-GBV, Lin et al. 2026, arXiv 2604.25925), verdicts computed now:", rep.claims),
        ("Field ledger (the literature's verifiers and claims), verdicts computed now:", rep.field_claims),
    ):
        if claims:
            out += _ledger(title, claims, detail=detail)
    if rep.multi:
        out += _multi_table(rep, detail=detail)
    out += _summary_lines(rep)
    return "\n".join(out)
