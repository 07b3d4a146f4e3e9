"""The documentation site: every public module has an API page entry, and the Sphinx build is clean.

The build runs as CI does (``-n -W --keep-going -E``): a broken cross-reference, a malformed
docstring, a page outside the table of contents or an import error fails it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: Modules that are not API: the CLI only parses arguments (``--help`` documents it), ``data``
#: holds files.
NOT_API = re.compile(r"^spectr_gbv(\.cli(\..*)?|\.data)?$")


def _public_modules() -> set[str]:
    names = set()
    for path in (ROOT / "spectr_gbv").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(part.startswith("_") for part in parts):
            continue
        name = ".".join(parts)
        if not NOT_API.match(name):
            names.add(name)
    return names


def _documented_modules() -> set[str]:
    text = "\n".join(p.read_text() for p in (DOCS / "api").glob("*.rst"))
    return set(re.findall(r"^\.\. automodule:: (\S+)$", text, flags=re.M))


def test_every_public_module_is_in_the_api_reference():
    public, documented = _public_modules(), _documented_modules()
    assert "spectr_gbv.theory.bounds" in public and "spectr_gbv.testing.mutants.law_bugs" in public
    assert sorted(public - documented) == []
    assert sorted(documented - public) == []


def test_sphinx_build_is_clean(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    pytest.importorskip("numpydoc")
    pytest.importorskip("torch")  # the gpu pages import torch and transformers
    pytest.importorskip("transformers")
    cmd = [sys.executable, "-m", "sphinx", "-n", "-W", "--keep-going", "-E", "-q", "-b", "html"]
    cmd += [str(DOCS), str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    theory = (tmp_path / "api" / "theory.html").read_text()
    assert 'id="spectr_gbv.theory.bounds.cic_bound"' in theory
    assert "Fraction(401, 216)" in theory  # the docstring example, rendered
    index = (tmp_path / "index.html").read_text()
    pages = (
        "guide",
        "theory",
        "project/THEORY",
        "findings",
        "verifiers",
        "decoder",
        "bench",
        "validate",
        "bug_classes",
    )
    for page in pages:
        assert f'href="{page}.html"' in index, page
    assert 'href="api/index.html"' in index
    assert "Part B - public bug reports" in (tmp_path / "bug_classes.html").read_text()  # the included survey


def _fenced(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", text, flags=re.M | re.S)


def test_guide_own_instance_example_prints_what_the_page_says(tmp_path, monkeypatch, capsys):
    """The guide's "Your own instance" section: its JSON, its code and its printed output."""
    guide = (DOCS / "guide.md").read_text()
    section = guide.split("## Your own instance", 1)[1].split("\n## ", 1)[0]
    (instance_json,) = _fenced(section, "json")
    (code,) = _fenced(section, "python")
    (printed,) = _fenced(section, "text")
    (tmp_path / "my.json").write_text(instance_json)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "guide.md", "exec"), {})
    assert capsys.readouterr().out == printed
    assert printed.splitlines()[-1] == "True" and printed.startswith("1 5/6 5/6 ")


@pytest.mark.parametrize(
    "name, must_contain",
    [
        ("THEORY.md", ["# Multi-draft block verification", "### 6a. The released SpecTr-GBV", "## 7. Public"]),
        ("ECOSYSTEM.md", ["## Part A - implementations", "## Part B - public bug reports"]),
    ],
)
def test_shipped_project_notes_are_verbatim(name, must_contain):
    """docs/project/THEORY.md and ECOSYSTEM.md are the project's files (compared where those exist)."""
    shipped = (DOCS / "project" / name).read_text()
    assert all(text in shipped for text in must_contain)
    original = ROOT.parent / "shared" / name
    if original.exists():
        assert shipped == original.read_text()


def _transcripts(text: str) -> list[tuple[str, str]]:
    """``$ spectr-gbv ...`` blocks of a page: (command line, the output shown under it)."""
    out = []
    for block in re.findall(r"^```\n(\$ spectr-gbv [^\n]*)\n(.*?)^```$", text, flags=re.M | re.S):
        out.append((block[0][2:], block[1]))
    return out


GUIDE_TRANSCRIPTS = _transcripts((DOCS / "guide.md").read_text())


def test_guide_has_transcripts():
    assert [cmd.split()[1] for cmd, _ in GUIDE_TRANSCRIPTS] == ["bound", "simulate"]


@pytest.mark.parametrize("command, shown", GUIDE_TRANSCRIPTS, ids=[c for c, _ in GUIDE_TRANSCRIPTS])
def test_guide_transcript_is_what_the_command_prints(command, shown, capsys):
    """Every full ``$ spectr-gbv`` transcript of the guide is the command's live output."""
    from spectr_gbv.cli.main import main

    assert main(command.split()[1:]) == 0
    assert capsys.readouterr().out == shown


def _validate_md_blocks_after(heading_text: str) -> list[str]:
    text = (DOCS / "validate.md").read_text()
    return _fenced(text.split(heading_text, 1)[1], "python")


def test_validate_md_rerun_and_probe_replay_recipes_work():
    """The two recipes after "smallest failing case" in docs/validate.md, on planted bugs."""
    from spectr_gbv.testing.mutants import MUTANTS

    rerun, replay = _validate_md_blocks_after("The report ends on the **smallest failing case**")[:2]
    ns = {"my_verify": MUTANTS["softmax_residual"]}
    exec(compile(rerun, "validate.md", "exec"), ns)
    assert ns["case"].diagnosis == "wrong_residual" and ns["K"] >= 1 and not ns["report"].passed

    bug = MUTANTS["zero_residual_oov"]
    from spectr_gbv.validate import validate

    report = validate(bug, budget="quick")
    case = report.smallest_failure
    # the likeliest failure of the smallest size comes first: the forcing-free probe (every call)
    assert case.instance["kind"] == "probe" and case.name == "zero_target_draft" and case.severity == 1.0
    forced = next(c for c in report.failures if c.instance and "coin" in c.instance)  # what the recipe picks
    assert forced.name == "degenerate_residual"
    *setup, last = replay.strip().splitlines()
    ns = {"my_verify": bug, "report": report}
    exec(compile("\n".join(setup), "validate.md", "exec"), ns)
    out = eval(compile(last.split("#")[0], "validate.md", "eval"), ns)
    assert list(out) == [3]  # the out-of-vocabulary id the probe reported


def test_no_two_files_differ_only_in_case():
    """A clone on a case-insensitive file system (macOS, Windows) must not lose a file."""
    skip = {".git", "_build", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis", ".venv", "venv"}
    paths = [p for p in ROOT.rglob("*") if not skip & set(p.relative_to(ROOT).parts)]
    lowered: dict[str, list[str]] = {}
    for p in paths:
        lowered.setdefault(str(p.relative_to(ROOT)).lower(), []).append(str(p.relative_to(ROOT)))
    assert "docs/theory.md" in lowered and "docs/project/theory.md" in lowered
    assert [names for names in lowered.values() if len(names) > 1] == []
