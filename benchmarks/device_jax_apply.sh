#!/bin/bash
# `mallocgame apply --jax` on the device's GPU (issue #43, item 1; about 1 minute): a JAX
# MLP (tests/runtime/jax_function_module.py at 4096x8192, 8192x1024 and 2048x4096 fp32)
# extracted on gpu_h100_host, then the answers of drop, heuristic and first-touch applied
# with memory kinds and timed against the plain jit, each a line with whether the results
# are identical. Run from the repository root by the device tool with `.whl-device`
# carried; DEVICE=cpu runs it here on the CPU stand-in. The instance and answers go to $OUT.
cd "$(dirname "$0")/.." || exit 3
if [[ -d .whl-device ]] && [[ "${DEVICE:-cuda}" == cuda ]]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl-device/*.whl || exit 3
fi
export PYTHONPATH=/tmp/site:src:. PYTHONUNBUFFERED=1
OUT=${OUT:-$(mktemp -d)}
FN=tests.runtime.jax_function_module:mlp
ARGS=(--arg "f32[4096,8192]" --arg "f32[8192,1024]" --arg "f32[2048,4096]")
run() { python3 -c "import sys; from mallocgame.cli import main; sys.exit(main())" "$@"; }
run extract --jax "$FN" "${ARGS[@]}" --preset gpu_h100_host --out "$OUT/mlp.json" || exit 1
for solver in drop heuristic first-touch; do
  run solve "$OUT/mlp.json" --solver "$solver" --seed 0 --out "$OUT/mlp.$solver.json" || exit 1
  run apply "$OUT/mlp.$solver.json" --jax "$FN" "${ARGS[@]}" --instance "$OUT/mlp.json" \
    --device "${DEVICE:-cuda}" --steps 10
done
