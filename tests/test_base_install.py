"""A base install (numpy, scipy, sympy, tqdm) runs every exact command; --help and --version stay light.

Each check runs in a fresh interpreter where torch, transformers and matplotlib cannot be
found (the path finder skips them, so ``import torch`` raises ModuleNotFoundError and
``importlib.util.find_spec("torch")`` is None, as if they were not installed), whatever this
environment has. ``.ci/run`` also runs the README's main job in a real base-only venv.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "matplotlib")

#: Run before the script under test: the heavy packages cannot be found.
BLOCK = """
import importlib.machinery, sys

class _Hide(importlib.machinery.PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.partition(".")[0] in {heavy!r}:
            return None
        return super().find_spec(name, path, target)

sys.meta_path = [_Hide if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
"""


def run_python(code: str, *, block: bool = True) -> subprocess.CompletedProcess:
    script = (BLOCK.format(heavy=HEAVY) if block else "") + "\n" + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300, check=False
    )


def cli(*argv: str) -> str:
    """A script that runs ``spectr-gbv argv`` and prints its exit status last."""
    return f"from spectr_gbv.cli.main import main\nprint('exit', main({list(argv)!r}))\n"


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_import_no_heavy_package(flag):
    done = run_python(
        f"""
        import json, sys
        from spectr_gbv.cli.main import main
        try:
            main([{flag!r}])
        except SystemExit as exc:
            code = exc.code
        heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})
        gpu = sorted(m for m in sys.modules if m.startswith('spectr_gbv.gpu'))
        numeric = sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'scipy', 'sympy'))
        print(json.dumps({{"code": code, "heavy": heavy, "gpu": gpu, "numeric": numeric}}))
        """,
        block=False,
    )
    assert done.returncode == 0, done.stderr
    *text, last = done.stdout.strip().splitlines()
    # not even numpy: --help and --version cost about 0.1 s of CPU (the budget is 0.3 s)
    assert json.loads(last) == {"code": 0, "heavy": [], "gpu": [], "numeric": []}
    if flag == "--version":
        assert text == ["spectr-gbv 0.1.0"]
    else:
        help_text = "\n".join(text)
        for command in ("report", "bound", "simulate", "validate", "bench", "fetch-models"):
            assert command in help_text


def test_exact_commands_run_without_torch_transformers_matplotlib():
    code = (
        cli("report", "--K", "1,2", "--horizon", "2", "--quiet")
        + cli("bound", "--K", "1,2", "--json", "--quiet")
        + cli("simulate", "--methods", "sd,mdbv", "--K", "2", "--quiet")
        + cli("simulate", "--methods", "sd", "--K", "1", "--samples", "200", "--json")
        + "print('heavy', sorted(m for m in sys.modules if m.split('.')[0] in "
        + repr(HEAVY)
        + "))\n"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.count("exit 0") == 4, out + done.stderr
    assert "[FAILS] lossless" in out  # the report's claims ledger
    assert '"cic_bound": "401/216"' in out  # bound --json, K = 2
    assert "61/36" in out  # simulate: mdbv's exact E[tau] at K = 2
    assert "heavy []" in out


def test_validate_runs_without_torch():
    done = run_python(
        "import spectr_gbv.validate, spectr_gbv.cli.validate\n"
        + cli(
            "validate",
            "spectr_gbv.examples.textbook_sd:verify",
            "--interface",
            "generic",
            "--budget",
            "quick",
            "--no-probes",
            "--no-search",
        )
    )
    assert done.returncode == 0, done.stderr
    assert "PASSED" in done.stdout and done.stdout.rstrip().endswith("exit 0"), done.stdout + done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "--preset", "quick", "--datasets", "humaneval"],
        ["fetch-models", "--cache-dir", "/nonexistent-spectr-gbv-cache"],
        ["validate", "hf-assisted", "--interface", "generation", "--budget", "quick"],
        ["validate", "spectr_gbv.examples.textbook_sd:verify", "--interface", "generation_batched"],
    ],
)
def test_gpu_commands_say_which_extra_they_need(argv):
    done = run_python(cli(*argv))
    assert done.returncode == 0, done.stderr  # main() returned, no traceback
    assert done.stdout.strip() == "exit 2"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs the gpu extra" in lines[0] and "pip install 'spectr_gbv[gpu" in lines[0]


def test_bench_help_names_match_the_bench_config():
    from spectr_gbv.cli import bench
    from spectr_gbv.realpair import config as bench_config

    assert bench.PRESET_NAMES == tuple(bench_config.PRESETS)
    assert bench.DATASET_NAMES == bench_config.DATASETS
    assert bench.METHOD_NAMES == bench_config.METHODS
