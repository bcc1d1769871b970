#!/bin/sh
# Checks the shipped alerting rules with promtool from Debian's prometheus package (scripts/deps.sh installs it):
# `promtool check rules` (the file, its PromQL and its templates) and `promtool test rules` (beacond-alerts.test.yml:
# each alert fires where it should and stays quiet where it should not). Without promtool it fails: never a skip.
#   sh deploy/prometheus/check.sh        PROMTOOL=PATH: another promtool than the one on PATH
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
promtool=${PROMTOOL:-promtool}
if ! command -v "$promtool" >/dev/null 2>&1; then
    echo "deploy/prometheus/check.sh: promtool not installed: apt-get install prometheus (or sh scripts/deps.sh)" >&2
    exit 1
fi
cd "$top"
"$promtool" check rules deploy/prometheus/beacond-alerts.yml
"$promtool" test rules deploy/prometheus/beacond-alerts.test.yml
