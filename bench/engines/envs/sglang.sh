#!/usr/bin/env bash
# Build the SGLang engine environment: sglang (PyPI) + triton, on torch 2.13.0+cpu, for `spectr-gbv validate`.
#
# Usage: bench/engines/envs/sglang.sh [VERSION=0.5.23] [DIR=.engines/sglang-VERSION]
# Idempotent: an existing venv is reused; pip skips what is already installed at the pinned versions.
#
# Why --no-deps: sglang 0.5.23 pins `torch==2.14.1`, `torchaudio==2.11.0`, `flashinfer_python[cu13]==0.7.2`,
# `nvidia-cutlass-dsl[cu13]`, `cuda-python>=13`, `sglang-kernel==0.4.10` and other CUDA wheels (METADATA
# Requires-Dist). A full install would replace torch 2.13.0+cpu by the CUDA torch 2.14.1 and pull gigabytes of CUDA
# wheels; with torch pinned to the CPU build the resolver fails outright (ResolutionImpossible, checked below with
# `--dry-run`; the script prints the resolver's verdict and goes on). So sglang is installed with --no-deps, plus
# the few packages its speculative kernel modules import on the way in:
#   triton==3.9.0        the kernels (`reject_sampling.py` is @triton.jit; run in Triton's interpreter on CPU)
#   the rest             what `import sglang.kernels.ops.speculative.reject_sampling` needs: `sglang/__init__.py`
#                        imports `sglang.srt.utils`, which loads PIL, starlette, aiohttp, zmq, psutil, pydantic,
#                        orjson, msgspec, IPython, pybase64, requests, tqdm (checked in sys.modules after the
#                        import). einops, setproctitle and apache-tvm-ffi are not loaded by it (installed up front
#                        from sglang's METADATA; tvm-ffi is what the CUDA tree kernel's JIT would use). pillow,
#                        starlette and aiohttp were added one by one from the import probe's ModuleNotFoundError.
#   not installed        torch 2.14.1, torchaudio, torchvision, flashinfer, sglang-kernel, cuda-python, nvidia-*:
#                        CUDA builds, and none is imported by the chain kernel's module.
# The exact import chain is probed at the end: the script fails if `chain_speculative_sampling_triton` does not
# import under TRITON_INTERPRET=1 (through bench.engines.triton_interpret).
set -euo pipefail
VERSION="${1:-0.5.23}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
DIR="${2:-$ROOT/.engines/sglang-$VERSION}"
TORCH_WHEEL=/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl
TRITON=3.9.0
PY="${PYTHON:-python3.11}"

if [ ! -x "$DIR/bin/python" ]; then
  echo "[sglang.sh] creating venv $DIR" >&2
  "$PY" -m venv "$DIR"
fi
PIP=("$DIR/bin/python" -m pip --disable-pip-version-check)
echo "[sglang.sh] torch 2.13.0+cpu from $TORCH_WHEEL" >&2
"${PIP[@]}" install -q "$TORCH_WHEEL"

echo "[sglang.sh] full install (dry run, torch pinned to the CPU build): expected to fail, see the header" >&2
printf 'torch==2.13.0+cpu\n' > "$DIR/torch-constraint.txt"
if "${PIP[@]}" install --dry-run -q -c "$DIR/torch-constraint.txt" "sglang==$VERSION" > "$DIR/full-install.log" 2>&1
then
  echo "[sglang.sh] NOTE: the full install resolves with torch 2.13.0+cpu; --no-deps is used anyway" >&2
else
  echo "[sglang.sh] full install does not resolve with torch 2.13.0+cpu:" >&2
  grep -E "ResolutionImpossible|requires torch|conflict|torch==" "$DIR/full-install.log" | head -5 >&2 || true
fi

echo "[sglang.sh] sglang==$VERSION --no-deps, triton==$TRITON and the kernels' import-time deps" >&2
"${PIP[@]}" install -q --no-deps "sglang==$VERSION"
"${PIP[@]}" install -q "triton==$TRITON" numpy packaging psutil requests tqdm pydantic pyzmq orjson msgspec \
  setproctitle pybase64 IPython filelock einops "apache-tvm-ffi==0.1.11" pillow starlette aiohttp
echo "[sglang.sh] the project (base deps) for spectr-gbv" >&2
"${PIP[@]}" install -q -e "$ROOT"

echo "[sglang.sh] import probe" >&2
(cd "$ROOT" && PYTHONPATH="$ROOT" "$DIR/bin/python" - <<'PY'
import bench.engines.triton_interpret  # noqa: F401  (TRITON_INTERPRET=1 before sglang)
from sglang.kernels.ops.speculative.reject_sampling import chain_speculative_sampling_triton
from sglang.kernels.ops.speculative import verify_sampling
print("chain_speculative_sampling_triton:", chain_speculative_sampling_triton.__module__)
print("verify_sampling.tree_speculative_sampling_target_only on this platform:",
      verify_sampling.tree_speculative_sampling_target_only)
PY
)
"${PIP[@]}" freeze | grep -iE "^(sglang|triton|torch|apache-tvm-ffi|spectr)([=@ ]|-gbv)" || true
