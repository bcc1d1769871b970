#!/bin/sh
# Prints the stages scripts/stage.sh recorded: when each started (from the first), how long it ran, the CPU time it
# used, and its status;
# then the wall time from the first start to the last end.
#   sh scripts/stage-report.sh [FILE]        (default $BEACOND_STAGES or build/stages.tsv)
set -eu
log=${1:-${BEACOND_STAGES:-build/stages.tsv}}
[ -s "$log" ] || { echo "stage-report: no stages recorded in $log"; exit 0; }
sort -t "$(printf '\t')" -k2,2n "$log" | awk -F '\t' '
    NR == 1 { first = $2 }
    { last = ($3 > last) ? $3 : last
      cpu += $5
      printf "  %-22s starts at %5d s, %5d s, CPU %5s s%s\n", $1, $2 - first, $3 - $2, $5, ($4 == 0 ? "" : "  FAILED (exit " $4 ")") }
    END { printf "  %-22s %5d s (%d min %d s), CPU %d s\n", "wall time", last - first, (last - first) / 60, (last - first) % 60, cpu }'
