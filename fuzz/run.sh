#!/bin/sh
# Builds the libFuzzer targets (ASan) and runs each one on its seed corpus.
#   fuzz/run.sh [SECONDS]            every target for SECONDS each (default 30), with AddressSanitizer; CI runs this
#   fuzz/run.sh --runs N [TARGET…]   each target (default all) for N executions (make fuzz-long: 10 million), two
#                                    at a time, without AddressSanitizer: the decoders under fuzz use no unsafe
#                                    pointers, Swift's own bounds, overflow and unwrap checks trap without it, and
#                                    it is 3-5 times faster
# Exits non-zero on a crash, a timeout or a build failure, naming the target and the crashing input.
set -eu
cd "$(dirname "$0")/.."
targets="config hci adv mgmt device"
limit="-max_total_time=30"
sanitize="fuzzer,address"
binary=beacond-fuzz-asan
jobs=1
if [ "${1:-}" = "--runs" ]; then
    limit="-runs=$2"
    sanitize="fuzzer"
    binary=beacond-fuzz
    jobs=2
    shift 2
    [ $# -gt 0 ] && targets="$*"
elif [ $# -gt 0 ]; then
    limit="-max_total_time=$1"
fi
out=.build/fuzz
mkdir -p "$out/src"
rm -f "$out"/src/*.swift
# One module: the pure sources, without their cross-module imports, plus the entry points (BeaconCore's libm comes
# through the CMath module map, -I).
for f in Sources/SystemConditions/*.swift Sources/BluetoothHCI/*.swift Sources/BeaconCore/*.swift \
         Sources/HCIHost/CommandFlow.swift Sources/HCIHost/StepSequence.swift Sources/HCIHost/AdvertisingPlan.swift Sources/HCIHost/HCIEventMeaning.swift \
         Sources/Mgmt/MgmtCodec.swift Sources/Mgmt/MgmtCommandFlow.swift Sources/Mgmt/MgmtAdvertisingPlan.swift \
         Sources/Mgmt/MgmtInstancePlan.swift; do
    sed '/^import BluetoothHCI$/d; /^import HCITransport$/d; /^import HCIHost$/d; /^import SystemCalls$/d; /^import SystemConditions$/d' "$f" > "$out/src/$(basename "$(dirname "$f")")-$(basename "$f")"
done
if [ ! -x "$out/$binary" ] || [ -n "$(find fuzz Sources -newer "$out/$binary" -name '*.swift' | head -n 1)" ]; then
    echo "fuzz: building the targets (-sanitize=$sanitize)"
    swiftc -O -sanitize="$sanitize" -parse-as-library -use-ld=lld -module-name FuzzTarget -I Sources/CMath \
        "$out"/src/*.swift fuzz/Targets.swift -o "$out/$binary"
fi

# One target: its corpus (seeds, and for config the fixtures), the run, one summary line. HCI events are at most 257
# bytes: those targets take a few packets per input, config files up to 4 KiB.
run_target() {
    t=$1
    corpus="$out/corpus-$t"
    mkdir -p "$corpus"
    cp fuzz/seeds/"$t"/* "$corpus/" 2>/dev/null || true
    if [ "$t" = config ]; then cp Tests/Fixtures/bad/*.conf Tests/Fixtures/good/*.conf config/beacond.conf "$corpus/"; fi
    len=600
    [ "$t" = config ] && len=4096
    # The Swift backtracer hangs after a crash under the fuzzer: turn it off.
    s=0
    (cd "$out" && SWIFT_BACKTRACE=enable=no BEACOND_FUZZ_TARGET="$t" "./$binary" "$limit" -max_len=$len -timeout=10 \
        -print_final_stats=1 -artifact_prefix="crash-$t-" "corpus-$t" > "fuzz-$t.log" 2>&1) || s=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/fuzz-$t.log")
    secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$out/fuzz-$t.log")
    if [ "$s" -ne 0 ]; then
        tail -n 40 "$out/fuzz-$t.log"
        echo "fuzz: $t FAILED (exit $s); the crashing input is in $out (crash-$t-*)" >&2
        return "$s"
    fi
    echo "fuzz: $t: ${execs:-?} executions in ${secs:-?} s, no crash"
}

status=0
if [ "$jobs" -eq 1 ]; then
    for t in $targets; do run_target "$t" || status=$?; done
else
    # Two at a time (the machines have two cores); each writes its own log and result file.
    set -- $targets
    while [ $# -gt 0 ]; do
        a=$1; shift
        b=${1:-}; [ $# -gt 0 ] && shift
        (run_target "$a" > "$out/result-$a" 2>&1; echo $? >> "$out/result-$a") &
        [ -n "$b" ] && (run_target "$b" > "$out/result-$b" 2>&1; echo $? >> "$out/result-$b") &
        wait
        for t in $a $b; do
            head -n -1 "$out/result-$t"
            [ "$(tail -n 1 "$out/result-$t")" = 0 ] || status=1
        done
    done
fi
exit "$status"
