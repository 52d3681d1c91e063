# `make run`: set up .venv, solve a bundled workload, train MMap-MuZero for a minute; `make test`: set up and run the tests.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
WORKLOAD ?= xla-v1/transformer_train
SMALL ?= xla-v1/gru_infer

.PHONY: setup run test bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,xla,muzero,ray]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/mallocgame list
	$(VENV)/bin/mallocgame solve $(WORKLOAD) --solver heuristic --out out/run.heuristic.json
	$(VENV)/bin/mallocgame solve $(WORKLOAD) --solver random --work 20 --seed 0 --progress --out out/run.random.json
	$(VENV)/bin/mallocgame check $(WORKLOAD) out/run.heuristic.json
	$(VENV)/bin/mallocgame check $(WORKLOAD) out/run.random.json
	$(VENV)/bin/mallocgame simulate $(WORKLOAD) out/run.heuristic.json
	$(VENV)/bin/mallocgame simulate $(WORKLOAD) out/run.random.json
	$(VENV)/bin/mallocgame show $(WORKLOAD) out/run.heuristic.json --out out/run.layout.png
	$(VENV)/bin/mallocgame train $(SMALL) --dir out/run.muzero --budget 60
	$(VENV)/bin/mallocgame check $(SMALL) out/run.muzero/final.solution.json
	$(VENV)/bin/mallocgame simulate $(SMALL) out/run.muzero/final.solution.json

# Two test processes (pytest-xdist), one for each core of CI; `pytest` alone runs serially.
test: $(STAMP)
	$(PY) -m pytest -n 2

bench: $(STAMP)
	$(PY) benchmarks/game_speed.py

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis
