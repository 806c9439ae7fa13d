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

# three workers on 2 cores, each file's tests on one of them (module-scoped servers stay
# shared): the suite waits on servers, browsers and trainers as much as it computes, and a third
# worker computes while two wait (2026-12-03, clean clones, pairs run one after the other:
# 666-750 s with 2, 607-658 s with 3). Files
# go in tests/conftest.py's order, the slowest first (not xdist's: the most tests first).
test: $(STAMP) lint
	$(BIN)/python -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder

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
