#!/bin/sh
# Runs one stage of the test suite and records how long it took, so every run (CI's too) ends with a table of its
# stages (scripts/stage-report.sh) instead of a total alone.
#   sh scripts/stage.sh NAME COMMAND [ARG...]
# Appends "NAME<TAB>start<TAB>end<TAB>exit status<TAB>CPU seconds" (times since the epoch; the CPU time, user and
# system, of every process of the stage that was waited for: guests' qemu included) to $BEACOND_STAGES (default
# build/stages.tsv) and exits with the command's status. On a machine with few cores the CPU column says which stage
# makes the others wait.
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
# times: the shell's own user and system time, then its children's ("0m1.250000s 0m0.310000s").
# Into a file: in a pipe or $(...) it would run in a subshell, which has no children yet.
times_file=$(mktemp)
times > "$times_file"
cpu=$(awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); t += p[1] * 60 + p[2] } printf "%.0f", t }' "$times_file")
rm -f "$times_file"
printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$start" "$end" "$status" "${cpu:-?}" >> "$log"
echo "<== $name: $((end - start)) s$([ "$status" -eq 0 ] || echo ", FAILED (exit $status)")"
exit "$status"
