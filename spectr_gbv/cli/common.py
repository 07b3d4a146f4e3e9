"""Argument helpers shared by the CLI commands (instance selection, K lists, output)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spectr_gbv.core.instance import Instance


#: Largest number of exact table entries (both models, prefixes of length 0..L) ``--random``
#: draws: about 40 s to draw and 0.2 GB (n = 16, L = 4 fits; n = 16, L = 5 would need 36M
#: entries, 3.6 GB and 7 minutes, and is refused).
MAX_RANDOM_CLI_ENTRIES = 2_500_000

#: Most K values a ``--K`` list may name (ranges count every value they expand to).
MAX_K_VALUES = 64


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
    from spectr_gbv.core.instance import default_instance, load_instance, random_instance

    try:
        if getattr(args, "instance", None) is not None:
            if not args.instance:
                raise UsageError("--instance: the path is empty")
            return load_instance(args.instance)
        if getattr(args, "random", None) is not None:
            parts = args.random.split(",")
            usage = f"--random expects n,L,seed[,zero_prob] (ints, then a float), got {args.random!r}"
            if len(parts) not in (3, 4):
                raise UsageError(usage)
            try:
                n, L, seed = (int(x) for x in parts[:3])
                zero_prob = float(parts[3]) if len(parts) == 4 else 0.0
            except ValueError as exc:
                raise UsageError(usage) from exc
            if n < 1 or L < 1 or not 0 <= zero_prob < 1:
                raise UsageError(f"--random: need n >= 1, L >= 1, 0 <= zero_prob < 1; got {args.random!r}")
            from spectr_gbv.core.tabular import ENTRY_BYTES, format_bytes, table_entries

            entries = 2 * table_entries(n, L)
            if entries > MAX_RANDOM_CLI_ENTRIES:
                count = str(entries) if entries < 2**62 else "over 10^18"
                raise UsageError(
                    f"--random {args.random}: n={n}, L={L} needs {count} exact table entries for p and q "
                    f"(~{format_bytes(entries * ENTRY_BYTES)}, ~{entries * 12e-6:.0f} s to draw), above the "
                    f"--random limit {MAX_RANDOM_CLI_ENTRIES} (e.g. n=16, L=4 or n=2, L=18)"
                )
            return random_instance(n, L, seed, exact=True, zero_prob=zero_prob)
        return default_instance()
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def parse_ks(text: str, *, max_k: int = 64) -> list[int]:
    """Parse ``"1,2,3"`` or ``"1-4"`` into a list of K values in ``1..max_k``.

    Raises
    ------
    UsageError
        Not a list of ints, a value outside ``1..max_k`` (a range's ends are checked before it
        is expanded), or more than :data:`MAX_K_VALUES` values.
    """
    out: list[int] = []
    bounds = f"--K values must lie in 1..{max_k}, got {text!r}"
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise UsageError(f"--K range {part!r} is empty: write it low-high (e.g. 1-4)")
                if not 1 <= lo <= max_k or not 1 <= hi <= max_k:  # check before expanding the range
                    raise UsageError(bounds)
                out.extend(range(lo, hi + 1))
                if len(out) > MAX_K_VALUES:
                    raise UsageError(f"--K names more than {MAX_K_VALUES} values, got {text!r}")
            elif part:
                out.append(int(part))
            else:
                raise ValueError("empty element")
    except ValueError as exc:
        raise UsageError(f"--K expects comma-separated ints (e.g. 1,2,3 or 1-4), got {text!r}") from exc
    if not out or any(not 1 <= k <= max_k for k in out):
        raise UsageError(bounds)
    if len(out) > MAX_K_VALUES:
        raise UsageError(f"--K names more than {MAX_K_VALUES} values, got {text!r}")
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
