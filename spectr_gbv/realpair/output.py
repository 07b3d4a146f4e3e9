r"""Files written by ``spectr-gbv bench``: ``runs.csv``, ``results.json``, ``summary.md`` and PNG plots.

Every writer takes the JSON-ready dict of :meth:`spectr_gbv.realpair.results.BenchResult.to_dict`
(plus ``machine`` from :func:`machine_info`), so the markdown and the plots can be rebuilt from a
saved ``results.json``; they are rendered by :mod:`spectr_gbv.realpair.report`. Plots use
matplotlib's Agg backend (no display); without matplotlib they are skipped and the summary says so.

=====================  =============================================================
file                   content
=====================  =============================================================
``runs.csv``           one row per dataset x method x K x L x T (:data:`CSV_COLUMNS`)
``results.json``       config, machine, command, step costs, rows, predictions, peer,
                       law tests, samples, errors
``summary.md``         per dataset the BE / SR tables of each sweep, histograms,
                       predicted vs measured BE, the peer's ratios, the law tests
``be_vs_K_<ds>.png``   BE vs K (L, T at the centre), one line per method
``be_vs_L_<ds>.png``   BE vs L; ``sr_vs_L_<ds>.png`` speed-up vs L; ``be_vs_T_<ds>.png``
``hist_<ds>.png``      accepted-length distributions at the centre
=====================  =============================================================
"""

from __future__ import annotations

import csv
import datetime
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from spectr_gbv.realpair.report import plot_results, render_summary

CSV_COLUMNS = (
    "dataset",
    "method",
    "num_drafts",
    "draft_length",
    "temperature",
    "sweeps",
    "prompts",
    "tokens_generated",
    "tokens_emitted",
    "row_iterations",
    "target_calls",
    "draft_calls",
    "target_calls_per_token",
    "block_efficiency",
    "block_efficiency_se",
    "tokens_per_second",
    "ar_tokens_per_second",
    "speedup",
    "time_total",
    "time_draft",
    "time_target",
    "time_verify",
    "accepted_hist",
)
"""Columns of ``runs.csv`` (names of :meth:`~spectr_gbv.realpair.results.RunRow.summary`)."""
_INT_COLUMNS = {"num_drafts", "draft_length", "prompts", "tokens_generated", "tokens_emitted", "row_iterations"}
_INT_COLUMNS |= {"target_calls", "draft_calls"}
_STR_COLUMNS = {"dataset", "method", "sweeps"}


def machine_info(device: str, command: list[str] | None = None) -> dict[str, Any]:
    """Where and how the run happened.

    Parameters
    ----------
    device : str
        The decoder's device (``"cpu"``, ``"cuda"``, ...).
    command : list of str, optional
        The command line (default ``sys.argv``).

    Returns
    -------
    dict
        ``platform``, ``python``, ``processor``, ``cpu_count``, ``torch``, ``transformers``,
        ``torch_threads``, ``device``, ``device_name``, ``command``, ``git_commit`` (``None``
        outside a git checkout; ``+dirty`` when tracked files changed) and ``datetime`` (UTC, ISO 8601).
    """
    import shlex

    import torch

    try:
        import transformers

        tf_version = transformers.__version__
    except ImportError:  # pragma: no cover - the gpu extra installs it
        tf_version = None
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") and torch.cuda.is_available() else None
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "transformers": tf_version,
        "torch_threads": torch.get_num_threads(),
        "device": device,
        "device_name": name,
        "command": shlex.join(command if command is not None else ["spectr-gbv", *sys.argv[1:]]),
        "git_commit": git_commit(),
        "datetime": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def git_commit() -> str | None:
    """HEAD of the checkout holding this package (``+dirty`` if tracked files changed), or None."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if head.returncode:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "-uno"], cwd=root, capture_output=True, text=True)
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def _clean(obj: Any) -> Any:
    """JSON-safe copy: NaN and infinities become None, tuples lists, dict keys strings."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def write_runs_csv(rows: list[dict[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Write the rows with :data:`CSV_COLUMNS` (histogram as a JSON list, NaN as ``nan``)."""
    path = Path(path)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            cells = {k: ("nan" if row.get(k) is None else row.get(k)) for k in CSV_COLUMNS}
            cells["accepted_hist"] = json.dumps(list(row["accepted_hist"]))
            writer.writerow(cells)
    return path


def read_runs_csv(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Rows of a ``runs.csv`` with their types restored (int, float, str, list of int).

    Raises
    ------
    ValueError
        The header is not :data:`CSV_COLUMNS`.
    """
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != CSV_COLUMNS:
            raise ValueError(f"{path}: header {reader.fieldnames} is not the runs.csv columns {list(CSV_COLUMNS)}")
        rows = []
        for raw in reader:
            row: dict[str, Any] = {}
            for key, value in raw.items():
                if key == "accepted_hist":
                    row[key] = [int(x) for x in json.loads(value)]
                elif key in _STR_COLUMNS:
                    row[key] = value
                elif key in _INT_COLUMNS:
                    row[key] = int(value)
                else:
                    row[key] = float(value)
            rows.append(row)
    return rows


def write_outputs(res: dict[str, Any], out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Write ``runs.csv``, the PNGs, ``summary.md`` and ``results.json`` into ``out_dir`` (created).

    Parameters
    ----------
    res : dict
        :meth:`~spectr_gbv.realpair.results.BenchResult.to_dict` with ``machine`` added.
    out_dir : str or PathLike

    Returns
    -------
    dict
        ``csv``, ``json``, ``summary`` (Path) and ``plots`` (list of Path).

    Raises
    ------
    OSError
        ``out_dir`` cannot be created or written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    res = _clean(res)
    files: dict[str, Any] = {"csv": write_runs_csv(res["rows"], out / "runs.csv"), "plots": []}
    try:
        files["plots"] = plot_results(res, out)
    except ImportError as exc:
        res["plot_error"] = f"matplotlib is not installed ({exc}); pip install 'spectr_gbv[bench]'"
    res["files"] = [p.name for p in [files["csv"], *files["plots"]]] + ["summary.md", "results.json"]
    files["summary"] = out / "summary.md"
    files["summary"].write_text(render_summary(res), encoding="utf-8")
    files["json"] = out / "results.json"
    with open(files["json"], "w", encoding="utf-8") as fh:
        json.dump(res, fh, indent=2, allow_nan=False)
        fh.write("\n")
    return files
