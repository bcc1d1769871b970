#!/bin/sh
# Makes (or adds to) a signed apt repository of beacond's packages, with Debian's own tools: apt-ftparchive (apt-utils)
# for the indexes and the Release file, gpg for the signatures.
#   sh scripts/make-repo.sh REPO_DIR DEB...            REPO_KEY=<key id or fingerprint> signs with your key
#   sh scripts/make-repo.sh REPO_DIR                   no package: indexes and signs again what the pool has (a fresh
#                                                      Date and Valid-Until, nothing added): the scheduled re-sign
#
# REPO_DIR afterwards, ready for any static web server or a file: URI:
#   pool/main/b/beacond/beacond_<version>_<arch>.deb   every version ever added (so a host can go back to one); a
#                                                      version there is never replaced: another build of it is refused
#   dists/stable/{InRelease,Release,Release.gpg}      signed, Valid-Until REPO_VALID_DAYS (30; 1-3650) days; Architectures:
#                                                      amd64 arm64, Components: main, Acquire-By-Hash: yes
#   dists/stable/main/binary-{amd64,arm64}/Packages[.gz], and by-hash/SHA256/<hash> copies (the last 8 of each by
#                                                      file time; REPO_BY_HASH_KEEP=all keeps every one)
#   beacond-archive-keyring.gpg, .asc                  the public key hosts install (Signed-By=)
#   beacond.sources                                    the deb822 source for /etc/apt/sources.list.d/: URIs: REPO_URL
#                                                      (where the directory is served) when set, else file:REPO_DIR
#
# A rebuild of a served repository never shows a host a mix: the packages go in first, the indexes under their hash
# (apt fetches them by the hash its InRelease names, and the previous ones stay), and the signed Release files last,
# each renamed into place. Re-run it within REPO_VALID_DAYS, or hosts refuse the stale index (apt: "is expired").
#
# REPO_KEY is looked up in GNUPGHOME (default ~/.gnupg); it must be able to sign without a prompt (gpg-agent or no
# passphrase). It must name exactly one secret key (a fingerprint does; a user id or short id matching several is
# refused, naming them), and only that key's public key is published: apt trusts every key in the keyring it is given. Without REPO_KEY the repository is signed with a throw-away key made once in the user's state
# directory (${XDG_STATE_HOME:-~/.local/state}/beacond/repo-throwaway-gnupg, never in or beside the repository,
# which is published), and this script says so loudly every time: fine for a test, not for a fleet.
#
# One run at a time per repository: a run holds a lock (flock(1)) on REPO_DIR itself, the directory, so no lock file
# is ever in the published tree or beside it; a second run waits for it (up to 10 minutes) before it touches anything.
set -eu
repo=${1:?usage: make-repo.sh REPO_DIR [DEB...]}
shift
# No package: the pool's are indexed and signed again (the scheduled re-sign); an empty pool is an error.
if [ $# -eq 0 ] && ! ls "$repo/pool/main/b/beacond/"*.deb >/dev/null 2>&1; then
    echo "repo: no packages given (make deb first)" >&2
    exit 2
fi
case ${REPO_URL:-} in
    *[[:space:]]*) echo "repo: REPO_URL must be one URL without spaces (where the repository is served), not '$REPO_URL'" >&2; exit 2 ;;
esac
for tool in apt-ftparchive gpg gpgv dpkg-deb flock; do
    command -v "$tool" >/dev/null 2>&1 || { echo "repo: $tool is missing (apt-get install apt-utils gnupg gpgv dpkg-dev util-linux)" >&2; exit 2; }
done
suite=stable
# How long hosts accept the signed index: a decimal count of days (010 is 10: the shell's arithmetic would read it as
# octal 8), from 1 to 3650 (a longer number would overflow it).
given=${REPO_VALID_DAYS:-30}
valid_days=$(printf '%s' "$given" | sed 's/^0*//')
case $given in
    *[!0-9]*) valid_days= ;;
esac
if [ -z "$valid_days" ] || [ ${#valid_days} -gt 4 ] || [ "$valid_days" -gt 3650 ]; then
    echo "repo: REPO_VALID_DAYS must be a whole number of days, from 1 to 3650 (how long hosts accept the signed index; 30 when unset), not '$given'" >&2
    exit 2
fi
# How many indexes by hash stay of each (Packages, Packages.gz): the last 8 by file time, or all (scripts/publish.sh: a
# git checkout of the served tree gives every file the same time).
keep=${REPO_BY_HASH_KEEP:-8}
case $keep in
    all|[1-9]|[1-9][0-9]) ;;
    *) echo "repo: REPO_BY_HASH_KEEP must be a number of indexes by hash to keep of each, from 1 to 99, or all, not '$keep'" >&2; exit 2 ;;
esac
mkdir -p "$repo"
repo=$(cd "$repo" && pwd)

# The lock, on the directory itself (fd 9, held until this script exits; gpg's agent, which outlives it, does not
# inherit it: gpg closes every other descriptor when it starts the agent). Two runs at once removed each other's
# staging tree (dists/.stable.new) and renamed their indexes over each other's.
exec 9<"$repo"
if ! flock -w 600 9; then
    echo "repo: another make-repo.sh has been writing $repo for 10 minutes (it holds a lock on the directory): nothing changed; run again once it is done" >&2
    exit 1
fi

# The signing key, before anything is added: the user's (exactly one, by its fingerprint), or the throw-away one.
if [ -n "${REPO_KEY:-}" ]; then
    # A user id or a short id may name several secret keys: gpg would sign with one of them and export the public key
    # of every key that matches, another's too. apt trusts one key, by its fingerprint: so does this.
    listing=$(gpg --batch --with-colons --list-secret-keys -- "$REPO_KEY" 2>/dev/null || true)
    # Each secret key's fingerprint (the fpr line right after its sec line) and its first user id.
    keys=$(printf '%s\n' "$listing" | awk -F: '
        $1 == "sec" { want = 1; next }
        want && $1 == "fpr" { fpr = $10; want = 0; next }
        $1 == "uid" && fpr != "" { print fpr " (" $10 ")"; fpr = "" }
        END { if (fpr != "") print fpr }')
    count=$(printf '%s' "$keys" | grep -c . || true)
    if [ "$count" -eq 0 ]; then
        echo "repo: no secret key '$REPO_KEY' in ${GNUPGHOME:-~/.gnupg}" >&2
        exit 2
    fi
    if [ "$count" -gt 1 ]; then
        echo "repo: REPO_KEY '$REPO_KEY' names $count secret keys in ${GNUPGHOME:-~/.gnupg}: $(printf '%s' "$keys" | tr '\n' ';' | sed 's/;/; /g'): give the one to sign with by its fingerprint (REPO_KEY=<its 40 hex digits>); nothing changed" >&2
        exit 2
    fi
    key=${keys%% *}
else
    GNUPGHOME="${XDG_STATE_HOME:-$HOME/.local/state}/beacond/repo-throwaway-gnupg"
    export GNUPGHOME
    case $GNUPGHOME/ in "$repo"/*) echo "repo: the throw-away key would be inside the repository ($GNUPGHOME): set XDG_STATE_HOME elsewhere" >&2; exit 2;; esac
    if [ ! -f "$GNUPGHOME/beacond-key-id" ]; then
        mkdir -p "$GNUPGHOME"
        chmod 0700 "$GNUPGHOME"
        gpg --batch --quiet --passphrase '' --quick-gen-key "beacond throw-away repository key (not for production)" ed25519 sign never \
            2>"$GNUPGHOME/gen.log" || { cat "$GNUPGHOME/gen.log" >&2; exit 1; }
        gpg --batch --with-colons --list-secret-keys | awk -F: '$1 == "fpr" { print $10; exit }' > "$GNUPGHOME/beacond-key-id"
    fi
    key=$(cat "$GNUPGHOME/beacond-key-id")
    cat >&2 <<WARN
repo: ****************************************************************************************************
repo: WARNING: REPO_KEY is not set: this repository is signed with a THROW-AWAY key made on this machine
repo: ($GNUPGHOME, fingerprint $key).
repo: Whoever can read that directory can sign packages your hosts will install, and a new checkout makes a
repo: new key that your hosts will refuse. For a fleet: REPO_KEY=<your signing key's fingerprint> make repo
repo: ****************************************************************************************************
WARN
fi
mkdir -p "$repo/pool/main/b/beacond"

# The packages: every one checked before any is added. A version the pool serves is never replaced by another build
# (the same name, other bytes): a host downloading it meanwhile, and every index kept by hash, would name the old
# bytes (apt: "Hash Sum mismatch"), and hosts that have it would keep theirs. The same bytes again add nothing; a new
# file goes in under a temporary name, then is renamed into place.
pool=pool/main/b/beacond
sha() { sha256sum < "$1" | cut -c 1-16; }
new=""
for deb in "$@"; do
    [ "$(dpkg-deb -f "$deb" Package 2>/dev/null)" = beacond ] || { echo "repo: $deb is not a beacond package" >&2; exit 2; }
    name="beacond_$(dpkg-deb -f "$deb" Version)_$(dpkg-deb -f "$deb" Architecture).deb"
    if [ -f "$repo/$pool/$name" ]; then
        cmp -s "$deb" "$repo/$pool/$name" && continue
        echo "repo: $deb is another build of $name than the one the repository serves, $repo/$pool/$name (SHA-256 $(sha "$deb")… and $(sha "$repo/$pool/$name")…): refused, nothing changed. Hosts and the indexes kept by hash name the served file's bytes: bump the version for a new build." >&2
        exit 2
    fi
    earlier=$(printf '%s\n' "$new" | awk -v n="$name" '$1 == n { sub(/^[^ ]* /, ""); print; exit }')
    if [ -n "$earlier" ]; then
        cmp -s "$deb" "$earlier" && continue
        echo "repo: $earlier and $deb are two builds of $name: refused, nothing changed (give one; bump the version for a new build)" >&2
        exit 2
    fi
    new="$new$name $deb
"
done
printf '%s' "$new" | while read -r name deb; do
    cp "$deb" "$repo/$pool/.$name.new"
    mv "$repo/$pool/.$name.new" "$repo/$pool/$name"
done

# Indexes: one per architecture, from every package in the pool, made in a staging tree with the Release files.
cd "$repo"
stage="dists/.$suite.new"
rm -rf "$stage"
for arch in amd64 arm64; do
    mkdir -p "$stage/main/binary-$arch"
    apt-ftparchive --arch "$arch" packages pool > "$stage/main/binary-$arch/Packages"
    # apt-ftparchive reports an unreadable package and goes on: every one of this architecture must be listed.
    want=$(ls pool/main/b/beacond | grep -c "_$arch\.deb\$" || true)
    got=$(grep -c '^Package: ' "$stage/main/binary-$arch/Packages" || true)
    [ "$want" = "$got" ] || { echo "repo: $got of $want $arch packages made it into the index" >&2; exit 1; }
    gzip -9nc "$stage/main/binary-$arch/Packages" > "$stage/main/binary-$arch/Packages.gz"
done
# SHA256 only: the hash apt fetches the indexes by.
apt-ftparchive \
    -o APT::FTPArchive::Release::Origin=beacond -o APT::FTPArchive::Release::Label=beacond \
    -o APT::FTPArchive::Release::Suite="$suite" -o APT::FTPArchive::Release::Codename="$suite" \
    -o APT::FTPArchive::Release::Architectures="amd64 arm64" -o APT::FTPArchive::Release::Components=main \
    -o APT::FTPArchive::Release::Description="beacond: Bluetooth LE beacon daemon" \
    -o APT::FTPArchive::Release::Acquire-By-Hash=yes \
    -o APT::FTPArchive::Release::ValidTime=$((valid_days * 86400)) \
    -o APT::FTPArchive::Release::MD5=false -o APT::FTPArchive::Release::SHA1=false -o APT::FTPArchive::Release::SHA512=false \
    release "$stage" > "$repo/Release.tmp"
mv "$repo/Release.tmp" "$stage/Release"
gpg --batch --quiet --yes --trust-model always --local-user "$key" --digest-algo SHA512 --clearsign -o "$stage/InRelease" "$stage/Release"
gpg --batch --quiet --yes --trust-model always --local-user "$key" --digest-algo SHA512 --armor --detach-sign -o "$stage/Release.gpg" "$stage/Release"
# The signatures must check with the public key alone, as apt will check them, before anything is published.
gpg --batch --yes --export "$key" > "$repo/.keyring.new"
gpgv --quiet --keyring "$repo/.keyring.new" "$stage/InRelease" 2>/dev/null \
    || { echo "repo: InRelease does not verify with the exported public key" >&2; exit 1; }
gpgv --quiet --keyring "$repo/.keyring.new" "$stage/Release.gpg" "$stage/Release" 2>/dev/null \
    || { echo "repo: Release.gpg does not verify with the exported public key" >&2; exit 1; }

# Into the served tree: the indexes by hash first (a host that read the previous InRelease still finds the
# previous ones), then the indexes under their names, then the Release files, each renamed into place.
live="dists/$suite"
for arch in amd64 arm64; do
    d="main/binary-$arch"
    mkdir -p "$live/$d/by-hash/SHA256"
    for f in Packages Packages.gz; do
        h=$(sha256sum "$stage/$d/$f" | cut -d' ' -f1)
        [ -f "$live/$d/by-hash/SHA256/$h" ] || { cp "$stage/$d/$f" "$live/$d/by-hash/SHA256/.$h.new" && mv "$live/$d/by-hash/SHA256/.$h.new" "$live/$d/by-hash/SHA256/$h"; }
        touch "$live/$d/by-hash/SHA256/$h"
    done
    # The last 8 of each (two files each): enough for any host's update in flight.
    if [ "$keep" != all ]; then
        ls -t "$live/$d/by-hash/SHA256" | tail -n +$((keep * 2 + 1)) | while read -r old; do rm -f "$live/$d/by-hash/SHA256/$old"; done
    fi
    for f in Packages Packages.gz; do mv "$stage/$d/$f" "$live/$d/$f"; done
done
for f in Release.gpg Release InRelease; do mv "$stage/$f" "$live/$f"; done
rm -rf "$stage"

# The public key, as apt reads it (binary) and as a person reads it (armored), and the source to install (the
# README and the Ansible role install the key in /etc/apt/keyrings).
mv "$repo/.keyring.new" beacond-archive-keyring.gpg
gpg --batch --yes --armor --export "$key" > beacond-archive-keyring.asc.new && mv beacond-archive-keyring.asc.new beacond-archive-keyring.asc
cat > beacond.sources.new <<SOURCES
# /etc/apt/sources.list.d/beacond.sources (deb822). URIs: where this directory is served (https://…, or file:/path).
Types: deb
URIs: ${REPO_URL:-file:$repo}
Suites: $suite
Components: main
Signed-By: /etc/apt/keyrings/beacond-archive-keyring.gpg
SOURCES
mv beacond.sources.new beacond.sources

echo "repo: $repo: $(ls pool/main/b/beacond | wc -l) package(s) ($(ls pool/main/b/beacond | sed 's/^beacond_//; s/\.deb$//' | tr '\n' ' ')), signed by $key" >&2
