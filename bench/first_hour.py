"""Time what a new user runs in the first hour, each as a whole process, as the docs print it.

The commands and snippets are read from README.md and docs/guide.md at run time (so the timed
code is the documented code): the main job, the guide's four Python examples, the README's
Python API block and Hugging Face snippet, and the validate command on the shipped example.
Each runs ``--runs`` times (after one untimed warm-up) in a fresh interpreter from a scratch
directory; the table gives the median and range of the wall time.

Usage::

    python bench/first_hour.py                       # all entries, 3 runs each (about 20 minutes)
    python bench/first_hour.py --only report,guide_bounds --runs 5
    python bench/first_hour.py --out docs/results/first_hour.md

Run it on a quiet machine: the figures are wall times, so other load on the cores shows in them.
The Hugging Face entries need the ``gpu`` extra and the cached real model (``spectr-gbv
fetch-models``); they are skipped, and said so, when it is absent.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from process_timing import run_timed
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Entry:
    """One timed item: a key, where the docs show it, and the argv that runs it."""

    key: str
    source: str
    argv: tuple[str, ...]
    needs_model: bool = False


def python_blocks(text: str, heading: str) -> list[str]:
    """The ```python blocks of the section under ``heading`` (up to the next heading of its level)."""
    level = heading.split(" ", 1)[0]
    start = text.index(heading + "\n")
    nxt = re.search(rf"^{level} ", text[start + len(heading) :], flags=re.MULTILINE)
    section = text[start : start + len(heading) + nxt.start()] if nxt else text[start:]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def entries(scratch: Path) -> list[Entry]:
    """Every first-hour item, its snippet written under ``scratch`` as a script."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    guide = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    exe = sys.executable
    cli = str(Path(exe).with_name("spectr-gbv"))
    out = [Entry("report", "README, Set up", (cli, "report"))]
    guide_keys = ("guide_bounds", "guide_simulate", "guide_validate", "guide_decoder")
    imports: list[str] = []  # the guide's examples read as one session: later ones use earlier imports
    for key, code in zip(guide_keys, python_blocks(guide, "## The Python API in four examples"), strict=True):
        path = scratch / f"{key}.py"
        path.write_text("".join(imports) + code, encoding="utf-8")
        imports += [line + "\n" for line in code.splitlines() if line.startswith(("from ", "import "))]
        out.append(Entry(key, "docs/guide.md, The Python API", (exe, str(path)), needs_model=key == "guide_decoder"))
    for key, heading, model in (
        ("readme_python_api", "## Python API", False),
        ("readme_hf_snippet", "## Speculative decoding with Hugging Face models", True),
    ):
        path = scratch / f"{key}.py"
        path.write_text(python_blocks(readme, heading)[0], encoding="utf-8")
        out.append(Entry(key, f"README, {heading[3:]}", (exe, str(path)), needs_model=model))
    out.append(
        Entry(
            "validate_textbook_quick",
            "README, validate",
            (cli, "validate", "spectr_gbv.examples.textbook_sd:verify", "--budget", "quick", "--quiet"),
        )
    )
    return out


def model_cached() -> bool:
    """True when the real target model loads without a download."""
    try:
        from spectr_gbv.realpair.models import target
        from spectr_gbv.realpair.models.fetch import check_manifest
    except ImportError:  # no gpu extra
        return False
    return check_manifest(target.model_dir() / "hf") is None


def time_once(argv: tuple[str, ...], cwd: Path) -> float:
    """Wall seconds of one run; raises RuntimeError with its stderr tail when it fails."""
    timed = run_timed(argv, cwd=cwd)
    if timed.proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {timed.proc.returncode}: {timed.proc.stderr[-800:]}")
    return timed.wall_s


def main(argv: list[str] | None = None) -> int:
    """Run the timings and print (and optionally write) the markdown table."""
    parser = argparse.ArgumentParser(description="Time the first-hour commands and snippets as whole processes.")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per entry, after one warm-up (default 3)")
    parser.add_argument("--only", default="", help="comma-separated entry keys (default: all)")
    parser.add_argument("--out", type=Path, default=None, help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        todo = entries(scratch)
        if args.only:
            wanted = set(args.only.split(","))
            unknown = wanted - {e.key for e in todo}
            if unknown:
                parser.error(f"--only: unknown entries {sorted(unknown)}; known: {[e.key for e in todo]}")
            todo = [e for e in todo if e.key in wanted]
        have_model = model_cached()
        rows = []
        bar = tqdm(total=len(todo) * (args.runs + 1), desc="first hour", unit="run", file=sys.stderr)
        for e in todo:
            if e.needs_model and not have_model:
                rows.append(f"| `{e.key}` | {e.source} | skipped: the real model is not cached | | |")
                bar.update(args.runs + 1)
                continue
            time_once(e.argv, scratch)  # warm-up: caches, byte-compiled files
            bar.update(1)
            walls = []
            for _ in range(args.runs):
                walls.append(time_once(e.argv, scratch))
                bar.update(1)
            rows.append(
                f"| `{e.key}` | {e.source} | {statistics.median(walls):.1f} | {min(walls):.1f} | {max(walls):.1f} |"
            )
        bar.close()
    head = [
        f"Whole-process wall time, seconds, {args.runs} runs after one warm-up "
        f"({platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}).",
        "",
        "| entry | shown in | median | min | max |",
        "|---|---|---|---|---|",
    ]
    table = "\n".join(head + rows)
    print(table)
    if args.out is not None:
        args.out.write_text("# First-hour timings\n\n`python bench/first_hour.py`\n\n" + table + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
