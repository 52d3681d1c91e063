#!/bin/bash
# The next device call (about 8 minutes on an H100 or H200 machine with 16 cores), run from
# the repository root by the device tool, with `.whl-device` carried
# (`python benchmarks/device_wheels.py --out .whl-device` here first: mctx, a slimmed Ray,
# jsonschema). Its outputs go under $OUT:
#   A  `bench real` on the measured preset with the HBM capped (--hbm-limit A_LIMIT, 2.5:
#      the segments a program holds plus 2.5x its instance's fast memory; a run holds the
#      plan plus one kernel's workspace), and every answer measured twice: as it is, and
#      with its matmuls reading their host operands through an HBM scratch copy (rows
#      LABEL+staged-dots, and per-op profiles of drop both ways and of muzero-prod's answer
#      staged; A_STAGE_DOTS= turns that off). The answers: drop, heuristic,
#      first-touch, es and muzero-prod's (600 s, seed 0, solved on the development machine
#      on the instances the device derived: docs/results/gpu-real-h200-capped/answers; they
#      run where the instance hash matches, i.e. on the same torch version). A_PROGRAMS
#      picks the programs, A_PLACEMENTS the solvers run there, A_FRACTION the fast memory
#      (a fraction of each program's peak live bytes, 0.25 by default), A_ANSWERS the given
#      answers and A_PRESET the preset (gpu_h100_host_staged: answers solved for staged
#      execution; their muzero-prod answers are solved elsewhere from the programs this
#      run's programs.json.gz keeps, docs/runtime.md);
#   B  #40: self-play throughput with 1 and 2 Ray actors on the 16 cores (measured on
#      2026-11-28; run it again only to repeat that point);
#   C  the answers solved for staged execution: `bench real` on gpu_h100_host_staged for
#      bert-small and mlp-train (C_PROGRAMS), muzero-prod's answers solved on this
#      machine's staged instances (docs/results/gpu-real-h200-capped/answers-staged, the
#      hashes the device derives on torch 2.11), every answer in place and staged, under
#      the same cap (about 3 minutes; C_SECONDS).
# Each part has its own timeout; A_SECONDS, B_TIMEOUT and C_SECONDS change them; PARTS
# ("A") picks, e.g. PARTS="A C" with A_SECONDS=300 in one call of under 10 minutes. The
# device tool brings back at most 8 files, so each bench part's folder comes back packed:
# $OUT/real.tgz (A) and $OUT/staged.tgz (C); unpack with tar xzf.
cd "$(dirname "$0")/.." || exit 3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl-device/*.whl || exit 3
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 RAY_AUTH_MODE=disabled
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, jax; print('torch', torch.__version__, 'jax', jax.__version__)" 2>&1 | tail -1
mkdir -p "$OUT/real"
A_SECONDS=${A_SECONDS:-400}
A_STAGE_DOTS=${A_STAGE_DOTS-1}  # set and empty: each answer measured as it is only
if [[ " ${PARTS:-A} " == *" A "* ]]; then
  echo "== A bench real under an HBM limit $(date +%T)"
  timeout $((A_SECONDS + 50)) python3 benchmarks/device_real.py --out "$OUT/real" \
    --seconds "$A_SECONDS" --preset "${A_PRESET:-gpu_h100_host}" --hbm-limit "${A_LIMIT:-2.5}" \
    --capacity-fraction "${A_FRACTION:-0.25}" \
    --answers "${A_ANSWERS:-docs/results/gpu-real-h200-capped/answers}" \
    --programs ${A_PROGRAMS:-bert-small-train bert-small mlp-train} \
    --placements ${A_PLACEMENTS:-drop heuristic first-touch es:0} --no-plot \
    ${A_STAGE_DOTS:+--stage-dot-reads --profile drop drop+staged-dots given:muzero-prod+staged-dots} \
    2>&1 \
    | grep "^\[" | grep -v "Traceback" | cut -c1-400 | tail -"${A_TAIL:-40}"
  tar czf "$OUT/real.tgz" -C "$OUT" real && rm -rf "$OUT/real"
fi
if [[ " ${PARTS:-A} " == *" B "* ]]; then
  echo "== B Ray actors on the CPUs $(date +%T)"
  JAX_PLATFORMS=cpu timeout "${B_TIMEOUT:-150}" python3 benchmarks/distributed_selfplay.py \
    --program xla-v1/wavenet_infer --actors 1 2 --seconds 30 --learner-steps 100 \
    --out "$OUT/selfplay.jsonl" 2>&1 | grep -v "Warning" | tail -8
fi
if [[ " ${PARTS:-A} " == *" C "* ]]; then
  echo "== C answers solved for staged reads $(date +%T)"
  C_SECONDS=${C_SECONDS:-170}
  timeout $((C_SECONDS + 50)) python3 benchmarks/device_real.py --out "$OUT/staged" \
    --seconds "$C_SECONDS" --preset gpu_h100_host_staged --hbm-limit "${A_LIMIT:-2.5}" \
    --answers docs/results/gpu-real-h200-capped/answers-staged \
    --programs ${C_PROGRAMS:-bert-small mlp-train} --placements drop heuristic es:0 \
    --no-framework --no-plot --stage-dot-reads --profile given:muzero-prod+staged-dots 2>&1 \
    | grep "^\[" | grep -v "Traceback" | cut -c1-400 | tail -"${A_TAIL:-40}"
  tar czf "$OUT/staged.tgz" -C "$OUT" staged && rm -rf "$OUT/staged"
fi
echo "== done $(date +%T)"
