#!/bin/sh
# Builds beacond's release binary with scripts/release-flags; on amd64 with libstdc++ linked in statically:
#   sh scripts/release-build.sh TREE [SWIFT-BUILD-OPTION...]     (the binary: TREE/.build/release/beacond)
# The static Swift stdlib still names libstdc++ (`-lstdc++`, for the runtime's few C++ parts). Loading the shared
# libstdc++.so.6 and running its initializers cost 0.5 ms of every start (docs/benchmarks.md), more than the parts the
# runtime uses; linked from libstdc++.a (GCC's runtime library exception allows it) only those parts come in and the
# package no longer depends on libstdc++6. SwiftPM gives the linker its products' directory before the compiler's
# own: the archive is linked there under the name the linker looks for, so `-lstdc++` finds the archive first.
# Used by make release and scripts/build-deb.sh; checked: the binary must not need libstdc++.so.6. On other
# architectures (a Pi building its own package with Debian's swiftlang) the release flags alone, as before: not
# measured there.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
tree=$1
shift
swift=${SWIFT:-swift}
flags=$(cat "$top/scripts/release-flags")
if [ "$(dpkg --print-architecture)" != amd64 ]; then
    exec "$swift" build --package-path "$tree" $flags "$@" >&2
fi
archive=$(${CC:-cc} -print-file-name=libstdc++.a)
[ -f "$archive" ] || { echo "release-build: no libstdc++.a where the C compiler looks ($archive): install the C compiler's libstdc++ development package (libstdc++-12-dev on Debian 12)" >&2; exit 1; }
# lld, which the swift.org toolchains carry: with --gc-sections it drops the undefined symbols only collected sections
# used. GNU gold kept one: the archive's std::random_device (pulled in by std::logic_error's strings, never called)
# names arc4random, and the amd64 package would need glibc 2.36 instead of 2.35 (Ubuntu 22.04).
lld="$(dirname "$(readlink -f "$(command -v "$swift")")")/ld.lld"
[ -x "$lld" ] || { echo "release-build: this Swift toolchain has no ld.lld ($lld)" >&2; exit 1; }
flags="$flags -Xswiftc -use-ld=lld"
# The functions a run executes first, together (bench/symbol_order.py made the list from a profile): a start touched
# most of the 64-KiB windows of the code, and the kernel maps a whole window on each first touch (docs/benchmarks.md).
# scripts/text-layout.ld puts what has no name to order by (the compiler's unnamed helpers, .init) before them.
order="$top/scripts/symbol-order"
flags="$flags -Xlinker --symbol-ordering-file=$order -Xlinker --no-warn-symbol-ordering -Xlinker $top/scripts/text-layout.ld"
bin=$("$swift" build --package-path "$tree" $flags "$@" --show-bin-path)
mkdir -p "$bin"
ln -sf "$archive" "$bin/libstdc++.a"
"$swift" build --package-path "$tree" $flags "$@" >&2
if readelf -dW "$bin/beacond" | grep -q 'NEEDED.*libstdc++'; then
    echo "release-build: $bin/beacond still needs libstdc++.so.6: the linker did not take $bin/libstdc++.a" >&2
    exit 1
fi
# A stale list costs pages, not correctness: say how much of it the binary still has (regenerate it with
# `make symbol-order` when this falls well below all of it).
found=$(nm --defined-only "$bin/beacond" | awk '{ print $NF }' | LC_ALL=C sort -u | LC_ALL=C comm -12 - "$order" | wc -l)
echo "release-build: symbol order: $found of the $(wc -l < "$order") functions of scripts/symbol-order are in the binary" >&2
