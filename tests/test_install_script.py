"""``scripts/install_cpu_torch.py``: the README's test command never pulls torch's CUDA build."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "install_cpu_torch.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("install_cpu_torch", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fake_pip(calls: list[tuple[str, ...]], local_wheel: bool):
    def pip(*args: str, quiet: bool = False) -> subprocess.CompletedProcess[bytes]:
        calls.append(args)
        ok = local_wheel or "--no-index" not in args
        return subprocess.CompletedProcess(args, 0 if ok else 1)

    return pip


@pytest.mark.parametrize("platform", ["linux", "darwin", "win32"])
def test_source_order_without_a_local_wheel(monkeypatch: pytest.MonkeyPatch, platform: str) -> None:
    mod = _load()
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(mod, "installed_version", lambda: None)
    monkeypatch.setattr(mod, "pip", _fake_pip(calls, local_wheel=False))
    monkeypatch.setattr(sys, "platform", platform)
    assert mod.main([]) == 0
    assert calls[0] == ("--no-index", "--no-deps", "torch==2.13.0")
    if platform == "linux":
        assert calls[1] == ("torch==2.13.0", "--index-url", "https://download.pytorch.org/whl/cpu")
    else:
        assert calls[1] == ("torch==2.13.0",)
    assert len(calls) == 2


def test_local_wheel_then_its_dependencies(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = _load()
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(mod, "installed_version", lambda: None)
    monkeypatch.setattr(mod, "pip", _fake_pip(calls, local_wheel=True))
    assert mod.main([]) == 0
    assert calls == [("--no-index", "--no-deps", "torch==2.13.0"), ("-q", "torch==2.13.0")]


def test_already_installed_runs_no_pip(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    mod = _load()
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(mod, "installed_version", lambda: "2.13.0")
    monkeypatch.setattr(mod, "pip", _fake_pip(calls, local_wheel=True))
    assert mod.main([]) == 0
    assert calls == []
    assert capsys.readouterr().out == "torch 2.13.0 is already installed; keeping it\n"


def test_another_torch_is_kept_unless_forced(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = _load()
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(mod, "installed_version", lambda: "2.6.0")
    monkeypatch.setattr(mod, "pip", _fake_pip(calls, local_wheel=False))
    monkeypatch.setattr(sys, "platform", "linux")
    assert mod.main([]) == 0
    assert calls == []
    assert capsys.readouterr().out == "torch 2.6.0 is already installed; keeping it (--force replaces it)\n"
    assert mod.main(["--force"]) == 0
    assert calls[-1] == ("torch==2.13.0", "--index-url", "https://download.pytorch.org/whl/cpu")


def test_dry_run_names_the_cpu_index_on_linux(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = _load()
    monkeypatch.setattr(mod, "installed_version", lambda: None)
    monkeypatch.setattr(sys, "platform", "linux")
    assert mod.main(["--dry-run"]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert "install --no-index --no-deps torch==2.13.0" in first
    assert "install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in second


def test_ci_runs_the_readme_commands() -> None:
    root = SCRIPT.parents[1]
    readme = (root / "README.md").read_text(encoding="utf-8")
    ci = (root / ".ci" / "run").read_text(encoding="utf-8")
    setup = readme[readme.index("## Set up") : readme.index("\n## ", readme.index("## Set up") + 1)]
    blocks = [b.split("```", 1)[0].strip() for b in setup.split("```bash")[1:]]
    assert blocks[0] == "pip install -e . && spectr-gbv report"
    assert blocks[1].startswith("python scripts/install_cpu_torch.py && ")
    assert blocks[1] in ci
