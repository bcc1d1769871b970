# beacond — build, test, demo and install entry points.
#   make build      debug build
#   make release    static-stdlib release binary in build/beacond (needs only libc, libbluetooth3, libsystemd0)
#   make test       the whole test suite: unit tests (Swift 6.3, and 6.0 in a build root), fuzzing, the VM
#                   end-to-end test (root, qemu, debootstrap),
#                   the benchmark in smoke mode, integration tests on Bumble
#   make test-fast  the same without the VM test and the benchmark (no root needed)
#   make deb        build/beacond_<version>_amd64.deb and _arm64.deb (arm64 in a trixie root under qemu-user;
#                   root), checked with lintian
#   make vm-test    the VM end-to-end test of the amd64 package in Debian 12 (Tests/VM/run.sh)
#   make vm-test-arm64  the same for the arm64 package in Debian 13 under qemu-system-aarch64 (cortex-a53)
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

VERSION := $(shell sed -n 's/^public let beacondVersion = "\(.*\)"$$/\1/p' Sources/DaemonCore/Lifecycle.swift)
DEB_AMD64 := build/beacond_$(VERSION)_amd64.deb
DEB_ARM64 := build/beacond_$(VERSION)_arm64.deb

.PHONY: deps deps-all build release deb deb-amd64 deb-arm64 vm-test-arm64 test test-fast unit-test integration-test fuzz fuzz-long swift60 vm-test bench bench-smoke check-units demo install venv clean

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

# The packages are files: rebuilt when a tracked file they are made from changed, so `make test` builds each once.
PACKAGE_SOURCES := $(shell git ls-files Package.swift Sources systemd config scripts README.md 2>/dev/null)

$(DEB_AMD64): $(PACKAGE_SOURCES) | deps-all
	sh scripts/build-deb.sh amd64

$(DEB_ARM64): $(PACKAGE_SOURCES) | deps-all
	sh scripts/build-deb.sh arm64

deb-amd64: $(DEB_AMD64)
deb-arm64: $(DEB_ARM64)

deb: $(DEB_AMD64) $(DEB_ARM64)
	sh scripts/lint-deb.sh $(DEB_AMD64) $(DEB_ARM64)

vm-test: $(DEB_AMD64)
	sh Tests/VM/run.sh --arch amd64 $(DEB_AMD64)

vm-test-arm64: $(DEB_ARM64) venv
	sh Tests/VM/run.sh --arch arm64 $(DEB_ARM64)

bench: release venv
	$(PY) bench/run.py --beacond build/beacond

bench-smoke: release venv
	$(PY) bench/run.py --beacond build/beacond --smoke

# systemd-analyze verify must be clean and security --offline exposure at most 1.5 (printed for the CI log).
check-units: build
	sh scripts/check-units.sh .build/debug/beacond

test: deps-all unit-test swift60 fuzz check-units deb vm-test vm-test-arm64 bench-smoke integration-test

test-fast: unit-test fuzz check-units integration-test

demo: build venv
	$(PY) Tests/Integration/harness/demo.py

install: release
	DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" sh scripts/install.sh build/beacond

clean:
	rm -rf .build build $(VENV)
