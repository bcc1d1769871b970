#!/bin/sh
# A Debian 13 (trixie) build root with Debian's own Swift 6.0 (swiftlang) and beacond's build dependencies, for
# building beacond with the toolchain Debian ships: the code must build with 6.0 as well as with the 6.3 of the
# build machines, and the arm64 package is built natively in the arm64 root.
#
#   sh scripts/buildroot.sh [ARCH]      prints the root's path (ARCH: amd64, the default, or arm64)
#
# amd64 also has lintian (the packages are checked with trixie's). arm64 runs under trixie's qemu-aarch64
# (scripts/arm64-emulator.sh registers it with binfmt_misc); it has dpkg-dev for dpkg-shlibdeps.
#
# Cached outside the checkout in BEACOND_BUILDROOT_CACHE (default /var/cache/beacond-buildroot), keyed by this
# script's content and the architecture. Needs root (debootstrap, chroot). The mirror is the one this machine's apt
# configuration already uses; no host name is written into the project or left in the root.
set -eu
arch=${1:-amd64}
cache=${BEACOND_BUILDROOT_CACHE:-/var/cache/beacond-buildroot}
key=$(sha256sum "$0" | cut -c1-16)
root="$cache/trixie-$arch-$key"
if [ -f "$root/.complete" ]; then
    echo "$root"
    exit 0
fi
packages=swiftlang,libbluetooth-dev,libsystemd-dev,pkg-config,libstdc++-14-dev,ca-certificates,dpkg-dev
case $arch in
    amd64) packages="$packages,lintian,perl-openssl-defaults" ;;  # debootstrap cannot resolve lintian's virtual perl-openssl-abi-3
    arm64) sh "$(dirname "$0")/arm64-emulator.sh" >/dev/null ;;
    *) echo "buildroot: unknown architecture $arch (amd64 or arm64)" >&2; exit 2 ;;
esac
command -v debootstrap >/dev/null 2>&1 || { echo "buildroot: debootstrap is missing (apt-get install debootstrap)" >&2; exit 2; }
mirror=$(apt-get indextargets --format '$(URI)' 2>/dev/null | sed -n 's|^\(.*\)/dists/bookworm/main/.*|\1/|p' | head -n 1)
[ -n "$mirror" ] || { echo "buildroot: cannot find a Debian mirror in this machine's apt configuration" >&2; exit 1; }
rm -rf "$root.tmp"
mkdir -p "$cache"
echo "buildroot: debootstrap trixie $arch into $root" >&2
start=$(date +%s)
debootstrap --variant=minbase --arch="$arch" \
    --include="$packages" \
    trixie "$root.tmp" "$mirror" >&2
rm -rf "$root.tmp/var/lib/apt/lists/"* "$root.tmp/var/cache/apt/archives/"*.deb "$root.tmp/var/log/bootstrap.log"
rm -f "$root.tmp/etc/apt/sources.list" "$root.tmp/etc/apt/sources.list.d/"*
touch "$root.tmp/.complete"
mv "$root.tmp" "$root"
# Swift finds its runtime through $ORIGIN, which glibc resolves through /proc/self/exe: /proc must be mounted.
mount -t proc proc "$root/proc"
version=$(chroot "$root" swift --version 2>&1 | head -n 1)
umount "$root/proc"
echo "buildroot: ready in $(( $(date +%s) - start )) s: $version" >&2
echo "$root"
