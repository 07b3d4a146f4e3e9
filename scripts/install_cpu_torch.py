"""Install the CPU build of torch 2.13.0 into the running Python, whatever the platform.

Why a script: on Linux, PyPI's ``torch`` wheel is a CUDA build of several GB; the CPU build lives
on PyTorch's own index. This script picks the source once, in order:

1. torch already installed (any version, a CUDA build included): kept, nothing to do (the tests
   run on the torch the ``gpu`` extra accepts; CI uses 2.13.0); ``--force`` installs 2.13.0 anyway;
2. a torch wheel pip can find without any index (``--no-index``: the ``find-links`` of the user's
   pip configuration, e.g. a wheelhouse on disk): install it, then its dependencies from the
   configured index (torch itself is then satisfied, so no other build is fetched);
3. Linux: PyTorch's CPU index (``https://download.pytorch.org/whl/cpu``);
4. macOS and Windows: PyPI (its wheels there are CPU builds).

Usage (from the repository root, in the environment the tests will use)::

    python scripts/install_cpu_torch.py            # installs, prints the one source it used
    python scripts/install_cpu_torch.py --dry-run  # prints the pip commands it would try, in order
    python scripts/install_cpu_torch.py --force    # 2.13.0's CPU build even over another torch

Behind a mirror or proxy that download.pytorch.org is not reachable from, install torch's CPU
build your own way first: the script then keeps it.

Exit status: 0 installed (or already there), pip's own status when pip fails.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys

#: The torch release the project's tests and CI are run with.
TORCH_VERSION = "2.13.0"
#: PyTorch's index of CPU-only wheels (Linux, macOS, Windows).
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def installed_version() -> str | None:
    """The installed torch's version without its local tag (``"2.13.0"`` for ``2.13.0+cpu``), or None."""
    try:
        return importlib.metadata.version("torch").split("+")[0]
    except importlib.metadata.PackageNotFoundError:
        return None


def pip(*args: str, quiet: bool = False) -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m pip install ARGS`` in this interpreter; output captured when ``quiet``."""
    cmd = [sys.executable, "-m", "pip", "install", *args]
    return subprocess.run(cmd, capture_output=quiet, check=False)


def main(argv: list[str] | None = None) -> int:
    """Install torch's CPU build; see the module docstring for the order of sources."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the pip commands it would try, install nothing")
    parser.add_argument("--force", action="store_true", help=f"install {TORCH_VERSION} even over another torch")
    args = parser.parse_args(argv)
    spec = f"torch=={TORCH_VERSION}"
    have = installed_version()
    if have == TORCH_VERSION or (have is not None and not args.force):
        print(
            f"torch {have} is already installed; keeping it"
            + ("" if have == TORCH_VERSION else " (--force replaces it)")
        )
        return 0
    if args.dry_run:
        source = ["--index-url", CPU_INDEX] if sys.platform.startswith("linux") else []
        pip_cmd = [sys.executable, "-m", "pip", "install"]
        print(" ".join([*pip_cmd, "--no-index", "--no-deps", spec]), " # a local wheel, if pip's find-links has one")
        print(" ".join([*pip_cmd, spec, *source]), " # otherwise")
        return 0
    if pip("--no-index", "--no-deps", spec, quiet=True).returncode == 0:
        print(f"torch {TORCH_VERSION} from a local wheel (pip's find-links); its dependencies next", flush=True)
        return pip("-q", spec).returncode
    if sys.platform.startswith("linux"):
        print(f"installing torch {TORCH_VERSION} (CPU build) from {CPU_INDEX}", flush=True)
        return pip(spec, "--index-url", CPU_INDEX).returncode
    print(f"installing torch {TORCH_VERSION} from PyPI (a CPU build on this platform)", flush=True)
    return pip(spec).returncode


if __name__ == "__main__":
    sys.exit(main())
