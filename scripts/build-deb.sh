#!/bin/sh
# Builds the Debian package of beacond for one architecture:
#   sh scripts/build-deb.sh amd64|arm64        writes build/beacond_<version>_<arch>.deb
#
# amd64: the release binary from this machine's Swift (make release: static Swift stdlib), built on Debian 12, so
#        the package installs on Debian 12 and later.
# arm64: built natively with Debian 13's Swift 6.0 in the trixie arm64 build root under qemu-user
#        (scripts/buildroot.sh arm64, root), for Raspberry Pi OS / Debian 13 on a Pi 3, 4, 5 or Zero 2 W.
# The man pages come from scripts/man.py (the binary's help and the README), Depends from dpkg-shlibdeps run where
# the binary's libraries are (this machine for amd64, the arm64 root for arm64), plus procps for the units'
# ExecReload=/bin/kill. Needs dpkg-dev and python3; arm64 needs root.
set -eu
arch=$1
top=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^public let beacondVersion = "\(.*\)"$/\1/p' "$top/Sources/DaemonCore/Lifecycle.swift")
[ -n "$version" ] || { echo "build-deb: no beacondVersion in Sources/DaemonCore/Lifecycle.swift" >&2; exit 1; }
changelog_version=$(sed -n '1s/^beacond (\([^)]*\)).*/\1/p' "$top/scripts/deb/changelog")
[ "$version" = "$changelog_version" ] || { echo "build-deb: version $version but scripts/deb/changelog starts with $changelog_version" >&2; exit 1; }
out="$top/build"
work="$out/deb-$arch"
rm -rf "$work"
mkdir -p "$work/stage/DEBIAN" "$work/src/debian"
stage="$work/stage"
start=$(date +%s)
# Bind now, as Debian's hardening flags ask; the static Swift stdlib keeps the package Swift-free.
swift_flags='-c release --static-swift-stdlib --disable-local-rpath -Xlinker -z -Xlinker now'

case $arch in
amd64)
    (cd "$top" && swift build $swift_flags >&2)
    cp "$top/.build/release/beacond" "$work/beacond"
    help_binary="$work/beacond"
    strip --remove-section=.comment --remove-section=.note --strip-unneeded "$work/beacond"
    ;;
arm64)
    root=$(sh "$top/scripts/buildroot.sh" arm64)
    # separate-code: Debian's Swift 6.0 on aarch64 marks .rodata writable in every object it emits (ours and the
    # static stdlib's), and GNU ld put that next to the code: one LOAD segment writable and executable ("LOAD
    # segment with RWX permissions"). With it, code has a segment of its own (checked below). This machine's Swift
    # links with gold, which has no such option and keeps them apart already.
    sh "$top/scripts/in-buildroot.sh" arm64 "swift build $swift_flags -Xlinker -z -Xlinker separate-code >&2 && strip --remove-section=.comment --remove-section=.note --strip-unneeded -o /tmp/beacond .build/release/beacond"
    cp "$root/tmp/beacond" "$work/beacond"
    # The help texts are the same on every architecture; the host's debug build prints them quickly.
    (cd "$top" && swift build >&2)
    help_binary="$top/.build/debug/beacond"
    ;;
*) echo "build-deb: architecture amd64 or arm64, not $arch" >&2; exit 2 ;;
esac
echo "build-deb: $arch binary built in $(( $(date +%s) - start )) s" >&2
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

install -D -m 0755 "$work/beacond" "$stage/usr/bin/beacond"
install -D -m 0644 "$top/systemd/beacond.service" "$stage/usr/lib/systemd/system/beacond.service"
install -D -m 0644 "$top/systemd/beacond@.service" "$stage/usr/lib/systemd/system/beacond@.service"
install -D -m 0644 "$top/config/beacond.conf" "$stage/etc/beacond/beacond.conf"
python3 "$top/scripts/man.py" --beacond "$help_binary" --version "$version" --date "$man_date" --out "$work/man"
install -D -m 0644 "$work/man/beacond.8" "$stage/usr/share/man/man8/beacond.8"
install -D -m 0644 "$work/man/beacond.conf.5" "$stage/usr/share/man/man5/beacond.conf.5"
install -D -m 0644 "$top/scripts/deb/copyright" "$stage/usr/share/doc/beacond/copyright"
install -m 0644 "$top/scripts/deb/changelog" "$stage/usr/share/doc/beacond/changelog"
install -m 0644 "$top/README.md" "$stage/usr/share/doc/beacond/README.md"
gzip -9n "$stage/usr/share/man/man8/beacond.8" "$stage/usr/share/man/man5/beacond.conf.5" \
    "$stage/usr/share/doc/beacond/changelog"

# Depends: the shared libraries the binary needs, as the packages that provide them on the target say.
printf 'Source: beacond\n\nPackage: beacond\nArchitecture: any\n' > "$work/src/debian/control"
if [ "$arch" = arm64 ]; then
    rm -rf "$root/tmp/shlibs" && mkdir -p "$root/tmp/shlibs/debian"
    cp "$work/src/debian/control" "$root/tmp/shlibs/debian/control"
    cp "$work/beacond" "$root/tmp/shlibs/beacond"
    mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
    shlibs=$(chroot "$root" sh -c 'cd /tmp/shlibs && dpkg-shlibdeps -O beacond' | sed -n 's/^shlibs:Depends=//p')
    umount "$root/proc" 2>/dev/null || true
else
    shlibs=$(cd "$work/src" && dpkg-shlibdeps -O "$work/beacond" | sed -n 's/^shlibs:Depends=//p')
fi
[ -n "$shlibs" ] || { echo "build-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

installed_size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
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
Description: Bluetooth LE beacon daemon (Apple iBeacon)
 beacond turns a Linux machine with a Bluetooth LE controller (a Raspberry
 Pi by a shop shelf, a kiosk, a POS terminal, a gateway) into an Apple
 iBeacon. It puts the exact iBeacon frame on the air through the kernel's
 management interface beside bluetoothd, raw HCI, or an H4 controller on a
 serial line, TCP or a unix socket; keeps it there across adapter resets and
 re-plugs; and reports its health to systemd (sd-notify, watchdog, journal).
 .
 It advertises nothing until a beacon UUID is set in
 /etc/beacond/beacond.conf (beacond gen-uuid --set). The package also has
 check-config, payload (hex, hcitool or JSON), gen-uuid and scan (iBeacon,
 AltBeacon, Eddystone ranging).
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
