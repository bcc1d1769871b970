#!/bin/sh
# Makes DEST a copy of the checkout's files (tracked, and untracked ones git does not ignore) as they are in the
# working tree: what differs is replaced, what is new is added, what is gone is dropped, and an identical file keeps
# its old copy and timestamp. DEST's .build stays, so a build in DEST after a fresh clone (new timestamps everywhere)
# recompiles only the modules whose files really changed. The caller holds DEST's lock.
#   sh scripts/sync-tree.sh DEST
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
dest=$1
incoming="$dest.incoming"
rm -rf "$incoming"
mkdir -p "$dest" "$incoming"
(cd "$top" && git ls-files -z --cached --others --exclude-standard | xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh | tar --null -cf - -T -) | (cd "$incoming" && tar -xf -)
(cd "$incoming" && find . -type f -print) | while IFS= read -r f; do
    if ! cmp -s "$incoming/$f" "$dest/$f"; then
        mkdir -p "$(dirname "$dest/$f")"
        cp -p "$incoming/$f" "$dest/$f"
    fi
done
(cd "$dest" && find . -path ./.build -prune -o -type f -print) | while IFS= read -r f; do
    [ -e "$incoming/$f" ] || rm -f "$dest/$f"
done
rm -rf "$incoming"
