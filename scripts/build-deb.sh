#!/bin/sh
# Builds the Debian package of beacond for one architecture:
#   sh scripts/build-deb.sh amd64|arm64        writes build/beacond_<version>_<arch>.deb
#
# Where each binary is compiled (docs/packaging.md has the why):
# amd64  with this machine's Swift when it has one (a Swift 6.x toolchain built for glibc 2.35, as on the build
#        machines: Debian 12 and Ubuntu 22.04 can install the package). Without one, with Debian 13's Swift 6.0 in
#        the trixie build root; that package needs glibc 2.38 (Debian 13, Ubuntu 24.04), and this script says so.
# arm64  on an amd64 machine: cross-compiled at native speed in the trixie amd64 build root (scripts/buildroot.sh)
#        with the root's Swift 6.0 and Debian's aarch64 runtime, linked with lld against a bookworm arm64 sysroot
#        (scripts/sysroot.sh: glibc 2.36, libgcrypt 1.10), so that it installs on Debian 12 and 13 alike; readelf
#        checks that (scripts/check-abi.py). BEACOND_ARM64_BUILD=native compiles it natively instead, in a trixie
#        arm64 root under qemu-user (about 13 minutes; that package needs trixie). On an arm64 machine (a Pi with
#        swiftlang installed: trixie) it is built with that machine's own Swift, for that release and later.
# The man pages come from scripts/man.py (a binary's help and config schema), Depends from dpkg-shlibdeps run where
# the target's libraries are (with dpkg-architecture -aarm64 for the cross-build), plus procps for the units'
# ExecReload=/bin/kill. Needs dpkg-dev and python3; the build roots need root.
set -eu
arch=$1
top=$(cd "$(dirname "$0")/.." && pwd)
version=$(sh "$top/scripts/version.sh")
changelog_version=$(sed -n '1s/^beacond (\([^)]*\)).*/\1/p' "$top/scripts/deb/changelog")
[ "$version" = "$changelog_version" ] || { echo "build-deb: version $version but scripts/deb/changelog starts with $changelog_version" >&2; exit 1; }
out="$top/build"
work="$out/deb-$arch"
rm -rf "$work"
mkdir -p "$work/stage/DEBIAN" "$work/src/debian"
stage="$work/stage"
start=$(date +%s)
# scripts/release-flags, shared with make release: the static Swift stdlib keeps the package Swift-free; optimized for
# size, each function in a section of its own and the unused ones dropped by the linker (8.3 MB stripped against 8.7
# with -O; docs/benchmarks.md has the measurement); bind now, as Debian's hardening flags ask.
# On this machine's Swift, through scripts/release-build.sh: libstdc++ linked in statically.
swift_flags=$(cat "$top/scripts/release-flags")
strip_flags='--remove-section=.comment --remove-section=.note --strip-unneeded'
host_arch=$(dpkg --print-architecture)
arm64_build=${BEACOND_ARM64_BUILD:-cross}
# Where dpkg-shlibdeps runs: "host", or the build root that has the target's libraries (with its arch option).
shlibs_root=""
shlibs_root_arch=""
shlibs_arch=""
# dpkg-shlibdeps -S options (library packages to take symbols from), and the sysroot whose libraries the binary must
# load on (build-deb checks every symbol version it needs), for the arm64 package.
shlibs_from=""
target_root=""
# The help texts (for the man pages) come from a binary this machine can run.
help_binary="$work/beacond"

# The root's debug build links the root's Swift runtime (glibc 2.41): it runs inside the root only.
help_from_root() {
    printf '#!/bin/sh\nexec sh %s/scripts/in-buildroot.sh --exec amd64 /src/beacond/.build/debug/beacond "$@"\n' "$top" > "$work/beacond-help"
    chmod 0755 "$work/beacond-help"
    help_binary="$work/beacond-help"
}

case $arch in
amd64|arm64) ;;
*) echo "build-deb: architecture amd64 or arm64, not $arch" >&2; exit 2 ;;
esac
if [ "$arch" = "$host_arch" ] && command -v "${SWIFT:-swift}" >/dev/null 2>&1; then
    # This machine's own Swift, for its own architecture; in the build tree when `make test` gives one
    # (scripts/build-tree.sh), else in the checkout.
    tree=${BEACOND_BUILD_TREE:-$top}
    sh "$top/scripts/release-build.sh" "$tree"
    cp "$tree/.build/release/beacond" "$work/beacond"
    strip $strip_flags "$work/beacond"
    how="this machine's $("${SWIFT:-swift}" --version 2>&1 | sed -n 's/.*\(Swift version [^ ]*\).*/\1/p' | head -n 1)"
elif [ "$arch" = amd64 ] && [ "$host_arch" = amd64 ]; then
    root=$(sh "$top/scripts/buildroot.sh" amd64)
    echo "build-deb: WARNING: this machine has no Swift; the amd64 package is built with Debian 13's Swift 6.0 and needs glibc 2.38 (Debian 13, Ubuntu 24.04 or later): it will not install on Debian 12 or Ubuntu 22.04" >&2
    sh "$top/scripts/in-buildroot.sh" amd64 "swift build $swift_flags >&2 && strip $strip_flags -o /tmp/beacond .build/release/beacond"
    cp "$root/tmp/beacond" "$work/beacond"
    shlibs_root=$root
    shlibs_root_arch=amd64
    how="Debian 13's Swift 6.0 in the trixie build root"
elif [ "$arch" = arm64 ] && [ "$host_arch" = amd64 ] && [ "$arm64_build" = cross ]; then
    root=$(sh "$top/scripts/buildroot.sh" amd64)
    # Linked against bookworm's arm64 libraries (scripts/sysroot.sh), so that the one package installs on Debian 12
    # (most Raspberry Pis) and 13; the C23 names trixie's runtime calls come from the sysroot's compat.o.
    sysroot=$(sh "$top/scripts/sysroot.sh" "$root")
    # pkg-config looks in the sysroot only; the help texts come from the root's own debug build, which the Swift 6.0
    # tests share. pack-relative-relocs (DT_RELR, glibc 2.36) makes the binary 0.4 MB smaller (docs/benchmarks.md);
    # amd64 keeps the classic relocations, which Ubuntu 22.04's glibc 2.35 needs. The code in the order of
    # scripts/symbol-order, as release-build.sh links amd64's (the names are the same on both architectures but for
    # the few each one's runtime has alone, which lld passes over). Not scripts/text-layout.ld: this root's lld
    # (Swift 6.0's) fails an assertion on any INSERT command.
    sh "$top/scripts/in-buildroot.sh" amd64 "export PKG_CONFIG_SYSROOT_DIR=$sysroot/root PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=$sysroot/root/usr/lib/aarch64-linux-gnu/pkgconfig:$sysroot/root/usr/share/pkgconfig
        swift build $swift_flags -Xlinker -z -Xlinker pack-relative-relocs -Xlinker --symbol-ordering-file=/src/beacond/scripts/symbol-order -Xlinker --no-warn-symbol-ordering -Xlinker $sysroot/compat.o --scratch-path .build/bookworm-arm64 --swift-sdks-path /opt/swift-sdks-bookworm --swift-sdk bookworm-aarch64 >&2 &&
        aarch64-linux-gnu-strip $strip_flags -o /tmp/beacond-arm64 .build/bookworm-arm64/aarch64-unknown-linux-gnu/release/beacond &&
        unset PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_PATH PKG_CONFIG_LIBDIR && swift build --product beacond >&2"
    cp "$root/tmp/beacond-arm64" "$work/beacond"
    help_from_root
    shlibs_root=$root
    shlibs_root_arch=amd64
    shlibs_arch=arm64
    # Depends from bookworm's own symbols files (each library package on its own, with its DEBIAN/).
    shlibs_from=$(for p in "$root$sysroot"/pkg/*; do printf ' -S%s' "$sysroot/pkg/$(basename "$p")"; done)
    target_root=$root$sysroot
    how="cross-compiled with Debian 13's Swift 6.0 and its aarch64 runtime, linked against Debian 12's libraries, in the trixie amd64 build root"
elif [ "$arch" = arm64 ] && [ "$host_arch" = amd64 ] && [ "$arm64_build" = native ]; then
    root=$(sh "$top/scripts/buildroot.sh" arm64)
    # separate-code: Debian's Swift 6.0 on aarch64 marks .rodata writable in every object it emits (ours and the
    # static stdlib's), and GNU ld put that next to the code: one LOAD segment writable and executable ("LOAD
    # segment with RWX permissions"). With it, code has a segment of its own (checked below). The cross-build links
    # with lld, which keeps code and data in segments of their own anyway.
    sh "$top/scripts/in-buildroot.sh" arm64 "swift build $swift_flags -Xlinker -z -Xlinker separate-code >&2 && strip $strip_flags -o /tmp/beacond .build/release/beacond"
    cp "$root/tmp/beacond" "$work/beacond"
    sh "$top/scripts/in-buildroot.sh" amd64 "swift build --product beacond >&2"
    help_from_root
    shlibs_root=$root
    shlibs_root_arch=arm64
    how="natively with Debian 13's Swift 6.0 in the trixie arm64 root under qemu-user"
else
    echo "build-deb: cannot build the $arch package on this $host_arch machine (BEACOND_ARM64_BUILD=$arm64_build; an amd64 machine builds both, an arm64 one with swiftlang builds arm64)" >&2
    exit 2
fi
echo "build-deb: $arch binary built in $(( $(date +%s) - start )) s, $how" >&2
# No segment may be both writable and executable (W^X; MemoryDenyWriteExecute= in the units expects it too).
if readelf -lW "$work/beacond" | awk '$1 == "LOAD" && $(NF-1) ~ /W/ && $(NF-1) ~ /E/ { found = 1 } END { exit !found }'; then
    readelf -lW "$work/beacond" | grep LOAD >&2
    echo "build-deb: $arch binary has a LOAD segment that is writable and executable" >&2
    exit 1
fi

# The date of the newest changelog entry, for reproducible pages and timestamps.
date=$(sed -n 's/^ -- .*>  //p' "$top/scripts/deb/changelog" | head -n 1)
SOURCE_DATE_EPOCH=$(date -d "$date" +%s)
export SOURCE_DATE_EPOCH
man_date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)

# The layout is scripts/install.sh's (also `make install`); the package adds Debian's own files.
python3 "$top/scripts/man.py" --beacond "$help_binary" --version "$version" --date "$man_date" --out "$work/man"
DESTDIR=$stage PREFIX=/usr SYSCONFDIR=/etc MAN_PAGES=$work/man sh "$top/scripts/install.sh" "$work/beacond" >&2
install -m 0644 "$top/scripts/deb/copyright" "$stage/usr/share/doc/beacond/copyright"
install -m 0644 "$top/scripts/deb/changelog" "$stage/usr/share/doc/beacond/changelog"
gzip -9n "$stage/usr/share/man/man8/beacond.8" "$stage/usr/share/man/man5/beacond.conf.5" \
    "$stage/usr/share/doc/beacond/changelog"

# Depends: the shared libraries the binary needs, as the packages that provide them on the target say.
printf 'Source: beacond\n\nPackage: beacond\nArchitecture: any\n' > "$work/src/debian/control"
if [ -n "$shlibs_root" ]; then
    rm -rf "$shlibs_root/tmp/shlibs" && mkdir -p "$shlibs_root/tmp/shlibs/debian"
    cp "$work/src/debian/control" "$shlibs_root/tmp/shlibs/debian/control"
    cp "$work/beacond" "$shlibs_root/tmp/shlibs/beacond"
    cross=""
    [ -n "$shlibs_arch" ] && cross="dpkg-architecture -a$shlibs_arch -c"
    shlibs=$(sh "$top/scripts/in-buildroot.sh" --exec "$shlibs_root_arch" sh -c "cd /tmp/shlibs && $cross dpkg-shlibdeps$shlibs_from -O beacond" 2>"$work/shlibdeps.log" | sed -n 's/^shlibs:Depends=//p')
else
    shlibs=$(cd "$work/src" && dpkg-shlibdeps -O "$work/beacond" 2>"$work/shlibdeps.log" | sed -n 's/^shlibs:Depends=//p')
fi
[ -n "$shlibs" ] || { cat "$work/shlibdeps.log" >&2; echo "build-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
if [ "$arch" = amd64 ] && [ -z "$shlibs_root" ]; then
    # The amd64 package's promise (docs/packaging.md): glibc 2.35 and later, so Ubuntu 22.04 too.
    libc=$(echo "$shlibs" | sed -n 's/.*libc6 (>= \([^)]*\)).*/\1/p')
    dpkg --compare-versions "${libc:-0}" le 2.35 ||
        { echo "build-deb: the amd64 binary needs glibc $libc (Depends: $shlibs); the package promises 2.35" >&2; exit 1; }
fi
if [ -n "$target_root" ]; then
    # Every symbol version the binary needs is defined by bookworm's library, and every Depends fits bookworm.
    python3 "$top/scripts/check-abi.py" "$work/beacond" "$target_root/root" "$target_root/versions" "$shlibs" >&2 ||
        { echo "build-deb: the $arch binary would not load on Debian 12" >&2; exit 1; }
fi

installed_size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
# The formats, as the binary names them (BeaconFormat.allCases).
formats=$("$help_binary" check-config --schema | python3 -c 'import json, sys; n = json.load(sys.stdin)["formatNames"]; print(", ".join(n[:-1]) + " and " + n[-1])')
cat > "$stage/DEBIAN/control" <<CONTROL
Package: beacond
Version: $version
Architecture: $arch
Maintainer: beacond developers <maintainers@beacond.invalid>
Installed-Size: $installed_size
Depends: $shlibs, procps
Suggests: bluez
Section: net
Priority: optional
Description: Bluetooth LE beacon daemon (iBeacon, AltBeacon, Eddystone)
 beacond turns a Linux machine with a Bluetooth LE controller (a Raspberry
 Pi by a shop shelf, a kiosk, a POS terminal, a gateway) into one or more
 beacons, in these formats:
 $formats.
 It puts the exact frames on the air
 through the kernel's management interface beside bluetoothd, raw HCI, or an
 H4 controller on a serial line, TCP or a unix socket; keeps them there across
 adapter resets and re-plugs; and reports its health to systemd (sd-notify,
 watchdog, journal, beacond status, a reload that waits for the air).
 .
 It advertises nothing until a beacon UUID is set in
 /etc/beacond/beacond.conf (beacond gen-uuid --set). The package also has
 check-config, payload (hex, hcitool or JSON), gen-uuid, gen-key and scan
 (ranging, calibration, and checking configs against the air).
CONTROL
echo /etc/beacond/beacond.conf > "$stage/DEBIAN/conffiles"
for s in postinst prerm postrm; do install -m 0755 "$top/scripts/deb/$s" "$stage/DEBIAN/$s"; done
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | LC_ALL=C sort | xargs md5sum) > "$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/md5sums" "$stage/DEBIAN/control" "$stage/DEBIAN/conffiles"
find "$stage" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
deb="$out/beacond_${version}_$arch.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >&2
echo "build-deb: $(basename "$deb"): $(du -k "$deb" | cut -f1) KiB, installed $installed_size KiB, Depends: $shlibs, procps" >&2
echo "$deb"
