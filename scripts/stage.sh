#!/bin/sh
# Runs one stage of the test suite and records how long it took, so every run (CI's too) ends with a table of its
# stages (scripts/stage-report.sh) instead of a total alone.
#   sh scripts/stage.sh NAME COMMAND [ARG...]
# Appends "NAME<TAB>start<TAB>end<TAB>exit status" (seconds since the epoch) to $BEACOND_STAGES (default
# build/stages.tsv) and exits with the command's status.
set -u
name=$1
shift
log=${BEACOND_STAGES:-build/stages.tsv}
mkdir -p "$(dirname "$log")"
start=$(date +%s)
echo "==> $name"
status=0
"$@" || status=$?
end=$(date +%s)
printf '%s\t%s\t%s\t%s\n' "$name" "$start" "$end" "$status" >> "$log"
echo "<== $name: $((end - start)) s$([ "$status" -eq 0 ] || echo ", FAILED (exit $status)")"
exit "$status"
