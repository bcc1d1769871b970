#!/bin/sh
# Publishes beacond's apt repository into SITE, the tree a static web server serves as it is (GitHub Pages, from the
# gh-pages branch: docs/packaging.md "Publishing a release"):
#   sh scripts/publish.sh SITE DEB...     adds the packages, indexes and signs (make publish SITE=…)
#   sh scripts/publish.sh SITE            indexes and signs again what SITE has, with a fresh Date and Valid-Until:
#                                         the scheduled re-sign (make resign SITE=…)
# SITE afterwards: the repository scripts/make-repo.sh makes (every version ever published stays in its pool, and
# every earlier index by hash: SITE may be a checkout of what was published before), whose beacond.sources names
# REPO_URL; .nojekyll (GitHub Pages then serves every file as it is); and install.sh, deploy/apt/install.sh with
# REPO_URL written in, which adds the repository to a host.
#
# REPO_URL: where SITE is served; by default the one address in deploy/apt/base-url (a fork changes that file, and
# only that). REPO_KEY, REPO_VALID_DAYS and GNUPGHOME as make-repo.sh reads them (no REPO_KEY: its throw-away key).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
site=${1:?usage: publish.sh SITE [DEB...]}
shift
say() { echo "publish: $*" >&2; }

base_file="$top/deploy/apt/base-url"
[ -f "$base_file" ] || { say "$base_file is missing: it holds the repository's address, one line"; exit 2; }
[ "$(wc -l < "$base_file")" -le 1 ] || { say "$base_file must be one line, the repository's address"; exit 2; }
url=${REPO_URL:-$(cat "$base_file")}
# Without a trailing slash (install.sh appends /file); only the characters of a plain URL, so that it goes into
# beacond.sources and install.sh as it is.
url=${url%/}
case $url in
    http://?*|https://?*) ;;
    *) say "the repository's address must be an http:// or https:// URL, not '$url' (REPO_URL, or $base_file)"; exit 2 ;;
esac
case $url in
    *[!A-Za-z0-9:/._~%+@-]*) say "the repository's address '$url' has a character a plain URL does not need"; exit 2 ;;
esac

for deb in "$@"; do
    [ -f "$deb" ] || { say "$deb is missing: make deb first (or put the release's packages in build/)"; exit 2; }
done
grep -q "'@BEACOND_REPO_URL@'" "$top/deploy/apt/install.sh" || { say "deploy/apt/install.sh has no '@BEACOND_REPO_URL@' to write the address into"; exit 1; }

# Every index by hash stays: SITE is a git checkout, whose files all have the checkout's time, so make-repo's "last 8
# by time" would keep any 8; and a host that read an earlier InRelease (a CDN may serve it a while longer) must find
# the indexes it names. They are small (a few hundred bytes a version).
REPO_URL=$url REPO_BY_HASH_KEEP=all sh "$top/scripts/make-repo.sh" "$site" "$@"

# GitHub Pages runs Jekyll over a branch unless it has .nojekyll: the files are served as they are.
: > "$site/.nojekyll"
sed "s|'@BEACOND_REPO_URL@'|'$url'|" "$top/deploy/apt/install.sh" > "$site/.install.sh.new"
chmod 0644 "$site/.install.sh.new"
mv "$site/.install.sh.new" "$site/install.sh"
say "$site is ready to serve at $url (install.sh, beacond.sources and the keyring there; .nojekyll for GitHub Pages)"
