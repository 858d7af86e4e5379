# `make run` and `make test` each do their own set-up, idempotently: a second run
# downloads nothing.
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: setup run test unit lint clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@

setup: $(STAMP)
	$(BIN)/faultline setup

run: setup
	$(BIN)/faultline run

lint: $(STAMP)
	$(BIN)/ruff check faultline tests benchmarks
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

test: setup lint
	$(BIN)/pytest -q --timeout=900 tests

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
