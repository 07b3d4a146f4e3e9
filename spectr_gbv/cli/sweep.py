"""``spectr-gbv sweep``: run a declared grid on Ray into a Parquet dataset; ``sweep summarize DIR``: report on it.

``sweep bench``: the real-model bench grid on Ray, one configuration per task (:mod:`spectr_gbv.realpair.sweep_task`).
``sweep verify DIR``: every part of a dataset read back and checked (:func:`spectr_gbv.sweep.store.verify_folder`).

Exit statuses of the run forms: 0 done; 1 a task failed or a row of the grid carries an error;
2 a usage or input error, one line (a bad grid, broken instance files, a locked, unwritable or
damaged folder, an unreachable ``--address``); 130 interrupted (Ctrl-C), one line.

Argument parsing only: the grid, the runner and the summary live in :mod:`spectr_gbv.sweep`
and are imported inside the handlers, so ``--help`` imports neither numpy nor ray.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from spectr_gbv.cli.common import UsageError, print_json

#: Exit status of a sweep stopped by Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130


def _run_guarded(args: argparse.Namespace, label: str, call: Any) -> Any:
    """``call()``, with the sweep's errors as one-line usage errors and Ctrl-C as one line.

    Returns the call's result, or :data:`EXIT_INTERRUPTED` (an int) after Ctrl-C, whose line
    (``spectr-gbv LABEL: interrupted; N rows stored, rerun the same command to resume``) is
    printed here.
    """
    from spectr_gbv.sweep.runner import SweepInterrupted

    try:
        return call()
    except (ImportError, ValueError, OSError) as exc:  # OSError: SweepWriteError (read-only folder, disk full)
        raise UsageError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
    except SweepInterrupted as exc:
        print(f"spectr-gbv {label}: {exc}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        print(f"spectr-gbv {label}: interrupted; 0 rows stored, rerun the same command to resume", file=sys.stderr)
        return EXIT_INTERRUPTED


def run(args: argparse.Namespace) -> int:
    """Execute ``sweep`` (the run form).

    Returns 0; 1 when a task failed after its retries or a row of the grid carries an error;
    2 for a usage or input error (printed as one line); 130 after Ctrl-C.
    """
    from spectr_gbv.sweep.grid import grid_from_args, load_grid_toml

    if not args.out:
        raise UsageError("--out DIR is required (the Parquet dataset's folder)")
    if args.num_cpus is not None and args.num_cpus < 1:
        raise UsageError(f"--num-cpus must be >= 1, got {args.num_cpus}")
    try:
        base = load_grid_toml(args.grid) if args.grid else None
        grid = grid_from_args(
            random=args.random or (),
            instances=args.instances,
            battery=args.battery,
            methods=args.methods,
            ks=args.K,
            measures=args.measures,
            base=base,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    _note_single_draft(grid, args.quiet)
    try:
        from spectr_gbv.sweep.runner import run_sweep
    except ImportError as exc:
        raise UsageError(str(exc).splitlines()[0]) from exc

    result = _run_guarded(
        args,
        "sweep",
        lambda: run_sweep(grid, args.out, address=args.address, num_cpus=args.num_cpus, show_progress=not args.quiet),
    )
    if isinstance(result, int):
        return result
    return _finish(args, result, f"Sweep of {result.tasks_total} instances: {result.tasks_done} tasks done")


def _note_single_draft(grid: Any, quiet: bool) -> None:
    """One stderr line naming the methods run at fewer K than the grid names (single-draft and ``ar``)."""
    fewer = [m for m in grid.methods if tuple(grid.method_ks(m)) != tuple(grid.ks)]
    if fewer and not quiet:
        print(
            f"spectr-gbv sweep: note: {', '.join(fewer)}: run at K = 1 only (a rule that reads draft 0 only, or "
            "no draft, has the same law at every K)",
            file=sys.stderr,
        )


def _warn_foreign(directory: Any, quiet: bool) -> None:
    """One stderr line when the dataset folder holds files other than Parquet (its readers would fail)."""
    if quiet:
        return
    from spectr_gbv.sweep.store import non_parquet_entries

    names = non_parquet_entries(directory)
    if names:
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        print(
            f"spectr-gbv sweep: note: {directory} holds entries that are not Parquet files ({shown}): pandas, "
            "pyarrow, polars and DuckDB fail on the folder until they are moved out of it",
            file=sys.stderr,
        )


def _finish(args: argparse.Namespace, result: Any, head: str) -> int:
    """Print a sweep result (JSON with ``--json``, else one line after ``head``).

    Returns 1 when a task failed or a row of the grid carries an error (each counted in the
    line), else 0.
    """
    _warn_foreign(result.out, args.quiet)
    if args.json:
        print_json(dataclasses.asdict(result))
    else:
        errors = result.rows_with_errors
        print(
            f"{head}, {result.tasks_skipped} skipped (already stored), {result.tasks_failed} failed; "
            f"{result.rows_written} rows written in {result.seconds:.1f} s to {result.out}"
            + (" (rerun the same command to retry the failed tasks)" if result.tasks_failed else "")
            + (f"; {errors} rows of the grid carry an error (see the 'error' column)" if errors else "")
            + "."
        )
    return 1 if result.tasks_failed or result.rows_with_errors else 0


def run_summarize(args: argparse.Namespace) -> int:
    """Execute ``sweep summarize DIR``: write the summary files, print it as Markdown (or JSON with ``--json``)."""
    try:
        from spectr_gbv.sweep.summary import default_summary_dir, summarize
    except ImportError as exc:
        raise UsageError(f"sweep summarize needs the 'sweep' extra: pip install 'spectr_gbv[sweep]' ({exc})") from exc
    out = args.summary_out or default_summary_dir(args.directory)
    try:
        summary = summarize(args.directory, out, baseline=args.baseline, plots=not args.no_plots)
    except (ValueError, OSError) as exc:  # a damaged, foreign or corrupt part is named by the message
        raise UsageError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
    if not args.quiet:
        print(f"spectr-gbv sweep summarize: summary files written to {out}", file=sys.stderr)
    _warn_foreign(args.directory, args.quiet)
    if args.json:
        print_json(summary.to_json())
    else:
        print(summary.to_markdown())
    return 0


def run_verify(args: argparse.Namespace) -> int:
    """Execute ``sweep verify DIR``: read every part, check its schema and content hash.

    Returns 0 when every part is whole, 1 when a part is damaged, foreign or corrupt (each named on
    its own stdout line), 2 for a usage error (no such folder, no pyarrow).
    """
    try:
        from spectr_gbv.realpair.sweep_task import BENCH_TABLE
        from spectr_gbv.sweep.store import verify_folder

        report = verify_folder(args.directory, kinds=(BENCH_TABLE,))
    except (ImportError, ValueError) as exc:
        raise UsageError(str(exc).splitlines()[0]) from exc
    if args.json:
        data = dataclasses.asdict(dataclasses.replace(report, bad=()))
        print_json({**data, "directory": str(args.directory), "bad": [str(e) for e in report.bad]})
        return 1 if report.bad else 0
    for err in report.bad:
        print(f"BAD {err}")
    notes = [f"{report.unhashed} parts written before content hashes (read unchecked)"] if report.unhashed else []
    if report.duplicates:
        notes.append(f"{report.duplicates} rows repeat a stored key (readers that do not deduplicate see them twice)")
    verdict = f"{len(report.bad)} bad parts" if report.bad else "every part whole (schema and content hash match)"
    print(
        f"{args.directory}: {report.parts} parts, {report.rows} rows in the good ones; {verdict}"
        + "".join(f"; {n}" for n in notes)
        + "."
    )
    return 1 if report.bad else 0


def run_bench(args: argparse.Namespace) -> int:
    """Execute ``sweep bench``: the bench grid on Ray, one task per configuration; 1 when a task failed."""
    from spectr_gbv.cli.bench import build_config

    if not args.out:
        raise UsageError("--out DIR is required (the Parquet dataset's folder)")
    if args.num_cpus is not None and args.num_cpus < 1:
        raise UsageError(f"--num-cpus must be >= 1, got {args.num_cpus}")
    config = build_config(args)
    try:
        from spectr_gbv.realpair.sweep_task import SHIPPED_MODELS, BenchSweep, resolve, run_bench_sweep
    except ImportError as exc:
        raise UsageError(str(exc).splitlines()[0]) from exc
    for option, spec in (("--models", args.models), ("--prompt-loader", args.prompt_loader)):
        try:
            if spec is not None:
                resolve(spec)
        except ValueError as exc:
            raise UsageError(f"{option} {exc}") from exc
    sweep = BenchSweep(config, args.models or SHIPPED_MODELS, args.prompt_loader, args.cache_dir)
    result = _run_guarded(
        args,
        "sweep bench",
        lambda: run_bench_sweep(
            sweep, args.out, address=args.address, num_cpus=args.num_cpus, show_progress=not args.quiet
        ),
    )
    if isinstance(result, int):
        return result
    return _finish(args, result, f"Bench sweep of {result.tasks_total} configurations: {result.tasks_done} done")


def _add_bench_parser(forms: argparse._SubParsersAction) -> None:
    """Register ``sweep bench`` (options as ``spectr-gbv bench``'s, plus the Ray and model-spec ones)."""
    b = forms.add_parser(
        "bench",
        help="the real-model bench grid on Ray, one configuration per task (one GPU each when the cluster has GPUs)",
        description="Run the decoding grid of 'spectr-gbv bench' (every method, K, L, T) on Ray, one task per "
        "configuration on every dataset and prompt, each task on one GPU when the cluster has GPUs (else one "
        "CPU), into a Parquet dataset (one row per dataset and configuration). A rerun skips the stored rows.",
    )
    b.add_argument("--preset", default="quick", help="quick or full (default quick): datasets, prompts, axes")
    b.add_argument("--datasets", help="comma-separated prompt sets (default: the preset's)")
    b.add_argument("--methods", help="comma-separated methods (ar is always run)")
    b.add_argument("--prompts", dest="num_prompts", metavar="N", help="prompts per dataset")
    b.add_argument("--max-new-tokens", dest="max_new_tokens", metavar="N", help="tokens generated per prompt")
    b.add_argument("--K", help="K sweep values, e.g. 1,3,5,7")
    b.add_argument("--L", help="L sweep values, e.g. 4,8,12,16")
    b.add_argument("--T", help="T sweep values, e.g. 0.1,0.4,0.7")
    b.add_argument("--seed", help="prompt selection and decoding seed (default 0)")
    b.add_argument(
        "--models",
        default=None,
        metavar="MODULE:FUNCTION",
        help="a function returning the BenchModels pair (default: the shipped pair of 'spectr-gbv bench')",
    )
    b.add_argument(
        "--prompt-loader", default=None, metavar="MODULE:FUNCTION", help="(config, models) -> encoded prompts"
    )
    b.add_argument("--cache-dir", metavar="PATH", help="cache root of the prompt data")
    b.add_argument("--out", metavar="DIR", help="the dataset's folder (created; rows already there are kept)")
    b.add_argument("--address", default=None, help="an existing Ray cluster (default: a local Ray)")
    b.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray (default: all)")
    b.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    b.add_argument("--json", action="store_true", help="print the result as JSON")
    b.set_defaults(func=run_bench, no_peer=True, no_predict=True, no_lossless=True)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``sweep`` subcommand and its ``summarize`` form."""
    p = sub.add_parser(
        "sweep",
        help="run a grid of instances x methods x K on Ray into a Parquet dataset (resumable); 'summarize' it",
        description=(
            "Run a declared grid (a TOML file or the flags below) on Ray, one task per instance, into a "
            "Parquet dataset (one row per instance, method and K). A rerun skips the rows already stored. "
            "'spectr-gbv sweep summarize DIR' reports on a dataset; 'spectr-gbv sweep verify DIR' checks its parts."
        ),
    )
    p.add_argument("--grid", metavar="FILE.toml", help="the grid as a TOML file (flags below override its fields)")
    p.add_argument(
        "--random",
        action="append",
        metavar="n,L,seeds[,zero_prob]",
        help="a family of random exact instances, seeds a range such as 0-99 (repeatable)",
    )
    p.add_argument("--instances", metavar="DIR", help="a folder of instance JSON files")
    p.add_argument("--battery", action="store_true", help="add the validate battery's instances")
    p.add_argument(
        "--methods",
        default=None,
        help="comma-separated registered names or module:attribute naming your own rule (default sd,bv,mdbv; "
        "single-draft methods run at K = 1 only)",
    )
    p.add_argument("--K", default=None, help="numbers of drafts in 1..8, e.g. 2,3 or 2-4 (default 1,2)")
    p.add_argument("--measures", default=None, help="comma-separated subset of tau,bounds,opt,ot (default tau,bounds)")
    p.add_argument("--out", metavar="DIR", help="the dataset's folder (created; rows already there are kept)")
    p.add_argument("--address", default=None, help="an existing Ray cluster (default: a local Ray)")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray (default: all)")
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr (also: SPECTR_GBV_QUIET=1)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)
    forms = p.add_subparsers(dest="sweep_command", metavar="{summarize,verify,bench}")
    s = forms.add_parser("summarize", help="tables (and plots) of a sweep dataset")
    s.add_argument("directory", metavar="DIR", help="the sweep's dataset folder")
    s.add_argument(
        "--out",
        dest="summary_out",
        metavar="OUT",
        default=None,
        help="folder for summary.md, summary.json and the plots, outside DIR (default: DIR-summary beside DIR)",
    )
    s.add_argument(
        "--baseline",
        default=None,
        help="the method others are compared with, one of the dataset's (default mdbv, else its first method)",
    )
    s.add_argument("--no-plots", action="store_true", help="tables only")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.add_argument("--quiet", action="store_true", help="no progress bars or notes on stderr")
    s.set_defaults(func=run_summarize)
    v = forms.add_parser(
        "verify",
        help="check every part of a sweep dataset: readable, the sweep's schema, rows matching their hash",
        description="Read every part-*.parquet file of a sweep folder and check it: readable Parquet, the "
        "sweep's columns and types, and rows matching the SHA-256 recorded when it was written (a changed "
        "byte reads back as another number in pandas, polars and DuckDB, which do not check it). Exit 0 when "
        "every part is whole, 1 when one is not (each named on its own line).",
    )
    v.add_argument("directory", metavar="DIR", help="the sweep's dataset folder")
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    v.set_defaults(func=run_verify, quiet=False)
    _add_bench_parser(forms)
