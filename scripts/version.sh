#!/bin/sh
# Prints beacond's version: the one place it is written is Sources/DaemonCore/Version.swift.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^public let beacondVersion = "\(.*\)"$/\1/p' "$top/Sources/DaemonCore/Version.swift")
[ -n "$version" ] || { echo "version.sh: no beacondVersion in Sources/DaemonCore/Version.swift" >&2; exit 1; }
echo "$version"
