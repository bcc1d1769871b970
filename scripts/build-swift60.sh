#!/bin/sh
# Builds beacond and runs its unit tests with Debian 13's Swift 6.0 in the trixie amd64 build root
# (scripts/buildroot.sh, scripts/in-buildroot.sh).
#   sh scripts/build-swift60.sh          (root)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
status=0
sh "$top/scripts/in-buildroot.sh" amd64 'swift --version 2>&1 | head -n 1 | sed "s/^/swift60: /" >&2; swift build --build-tests' > "$log" 2>&1 || status=$?
grep -E 'swift60:|error:' "$log" | sort -u | head -n 40
echo "swift60: swift build --build-tests exited $status after $(( $(date +%s) - start )) s"
[ "$status" -eq 0 ] || exit "$status"
sh "$top/scripts/in-buildroot.sh" amd64 'swift test' > "$log" 2>&1 || status=$?
grep -E '✘|Test run with|error:' "$log" | tail -n 20
echo "swift60: swift test exited $status"
exit "$status"
