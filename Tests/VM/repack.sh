#!/bin/sh
# Makes another release of the package under test, for the upgrade scenarios: the same package (the same binary) with
# another version and, where given, another default config as its conffile. There never was a 0.1.0 package, and the
# next release does not exist yet: these stand-ins exercise what an upgrade does to a user, dpkg's conffile handling
# (an edited file is kept; a changed default is offered as .dpkg-dist, an unchanged one asks nothing) and the
# maintainer scripts' restart, through apt-get install ./file or through the signed repository. What they do not
# test is a change of behaviour between releases.
#   sh Tests/VM/repack.sh CURRENT.deb OUT.deb VERSION [CONFFILE]
#     previous release (run.sh): VERSION 0.1.0, CONFFILE Tests/VM/previous-beacond.conf (0.1.0's config, Apple's
#     sample UUID; its first comment line says what it is and is left out)
#     next release (run.sh's repository, fleet.py): VERSION <current>+…, the current default (none given) or one
#     with a change (fleet.py)
set -eu
current=$1
out=$2
version=$3
conf=${4:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -R "$current" "$work/pkg"
sed -i "s/^Version: .*/Version: $version/" "$work/pkg/DEBIAN/control"
if [ -n "$conf" ]; then
    grep -v '^# The config beacond 0.1.0 shipped' "$conf" > "$work/pkg/etc/beacond/beacond.conf"
fi
(cd "$work/pkg" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | LC_ALL=C sort | xargs md5sum) > "$work/pkg/DEBIAN/md5sums"
# gzip -1, not xz: a test artifact built on every run, on the VM suite's critical path (xz took 3.1 s, gzip 0.1 s).
dpkg-deb --root-owner-group -Zgzip -z1 --build "$work/pkg" "$out" >/dev/null
