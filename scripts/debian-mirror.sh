#!/bin/sh
# Prints the Debian mirror (a URL ending in /) that the build roots and VM images are bootstrapped from.
#   sh scripts/debian-mirror.sh
# BEACOND_DEBIAN_MIRROR when set; otherwise, on a Debian host, the archive this machine's own apt configuration
# already uses for its release (not its -security or -updates suites). No host name is written into the project. On
# a host whose apt knows no Debian archive (Ubuntu, for one) it fails and says to set BEACOND_DEBIAN_MIRROR.
set -eu
if [ -n "${BEACOND_DEBIAN_MIRROR:-}" ]; then
    case $BEACOND_DEBIAN_MIRROR in */) echo "$BEACOND_DEBIAN_MIRROR" ;; *) echo "$BEACOND_DEBIAN_MIRROR/" ;; esac
    exit 0
fi
codename=$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release 2>/dev/null | tr -d '"')
id=$(sed -n 's/^ID=//p' /etc/os-release 2>/dev/null | tr -d '"')
mirror=""
if [ "$id" = debian ] && [ -n "$codename" ]; then
    mirror=$(apt-get indextargets --format '$(URI)' 2>/dev/null | sed -n "s|^\(.*\)/dists/$codename/main/.*|\1/|p" | head -n 1)
fi
if [ -z "$mirror" ]; then
    echo "debian-mirror: this machine's apt configuration names no Debian archive for its release (${id:-unknown} ${codename:-}); set BEACOND_DEBIAN_MIRROR to a Debian mirror's URL" >&2
    exit 1
fi
echo "$mirror"
