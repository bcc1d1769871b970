#!/bin/sh
# Installs a prebuilt beacond (no Swift needed on the target), its systemd units, the example config and the
# Prometheus alerting rules for its verifier.
#
#   sh scripts/install.sh [BINARY]        BINARY defaults to build/beacond (make release)
#
# Honours DESTDIR (staging root: scripts/build-deb.sh stages the package with it) and PREFIX (default /usr). Never
# overwrites an existing /etc/beacond/beacond.conf. The units use DynamicUser=, so there is no system user to create.
# The man pages are made from the binary by scripts/man.py (python3); MAN_PAGES=DIR installs pages made already
# (for a binary this machine cannot run).
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
binary=${1:-"$here/build/beacond"}
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/usr}
SYSCONFDIR=${SYSCONFDIR:-/etc}
UNITDIR=${UNITDIR:-"$PREFIX/lib/systemd/system"}
DOCDIR=${DOCDIR:-"$PREFIX/share/doc/beacond"}
DATADIR=${DATADIR:-"$PREFIX/share/beacond"}
MANDIR=${MANDIR:-"$PREFIX/share/man"}
LIBEXECDIR=${LIBEXECDIR:-"$PREFIX/libexec/beacond"}

if [ ! -x "$binary" ]; then
    echo "install.sh: no executable at $binary (run 'make release' first, or name the binary)" >&2
    exit 1
fi

install -d "$DESTDIR$PREFIX/bin" "$DESTDIR$UNITDIR" "$DESTDIR$DOCDIR" "$DESTDIR$SYSCONFDIR/beacond"
# Eddystone-EID keys, loaded into the units as credentials (LoadCredential= needs the directory).
install -d -m 0700 "$DESTDIR$SYSCONFDIR/beacond/keys"
# The configs beacond-verify@ checks from the air, and the EID keys they name (its credentials, as keys/ is the
# service's).
install -d -m 0755 "$DESTDIR$SYSCONFDIR/beacond/verify"
install -d -m 0700 "$DESTDIR$SYSCONFDIR/beacond/verify/keys"
install -m 0755 "$binary" "$DESTDIR$PREFIX/bin/beacond"
# beacond-verify@'s first step (node_exporter's directory, the check's interval beside its metrics).
install -D -m 0755 "$here/scripts/verify-prepare.sh" "$DESTDIR$LIBEXECDIR/verify-prepare"
for unit in beacond.service beacond@.service beacond-verify@.service beacond-verify@.timer; do
    # The units name /usr/bin/beacond, /usr/libexec/beacond and /etc/beacond; follow PREFIX, LIBEXECDIR and SYSCONFDIR.
    sed -e "s|/usr/bin/beacond|$PREFIX/bin/beacond|g" -e "s|/usr/libexec/beacond|$LIBEXECDIR|g" -e "s|/etc/beacond|$SYSCONFDIR/beacond|g" \
        -e "s|/usr/share/doc/beacond|$DOCDIR|g" "$here/systemd/$unit" > "$DESTDIR$UNITDIR/$unit"
    chmod 0644 "$DESTDIR$UNITDIR/$unit"
done
install -m 0644 "$here/config/beacond.conf" "$DESTDIR$DOCDIR/beacond.conf.example"
install -m 0644 "$here/README.md" "$DESTDIR$DOCDIR/README.md"
# The verifier's alerting rules, for a Prometheus server's rule_files: (docs/fleet.md).
install -d "$DESTDIR$DATADIR/prometheus"
install -m 0644 "$here/deploy/prometheus/beacond-alerts.yml" "$DESTDIR$DATADIR/prometheus/beacond-alerts.yml"
pages=${MAN_PAGES:-}
if [ -z "$pages" ] && command -v python3 >/dev/null 2>&1 && version=$("$binary" --version 2>/dev/null) && [ "${version#beacond }" != "$version" ]; then
    pages=$(mktemp -d)
    trap 'rm -rf "$pages"' EXIT
    python3 "$here/scripts/man.py" --beacond "$binary" --version "${version#beacond }" --out "$pages"
fi
if [ -n "$pages" ]; then
    install -D -m 0644 "$pages/beacond.8" "$DESTDIR$MANDIR/man8/beacond.8"
    install -D -m 0644 "$pages/beacond.conf.5" "$DESTDIR$MANDIR/man5/beacond.conf.5"
else
    echo "install.sh: no man pages (they need python3 and a binary this machine runs)" >&2
fi
if [ -e "$DESTDIR$SYSCONFDIR/beacond/beacond.conf" ]; then
    echo "kept existing $SYSCONFDIR/beacond/beacond.conf (the new example is $DOCDIR/beacond.conf.example)"
else
    install -m 0644 "$here/config/beacond.conf" "$DESTDIR$SYSCONFDIR/beacond/beacond.conf"
    echo "installed example config $SYSCONFDIR/beacond/beacond.conf"
fi

if [ -z "$DESTDIR" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl daemon-reload
fi
echo "installed $PREFIX/bin/beacond and $UNITDIR/beacond.service, beacond@.service, beacond-verify@.service and .timer"
echo "installed the verifier's alerting rules $DATADIR/prometheus/beacond-alerts.yml (for Prometheus' rule_files)"
if [ -z "$DESTDIR" ]; then
    echo "next: beacond gen-uuid --set $SYSCONFDIR/beacond/beacond.conf && systemctl enable --now beacond"
fi
