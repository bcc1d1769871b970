#!/bin/sh
# Checks the packages with Debian 13's lintian (in the trixie amd64 build root, scripts/buildroot.sh): fails on
# any error; prints every warning and info tag. The warnings kept on purpose are listed with their reasons in
# docs/packaging.md.
#   sh scripts/lint-deb.sh DEB...        (root)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
root=$(sh "$top/scripts/buildroot.sh" amd64)
rm -rf "$root/tmp/lint" && mkdir -p "$root/tmp/lint"
for deb in "$@"; do cp "$deb" "$root/tmp/lint/"; done
status=0
sh "$top/scripts/in-buildroot.sh" --exec amd64 sh -c 'cd /tmp/lint && lintian --version && lintian --info --display-info --fail-on error *.deb' || status=$?
rm -rf "$root/tmp/lint"
echo "lint-deb: lintian exited $status"
exit "$status"
