# beacond — build, test, demo and install entry points.
#   make build      debug build
#   make release    static-stdlib release binary in build/beacond, libstdc++ linked in (scripts/release-build.sh; its Depends are the package's: docs/packaging.md)
#   make test       the whole test suite: unit tests (Swift 6.3, and 6.0 in a build root), fuzzing, both
#                   packages, the VM end-to-end tests (root, qemu, debootstrap), the benchmark in smoke mode,
#                   integration tests on Bumble; stages run side by side (TEST_JOBS, default 10: every stage starts when what it needs is there) and the run ends
#                   with a table of their times (scripts/stage-report.sh)
#   make test-fast  the same without the VM test and the benchmark (no root needed)
#   make deb        build/beacond_<version>_amd64.deb and _arm64.deb (arm64 cross-compiled in a trixie build
#                   root against a bookworm sysroot: it installs on Debian 12 and 13; root), checked with lintian;
#                   installs only what that needs, and says what and why (scripts/deps.sh --cross: the build's
#                   packages, git, debootstrap; no VM or test packages); BEACOND_ARM64_BUILD=native builds arm64
#                   under qemu-user
#   make deb-arm64  on an arm64 machine (a Pi with Debian 13's swiftlang): the arm64 package with that machine's
#                   Swift, nothing else (no build root, no VM or test packages); on amd64, the cross-build above
#   make vm-test    the VM end-to-end test of the amd64 package in Debian 12 (Tests/VM/run.sh)
#   make vm-test-arm64  the same for the arm64 package in Debian 13 under qemu-system-aarch64 (cortex-a53);
#                   make vm-test-arm64-bookworm in Debian 12
#   make vm-test-fleet  the fleet scenario in an amd64 guest of its own: the Ansible role (deploy/ansible) run
#                   from this machine against the guest over SSH, and an upgrade through the signed repository
#   make repo       a signed apt repository of both packages in REPO_DIR (default build/repo), signed with REPO_KEY
#                   (its fingerprint, or an id naming one secret key; without it a throw-away key, with a loud warning): scripts/make-repo.sh
#   make publish SITE=DIR   the release's apt repository into DIR (a gh-pages checkout: earlier versions stay), served
#                   at deploy/apt/base-url's address (REPO_URL overrides it), with install.sh and .nojekyll
#                   (scripts/publish.sh); takes build/'s two packages as they are (DEBS=…) and builds nothing
#   make resign SITE=DIR    the same tree indexed and signed again, a fresh Valid-Until (the weekly re-sign)
#   make release-files DIR=DIR  both packages and their SHA256SUMS into DIR (the GitHub release's files)
#   make signing-key        imports the armored secret key in BEACOND_REPO_SIGNING_KEY into GNUPGHOME (which must be
#                   set) and prints REPO_KEY=<fingerprint>, nothing else (scripts/signing-key.sh)
#   make deps-repo  only what publishing needs (apt-utils gnupg gpgv dpkg-dev)
#   make check-release-tag TAG=vX.Y.Z   fails unless the tag names this version (the release workflow's first check)
#   make fuzz-long  every fuzz target for 10 million executions
#   make swift60    build and unit-test with Debian 13's Swift 6.0 in a cached trixie build root (root)
#   make bench      the full benchmark (docs/benchmarks.md)
#   make soak       an hour of legacy time slicing with faults on the CYW43455 model, x86-64 and Cortex-A53 (qemu-user)
#   make demo       three beacons on a model of a Raspberry Pi's radio (a virtual controller), heard by a second
#                   virtual radio; installs only what it needs (scripts/deps.sh --demo, bumble and beacontools)
#   make install    release binary + units + example config via scripts/install.sh (DESTDIR, PREFIX honoured)

SWIFT ?= swift
PREFIX ?= /usr
DESTDIR ?=
VENV ?= .venv
# Home Assistant's own venv (its pins conflict with the parsers in VENV), for test_home_assistant.py.
HA_VENV ?= .venv-ha
# The oldest ansible-core the Ansible role claims, for test_role.py (which runs its tests with it and with VENV's).
ANSIBLE_OLDEST := Tests/Integration/requirements-ansible-oldest.txt
# ansible-lint and yamllint, for test_role.py's lint of deploy/ansible (a venv of their own, as the oldest's).
ANSIBLE_LINT := Tests/Integration/requirements-ansible-lint.txt
PYTHON ?= python3
FUZZ_SECONDS ?= 30
TEST_JOBS ?= 10
# What the test stages wait for first: deps (no root needed, test-fast) or, under make test, deps-all, so that every
# stage becomes ready at the same moment and make starts them in test-stages' order, the longest chain first.
STAGE_DEPS ?= deps
SWIFT60_AFTER ?=
STAGE := sh scripts/stage.sh
# Where SwiftPM builds and tests: the checkout, or under `make test` the build tree outside it (scripts/build-tree.sh),
# whose .build outlives a fresh clone.
BUILD_TREE ?= $(CURDIR)
PY := $(VENV)/bin/python

VERSION := $(shell sh scripts/version.sh)
# amd64 builds both packages (arm64 in a build root); an arm64 machine builds its own with its own Swift.
HOST_ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo unknown)
DEMO_VENV ?= .venv-demo
DEB_AMD64 := build/beacond_$(VERSION)_amd64.deb
DEB_ARM64 := build/beacond_$(VERSION)_arm64.deb
REPO_DIR ?= build/repo
# The fleet guest's control node keeps its files here (make vm-test-fleet, make test).
FLEET_DIR := $(CURDIR)/build/fleet

.PHONY: symbol-order deps deps-all deps-build deps-cross deps-repo deps-demo venv-demo build release deb deb-amd64 deb-arm64 repo publish resign release-files signing-key check-release-tag vm-test-fleet vm-test-arm64 test test-stages test-fast unit-test integration-test fuzz fuzz-long swift60 vm-test bench bench-smoke soak check-units demo install venv venv-ha venv-ansible clean buildroot vm-image-amd64 vm-image-arm64 vm-image-arm64-bookworm vm-test-arm64-bookworm

# The Debian packages (installed when missing and run as root; otherwise the command to run is printed).
deps:
	sh scripts/deps.sh

deps-all:
	sh scripts/deps.sh --all

# Only what building the package needs (an arm64 Pi's native route), or what the demo needs.
deps-build:
	sh scripts/deps.sh --build

# Only what building the packages on amd64 needs: the build's packages and the build root's (debootstrap), said as
# they are installed; no QEMU, VM or test packages (a borrowed laptop's `make deb-arm64`).
deps-cross:
	sh scripts/deps.sh --cross

# Only what publishing the apt repository needs (apt-utils, gnupg, gpgv, dpkg-dev): make publish, make resign.
deps-repo:
	sh scripts/deps.sh --repo

deps-demo:
	sh scripts/deps.sh --demo

build: $(STAGE_DEPS)
	$(SWIFT) build --package-path $(BUILD_TREE)

release: $(STAGE_DEPS)
	SWIFT=$(SWIFT) sh scripts/release-build.sh $(BUILD_TREE)
	mkdir -p build
	cp $(BUILD_TREE)/.build/release/beacond build/beacond
	strip build/beacond

$(VENV)/.installed: Tests/Integration/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r Tests/Integration/requirements.txt
	touch $@

venv: $(VENV)/.installed

$(HA_VENV)/.installed: Tests/Integration/ha/requirements.txt
	$(PYTHON) -m venv $(HA_VENV)
	$(HA_VENV)/bin/pip install --quiet --disable-pip-version-check -r Tests/Integration/ha/requirements.txt
	touch $@

venv-ha: $(HA_VENV)/.installed

# The demo's own venv: Bumble and beacontools only.
$(DEMO_VENV)/.installed: Tests/Integration/harness/demo-requirements.txt
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/pip install --quiet --disable-pip-version-check -r Tests/Integration/harness/demo-requirements.txt
	touch $@

venv-demo: $(DEMO_VENV)/.installed

# A venv per extra ansible-core and one for the linters, made once and kept outside the checkout
# (/var/cache/beacond-venvs as root), keyed by the hash of what it installs (scripts/test-venv.sh). test_role.py asks
# the same script and fails that version's tests (or the lint test), saying why, when it cannot be made: a failure
# here is in the stage table and the integration tests still run.
venv-ansible:
	$(STAGE) venv-ansible env PYTHON=$(PYTHON) sh scripts/test-venv.sh $(ANSIBLE_OLDEST) || true
	$(STAGE) venv-ansible-lint env PYTHON=$(PYTHON) sh scripts/test-venv.sh $(ANSIBLE_LINT) || true

unit-test: $(STAGE_DEPS)
	$(STAGE) unit-test-swift63 $(SWIFT) test --package-path $(BUILD_TREE)

# Four at a time: alone the suite spends three quarters of its time waiting on timers (501 tests: 768 s one at a time
# at 27 % of a core, 241 s four at a time; docs/benchmarks.md).
PYTEST_JOBS ?= 4
integration-test: build venv venv-ha venv-ansible | buildroot
	BEACOND=$(BUILD_TREE)/.build/debug/beacond BEACOND_HA_PYTHON=$(CURDIR)/$(HA_VENV)/bin/python $(STAGE) integration-tests $(PY) -m pytest -q -n $(PYTEST_JOBS) Tests/Integration

fuzz: $(STAGE_DEPS)
	$(STAGE) fuzz nice -n 10 fuzz/run.sh $(FUZZ_SECONDS)

# Under make test the Swift 6.0 tests wait for the arm64 package: both run in the build root, one at a time (its
# lock), and the arm64 VM suites wait for the package while nothing waits for these tests (a cold run lost 10 minutes
# to the tests going first).
swift60: deps-all buildroot | $(SWIFT60_AFTER)
	$(STAGE) unit-test-swift60 nice -n 10 sh scripts/build-swift60.sh

# What the packages wait for on amd64: alone, only what the build and the build root need (deps.sh --cross); under make
# test (STAGE_DEPS=deps-all) everything, as every stage does.
CROSS_DEPS := $(if $(filter deps-all,$(STAGE_DEPS)),deps-all,deps-cross)

# The trixie build root (Swift 6.0 and the arm64 cross SDK), made once and cached (scripts/buildroot.sh).
buildroot: $(CROSS_DEPS)
	$(STAGE) buildroot sh -c 'sh scripts/buildroot.sh amd64 >/dev/null'

# The VM guest images, made once and cached (Tests/VM/build-image.sh); early in a run so they build beside the rest.
vm-image-amd64: deps-all
	$(STAGE) vm-image-amd64 sh Tests/VM/run.sh --image-only --arch amd64

vm-image-arm64: deps-all
	$(STAGE) vm-image-arm64 sh Tests/VM/run.sh --image-only --arch arm64

vm-image-arm64-bookworm: deps-all
	$(STAGE) vm-image-arm64-bookworm sh Tests/VM/run.sh --image-only --arch arm64-bookworm

# Every fuzz target for at least 10 million executions (about an hour on two cores; docs/benchmarks.md has the counts).
fuzz-long: deps
	fuzz/run.sh --runs 10000000

# The packages are files: rebuilt when a tracked file they are made from changed, so `make test` builds each once.
PACKAGE_SOURCES := $(shell git ls-files Package.swift Sources systemd config scripts README.md deploy/prometheus 2>/dev/null)

$(DEB_AMD64): $(PACKAGE_SOURCES) | $(CROSS_DEPS)
	$(STAGE) deb-amd64 env BEACOND_BUILD_TREE=$(BUILD_TREE) sh scripts/build-deb.sh amd64

ifeq ($(HOST_ARCH),arm64)
# On the Pi itself: its own Swift, its own libraries; no build root, no VM or test packages.
$(DEB_ARM64): $(PACKAGE_SOURCES) | deps-build
	$(STAGE) deb-arm64 sh scripts/build-deb.sh arm64
else
$(DEB_ARM64): $(PACKAGE_SOURCES) | $(CROSS_DEPS) buildroot
	$(STAGE) deb-arm64 sh scripts/build-deb.sh arm64
endif

deb-amd64: $(DEB_AMD64)
deb-arm64: $(DEB_ARM64)

deb: $(DEB_AMD64) $(DEB_ARM64)
	$(STAGE) lintian sh scripts/lint-deb.sh $(DEB_AMD64) $(DEB_ARM64)

# Guests two at a time on a machine of fewer than four cores (Tests/VM/run.sh's BEACOND_VM_SLOT): four emulated guests
# at once on two cores took 1,292 s of CPU in a warm run, the same four one after another 632 s (docs/testing.md).
# The pairs balance what each took alone, whichever of a pair is ready first going first: the amd64 suite (287 s) and
# the arm64 Debian 13 one (82 s); the fleet guest (227 s) and the arm64 Debian 12 one (140 s).
VM_PAIRED := $(shell [ "$$(nproc 2>/dev/null || echo 1)" -lt 4 ] && echo yes)
vm_slot = $(if $(VM_PAIRED),env BEACOND_VM_SLOT=$(1),)

vm-test: $(DEB_AMD64) vm-image-amd64 venv
	$(STAGE) vm-amd64 $(call vm_slot,a) sh Tests/VM/run.sh --arch amd64 $(DEB_AMD64)

# The fleet scenario in an amd64 guest of its own, beside the amd64 suite: the Ansible role against a fresh host.
vm-test-fleet: $(DEB_AMD64) vm-image-amd64 venv
	rm -rf $(FLEET_DIR)
	$(STAGE) vm-amd64-fleet $(call vm_slot,b) env BEACOND_VM_FLEET=$(FLEET_DIR) sh Tests/VM/run.sh --arch amd64 $(DEB_AMD64)

vm-test-arm64: $(DEB_ARM64) vm-image-arm64 venv
	$(STAGE) vm-arm64 $(call vm_slot,a) sh Tests/VM/run.sh --arch arm64 $(DEB_ARM64)

# The same arm64 package in a Debian 12 guest: it must install and run where most Pis are.
vm-test-arm64-bookworm: $(DEB_ARM64) vm-image-arm64-bookworm venv
	$(STAGE) vm-arm64-bookworm $(call vm_slot,b) sh Tests/VM/run.sh --arch arm64-bookworm $(DEB_ARM64)

repo: $(DEB_AMD64) $(DEB_ARM64)
	sh scripts/make-repo.sh $(REPO_DIR) $(DEB_AMD64) $(DEB_ARM64)

# The release (docs/packaging.md "Publishing a release"; .github/workflows/release.yml and resign.yml run these). They
# take the packages as files and build nothing: the workflow's publish job downloads its build job's, and a missing one
# is an error that says so. DEBS: the packages (this version's two); SITE: the published tree (a gh-pages checkout).
DEBS ?= $(DEB_AMD64) $(DEB_ARM64)
publish:
	$(if $(SITE),,$(error publish: give SITE=DIR, the tree to publish into (a gh-pages checkout)))
	sh scripts/publish.sh $(SITE) $(DEBS)

resign:
	$(if $(SITE),,$(error resign: give SITE=DIR, the published tree to sign again))
	sh scripts/publish.sh $(SITE)

release-files:
	$(if $(DIR),,$(error release-files: give DIR=DIR, where the release's files go))
	sh scripts/release-files.sh $(DIR) $(DEBS)

# A release's tag names the version its packages have (Sources/DaemonCore/Version.swift): v$(VERSION).
check-release-tag:
	@[ "$(TAG)" = "v$(VERSION)" ] || { echo "check-release-tag: the tag is '$(TAG)', but the packages are version $(VERSION) (Sources/DaemonCore/Version.swift): tag v$(VERSION), or change the version" >&2; exit 2; }

# Silent (@): its one line of output, REPO_KEY=<fingerprint>, is appended to $$GITHUB_ENV.
signing-key:
	@sh scripts/signing-key.sh

# The release link's code order (scripts/symbol-order) from a profile of runs on Bumble (valgrind's callgrind): rerun
# when release-build.sh says the binary has much less of the list than all of it.
symbol-order: release venv
	$(PY) bench/symbol_order.py --beacond $(BUILD_TREE)/.build/release/beacond --out scripts/symbol-order

bench: release venv
	$(PY) bench/run.py --beacond build/beacond

# An hour of legacy time slicing on the CYW43455 model with faults, here and as a Cortex-A53 under qemu-user.
soak: release venv deb-arm64
	$(PY) bench/soak.py --beacond build/beacond --arm64 build/deb-arm64/beacond

bench-smoke: release venv
	$(STAGE) bench-smoke sh -c '$(PY) bench/run.py --beacond build/beacond --smoke && $(PY) bench/variants.py --runs 1 release=build/beacond && $(PY) bench/soak.py --beacond build/beacond --minutes 0.7 && $(PY) bench/symbol_order.py --beacond $(BUILD_TREE)/.build/release/beacond --check'

# systemd-analyze verify must be clean and security --offline exposure at most 1.5 (printed for the CI log).
check-units: build
	$(STAGE) check-units sh scripts/check-units.sh $(BUILD_TREE)/.build/debug/beacond

# The longest chains first (build root → arm64 image → arm64 VM), so make starts them before the rest.
test: deps-all
	rm -rf build/stages.tsv
	status=0; sh scripts/build-tree.sh $(MAKE) --no-print-directory -k -j$(TEST_JOBS) --output-sync=target STAGE_DEPS=deps-all SWIFT60_AFTER=$(DEB_ARM64) test-stages || status=$$?; \
	  echo "Stages:"; sh scripts/stage-report.sh; exit $$status

# The arm64 package heads the longest chain (its VM suite is the slowest): it and the amd64 package and the venv the VM
# suites need come first, before the Swift 6.0 tests take a job slot.
test-stages: buildroot vm-image-arm64 vm-image-arm64-bookworm $(DEB_ARM64) vm-image-amd64 $(DEB_AMD64) venv venv-ansible swift60 deb vm-test-arm64 vm-test-arm64-bookworm vm-test vm-test-fleet unit-test fuzz check-units bench-smoke integration-test

test-fast: unit-test fuzz check-units integration-test

demo: deps-demo venv-demo
	$(SWIFT) build --product beacond
	$(DEMO_VENV)/bin/python Tests/Integration/harness/demo.py

install: release
	DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" sh scripts/install.sh build/beacond

clean:
	rm -rf .build build $(VENV)
