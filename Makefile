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

.PHONY: demo run test lint docs conformance compiled interpreted

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# mypyc and the C compiler say a lot (and warn about code that is not ours): their
# output goes to BUILD_LOG, and the screen gets one line.
BUILD_LOG := $(VENV)/mypyc-build.log

$(VENV)/.built-compiled: $(STAMP) setup.py topics/runtimes.py $(wildcard adapters/*.py adapters/*/*.py)
	@rm -f $(VENV)/.built-interpreted
	@echo "make: compiling the adapters with mypyc (a few minutes the first time; log: $(BUILD_LOG))"
	@CANONFLOW_COMPILE=1 $(PY) setup.py --quiet build_ext --inplace >$(BUILD_LOG) 2>&1 \
	    || { find adapters -name "*.so" -delete; echo "make: mypyc build failed (see $(BUILD_LOG)): adapters run interpreted"; }
	@rm -rf build
	@touch $@

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

# The documentation site (mkdocs.yml), warnings as errors, into site/; the test suite
# builds it too (tests/test_docs.py).
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict --site-dir site

# The suite mostly waits (workers joining their groups, settle windows), so it runs in
# TEST_PROCESSES pytest-xdist processes, more than the cores (tests/conftest.py says how
# it is spread), with the Tansu smoke set beside it on Kafka runs; then the tests
# marked `serial`, which time themselves, alone.
# The broker tests run on Apache Kafka (one per pytest process, tests/pipeline/brokers.py)
# where java and mvn are installed, and then the smoke set (marked `tansu`) on the
# embedded Tansu; elsewhere they all run on Tansu, and make says so in one line.
# TEST_BROKER=tansu chooses Tansu. Every run always goes; the target fails if any does.
TEST_PROCESSES ?= 5
HAVE_KAFKA := $(shell command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 && echo kafka)
TEST_BROKER ?= $(or $(HAVE_KAFKA),tansu)
test: lint $(BUILT)
	@if [ "$(TEST_BROKER)" = kafka ]; then $(PY) -m pipeline.cluster.kafka || exit 1; \
	elif [ -z "$(HAVE_KAFKA)" ]; then \
	    echo "make: no java or no mvn: the broker tests run on the embedded Tansu, not on Apache Kafka"; fi
	export CANONFLOW_TEST_BROKER=$(TEST_BROKER); status=0; \
	if [ "$(TEST_BROKER)" = kafka ]; then \
	    CANONFLOW_TEST_BROKER=tansu $(VENV)/bin/pytest -q -p no:cacheprovider -n 2 \
	        --basetemp=$(VENV)/tansu-smoke-tmp -m "tansu and not serial" \
	        > $(VENV)/tansu-smoke.log 2>&1 & smoke=$$!; \
	fi; \
	$(VENV)/bin/pytest -q --durations=15 -n $(TEST_PROCESSES) -m "not serial" || status=$$?; \
	if [ "$(TEST_BROKER)" = kafka ]; then \
	    wait $$smoke || status=$$?; echo "the smoke set on the embedded Tansu:"; \
	    cat $(VENV)/tansu-smoke.log; \
	fi; \
	$(VENV)/bin/pytest -q --durations=5 -m serial || status=$$?; \
	exit $$status

conformance: $(BUILT)
	python3 ../shared/conformance/canoncheck.py --cmd $(VENV)/bin/canonflow
