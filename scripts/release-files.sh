#!/bin/sh
# The files a GitHub release carries: the packages and their SHA256SUMS (sha256sum's format: `sha256sum -c SHA256SUMS`
# in a directory holding them checks what was downloaded).
#   sh scripts/release-files.sh DIR DEB...        (make release-files DIR=…: both packages of this version)
# DIR gets each DEB and SHA256SUMS naming exactly those, nothing else of DIR's; the packages must be there already
# (make deb, or the release workflow's download of its build job's).
set -eu
dir=${1:?usage: release-files.sh DIR DEB...}
shift
[ $# -gt 0 ] || { echo "release-files: no packages given (make deb first)" >&2; exit 2; }
for deb in "$@"; do
    [ -f "$deb" ] || { echo "release-files: $deb is missing: make deb first (or put the release's packages in build/)" >&2; exit 2; }
done
mkdir -p "$dir"
names=""
for deb in "$@"; do
    cp "$deb" "$dir/"
    names="$names $(basename "$deb")"
done
# shellcheck disable=SC2086 # the names are the packages' own (beacond_<version>_<arch>.deb): no spaces
(cd "$dir" && sha256sum $names > SHA256SUMS.new && mv SHA256SUMS.new SHA256SUMS)
echo "release-files: $dir:$names SHA256SUMS" >&2
