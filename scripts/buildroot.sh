#!/bin/sh
# A Debian 13 (trixie) build root with Debian's own Swift 6.0 (swiftlang) and beacond's build dependencies: the code
# must build with 6.0 as well as with the 6.3 of the build machines, and both packages are built here.
#
#   sh scripts/buildroot.sh [ARCH]      prints the root's path (ARCH: amd64, the default, or arm64)
#
# amd64 is the one build root: Swift 6.0 unit tests, lintian, and the arm64 package, cross-compiled at native speed.
# For that it holds binutils-aarch64-linux-gnu (strip, readelf, objdump) and the arm64 swiftlang package's runtime
# (its aarch64 swiftmodules, swiftrt.o and static stdlib, in /opt/swift-sdks), linked with the amd64 toolchain's own
# ld.lld against the bookworm arm64 sysroot scripts/sysroot.sh adds (the libraries the arm64 package runs with).
#
# arm64 is the native route, kept as a cross-check of the cross-built binary: a trixie arm64 root that runs under
# trixie's qemu-aarch64 (scripts/arm64-emulator.sh registers it with binfmt_misc); everything in it is emulated, so a
# build there takes about 13 minutes instead of one.
#
# Cached outside the checkout in BEACOND_BUILDROOT_CACHE (default /var/cache/beacond-buildroot), keyed by this
# script's content and the architecture. Needs root (debootstrap, chroot) and a Debian mirror (scripts/debian-mirror.sh:
# this machine's own apt configuration, or BEACOND_DEBIAN_MIRROR). No host name is written into the project or left
# in the root.
set -eu
arch=${1:-amd64}
here=$(cd "$(dirname "$0")" && pwd)
cache=${BEACOND_BUILDROOT_CACHE:-/var/cache/beacond-buildroot}
key=$(sha256sum "$0" | cut -c1-16)
root="$cache/trixie-$arch-$key"
if [ -f "$root/.complete" ]; then
    echo "$root"
    exit 0
fi
# One maker at a time (the CI builds in parallel, and the emulator and the VM images need this root too): a second
# caller waits for the first and then uses its root.
mkdir -p "$cache"
exec 9>"$root.lock"
flock 9
if [ -f "$root/.complete" ]; then
    echo "$root"
    exit 0
fi
packages=swiftlang,libbluetooth-dev,libsystemd-dev,libgcrypt20-dev,pkg-config,libstdc++-14-dev,ca-certificates,dpkg-dev
case $arch in
    # debootstrap cannot resolve lintian's virtual perl-openssl-abi-3: perl-openssl-defaults provides it.
    amd64) packages="$packages,lintian,perl-openssl-defaults,binutils-aarch64-linux-gnu" ;;
    arm64) sh "$here/arm64-emulator.sh" >/dev/null ;;
    *) echo "buildroot: unknown architecture $arch (amd64 or arm64)" >&2; exit 2 ;;
esac
command -v debootstrap >/dev/null 2>&1 || { echo "buildroot: debootstrap is missing (apt-get install debootstrap)" >&2; exit 2; }
mirror=$(sh "$here/debian-mirror.sh")
tmp="$root.tmp"
if mountpoint -q "$tmp/proc" 2>/dev/null; then umount "$tmp/proc"; fi
rm -rf "$tmp"
echo "buildroot: debootstrap trixie $arch into $root" >&2
start=$(date +%s)
debootstrap --variant=minbase --arch="$arch" --include="$packages" trixie "$tmp" "$mirror" >&2
# Swift finds its runtime through $ORIGIN, which glibc resolves through /proc/self/exe: /proc must be mounted.
mount -t proc proc "$tmp/proc"
trap 'umount "$tmp/proc" 2>/dev/null || true' EXIT
if [ "$arch" = amd64 ]; then
    echo "buildroot: the arm64 runtime: Debian 13's swiftlang for arm64" >&2
    # debootstrap left the mirror in the root's sources.list; it is removed below with the package lists.
    chroot "$tmp" sh -eu -c '
        export DEBIAN_FRONTEND=noninteractive
        dpkg --add-architecture arm64
        apt-get update -q >/dev/null
        rm -rf /tmp/sdk && mkdir -p /tmp/sdk && cd /tmp/sdk
        apt-get download -q swiftlang:arm64 >/dev/null
        # The arm64 runtime only: the modules, swiftrt.o and the static libraries (no host tools, no Foundation).
        mkdir -p x && dpkg-deb --fsys-tarfile swiftlang_*_arm64.deb | tar -x -C x \
            ./usr/libexec/swift/lib/swift ./usr/libexec/swift/lib/swift_static ./usr/libexec/swift/lib/clang
        ls swiftlang_*_arm64.deb > x/source'
    sdk="$tmp/opt/swift-sdks/trixie-aarch64.artifactbundle"
    mkdir -p "$sdk/sdk"
    mv "$tmp/tmp/sdk/x/usr/libexec/swift/lib" "$sdk/sdk/lib"
    mv "$tmp/tmp/sdk/x/source" "$sdk/sdk/source"
    rm -rf "$tmp/tmp/sdk"
    for dir in lib/swift/linux lib/swift_static/linux; do
        rm -rf "$sdk/sdk/$dir"/*Foundation* "$sdk/sdk/$dir"/*CoreFoundation* "$sdk/sdk/$dir"/lib_CF* "$sdk/sdk/$dir"/*XCTest* \
            "$sdk/sdk/$dir"/libTesting* "$sdk/sdk/$dir"/Testing.swiftmodule
    done
    version=$(chroot "$tmp" dpkg-query -W -f '${Version}' swiftlang)
    # The runtime and its version; scripts/sysroot.sh makes the Swift SDK bundle (SE-0387) that links with it.
    cat > "$sdk/info.json" <<JSON
{
  "schemaVersion": "1.0",
  "artifacts": {
    "trixie-aarch64": { "type": "swiftSDK", "version": "$version", "variants": [ { "path": "sdk" } ] }
  }
}
JSON
fi
rm -rf "$tmp/var/lib/apt/lists/"* "$tmp/var/cache/apt/archives/"*.deb "$tmp/var/log/bootstrap.log"
rm -f "$tmp/etc/apt/sources.list" "$tmp/etc/apt/sources.list.d/"*
version=$(chroot "$tmp" swift --version 2>&1 | head -n 1)
umount "$tmp/proc"
trap - EXIT
touch "$tmp/.complete"
mv "$tmp" "$root"
echo "buildroot: ready in $(( $(date +%s) - start )) s: $version" >&2
echo "$root"
