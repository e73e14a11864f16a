# zinc — top-level entry points. `make run` and `make test` work on a fresh Debian machine.
BUILD ?= build
JOBS ?= $(shell nproc)
PROMPT ?= The three most useful things to know about the Rust borrow checker are
N ?= 96
# Extra flags for the first configure of $(BUILD), e.g. CMAKE_FLAGS=-DZINC_CUDA=OFF.
CMAKE_FLAGS ?=
# The Python side (oracles, pytest) lives in this virtual environment, made and filled by
# scripts/install-deps; its bin/ comes first on PATH for every target, so the python3 that ctest's
# oracle suites, fetch-models and bench run is the venv's. ZINC_VENV=DIR picks another one.
ZINC_VENV ?= $(CURDIR)/.venv
export ZINC_VENV := $(abspath $(ZINC_VENV))
export PATH := $(ZINC_VENV)/bin:$(PATH)

.PHONY: all deps build models default-model run test fuzz bench clean

all: build

deps:
	./scripts/install-deps

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

models:
	./scripts/fetch-models

default-model:
	./scripts/fetch-models smollm2

run: deps default-model $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target zinc
	$(BUILD)/zinc -m models/SmolLM2-135M-Instruct.Q4_1.gguf --prompt "$(PROMPT)" -n $(N) --temp 0

test: deps build models
	ctest --test-dir $(BUILD) --output-on-failure -j 2

# zinc vs llama.cpp on the CPU (docs/benchmarks.md): microbenchmarks, server scenarios, load sweep
# and shared prefix, each engine as a server on the same GGUF; builds llama.cpp's tools first.
bench: deps build
	./scripts/build-llama-cpp --jobs $(JOBS)
	python3 bench/run --target cpu --zinc $(BUILD)/zinc --no-build

fuzz:
	./scripts/run-fuzz

clean:
	rm -rf $(BUILD)
