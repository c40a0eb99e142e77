# One entry for set-up, the demo, lint, types, tests and benchmarks — the same here and in CI.
VENV   ?= .venv
PYTHON ?= python3
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed-stamp

.PHONY: demo check lint typecheck test bench catalog-check fuzz clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,plot]'
	touch $(STAMP)

## demo: set everything up, then the main job on built-in defaults: what to train and serve a
## ~8B model on (1T tokens; 2k in / 256 out), with reasons, Pareto plots and an HTML report
## in out/
demo: $(STAMP)
	mkdir -p out
	$(BIN)/gpuarch advise train --plot out/advise-train.png
	$(BIN)/gpuarch advise infer --plot out/advise-infer.png
	$(BIN)/gpuarch report --out out/report.html

## check: the whole test suite: lint, type check, tests
check: lint typecheck test

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks scripts

typecheck: $(STAMP)
	$(BIN)/mypy

test: $(STAMP)
	$(BIN)/python -m pytest

## catalog-check: every consistency check of the catalog, one line each
catalog-check: $(STAMP)
	$(BIN)/python -m gpuarch.catalog.check -v

## bench: speed figures (not part of the tests)
bench: $(STAMP)
	$(BIN)/python benchmarks/bench_cold_start.py
	$(BIN)/python benchmarks/bench_estimate.py
	$(BIN)/python benchmarks/bench_instructions.py
	$(BIN)/python benchmarks/bench_prefill_reuse.py
	$(BIN)/python benchmarks/bench_numerics.py
	$(BIN)/python benchmarks/bench_advisor.py

## fuzz: odd values for every flag and config.json key; any traceback or hang fails (about a minute)
fuzz: $(STAMP)
	$(BIN)/python scripts/fuzz_cli.py

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache
