#!/bin/sh
# Runs arm64 programs on this amd64 machine: trixie's static qemu-aarch64 (qemu 10.0), registered with binfmt_misc
# with the F flag, so it serves chroots and debootstrap --arch=arm64 without being copied into them. Bookworm's own
# qemu-user (7.2) traps on Debian's Swift driver with signal 5, so it is not used.
#
#   sh scripts/arm64-emulator.sh        (root) prints the interpreter's path once it is registered
#
# The interpreter is fetched once with debootstrap --download-only (which checks the archive's signature with this
# machine's keyring) and cached beside the build roots, keyed by this script's content. It needs no build root, so the
# arm64 guest images start building at once, beside it.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${BEACOND_BUILDROOT_CACHE:-/var/cache/beacond-buildroot}
key=$(sha256sum "$0" | cut -c1-16)
dir="$cache/qemu-aarch64-$key"
mkdir -p "$cache"
exec 9>"$dir.lock"
flock 9
if [ ! -x "$dir/qemu-aarch64" ]; then
    command -v debootstrap >/dev/null 2>&1 || { echo "arm64-emulator: debootstrap is missing (apt-get install debootstrap)" >&2; exit 2; }
    mirror=$(sh "$top/scripts/debian-mirror.sh")
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/dl"
    status=0
    debootstrap --download-only --variant=minbase --include=qemu-user trixie "$dir.tmp/dl" "$mirror" >/dev/null 2>&1 || status=$?
    deb=$(ls "$dir.tmp/dl/var/cache/apt/archives/"qemu-user_*.deb 2>/dev/null | head -n 1)
    [ "$status" -eq 0 ] && [ -n "$deb" ] || { echo "arm64-emulator: could not fetch trixie's qemu-user (debootstrap exit $status)" >&2; exit 1; }
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dir.tmp" ./usr/bin/qemu-aarch64
    mv "$dir.tmp/usr/bin/qemu-aarch64" "$dir.tmp/qemu-aarch64"
    basename "$deb" > "$dir.tmp/source"
    rm -rf "$dir.tmp/dl" "$dir.tmp/usr"
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
binfmt=/proc/sys/fs/binfmt_misc
[ -e "$binfmt/register" ] || mount -t binfmt_misc binfmt_misc "$binfmt"
entry="$binfmt/beacond-aarch64"
if [ -e "$entry" ] && ! grep -qx "interpreter $dir/qemu-aarch64" "$entry"; then
    echo -1 > "$entry"
fi
if [ ! -e "$entry" ]; then
    # ELF64, little-endian, current version, executable or shared object (e_type 2 or 3), machine 183 (EM_AARCH64).
    printf '%s' ':beacond-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:'"$dir/qemu-aarch64"':F' > "$binfmt/register"
fi
echo "$dir/qemu-aarch64"
