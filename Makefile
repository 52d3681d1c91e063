# `make run`: set up .venv, list the workloads, then the main job: `mallocgame optimize` (muzero-prod against
# the heuristic) on a bundled xla-v2 program; it ends with the comparison table. Each run starts afresh.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
WORKLOAD ?= xla-v2/ddim_sampler_b16
BUDGET ?= 180

.PHONY: setup run test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,xla,muzero,ray,torch,hf,tpu]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/mallocgame list
	rm -rf out/run.*
	$(VENV)/bin/mallocgame optimize $(WORKLOAD) --budget $(BUDGET) --seed 0 --out out/run.json

# The linter, the formatter's check and the type check (settings in pyproject.toml), then the
# tests in two processes (pytest-xdist), one for each core of CI; `pytest` alone runs serially.
test: lint
	$(PY) -m pytest -n 2

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

bench: $(STAMP)
	$(PY) benchmarks/game_speed.py

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis .ruff_cache .mypy_cache
