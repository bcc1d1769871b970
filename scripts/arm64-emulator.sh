#!/bin/sh
# Runs arm64 programs on this amd64 machine: trixie's static qemu-aarch64 (qemu 10.0), registered with binfmt_misc
# with the F flag, so it serves chroots and debootstrap --arch=arm64 without being copied into them. Bookworm's own
# qemu-user (7.2) traps on Debian's Swift driver with signal 5, so it is not used.
#
#   sh scripts/arm64-emulator.sh        (root) prints the interpreter's path once it is registered
#
# The interpreter is fetched once with apt-get inside the trixie amd64 build root (scripts/buildroot.sh, which
# checks the archive's signature) and cached beside the build roots, keyed by this script's content.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${BEACOND_BUILDROOT_CACHE:-/var/cache/beacond-buildroot}
key=$(sha256sum "$0" | cut -c1-16)
dir="$cache/qemu-aarch64-$key"
mkdir -p "$cache"
exec 9>"$dir.lock"
flock 9
if [ ! -x "$dir/qemu-aarch64" ]; then
    root=$(sh "$top/scripts/buildroot.sh" amd64)
    mirror=$(sh "$top/scripts/debian-mirror.sh")
    echo "deb $mirror trixie main" > "$root/etc/apt/sources.list.d/emulator.list"
    rm -rf "$root/tmp/emulator" && mkdir -p "$root/tmp/emulator"
    status=0
    chroot "$root" sh -c 'apt-get update -q >/dev/null && cd /tmp/emulator && apt-get download -q qemu-user >/dev/null && dpkg-deb -x qemu-user_*.deb x' || status=$?
    rm -f "$root/etc/apt/sources.list.d/emulator.list"
    rm -rf "$root/var/lib/apt/lists/"*
    [ "$status" -eq 0 ] || { echo "arm64-emulator: could not fetch trixie's qemu-user (exit $status)" >&2; exit 1; }
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    cp "$root/tmp/emulator/x/usr/bin/qemu-aarch64" "$dir.tmp/qemu-aarch64"
    ls "$root"/tmp/emulator/qemu-user_*.deb | sed 's|.*/||' > "$dir.tmp/source"
    rm -rf "$root/tmp/emulator"
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
