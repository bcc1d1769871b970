#!/bin/sh
# Runs a command in the trixie build root of ARCH (scripts/buildroot.sh), in /src/beacond, a copy of the checkout's
# files (scripts/sync-tree.sh): the root's .build stays between runs, so a build after a fresh clone only recompiles
# the modules whose files really changed (a whole native arm64 build under qemu-user takes about 13 minutes).
#   sh scripts/in-buildroot.sh ARCH 'COMMAND'      (root; ARCH amd64 or arm64)
# The command's output goes to the terminal; its exit status is this script's.
#   sh scripts/in-buildroot.sh --exec ARCH PROGRAM [ARG...]
#                                                  runs a program of the root as it is (no copy), with these arguments
# Whatever runs in a root goes through here: one at a time, under the root's lock, which also guards the /proc mount
# (a stage that unmounted it under another's compiler made that one fail with exit 127).
set -eu
exec_only=false
if [ "$1" = --exec ]; then exec_only=true; shift; fi
arch=$1
shift
top=$(cd "$(dirname "$0")/.." && pwd)
root=$(sh "$top/scripts/buildroot.sh" "$arch")
src="$root/src/beacond"
# One command at a time per root: the copy below, SwiftPM's .build and the /proc mount are shared (the CI runs stages
# in parallel).
mkdir -p "$root/src"
exec 9>"$root/src/.lock"
flock 9
# Swift finds its runtime through $ORIGIN, which glibc resolves through /proc/self/exe: /proc must be mounted.
mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
trap 'umount "$root/proc" 2>/dev/null || true' EXIT
if $exec_only; then
    chroot "$root" "$@"
    exit
fi
command=$1
sh "$top/scripts/sync-tree.sh" "$src"
chroot "$root" sh -c "cd /src/beacond && $command"
