#!/bin/bash
# One device call: #43 (GPU runs) then #40 (learner on the GPU, Ray actors on 16 cores).
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl-ray/*.whl || exit 3
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 RAY_AUTH_MODE=disabled
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, jax, cupy; print('torch', torch.__version__, 'jax', jax.__version__, 'cupy', cupy.__version__)" 2>&1 | tail -1
mkdir -p "$OUT/real"
echo "== A device_real $(date +%T)"
timeout 270 python3 benchmarks/device_real.py --out "$OUT/real" --seconds ${A_SECONDS:-220} \
  --preset gpu_h100_host --answers .device/answers \
  --programs bert-small bert-small-train mlp-train resnet50 bert ffn \
  --placements drop heuristic first-touch es:0 --no-plot 2>&1 | grep -v "Warning\|cls.__new\|^  warnings\|^  return" | tail -${A_TAIL:-25}
echo "== B learner on the GPU $(date +%T)"
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 100 python3 benchmarks/distributed_selfplay.py --program xla-v1/wavenet_infer \
  --actors --seconds 30 --learner-steps 200 --out "$OUT/selfplay.jsonl" 2>&1 | grep '^{' 
echo "== C Ray actors on the CPUs $(date +%T)"
JAX_PLATFORMS=cpu timeout ${C_TIMEOUT:-190} python3 benchmarks/distributed_selfplay.py --program xla-v1/wavenet_infer \
  --actors 1 4 8 --seconds 30 --learner-steps 100 --out "$OUT/selfplay.jsonl" 2>&1 | grep -v "Warning" | tail -12
echo "== done $(date +%T)"
