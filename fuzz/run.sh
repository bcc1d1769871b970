#!/bin/sh
# Builds the libFuzzer target (ASan) and runs it for a bounded time on a seed corpus of the config fixtures.
# Usage: fuzz/run.sh [SECONDS]   (default 60). Exits non-zero on a crash, a leak-free hang or a build failure.
set -eu
cd "$(dirname "$0")/.."
seconds=${1:-60}
out=.build/fuzz
mkdir -p "$out/src" "$out/corpus"
# One module: the sources of the two pure targets and the device spec, without their cross-module imports, plus
# the entry point.
for f in Sources/BluetoothHCI/*.swift Sources/BeaconCore/*.swift Sources/HCITransport/DeviceSpec.swift; do
    sed '/^import BluetoothHCI$/d; /^import HCITransport$/d' "$f" > "$out/src/$(basename "$(dirname "$f")")-$(basename "$f")"
done
swiftc -O -sanitize=fuzzer,address -parse-as-library -use-ld=lld -module-name FuzzTarget \
    "$out"/src/*.swift fuzz/ConfigFuzz.swift -o "$out/config-fuzz"
cp Tests/Fixtures/bad/*.conf Tests/Fixtures/good/*.conf config/beacond.conf "$out/corpus/"
printf '\004\016\004\001\012\040\000' > "$out/corpus/h4-command-complete"
# The Swift backtracer hangs after a crash under the fuzzer: turn it off.
status=0
SWIFT_BACKTRACE=enable=no "$out/config-fuzz" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
    -print_final_stats=1 "$out/corpus" > "$out/fuzz.log" 2>&1 || status=$?
grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added)|ERROR|SUMMARY' "$out/fuzz.log" || true
if [ "$status" -ne 0 ]; then
    tail -n 60 "$out/fuzz.log"
    echo "fuzz: FAILED (exit $status); the crashing input is in the current directory (crash-*)" >&2
    exit "$status"
fi
echo "fuzz: no crash in ${seconds} s"
