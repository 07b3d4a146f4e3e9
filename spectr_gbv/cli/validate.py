"""``spectr-gbv validate module:function``: the conformance harness on a third-party verifier.

Exit status (:data:`spectr_gbv.validate.report.validation_report.EXIT_CODES`): 0 passed; 1 failed (a wrong
output law, a token of target probability 0, or an exception, hang, exit or invalid output on
a valid input); 2 (one line on stderr) for a usage error: a bad import path, an unknown
interface, level, budget, reference or convention; 3 passed, but the output differs from the
named reference's conditional law.

``--interface generation`` (or ``generation_batched``) runs the generation referee
(:func:`spectr_gbv.validate.generation.validate_generation`) on a whole generation loop or a ready
adapter's name, with the same report and exit statuses; the verifier harness's options
(``--level exact``, ``--reference``, ``--instance``, ``--K``, ``--conventions``) are usage errors there.

The verifier's module is imported as ``python -m`` would: from the installed packages, the
``PYTHONPATH``, or the current directory.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from spectr_gbv.cli.common import UsageError

# Copies of the harness's names for --help, so that the CLI starts without importing the
# harness (scipy.stats); tests/validate/harness/test_cli_validate.py keeps them equal to
# spectr_gbv.validate.INTERFACES and spectr_gbv.validate.harness.options.LEVELS, BUDGETS, CONVENTIONS.
INTERFACES: tuple[str, ...] = (
    "generic",
    "chain",
    "hf",
    "batched",
    "batched_torch",
    "generic_torch",
    "chain_torch",
)
LEVELS: tuple[str, ...] = ("exact", "statistical")
BUDGETS: tuple[str, ...] = ("quick", "standard", "thorough")
CONVENTIONS: tuple[str, ...] = ("vllm",)
#: The generation referee's interfaces (:data:`spectr_gbv.validate.generation.GENERATION_INTERFACES` and
#: ``self_drafting``): the positional argument is then a generate loop (``module:function``), a ready adapter's
#: name, or a self-drafting kernel (``module:function``).
GENERATION_INTERFACES: tuple[str, ...] = ("generation", "generation_batched", "self_drafting")
#: Options of the verifier harness that mean nothing to the generation referee: (dest, flag, default).
_NOT_FOR_GENERATION: tuple[tuple[str, str, object], ...] = (
    ("reference", "--reference", None),
    ("instance", "--instance", None),
    ("K", "--K", None),
    ("conventions", "--conventions", ""),
    ("no_probes", "--no-probes", False),
    ("no_search", "--no-search", False),
)
#: Options of the generation referee only: (dest, flag).
_GENERATION_ONLY: tuple[tuple[str, str], ...] = (
    ("pairs", "--pairs"),
    ("m", "--m"),
    ("max_new_tokens", "--max-new-tokens"),
    ("num_draft_tokens", "--num-draft-tokens"),
    ("rows_per_call", "--rows-per-call"),
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``validate`` subcommand."""
    p = sub.add_parser(
        "validate",
        help="check a verifier (module:function) for losslessness, structure and efficiency",
        description=(
            "Run the conformance harness on a verifier: structural probes, the exact or statistical law "
            "on an instance battery, an optional comparison with a named reference algorithm, and an "
            "adversarial search. Exit 0 passed, 1 failed (wrong law, or a failure on a valid input), 2 usage "
            "error, 3 lossless but different from the named --reference."
        ),
    )
    p.add_argument(
        "verifier",
        metavar="module:function",
        help="import path of the verifier (installed, on PYTHONPATH, or a module in the current directory); with "
        "--interface generation a generate loop, or a ready adapter's name (hf-assisted, spectr-decoder:mdbv, ...)",
    )
    p.add_argument(
        "--interface",
        default="generic",
        help=f"one of {', '.join(INTERFACES + GENERATION_INTERFACES)} (default generic); generation: "
        "generate(target, draft, prompt_ids, max_new_tokens, *, temperature, top_k, top_p, seed) checked against "
        "the target's exact sequence law; self_drafting: kernel(draft_logits, target_logits, *, num_draft_tokens, "
        "last_tokens, positions, seeds, temperature) that draws its own drafts, run as a generation loop",
    )
    p.add_argument("--level", default="statistical", help=f"one of {', '.join(LEVELS)} (default statistical)")
    p.add_argument(
        "--reference",
        default=None,
        metavar="NAME[:VARIANT]",
        help="algorithm the verifier claims (sd, bv, mdbv, rrs, rrs:random_order, ...)",
    )
    p.add_argument(
        "--conventions",
        default="",
        metavar="NAMES",
        help=f"conventions to check as part of the verdict, comma-separated ({', '.join(CONVENTIONS)}: -1 "
        "placeholder ids); otherwise they are advisory notes",
    )
    p.add_argument(
        "--budget",
        default="standard",
        help="quick (power 0.99 against a TV error of 0.1 per instance: seconds for a fast verifier), "
        "standard (TV 0.02, the default) or thorough (TV 0.01)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the harness (default 0)")
    p.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="S",
        help="seconds per verifier call (default 10; 60 per generate call for the generation interfaces)",
    )
    p.add_argument(
        "--instance",
        default=None,
        metavar="PATH",
        help="test this instance instead of the battery: an instance JSON file, or a check's instance spec saved "
        "from a report (with its K)",
    )
    p.add_argument(
        "--K", type=int, default=None, help="drafts per iteration for --instance (default: the spec's K, else 2)"
    )
    p.add_argument("--no-probes", action="store_true", help="skip the fixed robustness probes")
    p.add_argument("--no-search", action="store_true", help="skip the adversarial search")
    p.add_argument(
        "--isolation",
        default=None,
        choices=("process", "thread"),
        help="run the verifier in a worker process (default where fork exists) or in-process",
    )
    p.add_argument("--workers", type=int, default=None, help="worker processes for batches (default min(2, CPUs))")
    p.add_argument(
        "--pairs",
        default=None,
        metavar="NAMES",
        help="generation: only these reference pairs, comma-separated; module:attribute "
        "names a custom ReferencePair (or a function returning one)",
    )
    p.add_argument(
        "--m",
        type=int,
        default=None,
        help="generation: test the first m generated tokens in every scenario (default: each scenario's m, 2 or 3)",
    )
    p.add_argument(
        "--max-new-tokens", type=int, default=None, metavar="N", help="generation: max_new_tokens passed (default m)"
    )
    p.add_argument(
        "--num-draft-tokens",
        type=int,
        default=None,
        metavar="L",
        help="self_drafting: drafts per round (default 2)",
    )
    p.add_argument(
        "--rows-per-call",
        type=int,
        default=None,
        metavar="B",
        help="self_drafting: most requests (rows) per kernel call (default 512)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``validate``; returns the report's exit code (0 passed, 1 failed, 3 differs from the reference)."""
    from spectr_gbv.validate import ValidateOptions, load_verifier, validate  # noqa: PLC0415 - keeps CLI start-up light

    if os.getcwd() not in sys.path and "" not in sys.path:  # as ``python -m``: the current directory first
        sys.path.insert(0, os.getcwd())
    if args.interface in GENERATION_INTERFACES:
        return _run_generation(args)
    for dest, flag in _GENERATION_ONLY:
        if getattr(args, dest) is not None:
            raise UsageError(f"{flag} applies to --interface generation / generation_batched / self_drafting only")
    if "-" in args.verifier.split(":", 1)[0]:  # no Python module name has a hyphen: a generation adapter's name
        raise UsageError(f"{args.verifier!r} is a generation adapter's name: add --interface generation")
    try:
        instances = _instances(args.instance, args.K)
        verify = load_verifier(args.verifier, args.interface, isolation=args.isolation)
        options = ValidateOptions(
            interface=args.interface,
            level=args.level,
            reference=args.reference,
            seed=args.seed,
            budget=args.budget,
            time_limit_s=10.0 if args.time_limit is None else args.time_limit,
            probes=not args.no_probes,
            search=not args.no_search,
            conventions=args.conventions,
            instances=instances,
            isolation=args.isolation,
            workers=args.workers,
            quiet=True if args.quiet else None,
        )
        report = validate(verify, options=options)
    except ValueError as exc:
        raise UsageError(str(exc).splitlines()[0]) from exc
    return _print_report(report, args)


def _print_report(report: Any, args: argparse.Namespace) -> int:
    """Name the report after the CLI's argument, print it (text or ``--json``) and return its exit code."""
    report.verifier = args.verifier
    print(report.to_json() if args.json else report.to_text())
    return report.exit_code


def _run_generation(args: argparse.Namespace) -> int:
    """``validate LOOP --interface generation``: the generation referee; the report's exit code.

    Raises
    ------
    UsageError
        An option of the verifier harness (``--level exact``, ``--reference``, ``--instance``,
        ``--K``, ``--conventions``, ``--no-probes``, ``--no-search``), an unknown adapter, a
        callable with the wrong signature, an unknown pair, ``--m`` too large to enumerate,
        ``--max-new-tokens`` below m: one line, exit status 2.
    """
    import importlib.util  # noqa: PLC0415

    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(
            f"--interface {args.interface} needs the gpu extra (no module {', '.join(missing)}; the reference "
            "models are transformers causal LMs); run: pip install 'spectr_gbv[gpu]'"
        )
    from spectr_gbv.validate.generation import validate_generation  # noqa: PLC0415 - keeps CLI start-up light
    from spectr_gbv.validate.generation.interface import load_generate  # noqa: PLC0415

    if args.level != "statistical":
        raise UsageError(f"--level {args.level}: the generation interfaces test the law statistically only")
    for dest, flag, default in _NOT_FOR_GENERATION:
        if getattr(args, dest) != default:
            raise UsageError(f"{flag} does not apply to --interface {args.interface}")
    pairs = _pairs(args.pairs)
    if args.interface == "self_drafting":
        return _run_self_drafting(args, pairs)
    for dest, flag in _GENERATION_ONLY[3:]:
        if getattr(args, dest) is not None:
            raise UsageError(f"{flag} applies to --interface self_drafting only")
    try:
        report = validate_generation(
            load_generate(args.verifier, isolation=args.isolation),
            interface=args.interface,
            budget=args.budget,
            seed=args.seed,
            time_limit_s=60.0 if args.time_limit is None else args.time_limit,
            isolation=args.isolation,
            workers=args.workers,
            pairs=pairs,
            m=args.m,
            max_new_tokens=args.max_new_tokens,
            quiet=True if args.quiet else None,
        )
    except ValueError as exc:
        raise UsageError(str(exc).splitlines()[0]) from exc
    return _print_report(report, args)


def _run_self_drafting(args: argparse.Namespace, pairs: list[Any] | None) -> int:
    """``validate KERNEL --interface self_drafting``: a self-drafting kernel as a generation loop; the exit code.

    Raises
    ------
    UsageError
        ``--max-new-tokens``, a bad ``--num-draft-tokens`` / ``--rows-per-call``, a kernel with the wrong
        signature, an unknown pair or ``--m`` too large: one line, exit status 2.
    """
    from spectr_gbv.validate.generation.kernel_driver import ROWS_PER_CALL, validate_self_drafting  # noqa: PLC0415

    if args.max_new_tokens is not None:
        raise UsageError("--max-new-tokens does not apply to --interface self_drafting (the loop stops at m tokens)")
    try:
        report = validate_self_drafting(
            args.verifier,
            num_draft_tokens=2 if args.num_draft_tokens is None else args.num_draft_tokens,
            budget=args.budget,
            seed=args.seed,
            time_limit_s=600.0 if args.time_limit is None else args.time_limit,
            isolation=args.isolation,
            workers=args.workers,
            pairs=pairs,
            m=args.m,
            rows_per_call=ROWS_PER_CALL if args.rows_per_call is None else args.rows_per_call,
            quiet=True if args.quiet else None,
        )
    except ValueError as exc:
        raise UsageError(str(exc).splitlines()[0]) from exc
    return _print_report(report, args)


def _instances(path: str | None, K: int | None) -> list[object] | None:
    """``--instance PATH [--K K]``: an instance JSON file or a saved check spec, as ``validate(instances=...)``.

    Raises
    ------
    UsageError
        Unreadable file, invalid JSON or instance, or ``--K`` without ``--instance``.
    """
    if path is None:
        if K is not None:
            raise UsageError("--K needs --instance")
        return None
    import dataclasses  # noqa: PLC0415
    import json  # noqa: PLC0415

    from spectr_gbv.core.instance import parse_instance  # noqa: PLC0415
    from spectr_gbv.validate.battery import instance_from_spec  # noqa: PLC0415
    from spectr_gbv.validate.battery.instance import battery_instance_from_spec  # noqa: PLC0415

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        if isinstance(data, dict) and "vocab_ids" in data:  # a check on a wide vocabulary (wide_vocab)
            bi = battery_instance_from_spec(data)
            return [dataclasses.replace(bi, K=K) if K is not None else bi]
        if isinstance(data, dict) and "instance" in data and "K" in data:
            inst, spec_K = instance_from_spec(data)
        else:
            inst, spec_K = parse_instance(data), 2
    except (OSError, ValueError) as exc:
        raise UsageError(f"--instance {path}: {exc}".splitlines()[0]) from exc
    return [(inst, K if K is not None else spec_K)]


def _pairs(text: str | None) -> list[Any] | None:
    """``--pairs NAMES``: reference pair names, or ``module:attribute`` of a custom ``ReferencePair``.

    A ``module:attribute`` item is imported (from the current directory as ``python -m`` would); a
    callable is called with no arguments and must return the pair.

    Raises
    ------
    UsageError
        An item that cannot be imported or called.
    """
    if text is None:
        return None
    out: list[Any] = []
    for item in (n.strip() for n in text.split(",")):
        if not item:
            continue
        if ":" not in item:
            out.append(item)
            continue
        import importlib  # noqa: PLC0415

        module, _, attr = item.partition(":")
        try:
            obj = getattr(importlib.import_module(module), attr)
            out.append(obj() if callable(obj) else obj)
        except Exception as exc:  # noqa: BLE001 - any failure to build the user's pair is a usage error
            raise UsageError(f"--pairs {item}: {type(exc).__name__}: {exc}".splitlines()[0]) from exc
    return out
