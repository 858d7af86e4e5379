# `make run` and `make test` each do their own set-up, idempotently: a second run
# downloads nothing.
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: setup run test unit lint clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -e '.[dev,docker]'
	rm -f $(VENV)/.installed-* && touch $@

setup: $(STAMP)
	$(BIN)/faultline setup

# The default test: 3 nodes, acks=all, min.insync=2, idempotence on, a minute of
# kills and partitions; it ends by printing the run directory and the report's path.
run: setup
	$(BIN)/faultline run --nemesis kill,partition --time-limit 60

lint: $(STAMP)
	$(BIN)/ruff check faultline tests benchmarks
	$(BIN)/mypy

# The unit tests (pure, a fake at most) run on both cores; the rest, whose clusters would
# contend for them, one at a time.
unit: $(STAMP)
	$(BIN)/pytest -q -n 2 tests/unit

# FAULTLINE_REQUIRE_ALL=1: the set-up just ran, so a skipped test (a missing
# prerequisite) fails the run with the reason (tests/conftest.py).
# The docker backend's set-up installs docker.io, builds the image and starts dockerd where
# no engine runs; the test session stops that dockerd at its end and restores the host's
# firewall (tests/integration/conftest.py docker_engine), and --stop-engine does it again
# should pytest itself die, so nothing is left running (a user's own engine is untouched).
# --durations lists the slowest tests, to keep the suite inside CI's limit.
test: setup lint
	$(BIN)/faultline setup --backend docker
	FAULTLINE_REQUIRE_ALL=1 $(BIN)/pytest -q -n 2 --timeout=900 tests/unit && \
		FAULTLINE_REQUIRE_ALL=1 $(BIN)/pytest -q --timeout=900 --durations=30 tests --ignore=tests/unit; \
		rc=$$?; $(BIN)/faultline setup --stop-engine; exit $$rc

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
