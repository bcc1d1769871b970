#!/bin/sh
# beacond-verify@DEVICE.service's first step, as root outside the unit's sandbox (ExecStartPre=+; installed as
# /usr/libexec/beacond/verify-prepare): node_exporter's textfile directory made if it is missing, and the check's
# interval written beside its metrics, for the BeaconVerifierStale alert (stale at 3 intervals without a check):
#   /var/lib/prometheus/node-exporter/beacond-verify-DEVICE.interval.prom
#   beacond_verify_interval_seconds{device="DEVICE"} SECONDS
#
#   verify-prepare DEVICE SECONDS      SECONDS: BEACOND_VERIFY_INTERVAL_SECONDS, the timer's OnUnitActiveSec=
#
# Both by systemd-tmpfiles, which follows no symlink a user could have put on the way (the prometheus user owns
# /var/lib/prometheus), changes nothing of a directory that is there, and writes the file without following one.
# BEACOND_TMPFILES_ROOT: another root for both (the tests').
set -eu
device=${1-}
seconds=${2-}
case $device in
    '' | *[!A-Za-z0-9:._-]*)
        echo "beacond-verify: '$device' is not a device name (hciN)" >&2
        exit 2 ;;
esac
case $seconds in
    '' | *[!0-9]* | 0*) ok=no ;;
    *) if [ ${#seconds} -gt 9 ] || [ "$seconds" -lt 60 ]; then ok=no; else ok=yes; fi ;;
esac
if [ "$ok" = no ]; then
    echo "beacond-verify@$device: BEACOND_VERIFY_INTERVAL_SECONDS must be a whole number of seconds, 60 or more: '$seconds' (the timer's OnUnitActiveSec=; the Ansible role sets both)" >&2
    exit 2
fi
dir=/var/lib/prometheus/node-exporter
printf '%s\n' "d $dir - - - -" \
    "F $dir/beacond-verify-$device.interval.prom 0644 - - - # HELP beacond_verify_interval_seconds How often beacond-verify@DEVICE.timer starts a check, in seconds.\n# TYPE beacond_verify_interval_seconds gauge\nbeacond_verify_interval_seconds{device=\"$device\"} $seconds\n" |
    exec systemd-tmpfiles ${BEACOND_TMPFILES_ROOT:+"--root=$BEACOND_TMPFILES_ROOT"} --create -
