# Convenience front end over CMake. The README's two commands:
#   make demo   build and run the demonstration job on 4 local ranks
#   make test   build and run the whole test suite
# Other targets: make build, make asan (suite under ASan+UBSan), make fuzz,
# make install PREFIX=/usr/local, make clean.
MAKEFLAGS += --no-print-directory
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?=

.PHONY: all deps build demo test asan fuzz install clean

all: build

deps:
	@cmake/deps.sh

build: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	$(BUILD)/ccol demo

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

asan:
	$(MAKE) test BUILD=build-asan CMAKE_FLAGS="-DCCOL_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS)"

fuzz: deps
	CC=clang cmake -S . -B build-fuzz -DCCOL_FUZZ=ON -DCCOL_BUILD_TESTS=OFF >/dev/null
	cmake --build build-fuzz -j$(JOBS)

install: build
	cmake --install $(BUILD) --prefix $(or $(PREFIX),/usr/local)

clean:
	rm -rf build build-asan build-fuzz
