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

$(VENV)/.built-compiled: $(STAMP) setup.py topics/runtimes.py $(wildcard adapters/*.py adapters/*/*.py)
	rm -f $(VENV)/.built-interpreted
	CANONFLOW_COMPILE=1 $(PY) setup.py --quiet build_ext --inplace \
	    || { find adapters -name "*.so" -delete; echo "make: mypyc build failed: adapters run interpreted"; }
	rm -rf build
	touch $@

$(VENV)/.built-interpreted: $(STAMP)
	find adapters -name "*.so" -delete; rm -f $(VENV)/.built-compiled
	touch $@

compiled: $(VENV)/.built-compiled

interpreted: $(VENV)/.built-interpreted

demo: $(BUILT)
	$(VENV)/bin/canonflow demo

run: $(BUILT)
	$(VENV)/bin/canonflow run

lint: $(STAMP)
	$(VENV)/bin/ruff check canonflow topics adapters pipeline tests setup.py
	$(VENV)/bin/mypy topics adapters

# The suite mostly waits (workers joining their groups, settle windows), so it runs in
# TEST_PROCESSES pytest-xdist processes, more than the cores (tests/conftest.py says how
# it is spread); then the tests marked `serial`, which time themselves, alone. Both runs
# always go; the target fails if either does.
TEST_PROCESSES ?= 4
test: lint $(BUILT)
	$(VENV)/bin/pytest -q -n $(TEST_PROCESSES) -m "not serial"; status=$$?; \
	$(VENV)/bin/pytest -q -m serial && exit $$status

conformance: $(BUILT)
	python3 ../shared/conformance/canoncheck.py --cmd $(VENV)/bin/canonflow
