# The two set-up commands of the README: `make demo` (the main job on an embedded
# broker) and `make test` (everything CI runs). Both create .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The translators (adapters/) run compiled with mypyc (setup.py): the same source, about
# 1.6x faster in the adapter core (canonflow bench). COMPILE=0 runs them interpreted.
# The build follows the source: an edited adapter is compiled again before the next
# demo, run or test. Without a C compiler, they run interpreted (and make says so).
COMPILE ?= 1
BUILT := $(VENV)/.built-$(if $(filter 1,$(COMPILE)),compiled,interpreted)

.PHONY: demo run test lint conformance compiled interpreted

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

$(VENV)/.built-compiled: $(STAMP) setup.py $(wildcard adapters/*.py)
	rm -f $(VENV)/.built-interpreted
	CANONFLOW_COMPILE=1 $(PY) setup.py --quiet build_ext --inplace \
	    || { rm -f adapters/*.so; echo "make: mypyc build failed: adapters run interpreted"; }
	rm -rf build
	touch $@

$(VENV)/.built-interpreted: $(STAMP)
	rm -f adapters/*.so $(VENV)/.built-compiled
	touch $@

compiled: $(VENV)/.built-compiled

interpreted: $(VENV)/.built-interpreted

demo: $(BUILT)
	$(VENV)/bin/canonflow demo

run: $(BUILT)
	$(VENV)/bin/canonflow run

lint: $(STAMP)
	$(VENV)/bin/ruff check topics adapters pipeline tests setup.py
	$(VENV)/bin/mypy topics adapters

test: lint $(BUILT)
	$(VENV)/bin/pytest -q

conformance: $(BUILT)
	python3 ../shared/conformance/canoncheck.py --cmd $(VENV)/bin/canonflow
