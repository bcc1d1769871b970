#!/bin/sh
# Makes the upgrade scenario's "previous release" from the package under test: there never was a 0.1.0 package, so
# this stand-in is the same package with version 0.1.0 and the config 0.1.0 shipped (previous-beacond.conf, with
# Apple's sample UUID) as its conffile. Upgrading from it exercises what an upgrade does to a user: dpkg's conffile
# handling (an edited file is kept; a changed default is offered as .dpkg-dist) and the maintainer scripts'
# restart. The binary is the same, so what it does not test is a change of behaviour between releases.
#   sh Tests/VM/make-previous.sh CURRENT.deb OUT.deb
set -eu
here=$(cd "$(dirname "$0")" && pwd)
current=$1
out=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -R "$current" "$work/pkg"
sed -i 's/^Version: .*/Version: 0.1.0/' "$work/pkg/DEBIAN/control"
grep -v '^# The config beacond 0.1.0 shipped' "$here/previous-beacond.conf" > "$work/pkg/etc/beacond/beacond.conf"
(cd "$work/pkg" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | LC_ALL=C sort | xargs md5sum) > "$work/pkg/DEBIAN/md5sums"
# gzip -1, not xz: a test artifact built on every run, on the VM suite's critical path (xz took 3.1 s, gzip 0.1 s).
dpkg-deb --root-owner-group -Zgzip -z1 --build "$work/pkg" "$out" >/dev/null
