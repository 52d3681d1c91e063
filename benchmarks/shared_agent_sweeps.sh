#!/usr/bin/env bash
# The sweeps of benchmarks/shared_agent.py's table, one pinned job at a time on core ${CORE:-0}:
# the shared agent zero-shot (10 s) and fine-tuned (60 s), muzero from scratch, es and the
# heuristic (60 s), muzero-prod with and without the agent (60 s). Resumable (records are
# skipped where they exist). muzero from scratch at 600 s is a sweep of its own (docs/results.md).
#   benchmarks/shared_agent_sweeps.sh AGENT_DIR OUT_ROOT PROGRAM...
set -euo pipefail
agent=$1 root=$2
shift 2
sweep="taskset -c ${CORE:-0} ${PYTHON:-.venv/bin/python} benchmarks/pinned_sweep.py --cores 1 --programs $*"
$sweep --solvers muzero --budget 10 --out "$root/zeroshot" \
    --option "muzero:init=$agent" --option muzero:learning=false --option muzero:demonstrations=
$sweep --solvers muzero --budget 60 --out "$root/finetune-60" --option "muzero:init=$agent"
$sweep --solvers muzero es --budget 60 --out "$root/scratch-60"
$sweep --solvers muzero-prod --budget 60 --out "$root/prod-shared-60" --option "muzero-prod:init=$agent"
$sweep --solvers muzero-prod --budget 60 --out "$root/prod-60"
