# The two set-up commands of the README: `make demo` (the main job on an embedded
# broker) and `make test` (everything CI runs). Both create .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo run test lint conformance compiled interpreted

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/canonflow demo

run: $(STAMP)
	$(VENV)/bin/canonflow run

lint: $(STAMP)
	$(VENV)/bin/ruff check topics adapters pipeline tests
	$(VENV)/bin/mypy topics adapters

test: lint
	$(VENV)/bin/pytest -q

conformance: $(STAMP)
	python3 ../shared/conformance/canoncheck.py --cmd $(VENV)/bin/canonflow

# The adapter core compiled with mypyc, in place (setup.py): the same source, about
# 1.2x faster; `make interpreted` goes back to pure Python. Edits to a compiled
# module's .py take effect only after `make compiled` again.
compiled: $(STAMP)
	CANONFLOW_COMPILE=1 $(PY) setup.py --quiet build_ext --inplace
	rm -rf build

interpreted:
	rm -f adapters/*.so
