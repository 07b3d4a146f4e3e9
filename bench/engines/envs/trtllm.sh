#!/usr/bin/env bash
# Build the TensorRT-LLM engine environment the way a user would try, and record why the release cannot be
# imported here (idempotent).
#
# Usage: bash bench/engines/envs/trtllm.sh [VERSION] [DIR]
#   VERSION  tensorrt-llm release on PyPI (default 1.2.1, the latest)
#   DIR      target venv (default: .engines/trtllm-VERSION under the repository root)
#   TRTLLM_EXTRA_INDEX  optional extra index (e.g. https://pypi.nvidia.com/) for machines that can reach it
#
# Steps: a fresh venv (python3.11) -> torch 2.13.0+cpu from /opt/wheels -> `pip install tensorrt-llm==VERSION`
# -> if that fails, `pip install --no-deps tensorrt-llm==VERSION` -> `import
# tensorrt_llm._torch.pyexecutor.sampler` -> `pip install -e` this repository (base dependencies only), so the
# port bench/engines/trtllm_sampler.py (torch only) runs in the same env. Every outcome goes to
# DIR/trtllm_status.txt; the script exits 0 either way (the record is the product), printing the versions.
#
# What happens here (recorded 2026-12, this machine, no route to pypi.nvidia.com): PyPI's tensorrt-llm 1.2.1 is a
# 10 kB placeholder sdist (build backend `wheel_stub`) whose metadata step downloads the real wheel from
# https://pypi.nvidia.com/. That host does not resolve, so the install stops at
#   urllib.error.URLError: <urlopen error [Errno -2] Name or service not known>
#   wheel_stub.error.InstallFailedError: The installation of tensorrt-llm for version 1.2.1 failed.
#   error: metadata-generation-failed
# `--no-deps` fails the same way (the placeholder must build to install at all), so nothing named tensorrt_llm is
# installed and the import stops at
#   ModuleNotFoundError: No module named 'tensorrt_llm'
# No wheel, no source: bench/engines/trtllm_sampler.py ports the functions from the stored text of the upstream
# repository (its docstring names the commits). From that source, on a machine with the real wheel the import
# would still need the compiled extension `tensorrt_llm.bindings` (sampler.py imports it at module top) and its
# CUDA libraries: not measured here.
#
# The engine pins never touch the project's own environment: everything goes into DIR.
set -euo pipefail

VERSION="${1:-1.2.1}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
DIR="${2:-$ROOT/.engines/trtllm-$VERSION}"
PY="${PYTHON:-python3.11}"
TORCH_WHEEL="${TORCH_WHEEL:-/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl}"
EXTRA=()
if [ -n "${TRTLLM_EXTRA_INDEX:-}" ]; then EXTRA=(--extra-index-url "$TRTLLM_EXTRA_INDEX"); fi

if [ ! -x "$DIR/bin/python" ]; then
    "$PY" -m venv "$DIR"
fi
PIP=("$DIR/bin/python" -m pip --disable-pip-version-check)
STATUS="$DIR/trtllm_status.txt"
: >"$STATUS"
note() { echo "$*" | tee -a "$STATUS"; }

if ! "$DIR/bin/python" -c "import torch,sys; sys.exit(torch.__version__ != '2.13.0+cpu')" 2>/dev/null; then
    "${PIP[@]}" install "$TORCH_WHEEL"
fi

installed() { "$DIR/bin/python" -c "import importlib.metadata as m,sys; sys.exit(m.version('tensorrt-llm') != '$VERSION')" \
    2>/dev/null; }
# the error lines worth quoting from a pip log: the root cause and pip's verdict
key_lines() { grep -E "Error|error:|failed|not known|No matching|placeholder|pypi.nvidia" "$1" \
    | grep -vE '^\s*(File|\^|raise )' | sed 's/^ *//' | awk '!seen[$0]++' | head -12; }

note "tensorrt-llm==$VERSION into $DIR ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
if installed; then
    note "install: already installed"
else
    if "${PIP[@]}" install "${EXTRA[@]}" "tensorrt-llm==$VERSION" "torch==2.13.0+cpu" >"$DIR/install.log" 2>&1; then
        note "install: ok"
    else
        note "install: FAILED (pip install tensorrt-llm==$VERSION; full log $DIR/install.log):"
        key_lines "$DIR/install.log" | sed 's/^/    /' | tee -a "$STATUS"
        if "${PIP[@]}" install --no-deps "${EXTRA[@]}" "tensorrt-llm==$VERSION" >"$DIR/install_nodeps.log" 2>&1; then
            note "install --no-deps: ok"
        else
            note "install --no-deps: FAILED (full log $DIR/install_nodeps.log):"
            key_lines "$DIR/install_nodeps.log" | sed 's/^/    /' | tee -a "$STATUS"
        fi
    fi
fi

# The import the engine's own test does; its last line is the exact error.
if (cd /tmp && "$DIR/bin/python" -c "import tensorrt_llm._torch.pyexecutor.sampler" >"$DIR/import.log" 2>&1); then
    note "import tensorrt_llm._torch.pyexecutor.sampler: ok"
else
    note "import tensorrt_llm._torch.pyexecutor.sampler: FAILED: $(tail -n 1 "$DIR/import.log")"
fi

"${PIP[@]}" install -e "$ROOT" >/dev/null
(cd "$ROOT" && "$DIR/bin/python" -c "import bench.engines.trtllm_sampler as m; print('port of', m.TRTLLM_VERSION)") \
    | tee -a "$STATUS"
"${PIP[@]}" freeze 2>/dev/null | grep -iE '^(tensorrt|torch|numpy)|spectr' | tee -a "$STATUS" || true
echo "env ready: $DIR (status: $STATUS)"
