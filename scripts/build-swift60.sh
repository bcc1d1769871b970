#!/bin/sh
# Builds beacond and runs its unit tests with Debian 13's Swift 6.0 in the trixie build root (scripts/buildroot.sh):
# the checkout's tracked files are copied in, so the root's .build stays between runs.
#   sh scripts/build-swift60.sh          (root)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
root=$(sh "$top/scripts/buildroot.sh")
src="$root/src/beacond"
mkdir -p "$src"
# The tracked files as they are in the working tree (deleted ones gone), nothing else.
find "$src" -mindepth 1 -maxdepth 1 ! -name .build -exec rm -rf {} +
(cd "$top" && git ls-files -z --cached --others --exclude-standard | xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh | tar --null -cf - -T -) | (cd "$src" && tar -xf -)
mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
trap 'umount "$root/proc" 2>/dev/null || true' EXIT
echo "swift60: $(chroot "$root" swift --version 2>&1 | head -n 1)"
start=$(date +%s)
status=0
chroot "$root" sh -c 'cd /src/beacond && swift build --build-tests' > "$root/src/build.log" 2>&1 || status=$?
grep -E 'error:' "$root/src/build.log" | sort -u | head -n 40
echo "swift60: swift build --build-tests exited $status after $(( $(date +%s) - start )) s"
[ "$status" -eq 0 ] || exit "$status"
chroot "$root" sh -c 'cd /src/beacond && swift test' > "$root/src/test.log" 2>&1 || status=$?
grep -E '✘|Test run with|error:' "$root/src/test.log" | tail -n 20
echo "swift60: swift test exited $status"
exit "$status"
