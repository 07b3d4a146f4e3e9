"""``spectr-gbv bench``: the real-model decoding benchmark (grid, peer, predictions, law test) into ``--out``.

Nothing of the gpu layer is imported until :func:`run` (or :func:`build_config`) is called,
so ``spectr-gbv --help`` works on a base install. The names listed in ``--help`` are
:data:`PRESET_NAMES`, :data:`DATASET_NAMES` (copies of those of :mod:`spectr_gbv.realpair.config`;
a test keeps them equal) and :data:`METHOD_NAMES` (read from the method table).

``--methods`` also takes a user's rule, ``module:attribute`` (the current directory importable):
a torch rule with the kernel signature or a reference rule
(:mod:`spectr_gbv.gpu.kernels.rules`); it is resolved before anything runs, so a bad one exits 2.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any

from spectr_gbv.cli.common import UsageError, parse_ks
from spectr_gbv.core.methods import methods_where

#: ``spectr_gbv.realpair.config.PRESETS``' keys (for ``--help``; a test keeps them equal).
PRESET_NAMES = ("quick", "full")
#: ``spectr_gbv.realpair.config.DATASETS``.
DATASET_NAMES = ("humaneval", "gsm", "instruct", "cpython")
#: ``spectr_gbv.realpair.config.METHODS``: the table's lossless methods with a torch kernel.
METHOD_NAMES: tuple[str, ...] = methods_where(lossless=True, kernel=True)


def _names(text: str, valid: tuple[str, ...], option: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    bad = [x for x in names if x not in valid]
    if not names or bad:
        raise UsageError(f"{option}: unknown or empty {', '.join(bad) or repr(text)}; valid: {', '.join(valid)}")
    return names


def _methods(text: str, valid: tuple[str, ...]) -> tuple[str, ...]:
    """``--methods``: registered names of ``valid`` and users' rules (``module:attribute``), each resolved."""
    names = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    bad = [x for x in names if x not in valid and ":" not in x]
    if not names or bad:
        raise UsageError(
            f"--methods: unknown or empty {', '.join(bad) or repr(text)}; valid: {', '.join(valid)}, "
            "or 'module:attribute' naming your own rule"
        )
    rules = [x for x in names if x not in valid]
    if rules:
        try:
            from spectr_gbv.gpu.kernels.rules import resolve_kernel_rule
        except ImportError as exc:
            raise UsageError(f"needs the gpu extra ({exc}); run: pip install 'spectr_gbv[gpu,bench]'") from exc
        for name in rules:
            try:
                rule = resolve_kernel_rule(name)
            except ValueError as exc:
                raise UsageError(f"--methods: {exc}") from exc
            if rule.lossless_claimed is False:
                raise UsageError(
                    f"--methods: method {name!r} is lossy (it declares lossless = False); "
                    "the bench runs lossless rules only"
                )
    return names


def _positive_int(text: str | None, option: str) -> int | None:
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise UsageError(f"{option} expects an int >= 1, got {text!r}")
    return value


def _ints(text: str | None, option: str, max_value: int) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(parse_ks(text, max_k=max_value))
    except UsageError as exc:
        raise UsageError(str(exc).replace("--K", option)) from exc


def _temperatures(text: str | None) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:
        values = tuple(float(x) for x in text.split(","))
    except ValueError:
        values = ()
    if not values or any(not 0 <= t <= 10 for t in values):
        raise UsageError(f"--T expects comma-separated temperatures in [0, 10], got {text!r}")
    return values


def build_config(args: argparse.Namespace) -> Any:
    """The :class:`~spectr_gbv.realpair.config.BenchConfig` of the preset with the options applied.

    Raises
    ------
    UsageError
        A malformed option (the message names it).
    """
    try:
        from spectr_gbv.realpair.config import DATASETS, METHODS, PRESETS  # no torch import
    except ImportError as exc:
        raise UsageError(f"needs the gpu extra ({exc}); run: pip install 'spectr_gbv[gpu,bench]'") from exc
    if args.preset not in PRESETS:
        raise UsageError(f"--preset expects one of {', '.join(PRESETS)}, got {args.preset!r}")
    cfg = PRESETS[args.preset]
    changes: dict[str, Any] = {}
    if args.datasets is not None:
        changes["datasets"] = _names(args.datasets, DATASETS, "--datasets")
    if args.methods is not None:
        changes["methods"] = _methods(args.methods, METHODS)
    for option, field in (("--prompts", "num_prompts"), ("--max-new-tokens", "max_new_tokens")):
        value = _positive_int(getattr(args, field), option)
        if value is not None:
            changes[field] = value
    if args.seed is not None:
        try:
            changes["seed"] = int(args.seed)
        except ValueError as exc:
            raise UsageError(f"--seed expects an int, got {args.seed!r}") from exc
    changes.update(peer=cfg.peer and not args.no_peer, predict=cfg.predict and not args.no_predict)
    changes["lossless"] = cfg.lossless and not args.no_lossless
    ks, ls, ts = _ints(args.K, "--K", 16), _ints(args.L, "--L", 32), _temperatures(args.T)
    try:
        return replace(cfg, **changes).with_axes(ks, ls, ts)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _device(text: str) -> str:
    import torch

    if text == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if text == "cpu" or text.startswith("cuda"):
        if text.startswith("cuda") and not torch.cuda.is_available():
            raise UsageError(f"--device {text}: CUDA is not available here; use --device cpu")
        return text
    raise UsageError(f"--device expects auto, cpu or cuda[:N], got {text!r}")


def run(args: argparse.Namespace) -> int:
    """Execute ``bench``; returns the exit status (0; 1 if a law test rejected; 2 through :class:`UsageError`)."""
    config = build_config(args)
    threads = _positive_int(args.threads, "--threads")
    try:
        from spectr_gbv.realpair import output as bench_output
        from spectr_gbv.realpair import runner as benchmark
        from spectr_gbv.realpair.models.fetch import ModelFetchError
        from spectr_gbv.realpair.models.prompts import MissingPackageError, PromptDataError
    except ImportError as exc:
        raise UsageError(f"needs the gpu extra ({exc}); run: pip install 'spectr_gbv[gpu,bench]'") from exc
    try:
        benchmark.parse_draft_spec(args.draft)
    except ValueError as exc:
        raise UsageError(f"--draft {exc}") from exc
    import torch
    from tqdm.auto import tqdm

    device = _device(args.device)
    if threads is not None:
        torch.set_num_threads(threads)
    progress = not args.quiet

    def log(message: str) -> None:
        tqdm.write(message, file=sys.stderr)

    try:
        models = benchmark.load_models(args.draft, device, args.cache_dir, progress)
    except ImportError as exc:
        raise UsageError(
            f"--draft {args.draft}: the draft model is not available ({exc}); try --draft truncated:4"
        ) from exc
    except (ModelFetchError, OSError) as exc:
        raise UsageError(str(exc).replace("\n", " ")) from exc
    log(f"target {models.target_name}; draft {models.draft_name}; device {device}, {torch.get_num_threads()} threads")
    try:
        prompts, meta = benchmark.load_bench_prompts(config, models, args.cache_dir, progress)
    except (MissingPackageError, PromptDataError, ValueError) as exc:
        raise UsageError(f"--datasets/--prompts: {exc}") from exc
    result = benchmark.run_benchmark(config, models, prompts, device=device, progress=progress, log=log)
    result.prompts = meta
    res = result.to_dict()
    argv = getattr(args, "argv", None)
    res["machine"] = bench_output.machine_info(device, None if argv is None else ["spectr-gbv", *argv])
    try:
        files = bench_output.write_outputs(res, args.out)
    except OSError as exc:
        raise UsageError(f"--out {args.out}: {exc}") from exc
    rejected = [t for t in result.lossless if not t["passed"]]
    if args.json:
        with open(files["json"], encoding="utf-8") as fh:
            sys.stdout.write(fh.read())
    else:
        print(files["summary"].read_text(encoding="utf-8"))
        print(f"wrote {files['csv']}, {files['json']}, {files['summary']} and {len(files['plots'])} plots")
    for t in rejected:
        log(f"law test REJECTED: {t['method']} on the '{t['prompt']}' prompt (p = {t['p_value']:.3g})")
    return 1 if rejected else 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``bench`` subcommand."""
    p = sub.add_parser(
        "bench",
        help="benchmark the decoding methods on the real model and prompts (BE, speed-up, histograms, plots)",
        description="Run every method over one-factor-at-a-time sweeps of K (drafts), L (draft length) and T "
        "(temperature) around (3, 8, 0.7) on real prompts with SmolLM2-135M-Instruct and a draft, plus "
        "transformers' assisted generation (peer), bound-based predictions and a law test of the first tokens; "
        "write runs.csv, results.json, summary.md and PNG plots into --out. The target is fetched when needed.",
    )
    p.add_argument("--preset", default="quick", help="quick (about 17 min on a 2-core CPU) or full (default quick)")
    p.add_argument("--datasets", help=f"comma-separated prompt sets among {','.join(DATASET_NAMES)}")
    p.add_argument(
        "--methods",
        help=f"comma-separated methods among {','.join(METHOD_NAMES)}, or module:attribute naming your own rule "
        "(a torch rule (inputs, uniforms) -> VerifyOutput, or a reference rule: slow) (ar is always run; "
        "optimal_multidraft and near_opt_bv print a warning with their estimated seconds per verification call "
        "when the vocabulary is above 4096: seconds to minutes per call at the real model's 49,152)",
    )
    p.add_argument("--prompts", dest="num_prompts", metavar="N", help="prompts per dataset")
    p.add_argument("--max-new-tokens", dest="max_new_tokens", metavar="N", help="tokens generated per prompt")
    p.add_argument("--K", help="K sweep values, e.g. 1,3,5,7 (centre K = 3 if listed, else the first)")
    p.add_argument("--L", help="L sweep values, e.g. 4,8,12,16 (centre L = 8 if listed, else the first)")
    p.add_argument("--T", help="T sweep values, e.g. 0.1,0.4,0.7 (centre T = 0.7 if listed, else the first)")
    p.add_argument("--seed", help="prompt selection and decoding seed (default 0)")
    p.add_argument("--out", default="bench_results", metavar="DIR", help="output directory (default bench_results/)")
    p.add_argument("--draft", default="distilled", help="distilled (default) or truncated:N (first N target layers)")
    p.add_argument("--device", default="auto", help="auto (default: cuda if available), cpu or cuda[:N]")
    p.add_argument("--threads", metavar="N", help="torch CPU threads (default: torch's)")
    p.add_argument("--cache-dir", metavar="PATH", help="cache root (default $SPECTR_GBV_CACHE or ~/.cache/spectr_gbv)")
    p.add_argument("--no-peer", action="store_true", help="skip transformers assisted generation")
    p.add_argument("--no-predict", action="store_true", help="skip the B(K), B_BV(K) predictions")
    p.add_argument("--no-lossless", action="store_true", help="skip the law test of the first tokens")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print results.json instead of the markdown summary")
    p.set_defaults(func=run)
