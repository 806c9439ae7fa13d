# Two entry points: `make demo` (a live run watched at http://127.0.0.1:8501) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench serve clean image-check

$(STAMP): requirements.txt requirements-app.txt requirements-dev.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt -r requirements-dev.txt
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m app demo

# two workers, each file's tests on one of them (module-scoped servers stay shared): the suite
# waits on servers and browsers as much as it computes, so 2 cores take 464 s, not 804 s. Files
# go in tests/conftest.py's order, the slowest first (not xdist's: the most tests first).
test: $(STAMP) lint
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/diagnose.py
	$(BIN)/python bench/trainer.py
	$(BIN)/python bench/alerts.py
	$(BIN)/python bench/dashboard.py
	$(BIN)/python bench/fleet.py
	$(BIN)/python bench/sampler.py

# the monitor's Docker image, built and asked as a user would (docker/image-check.sh says how);
# needs a Docker engine, and root where the base must be made from Debian's packages
image-check:
	bash docker/image-check.sh

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
