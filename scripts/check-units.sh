#!/bin/sh
# Checks the shipped units without a running systemd: `systemd-analyze verify` must print nothing, and
# `systemd-analyze security --offline=true` must rate the exposure at most 1.5 (beacond-verify@, which runs as root
# to write into node_exporter's directory, at most 2.0). Prints both.
#   sh scripts/check-units.sh [BINARY]     BINARY: an executable to stand in for /usr/bin/beacond (verify checks it)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
binary=$(cd "$(dirname "${1:-$here/.build/debug/beacond}")" && pwd)/$(basename "${1:-beacond}")
limit=1.5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for unit in beacond.service beacond@.service beacond-verify@.service beacond-verify@.timer; do
    sed -e "s|/usr/bin/beacond|$binary|g" -e "s|/usr/libexec/beacond/verify-prepare|$here/scripts/verify-prepare.sh|g" \
        "$here/systemd/$unit" > "$work/$unit"
done
# verify runs man for every Documentation=man:… entry: give it the pages scripts/man.py makes for the package.
python3 "$here/scripts/man.py" --beacond "$binary" --version check --out "$work/pages"
mkdir -p "$work/man/man8" "$work/man/man5"
mv "$work/pages/beacond.8" "$work/man/man8/"
mv "$work/pages/beacond.conf.5" "$work/man/man5/"
export MANPATH="$work/man"
cd "$work"
status=0
for unit in beacond.service beacond@hci1.service beacond-verify@hci1.service beacond-verify@hci1.timer; do
    [ "${unit%@*}" = beacond-verify ] && limit=2.0
    out=$(systemd-analyze verify "./$unit" 2>&1) || status=1
    if [ -n "$out" ]; then
        echo "$out"
        echo "check-units: $unit: systemd-analyze verify is not clean" >&2
        status=1
    else
        echo "check-units: $unit: systemd-analyze verify clean"
    fi
    case $unit in *.timer) continue ;; esac
    line=$(systemd-analyze security --offline=true "./$unit" 2>&1 | grep 'Overall exposure level') || true
    echo "check-units: $unit: ${line#→ }"
    level=$(echo "$line" | sed -n 's/.*: \([0-9][0-9]*\.[0-9]\).*/\1/p')
    if [ -z "$level" ] || [ "$(echo "$level > $limit" | awk '{ print ($1 > $3) }')" = 1 ]; then
        echo "check-units: $unit: exposure '${level:-?}' is above the target $limit" >&2
        status=1
    fi
done
exit $status
