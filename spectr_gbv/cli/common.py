"""Argument helpers shared by the CLI commands (instance selection, K lists, output)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from spectr_gbv.core.instance import Instance, default_instance, load_instance, random_instance


class UsageError(Exception):
    """A user error: printed as one line, exit status 2."""


def add_instance_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--instance PATH`` / ``--random n,L,seed`` (mutually exclusive)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--instance",
        metavar="PATH",
        help="instance JSON file (default: the embedded public test vector, docs/theory.md)",
    )
    group.add_argument(
        "--random",
        metavar="n,L,seed[,zero_prob]",
        help="a random exact instance: vocabulary n, draft length L, seed, optional share of zero entries",
    )


def resolve_instance(args: argparse.Namespace) -> Instance:
    """The instance chosen by ``--instance`` / ``--random``, else the embedded default.

    Raises
    ------
    UsageError
        Unreadable or invalid instance, malformed ``--random``.
    """
    try:
        if getattr(args, "instance", None):
            return load_instance(args.instance)
        if getattr(args, "random", None):
            parts = args.random.split(",")
            usage = f"--random expects n,L,seed[,zero_prob] (ints, then a float), got {args.random!r}"
            if len(parts) not in (3, 4):
                raise UsageError(usage)
            try:
                n, L, seed = (int(x) for x in parts[:3])
                zero_prob = float(parts[3]) if len(parts) == 4 else 0.0
            except ValueError as exc:
                raise UsageError(usage) from exc
            if n < 1 or n > 16 or L < 1 or L > 8 or not 0 <= zero_prob < 1:
                raise UsageError(f"--random: need 1 <= n <= 16, 1 <= L <= 8, 0 <= zero_prob < 1; got {args.random!r}")
            return random_instance(n, L, seed, exact=True, zero_prob=zero_prob)
        return default_instance()
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def parse_ks(text: str, *, max_k: int = 64) -> list[int]:
    """Parse ``"1,2,3"`` or ``"1-4"`` into a list of K values in ``1..max_k``.

    Raises
    ------
    UsageError
        Not a list of ints, or a value outside ``1..max_k``.
    """
    out: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise UsageError(f"--K range {part!r} is empty: write it low-high (e.g. 1-4)")
                out.extend(range(lo, hi + 1))
            elif part:
                out.append(int(part))
            else:
                raise ValueError("empty element")
    except ValueError as exc:
        raise UsageError(f"--K expects comma-separated ints (e.g. 1,2,3 or 1-4), got {text!r}") from exc
    if not out or any(not 1 <= k <= max_k for k in out):
        raise UsageError(f"--K values must lie in 1..{max_k}, got {text!r}")
    return out


def print_json(obj: Any) -> None:
    """Print one JSON object to stdout."""
    json.dump(obj, sys.stdout, indent=2)
    sys.stdout.write("\n")


def render_table(headers: list[str], rows: list[list[str]]) -> str:
    """Plain-text table with right-aligned columns."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
    return "\n".join(lines)
