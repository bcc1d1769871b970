#!/bin/sh
# Adds beacond's apt repository to this machine, and nothing else:
#   curl -fsSL <the repository's address>/install.sh | sudo sh       then: sudo apt install beacond
# It fetches the repository's signing key to /etc/apt/keyrings/beacond-archive-keyring.gpg and the deb822 source
# (Signed-By: that key) to /etc/apt/sources.list.d/beacond.sources, then runs apt-get update. Before it touches
# anything it checks that the packages can install here (Debian 12 bookworm or later and Raspberry Pi OS based on it,
# 64-bit; Ubuntu 22.04 or later on amd64, 22.10 or later on arm64) and says in one sentence why not where they cannot.
#
# This is the template in beacond's source tree: scripts/publish.sh writes the repository's address in below
# (deploy/apt/base-url, or REPO_URL) and publishes it beside the repository.
# BEACOND_OS_RELEASE (a file to read instead of /etc/os-release) and BEACOND_DPKG_ARCH (instead of dpkg
# --print-architecture) are for the tests of the checks.
set -eu
base='@BEACOND_REPO_URL@'
keyring=/etc/apt/keyrings/beacond-archive-keyring.gpg
sources=/etc/apt/sources.list.d/beacond.sources

refuse() {
    echo "$*" >&2
    exit 1
}

case $base in
    http://*|https://*) ;;
    *) refuse "This is the template of install.sh in beacond's source tree, without the repository's address: run the install.sh the repository serves (scripts/publish.sh writes it)." ;;
esac

# Which system this is.
os_release=${BEACOND_OS_RELEASE:-/etc/os-release}
[ -r "$os_release" ] || os_release=/usr/lib/os-release
[ -r "$os_release" ] || refuse "This system has no /etc/os-release, so this script cannot tell whether beacond's packages install here: add the repository by hand (its beacond.sources and keyring)."
field() {
    sed -n "s/^$1=//p" "$os_release" | head -n 1 | sed "s/^\"\(.*\)\"\$/\1/; s/^'\(.*\)'\$/\1/"
}
id=$(field ID)
name=$(field NAME)
pretty=$(field PRETTY_NAME)
version_id=$(field VERSION_ID)
codename=$(field VERSION_CODENAME)

# Home Assistant OS has neither dpkg nor apt (nor has its SSH add-on, an Alpine container).
case "$id $name" in
    haos*|*"Home Assistant"*)
        refuse "Home Assistant OS cannot install .deb packages: use a second Pi, or the add-on a later release may bring." ;;
esac
if [ -n "${BEACOND_DPKG_ARCH:-}" ]; then
    arch=$BEACOND_DPKG_ARCH
elif command -v dpkg >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    arch=$(dpkg --print-architecture)
elif [ -n "${SUPERVISOR_TOKEN:-}" ] || command -v ha >/dev/null 2>&1; then
    refuse "Home Assistant OS cannot install .deb packages: use a second Pi, or the add-on a later release may bring."
else
    refuse "${pretty:-This system} has no dpkg and apt: beacond's packages are for Debian, Raspberry Pi OS and Ubuntu."
fi

# The userland's architecture, which is what a package must match (a 32-bit Raspberry Pi OS may run a 64-bit kernel).
case $arch in
    amd64|arm64) ;;
    armhf|armel)
        refuse "This is a 32-bit system ($arch) and beacond is built for 64-bit only: install the 64-bit Raspberry Pi OS (any Pi from the 3 and the Zero 2 W on runs it)." ;;
    *)
        refuse "beacond's packages are built for amd64 and arm64 only, not $arch." ;;
esac

# The release: the packages need Debian 12's libraries or newer (the arm64 one glibc 2.36, the amd64 one 2.35).
case $id in
    debian|raspbian)
        major=${version_id%%.*}
        old=false
        if [ -n "$major" ]; then
            case $major in
                *[!0-9]*) ;;
                *) [ "$major" -ge 12 ] || old=true ;;
            esac
        else
            # testing and unstable have no VERSION_ID
            case $codename in
                jessie|stretch|buster|bullseye) old=true ;;
            esac
        fi
        if $old; then
            refuse "${pretty:-This Debian} is older than Debian 12 bookworm, the oldest release beacond's packages install on: upgrade to Debian 12 or later (Raspberry Pi OS bookworm or later)."
        fi ;;
    ubuntu)
        # YY.MM as YYMM: 22.04 is 2204
        want=2204
        [ "$arch" = arm64 ] && want=2210
        year=${version_id%%.*}
        month=${version_id#*.}
        case "$year.$month" in
            [0-9][0-9].[0-9][0-9]) ;;
            *) refuse "This Ubuntu's VERSION_ID '$version_id' is not a version this script can read: add the repository by hand (its beacond.sources and keyring)." ;;
        esac
        if [ "$year$month" -lt "$want" ]; then
            if [ "$arch" = amd64 ]; then
                refuse "${pretty:-This Ubuntu} is older than Ubuntu 22.04, the oldest release beacond's amd64 package installs on."
            else
                refuse "${pretty:-This Ubuntu} is too old for beacond's arm64 package, which needs glibc 2.36: Ubuntu 22.10 or later."
            fi
        fi ;;
    *)
        refuse "This script knows Debian, Raspberry Pi OS and Ubuntu, not ${pretty:-${id:-this system}}: add the repository by hand (its beacond.sources and keyring) if its packages install here." ;;
esac

[ "$(id -u)" -eq 0 ] || refuse "Run this script as root, as it adds a file to /etc/apt/keyrings and one to /etc/apt/sources.list.d: curl -fsSL $base/install.sh | sudo sh"

# Fetching: curl, wget, or apt's own helper (always there with apt).
fetch() {
    if command -v curl >/dev/null 2>&1; then
        curl -fsSL -o "$2" "$1"
    elif command -v wget >/dev/null 2>&1; then
        wget -q -O "$2" "$1"
    else
        /usr/lib/apt/apt-helper download-file "$1" "$2" >/dev/null
    fi
}
# Both files are fetched into a directory of their own (apt's _apt user may write there: apt-helper downloads as that
# user), checked, then each put in place under a temporary name and renamed.
work=$(mktemp -d)
trap 'rm -rf "$work"; rm -f "$keyring.new" "$sources.new"' EXIT
chmod 0755 "$work"
if id _apt >/dev/null 2>&1; then chown _apt "$work"; fi
fetch "$base/beacond-archive-keyring.gpg" "$work/keyring" ||
    refuse "Could not fetch $base/beacond-archive-keyring.gpg, the repository's signing key: nothing was changed."
# A key in OpenPGP's binary form (what apt's Signed-By reads), not a web page: its first packet is a public key
# (old format 0x98/0x99, new 0xc6).
first=$(od -An -tx1 -N1 "$work/keyring" | tr -d ' \n')
case $first in
    98|99|c6) ;;
    *) refuse "$base/beacond-archive-keyring.gpg is not an OpenPGP key: nothing was changed." ;;
esac
fetch "$base/beacond.sources" "$work/sources" ||
    refuse "Could not fetch $base/beacond.sources, the repository's apt source: nothing was changed."
if ! grep -q "^Signed-By: $keyring\$" "$work/sources" || ! grep -q '^URIs: ' "$work/sources"; then
    refuse "$base/beacond.sources is not the repository's apt source (no URIs:, or no Signed-By: $keyring): nothing was changed."
fi
mkdir -p /etc/apt/keyrings /etc/apt/sources.list.d
install -m 0644 "$work/keyring" "$keyring.new"
install -m 0644 "$work/sources" "$sources.new"
mv "$keyring.new" "$keyring"
mv "$sources.new" "$sources"
echo "beacond: added $sources and $keyring; apt-get update:"
apt-get update || refuse "apt-get update failed (above): the repository's files are in place; once the cause is fixed, run sudo apt-get update."
echo "beacond: the repository is added. Now: sudo apt install beacond"
