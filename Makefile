# beacond — build, test, demo and install entry points.
#   make build      debug build
#   make release    static-stdlib release binary in build/beacond (needs only libc, libbluetooth3, libsystemd0)
#   make test       the whole test suite: unit tests (Swift 6.3, and 6.0 in a build root), fuzzing, the VM
#                   end-to-end test (root, qemu, debootstrap),
#                   the benchmark in smoke mode, integration tests on Bumble
#   make test-fast  the same without the VM test and the benchmark (no root needed)
#   make vm-test    only the VM end-to-end test (Tests/VM/run.sh)
#   make fuzz-long  every fuzz target for 10 million executions
#   make swift60    build and unit-test with Debian 13's Swift 6.0 in a cached trixie build root (root)
#   make bench      the full benchmark (docs/benchmarks.md)
#   make demo       beacond advertising on a virtual controller, heard by a second virtual radio
#   make install    release binary + units + example config via scripts/install.sh (DESTDIR, PREFIX honoured)

SWIFT ?= swift
PREFIX ?= /usr
DESTDIR ?=
VENV ?= .venv
PYTHON ?= python3
FUZZ_SECONDS ?= 30
PY := $(VENV)/bin/python

.PHONY: deps deps-all build release test test-fast unit-test integration-test fuzz fuzz-long swift60 vm-test bench bench-smoke check-units demo install venv clean

# The Debian packages (installed when missing and run as root; otherwise the command to run is printed).
deps:
	sh scripts/deps.sh

deps-all:
	sh scripts/deps.sh --all

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release --static-swift-stdlib --disable-local-rpath
	mkdir -p build
	cp .build/release/beacond build/beacond
	strip build/beacond

$(VENV)/.installed: Tests/Integration/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r Tests/Integration/requirements.txt
	touch $@

venv: $(VENV)/.installed

unit-test: deps
	$(SWIFT) test

integration-test: build venv
	BEACOND=$(CURDIR)/.build/debug/beacond $(PY) -m pytest -q Tests/Integration

fuzz: deps
	fuzz/run.sh $(FUZZ_SECONDS)

swift60: deps-all
	sh scripts/build-swift60.sh

# Every fuzz target for at least 10 million executions (about an hour on two cores; docs/benchmarks.md has the counts).
fuzz-long: deps
	fuzz/run.sh --runs 10000000

vm-test: release
	sh Tests/VM/run.sh build/beacond

bench: release venv
	$(PY) bench/run.py --beacond build/beacond

bench-smoke: release venv
	$(PY) bench/run.py --beacond build/beacond --smoke

# systemd-analyze verify must be clean and security --offline exposure at most 1.5 (printed for the CI log).
check-units: build
	sh scripts/check-units.sh .build/debug/beacond

test: deps-all unit-test swift60 fuzz check-units vm-test bench-smoke integration-test

test-fast: unit-test fuzz check-units integration-test

demo: build venv
	$(PY) Tests/Integration/harness/demo.py

install: release
	DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" sh scripts/install.sh build/beacond

clean:
	rm -rf .build build $(VENV)
