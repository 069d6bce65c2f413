#!/usr/bin/env bash
# GPU smoke benchmark: a few GRPO steps of a random-init ~100M-parameter model in bf16 with the transformers
# backend; prints step time, tokens/s, peak GPU memory and achieved TFLOP/s. Needs one NVIDIA GPU, a Python
# environment with torch (CUDA build), transformers and this project installed; no network. Budget: 8 minutes.
#   bash benchmarks/gpu_check.sh [--steps 6] [--completion-length 256]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [[ -z "$PY" ]]; then
  if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" -c "import torch; assert torch.cuda.is_available(), 'torch has no CUDA here: install a CUDA build of torch'; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
timeout 480 "$PY" benchmarks/gpu_check.py "$@"
