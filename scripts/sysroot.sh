#!/bin/sh
# A Debian 12 (bookworm) arm64 sysroot inside the trixie amd64 build root, and a Swift SDK bundle that links against
# it: the arm64 package is cross-compiled with trixie's Swift 6.0 runtime but linked against bookworm's libraries
# (glibc 2.36, libgcrypt 1.10, libstdc++ 12, systemd 252), so that one package installs on both bookworm, where most
# Raspberry Pis are, and trixie.
#
#   sh scripts/sysroot.sh ROOT     prints the sysroot's path inside ROOT (a build root from scripts/buildroot.sh)
#
# Made once and kept inside the root, keyed by this script's content. What it holds:
#   /opt/sysroots/bookworm-arm64-KEY/root       every package below extracted (usr-merged), for the compiler and ld.lld
#   /opt/sysroots/bookworm-arm64-KEY/pkg/NAME   each library package on its own with its DEBIAN/ control files, so
#                                               that dpkg-shlibdeps -S takes Depends from bookworm's own symbols files
#                                               (trixie's libgcrypt20 symbols ask for 1.11.0 whatever is used)
#   /opt/sysroots/bookworm-arm64-KEY/compat.o   scripts/glibc-compat.c compiled for it (the C23 names trixie's Swift
#                                               runtime calls, which glibc 2.36 lacks)
#   /opt/swift-sdks-bookworm/bookworm-aarch64.artifactbundle   the Swift SDK: trixie's aarch64 runtime, this sysroot
# The packages are downloaded with debootstrap --download-only from the mirror scripts/debian-mirror.sh names (this
# machine's own apt configuration); nothing is run under emulation, and no host name is left in the root.
set -eu
root=$1
here=$(cd "$(dirname "$0")" && pwd)
key=$( (cat "$0" "$here/glibc-compat.c") | sha256sum | cut -c1-16)
inside=/opt/sysroots/bookworm-arm64-$key
dir=$root$inside
if [ -f "$dir/.complete" ]; then
    echo "$inside"
    exit 0
fi
exec 7>"$root/opt/sysroot.lock" 2>/dev/null || { mkdir -p "$root/opt"; exec 7>"$root/opt/sysroot.lock"; }
flock 7
if [ -f "$dir/.complete" ]; then
    echo "$inside"
    exit 0
fi
start=$(date +%s)
mirror=$(sh "$here/debian-mirror.sh")
# The libraries beacond links (and their -dev packages); debootstrap adds what they depend on.
libs="libc6 libc6-dev linux-libc-dev libgcc-s1 libgcc-12-dev libstdc++6 libstdc++-12-dev libsystemd0 libsystemd-dev libgcrypt20 libgcrypt20-dev libgpg-error0 libgpg-error-dev libbluetooth3 libbluetooth-dev"
rm -rf "$dir.tmp"
mkdir -p "$dir.tmp/dl" "$dir.tmp/root" "$dir.tmp/pkg"
echo "sysroot: downloading bookworm arm64 packages" >&2
debootstrap --download-only --variant=minbase --arch=arm64 --include="$(echo $libs | tr ' ' ,)" bookworm "$dir.tmp/dl" "$mirror" >&2
# usr-merged, as bookworm is: /lib and /bin are links into /usr, and packages that ship /lib/… land there.
for d in bin sbin lib; do mkdir -p "$dir.tmp/root/usr/$d"; ln -s "usr/$d" "$dir.tmp/root/$d"; done
for deb in "$dir.tmp/dl/var/cache/apt/archives/"*.deb; do
    dpkg-deb --fsys-tarfile "$deb" | tar -x --keep-directory-symlink -C "$dir.tmp/root"
done
for p in $libs; do
    deb=$(ls "$dir.tmp/dl/var/cache/apt/archives/${p}_"*_arm64.deb "$dir.tmp/dl/var/cache/apt/archives/${p}_"*_all.deb 2>/dev/null | head -n 1)
    [ -n "$deb" ] || { echo "sysroot: debootstrap did not fetch $p" >&2; exit 1; }
    mkdir -p "$dir.tmp/pkg/$p/DEBIAN"
    dpkg-deb -x "$deb" "$dir.tmp/pkg/$p"
    dpkg-deb -e "$deb" "$dir.tmp/pkg/$p/DEBIAN"
done
# Absolute links (libfoo.so -> /lib/…) would leave the sysroot: make each relative to where it is.
python3 - "$dir.tmp" <<'PY'
import os, sys
top = sys.argv[1]
for base in [os.path.join(top, 'root')] + [os.path.join(top, 'pkg', p) for p in os.listdir(os.path.join(top, 'pkg'))]:
    for d, dirs, files in os.walk(base):
        for n in dirs + files:
            p = os.path.join(d, n)
            if os.path.islink(p) and os.readlink(p).startswith('/'):
                target = os.path.join(base, os.readlink(p).lstrip('/'))
                os.unlink(p)
                os.symlink(os.path.relpath(target, d), p)
PY
# What the sysroot holds, for build-deb.sh's check that every version the binary needs exists on bookworm.
for p in $libs; do printf '%s %s\n' "$p" "$(dpkg-deb -f "$(ls "$dir.tmp/dl/var/cache/apt/archives/${p}_"*.deb | head -n 1)" Version)"; done > "$dir.tmp/versions"
rm -rf "$dir.tmp/dl"
mv "$dir.tmp" "$dir"
# The compatibility object, compiled with the root's own clang for the sysroot.
cp "$here/glibc-compat.c" "$dir/glibc-compat.c"
chroot "$root" /usr/libexec/swift/bin/clang --target=aarch64-linux-gnu --sysroot="$inside/root" -O2 -fPIC -Wall -Werror \
    -c "$inside/glibc-compat.c" -o "$inside/compat.o"
# The Swift SDK: the trixie bundle's aarch64 runtime, this sysroot, lld.
sdk=$root/opt/swift-sdks-bookworm/bookworm-aarch64.artifactbundle
rm -rf "$sdk"
mkdir -p "$sdk/sdk"
ln -s /opt/swift-sdks/trixie-aarch64.artifactbundle/sdk/lib "$sdk/sdk/lib"
version=$(cat "$root/opt/swift-sdks/trixie-aarch64.artifactbundle/info.json" | python3 -c 'import json, sys; print(json.load(sys.stdin)["artifacts"]["trixie-aarch64"]["version"])')
cat > "$sdk/info.json" <<JSON
{
  "schemaVersion": "1.0",
  "artifacts": {
    "bookworm-aarch64": { "type": "swiftSDK", "version": "$version", "variants": [ { "path": "sdk" } ] }
  }
}
JSON
cat > "$sdk/sdk/swift-sdk.json" <<JSON
{
  "schemaVersion": "4.0",
  "targetTriples": {
    "aarch64-unknown-linux-gnu": {
      "sdkRootPath": "$inside/root",
      "swiftResourcesPath": "lib/swift",
      "swiftStaticResourcesPath": "lib/swift_static",
      "toolsetPaths": [ "toolset.json" ]
    }
  }
}
JSON
cat > "$sdk/sdk/toolset.json" <<'JSON'
{
  "schemaVersion": "1.0",
  "swiftCompiler": { "extraCLIOptions": [ "-use-ld=lld" ] },
  "linker": { "path": "/usr/libexec/swift/bin/ld.lld" }
}
JSON
touch "$dir/.complete"
echo "sysroot: bookworm arm64 ready in $(( $(date +%s) - start )) s ($(du -sh "$dir" | cut -f1))" >&2
echo "$inside"
