"""Entry point of the ``spectr-gbv`` command: parses arguments and dispatches to a subcommand.

Building the parser imports only the subcommand modules' argument definitions: each
subcommand imports what it computes with (theory, simulate, the gpu layer, torch) inside its
``run``, so ``--help``, ``--version`` and the exact commands work on a base install.
A subcommand's ``--quiet`` flag also switches progress bars off for the whole run
(:func:`spectr_gbv.core.progress.set_quiet`).

Every subcommand writes through :func:`spectr_gbv.cli.common.guarded_stdout`: a reader that
closes the pipe early (``| head -1``) no longer changes the exit status (a failed ``validate``
still exits 1), and an unwritable stdout (``> /dev/full``) is one line on stderr and exit 74.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from spectr_gbv import __version__
from spectr_gbv.cli import bench, bound, fetch_models, report, simulate, sweep, validate
from spectr_gbv.cli.common import UsageError, guarded_stdout, output_status
from spectr_gbv.core.progress import set_quiet


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="spectr-gbv",
        description="Reference implementation and referee for multi-draft block verification.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    report.add_parser(sub)
    bound.add_parser(sub)
    simulate.add_parser(sub)
    fetch_models.add_parser(sub)
    bench.add_parser(sub)
    validate.add_parser(sub)
    sweep.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status.

    Returns
    -------
    int
        The subcommand's status (0 ok, 1 a check failed, 2 usage or input error, ``validate``'s 3),
        unchanged when stdout is a pipe its reader closed early; 74
        (:data:`~spectr_gbv.cli.common.EXIT_OUTPUT_ERROR`) when stdout cannot be written.
    """
    parser = build_parser()
    with guarded_stdout() as guard:  # ``--help`` and ``--version`` write to stdout too
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:
            stop = exc
        else:
            stop = None
    if stop is not None:
        raise SystemExit(output_status(guard, stop.code, None)) from None
    args.argv = list(sys.argv[1:] if argv is None else argv)  # the exact command line, for result files
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    previous = set_quiet(True) if getattr(args, "quiet", False) else None
    try:
        with guarded_stdout() as guard:
            try:
                code = int(args.func(args))
            except UsageError as exc:
                print(f"spectr-gbv {args.command}: error: {exc}", file=sys.stderr)
                code = 2
        return output_status(guard, code, args.command)
    finally:
        if previous is not None:
            set_quiet(previous)


if __name__ == "__main__":
    sys.exit(main())
