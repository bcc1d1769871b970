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

# docs/packaging.md's "installed" row says what apt shows before it installs each package (Installed-Size): held here,
# where every `make deb` has the packages, within 10 % (the binary's size moves a little with every change).
row=$(sed -n 's/^| installed | \([0-9,]*\) KiB | \([0-9,]*\) KiB |$/\1 \2/p' "$top/docs/packaging.md" | tr -d ,)
[ -n "$row" ] || { echo "lint-deb: docs/packaging.md has no '| installed | N KiB | N KiB |' row" >&2; status=1; }
for deb in "$@"; do
    arch=$(dpkg-deb -f "$deb" Architecture)
    size=$(dpkg-deb -f "$deb" Installed-Size)
    case $arch in amd64) said=${row% *} ;; arm64) said=${row#* } ;; *) continue ;; esac
    [ -n "$row" ] || continue
    if [ $((size * 10)) -lt $((said * 9)) ] || [ $((size * 10)) -gt $((said * 11)) ]; then
        echo "lint-deb: docs/packaging.md says $said KiB installed for $arch; $(basename "$deb") says $size KiB: update its 'installed' row" >&2
        status=1
    else
        echo "lint-deb: $(basename "$deb"): installed $size KiB, docs/packaging.md $said KiB"
    fi
done
exit "$status"
