# Convenience front end over CMake. The README's two commands:
#   make demo   build and run the demonstration job on 4 local ranks
#   make test   build and run the test suite: the C suite (CTest), then the
#               Python package's quick cases (pytest, in .venv, on two
#               workers); every part runs, each with a TMPDIR of its own
#               that is removed after it, and a summary ends the run (it
#               fails if anything was left in /tmp or /dev/shm)
# Other targets: make build, make ctest, make python (build the package
# into .venv), make pytest, make test-slow (the Python suite's long cases),
# make asan (C suite under ASan+UBSan), make fuzz, make install
# PREFIX=/usr/local, make clean, make conformance (the long differential run
# against PyTorch; the suite runs a bounded one), make test-torch214
# (ccol.torch's tests again on torch 2.14.1, in .venv214).
MAKEFLAGS += --no-print-directory
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?=
VENV ?= .venv
PY := $(VENV)/bin/python
VENV214 ?= .venv214
PY214 := $(VENV214)/bin/python
# the torch tests, and the exchange reduction against the other torch's fold
TORCH_TESTS = python/tests/test_torch*.py python/tests/test_conformance_fold.py
PYTEST_FLAGS ?=
# pytest on two workers (pytest-xdist), each test's name and time printed
# as it ends, the ten slowest listed at the end
PYTEST_WORKERS ?= 2
PYTEST_BASE := -m pytest -v -p no:cacheprovider --durations=10
PYTEST := $(PYTEST_BASE) -n $(PYTEST_WORKERS) --dist load

.PHONY: all deps build demo test ctest python pytest test-slow conformance asan \
	fuzz install clean python214 test-torch214

all: build

deps:
	@cmake/deps.sh

build: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	$(BUILD)/ccol demo

# Every part runs whatever the one before it did; tests/run_parts.sh ends
# with each part's time and verdict.
test: build python
	@tests/run_parts.sh "C suite (ctest)=$(MAKE) ctest" \
		"Python suite, quick cases (pytest)=$(MAKE) pytest"

# Most C tests spend their time waiting (deadlines, peers that stall), so
# ctest runs four at once on two cores.
CTEST_JOBS ?= 4
ctest: build
	cd $(BUILD) && ctest --output-on-failure -j$(CTEST_JOBS)

# The package builds libccol from this tree into its own extension
# (scikit-build-core drives CMake; see pyproject.toml).
python:
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r python/requirements-test.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-build-isolation \
		--config-settings=cmake.define.CCOL_WERROR=ON .

pytest: build python
	CCOL_TOOL=$(abspath $(BUILD))/ccol $(PY) $(PYTEST) -m "not slow" \
		$(PYTEST_FLAGS) python/tests

# The long cases (marked slow: more torchrun jobs of the kinds make test
# runs, cold Inductor compiles on several ranks, the benchmarks' quick runs,
# the long conformance modes); CI runs them too. Those marked alone (cold
# Inductor compiles, timed benchmarks) run last, one at a time, whatever
# the others did.
test-slow: build python
	@rc=0; CCOL_TOOL=$(abspath $(BUILD))/ccol; export CCOL_TOOL; \
	$(PY) $(PYTEST) -m "slow and not alone" $(PYTEST_FLAGS) python/tests \
		|| rc=1; \
	$(PY) $(PYTEST_BASE) -n 0 -m "slow and alone" $(PYTEST_FLAGS) \
		python/tests || rc=1; \
	exit $$rc

# The other torch release ccol.torch supports: the same package, its torch
# tests (python/tests/test_torch*.py) on torch 2.14.1, less the cases marked
# one_release (a sibling case takes the same torch path on both releases).
python214:
	@test -x $(PY214) || python3 -m venv $(VENV214)
	$(PY214) -m pip install -q --disable-pip-version-check -r python/requirements-torch214.txt
	$(PY214) -m pip install -q --disable-pip-version-check --no-build-isolation \
		--config-settings=cmake.define.CCOL_WERROR=ON .

test-torch214: build python214
	@rc=0; CCOL_TOOL=$(abspath $(BUILD))/ccol; export CCOL_TOOL; \
	$(PY214) $(PYTEST) -m "not one_release and not alone" $(PYTEST_FLAGS) \
		$(TORCH_TESTS) || rc=1; \
	$(PY214) $(PYTEST_BASE) -n 0 -m "alone and not one_release" \
		$(PYTEST_FLAGS) $(TORCH_TESTS) || rc=1; \
	exit $$rc

# Many more random cases of the PyTorch-oracle tests; prints the figures.
conformance: build python
	CCOL_CONFORMANCE=long CCOL_TOOL=$(abspath $(BUILD))/ccol $(PY) -m pytest \
		-q --timeout=3600 $(PYTEST_FLAGS) python/tests/test_conformance_*.py

asan:
	$(MAKE) ctest CTEST_JOBS=$(JOBS) BUILD=build-asan CMAKE_FLAGS="-DCCOL_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS)"

fuzz:
	@cmake/deps.sh --fuzz
	CC=clang cmake -S . -B build-fuzz -DCCOL_FUZZ=ON -DCCOL_BUILD_TESTS=OFF >/dev/null
	cmake --build build-fuzz -j$(JOBS)

install: build
	cmake --install $(BUILD) --prefix $(or $(PREFIX),/usr/local)

clean:
	rm -rf build build-asan build-fuzz build-py $(VENV) $(VENV214)
