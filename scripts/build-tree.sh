#!/bin/sh
# The host's build tree for `make test`: a copy of the checkout (scripts/sync-tree.sh) at one place outside it, whose
# .build stays between runs, so that a CI run on a fresh clone recompiles only the modules whose files changed, as the
# build roots do for the Swift 6.0 and arm64 builds. Cached in BEACOND_BUILDROOT_CACHE (default
# /var/cache/beacond-buildroot), keyed by this script, sync-tree.sh and the Swift toolchain.
#   sh scripts/build-tree.sh COMMAND [ARG...]
# syncs the tree and runs COMMAND with BUILD_TREE set to it (the Makefile's SwiftPM builds and tests go there), holding
# the tree's lock until COMMAND ends: one `make test` at a time per cache.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${BEACOND_BUILDROOT_CACHE:-/var/cache/beacond-buildroot}
key=$({ cat "$top/scripts/build-tree.sh" "$top/scripts/sync-tree.sh"; "${SWIFT:-swift}" --version 2>&1; } | sha256sum | cut -c1-16)
tree="$cache/host-$key"
mkdir -p "$tree"
exec 9>"$tree.lock"
flock 9
sh "$top/scripts/sync-tree.sh" "$tree/beacond"
echo "build-tree: SwiftPM builds in $tree/beacond (its .build kept between runs)" >&2
BUILD_TREE="$tree/beacond" exec "$@"
