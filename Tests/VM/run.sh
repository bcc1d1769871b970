#!/bin/sh
# The end-to-end VM test: beacond installed the way users install it, under real systemd (PID 1), driving a
# kernel-owned hci0 (BlueZ's emulated controller, btvirt), with and without bluetoothd.
#
#   sh Tests/VM/run.sh [BINARY]      BINARY: the release binary (default build/beacond; make release)
#
# Builds the guest image once and caches it outside the checkout (BEACOND_VM_CACHE, default
# /var/cache/beacond-vm), keyed by build-image.sh's content; boots it under qemu (KVM only where kvm_intel or
# kvm_amd is loaded, else TCG), runs the scenarios as a unit after boot, reads the results from a 9p share, and
# prints "N passed, N failed". Exits non-zero on any failure, a missing result or a timeout.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
binary=${1:-"$top/build/beacond"}
cache_root=${BEACOND_VM_CACHE:-/var/cache/beacond-vm}
timeout_s=${BEACOND_VM_TIMEOUT:-900}

for tool in debootstrap qemu-system-x86_64 mke2fs; do
    command -v "$tool" >/dev/null 2>&1 || { echo "vm: $tool is missing (apt-get install debootstrap qemu-system-x86 e2fsprogs)" >&2; exit 2; }
done
[ -x "$binary" ] || { echo "vm: no release binary at $binary (make release)" >&2; exit 2; }

key=$(sha256sum "$here/build-image.sh" | cut -c1-16)
image="$cache_root/$key"
if [ ! -f "$image/rootfs.ext4" ]; then
    echo "vm: building the guest image ($image)"
    start=$(date +%s)
    rm -rf "$image.tmp"
    sh "$here/build-image.sh" "$image.tmp"
    rm -rf "$image"
    mv "$image.tmp" "$image"
    echo "vm: image built in $(( $(date +%s) - start )) s"
else
    echo "vm: using cached guest image $image"
fi

# The payload share: the checkout (scripts, units, config, scenarios) and the binary under test.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src/build" "$work/out"
cp -r "$top/scripts" "$top/systemd" "$top/config" "$top/README.md" "$work/src/"
mkdir -p "$work/src/tests"
# The guest image runs tests/vm/guest-entry.sh from the share: keep that path inside the share.
cp -r "$here" "$work/src/tests/vm"
cp "$binary" "$work/src/build/beacond"

accel=tcg
if grep -qE '^(kvm_intel|kvm_amd) ' /proc/modules 2>/dev/null && [ -w /dev/kvm ]; then accel=kvm; fi
echo "vm: booting under qemu ($accel); timeout ${timeout_s} s"
start=$(date +%s)
status=0
timeout "$timeout_s" qemu-system-x86_64 -accel "$accel" -cpu max -m 1536 -smp 2 -no-reboot \
    -display none -monitor none -serial "file:$work/out/console.log" \
    -kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
    -append "root=/dev/vda rw console=ttyS0 panic=-1 loglevel=4 systemd.show_status=false" \
    -drive "file=$image/rootfs.ext4,if=virtio,format=raw,snapshot=on" \
    -virtfs "local,path=$work/src,mount_tag=src,security_model=none,readonly=on" \
    -virtfs "local,path=$work/out,mount_tag=out,security_model=none" || status=$?
echo "vm: qemu exited $status after $(( $(date +%s) - start )) s"

# Results: TAP lines from the guest, evidence files next to them.
results="$work/out/results.tap"
keep=${BEACOND_VM_ARTIFACTS:-"$top/build/vm-artifacts"}
rm -rf "$keep"
mkdir -p "$keep"
cp -r "$work/out/." "$keep/" 2>/dev/null || true
if [ ! -s "$results" ]; then
    echo "vm: FAILED: no results from the guest (console log and guest log in $keep)" >&2
    tail -n 40 "$work/out/console.log" >&2 || true
    tail -n 40 "$work/out/guest.log" >&2 || true
    echo "0 passed, 1 failed"
    exit 1
fi
cat "$results"
passed=$(grep -c '^ok ' "$results" || true)
failed=$(grep -c '^not ok ' "$results" || true)
if ! grep -q '^# done' "$results"; then
    echo "vm: the guest did not finish all scenarios (timeout or crash); logs in $keep" >&2
    failed=$((failed + 1))
fi
[ "$status" -eq 0 ] || { echo "vm: qemu failed or timed out (exit $status)" >&2; failed=$((failed + 1)); }
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
