#!/bin/bash
# The next device call (about 8 minutes on an H100 or H200 machine with 16 cores), run from
# the repository root by the device tool, with `.whl-device` carried
# (`python benchmarks/device_wheels.py --out .whl-device` here first: mctx, a slimmed Ray,
# jsonschema). Its outputs go under $OUT:
#   A  #43: `bench real` on the measured preset with the HBM capped (--hbm-limit 1.5: what a
#      program holds plus 1.5x its instance's fast memory), the training steps with and
#      without AdamW's update, and run 4's muzero-prod answers again (`--answers` reads them
#      from its programs.json.gz; they run where the instance hash matches, i.e. on the
#      same torch version);
#   B  #40: self-play throughput with 2 Ray actors on the 16 cores (the missing point of
#      1, 2, 4, 8), beside 1 actor in the same call.
# Each part has its own timeout; A_SECONDS and B_TIMEOUT shorten them.
cd "$(dirname "$0")/.." || exit 3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl-device/*.whl || exit 3
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 RAY_AUTH_MODE=disabled
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, jax; print('torch', torch.__version__, 'jax', jax.__version__)" 2>&1 | tail -1
mkdir -p "$OUT/real"
echo "== A bench real under an HBM limit $(date +%T)"
timeout 300 python3 benchmarks/device_real.py --out "$OUT/real" --seconds "${A_SECONDS:-250}" \
  --preset gpu_h100_host --hbm-limit 1.5 --answers docs/results/gpu-real-h200/programs.json.gz \
  --programs mlp-train mlp-train-adamw bert-small \
  --placements drop heuristic first-touch es:0 --no-plot 2>&1 \
  | grep -v "Warning\|cls.__new\|^  warnings\|^  return" | tail -"${A_TAIL:-30}"
echo "== B Ray actors on the CPUs $(date +%T)"
JAX_PLATFORMS=cpu timeout "${B_TIMEOUT:-150}" python3 benchmarks/distributed_selfplay.py \
  --program xla-v1/wavenet_infer --actors 1 2 --seconds 30 --learner-steps 100 \
  --out "$OUT/selfplay.jsonl" 2>&1 | grep -v "Warning" | tail -8
echo "== done $(date +%T)"
