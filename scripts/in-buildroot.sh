#!/bin/sh
# Runs a command in the trixie build root of ARCH (scripts/buildroot.sh), in /src/beacond, a copy of the checkout's
# tracked files as they are in the working tree (the root's .build stays between runs, so builds are incremental).
#   sh scripts/in-buildroot.sh ARCH 'COMMAND'      (root; ARCH amd64 or arm64)
# The command's output goes to the terminal; its exit status is this script's.
set -eu
arch=$1
command=$2
top=$(cd "$(dirname "$0")/.." && pwd)
root=$(sh "$top/scripts/buildroot.sh" "$arch")
src="$root/src/beacond"
mkdir -p "$src"
find "$src" -mindepth 1 -maxdepth 1 ! -name .build -exec rm -rf {} +
(cd "$top" && git ls-files -z --cached --others --exclude-standard | xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh | tar --null -cf - -T -) | (cd "$src" && tar -xf -)
# Swift finds its runtime through $ORIGIN, which glibc resolves through /proc/self/exe: /proc must be mounted.
mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
trap 'umount "$root/proc" 2>/dev/null || true' EXIT
chroot "$root" sh -c "cd /src/beacond && $command"
