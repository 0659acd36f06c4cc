# The two set-up commands of the README: `make demo` and `make test`.
# Both install what is missing first (tools/setup.sh) and are idempotent.
.PHONY: setup demo test lint format clean

VENV := .venv
PY := $(VENV)/bin/python
export PYTHONDONTWRITEBYTECODE := 1

setup:
	@bash tools/setup.sh

demo: setup
	$(VENV)/bin/rlx-edge demo -o out/demo

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Two workers, a test file each at a time: CI has two cores, and most tests wait on gcc, QEMU or a
# simulator; session fixtures (batched builds) stay within one file's worker.
test: setup lint
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf out build dist *.egg-info .pytest_cache .ruff_cache
