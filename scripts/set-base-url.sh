#!/bin/sh
# Moves the repository's public address: the one place it is written is deploy/apt/base-url (scripts/publish.sh
# writes it into the published beacond.sources and install.sh); the README quotes it in its install lines, and this
# rewrites those too, so that a fork changes it once:
#   sh scripts/set-base-url.sh https://OWNER.github.io/beacond
# Tests/Integration/test_docs.py checks that the README quotes what the file says, and nothing else does.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
new=${1:?usage: set-base-url.sh https://HOST/PATH, where the release workflow publishes the site}
case $new in
    https://?*) ;;
    *) echo "set-base-url: '$new' is not an https:// URL: apt would fetch the keyring and the index unprotected" >&2; exit 2 ;;
esac
case $new in
    *[!A-Za-z0-9._~:/%+-]*) echo "set-base-url: '$new' has a character a URL in a shell line should not" >&2; exit 2 ;;
esac
new=${new%/}
old=$(cat "$top/deploy/apt/base-url")
[ "$old" != "$new" ] || { echo "set-base-url: already $new"; exit 0; }
# Only the install lines quote it: the lines that fetch from it, each replaced where the old address stands.
tmp="$top/README.md.new"
awk -v old="$old" -v new="$new" '{ out = ""; rest = $0
    while ((i = index(rest, old)) > 0) { out = out substr(rest, 1, i - 1) new; rest = substr(rest, i + length(old)) }
    print out rest }' \
    "$top/README.md" > "$tmp"
mv "$tmp" "$top/README.md"
echo "$new" > "$top/deploy/apt/base-url"
echo "set-base-url: $old → $new (deploy/apt/base-url and the README's install lines)"
