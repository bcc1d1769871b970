#!/bin/sh
# The end-to-end VM test: beacond installed the way users install it (apt-get install ./beacond_….deb), under
# real systemd (PID 1), driving a kernel-owned hci0 (BlueZ's emulated controller, btvirt), with and without
# bluetoothd; then upgraded from a previous package with an edited conffile, and purged.
#
#   sh Tests/VM/run.sh [--arch amd64|arm64] DEB
#   sh Tests/VM/run.sh --image-only [--arch amd64|arm64]     only make sure the cached guest image exists
#   BEACOND_VM_ONLY="17 18" sh Tests/VM/run.sh DEB              scenario 0 and those only (says so loudly)
#   BEACOND_VM_FLEET=DIR sh Tests/VM/run.sh --arch amd64 DEB     the fleet guest: the fleet scenario (22) alone, the
#                                                                Ansible role against this guest (make vm-test-fleet,
#                                                                make test: beside the amd64 suite, in a guest of its own)
#
# amd64: a Debian 12 guest under qemu-system-x86_64. arm64: a Debian 13 guest under qemu-system-aarch64
# (-M virt -cpu cortex-a53: the oldest 64-bit Pi's core, so an ARMv8.1 instruction in the binary would trap).
# arm64-bookworm: the same arm64 package in a Debian 12 arm64 guest (glibc 2.36, libgcrypt 1.10, systemd 252, BlueZ
# 5.66, kernel 6.1), with the arm64 guest's scenarios.
# Builds the guest image once and caches it outside the checkout (BEACOND_VM_CACHE, default
# /var/cache/beacond-vm), keyed by build-image.sh's content and the architecture; boots it (KVM only for amd64
# where kvm_intel or kvm_amd is loaded, else TCG), runs the scenarios as a unit after boot, reads the results from
# a 9p share, and prints "N passed, N failed". Exits non-zero on any failure, a missing result or a timeout.
#
# The fleet scenario (amd64 only, in a guest of its own: it is a third of the amd64 suite's time and shares nothing
# with the other scenarios, so the two guests run side by side): the guest gets a network (qemu's user networking, its sshd forwarded to a loopback
# port of this machine) and registers in DIR; the suite starts Tests/VM/fleet.py, the control node, which waits until
# the guest is ready, runs the Ansible role against it over SSH, checks the results from its controller's side, and
# tells the guest it is done. The suite prints the fleet test's lines.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
arch=amd64
image_only=false
if [ "${1:-}" = --image-only ]; then image_only=true; shift; fi
if [ "${1:-}" = --arch ]; then arch=$2; shift 2; fi
if $image_only; then deb=""; else deb=${1:?usage: run.sh [--image-only] [--arch amd64|arm64] DEB}; fi
cache_root=${BEACOND_VM_CACHE:-/var/cache/beacond-vm}
# Generous: a whole suite takes 4 (amd64) or 6 (arm64) minutes here; a loaded machine may take several times that.
# The Debian architecture of the guest (arm64-bookworm is an arm64 guest of another release).
debarch=${arch%%-*}
timeout_s=${BEACOND_VM_TIMEOUT:-$([ "$debarch" = arm64 ] && echo 3000 || echo 2400)}

case $arch in
    amd64) qemu=qemu-system-x86_64; qemu_pkg=qemu-system-x86 ;;
    arm64|arm64-bookworm) qemu=qemu-system-aarch64; qemu_pkg=qemu-system-arm ;;
    *) echo "vm: --arch amd64, arm64 or arm64-bookworm, not $arch" >&2; exit 2 ;;
esac
for tool in debootstrap "$qemu" mke2fs dpkg-deb; do
    command -v "$tool" >/dev/null 2>&1 || { echo "vm: $tool is missing (apt-get install debootstrap $qemu_pkg e2fsprogs)" >&2; exit 2; }
done
if ! $image_only; then
    [ -f "$deb" ] || { echo "vm: no package at $deb (make deb)" >&2; exit 2; }
    [ "$(dpkg-deb -f "$deb" Architecture)" = "$debarch" ] || { echo "vm: $deb is not an $debarch package" >&2; exit 2; }
fi

key=$(sha256sum "$here/build-image.sh" | cut -c1-16)-$arch
image="$cache_root/$key"
# Every lock of this script is a file in the cache directory, opened as root under make test: so it must be a
# directory no one else can put a file in (not /tmp or /run/lock, where another user's symlink of a lock's name made
# root truncate the file it pointed to, on a machine with fs.protected_symlinks=0).
mkdir -p "$cache_root"
if [ -n "$(find "$cache_root" -maxdepth 0 \( -perm -0002 -o ! -user "$(id -u)" \))" ]; then
    echo "vm: $cache_root (BEACOND_VM_CACHE) is a directory others can write, or another user's: its locks and guest images would be theirs to replace; give one that only you can write (by default /var/cache/beacond-vm)" >&2
    exit 2
fi
# One builder at a time: a second run (the other architecture's suite in parallel, say) waits for it.
exec 8>"$image.lock"
flock 8
if [ ! -f "$image/rootfs.ext4" ]; then
    echo "vm: building the guest image ($image)"
    start=$(date +%s)
    rm -rf "$image.tmp"
    sh "$here/build-image.sh" "$image.tmp" "$arch"
    rm -rf "$image"
    mv "$image.tmp" "$image"
    echo "vm: image built in $(( $(date +%s) - start )) s"
else
    echo "vm: using cached guest image $image"
fi
flock -u 8
$image_only && exit 0

# BEACOND_VM_SLOT=NAME: one guest at a time per NAME (make test pairs the four guests on a machine of fewer than four
# cores). Emulated guests beside each other on two cores cost more CPU than the same guests one after another, not
# just more time: a vCPU thread descheduled while its guest holds a lock leaves the other spinning (docs/testing.md).
# Its lock is in the cache directory (above), beside the images' locks.
if [ -n "${BEACOND_VM_SLOT:-}" ]; then
    case $BEACOND_VM_SLOT in
        *[!A-Za-z0-9_-]*) echo "vm: BEACOND_VM_SLOT must be a name (letters, digits, '_' and '-'), not '$BEACOND_VM_SLOT'" >&2; exit 2 ;;
    esac
    exec 6>"$cache_root/slot-$BEACOND_VM_SLOT.lock"
    if ! flock -n 6; then
        echo "vm: waiting for guest slot $BEACOND_VM_SLOT (another guest has it)"
        waited=$(date +%s)
        flock 6
        echo "vm: guest slot $BEACOND_VM_SLOT after $(( $(date +%s) - waited )) s"
    fi
fi

# The payload share: the scenarios, the package under test, and a stand-in for the previous release.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src/packages" "$work/out"
mkdir -p "$work/src/tests"
# The guest image runs tests/vm/guest-entry.sh from the share: keep that path inside the share.
cp -r "$here" "$work/src/tests/vm"
cp "$deb" "$work/src/packages/current.deb"
# BEACOND_VM_ONLY="17 18": only those scenarios (and 0, which installs the package), for a quick look at a few.
if [ -n "${BEACOND_VM_ONLY:-}" ]; then
    echo "vm: only scenarios 0 $BEACOND_VM_ONLY (BEACOND_VM_ONLY): NOT the whole suite" >&2
    echo "$BEACOND_VM_ONLY" > "$work/src/only"
fi
sh "$here/repack.sh" "$deb" "$work/src/packages/previous.deb" 0.1.0 "$here/previous-beacond.conf"

fleet=${BEACOND_VM_FLEET:-}
if [ -n "$fleet" ] && [ "$arch" != amd64 ]; then
    echo "vm: the fleet scenario runs on the amd64 guest only; not on $arch" >&2
    fleet=""
fi
fleet_pid=""
netdev=""
if [ -n "$fleet" ]; then
    mkdir -p "$fleet" "$work/src/fleet"
    # How long the guest waits for the control node's key: the other suite may still be building its image.
    echo "${BEACOND_VM_FLEET_WAIT:-1500}" > "$work/src/fleet-enabled"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    netdev="-netdev user,id=net0,hostfwd=tcp:127.0.0.1:$port-:22 -device virtio-net-pci,netdev=net0"
    exec 7>"$fleet/lock"
    flock 7
    printf 'port=%s\nsrc=%s\nout=%s\ndeb=%s\n' "$port" "$work/src/fleet" "$work/out" "$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")" > "$fleet/$arch.host"
    trap 'touch "$fleet/$arch.gone"; rm -rf "$work"' EXIT
    if [ ! -e "$fleet/started" ]; then
        touch "$fleet/started"
        python=${BEACOND_VM_PYTHON:-"$top/.venv/bin/python"}
        [ -x "$python" ] || { echo "vm: the fleet test needs Ansible on this machine: no $python (make venv)" >&2; exit 2; }
        "$python" "$here/fleet.py" "$fleet" > "$fleet/fleet.log" 2>&1 6>&- &
        fleet_pid=$!
        echo "vm: started the fleet test's control node (Tests/VM/fleet.py, pid $fleet_pid); its log: $fleet/fleet.log"
    fi
    flock -u 7
    echo "vm: fleet scenario on: this guest's sshd is 127.0.0.1:$port"
fi

# The published repository, as users install from it (every suite guest; the fleet guest's role has its own): the
# sites the release's own publish step makes (scripts/publish.sh, signed with the throw-away key), one for each moment
# of scenario 0b, served over HTTP at the repository's address in the guest (10.0.2.100) by Tests/VM/repo-server.py,
# which qemu starts for each connection. restrict=on: the guest reaches that address and nothing else, no host port is
# opened. The README and its one base URL go in the share: the guest runs the README's install lines as written, with
# that URL replaced by this one.
repo_netdev=""
if [ -z "$fleet" ]; then
    sites="$work/sites"
    mkdir -p "$sites"
    cp "$top/README.md" "$top/deploy/apt/base-url" "$work/src/"
    version=$(dpkg-deb -f "$deb" Version)
    sh "$here/repack.sh" "$deb" "$work/next.deb" "$version+next1"
    publish() {
        REPO_URL=http://10.0.2.100 XDG_STATE_HOME="$work/key" sh "$top/scripts/publish.sh" "$@" 2>>"$work/out/publish.log"
    }
    # v1: this release. v2: the next one added the way a new release's workflow adds it (the pool and the indexes kept).
    # Each site's files an hour older than the next site's: apt asks for InRelease with If-Modified-Since, to the second,
    # and three sites made within one second would all be "not modified" (as they are not when releases are days apart).
    aged() { find "$1" -exec touch -h -d "@$(( $(date +%s) - $2 ))" {} +; }
    publish "$sites/v1" "$deb"
    aged "$sites/v1" 7200
    cp -a "$sites/v1" "$sites/v2"
    publish "$sites/v2" "$work/next.deb"
    aged "$sites/v2" 3600
    # tampered: v2 with one digit of an index's hash changed in InRelease's signed text (its signature left as it was).
    cp -a "$sites/v2" "$sites/tampered"
    python3 - "$sites/tampered/dists/stable/InRelease" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
i = re.search(r'^ [0-9a-f]{64} ', text, flags=re.M).start() + 1
open(sys.argv[1], 'w').write(text[:i] + ('0' if text[i] != '0' else '1') + text[i + 1:])
PY
    gpgconf --homedir "$work/key/beacond/repo-throwaway-gnupg" --kill gpg-agent 2>/dev/null || true
    repo_netdev="user,id=repo,restrict=on,guestfwd=tcp:10.0.2.100:80-cmd:python3 $here/repo-server.py $sites $work/out/repo-published $work/out/repo-requests.log"
    echo "vm: the repository (scripts/publish.sh: $version, then $version+next1, and a tampered copy) at http://10.0.2.100 in the guest"
fi

accel=tcg
if [ "$arch" = amd64 ] && grep -qE '^(kvm_intel|kvm_amd) ' /proc/modules 2>/dev/null && [ -w /dev/kvm ]; then accel=kvm; fi
# Virtual CPUs: one under TCG on a host of fewer than four cores, where the guests share the host's cores with the
# rest of make test: a second vCPU thread there mostly spins in the guest waiting for the first, descheduled by the
# host (the arm64 Debian 13 suite beside two busy loops: 115 s of CPU with two, 93 s with one, 157 and 170 s of wall).
# The fleet guest keeps two: Ansible's Python and the beacons' turns run at once there (docs/testing.md).
# BEACOND_VM_SMP overrides.
smp=2
if [ "$accel" = tcg ] && [ -z "$fleet" ] && [ "$(nproc 2>/dev/null || echo 1)" -lt 4 ]; then smp=1; fi
smp=${BEACOND_VM_SMP:-$smp}
echo "vm: booting $arch under qemu ($accel, $smp vCPU); timeout ${timeout_s} s"
start=$(date +%s)
status=0
# What every guest's kernel is told. Under TCG each switch of the page tables flushes qemu's emulated TLB: arm64's
# kernel forces KPTI on whenever KASLR is on (a switch at every system call), and mitigations add more; nokaslr kpti=0
# mitigations=off took a third to a half of the arm64 guests' CPU off (docs/testing.md). None of them changes what the
# kernel does with Bluetooth, sockets or systemd, which is what the scenarios test.
append="root=/dev/vda rw panic=-1 loglevel=4 systemd.show_status=false mitigations=off"
if [ "$debarch" = amd64 ]; then
    # TCG: x86-64's baseline (qemu64), as the arm64 guests are a Cortex-A53: an instruction beyond the package's
    # architecture would trap; glibc's AVX2 routines under emulation also cost 10 % more CPU than its SSE2 ones.
    cpu=qemu64
    [ "$accel" = kvm ] && cpu=max
    set -- "$qemu" -accel "$accel" -cpu "$cpu" -append "$append console=ttyS0"
else
    # The controller: Bumble on the host, behind a virtio console the guest attaches with btattach (host-controller.py
    # says why: Debian's arm64 kernel has no hci_vhci for btvirt).
    python=${BEACOND_VM_PYTHON:-"$top/.venv/bin/python"}
    [ -x "$python" ] || { echo "vm: arm64 needs Bumble on the host: no $python (make venv)" >&2; exit 2; }
    (cd "$work" && exec "$python" "$here/host-controller.py" "$work/bt.sock" "$work/out/heard-by-second-radio.txt") \
        > "$work/out/host-controller.log" 2>&1 6>&- &
    controller_pid=$!
    trap 'kill "$controller_pid" 2>/dev/null || true; [ -z "$fleet" ] || touch "$fleet/$arch.gone"; rm -rf "$work"' EXIT
    set -- "$qemu" -M virt -accel tcg,thread=multi -cpu cortex-a53 \
        -append "$append console=ttyAMA0 nokaslr kpti=0" \
        -device virtio-serial-pci -chardev "socket,id=bt,path=$work/bt.sock,server=on,wait=off" \
        -device virtconsole,chardev=bt,name=bt
fi
[ -z "$repo_netdev" ] || set -- "$@" -netdev "$repo_netdev" -device virtio-net-pci,netdev=repo
# shellcheck disable=SC2086
timeout "$timeout_s" "$@" $netdev -nodefaults -m 1536 -smp "$smp" -no-reboot \
    -display none -monitor none -serial "file:$work/out/console.log" \
    -kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
    -drive "file=$image/rootfs.ext4,if=none,id=disk,format=raw,snapshot=on" -device virtio-blk-pci,drive=disk \
    -fsdev "local,id=src,path=$work/src,security_model=none,readonly=on" -device virtio-9p-pci,fsdev=src,mount_tag=src \
    -fsdev "local,id=out,path=$work/out,security_model=none" -device virtio-9p-pci,fsdev=out,mount_tag=out || status=$?
echo "vm: qemu exited $status after $(( $(date +%s) - start )) s"
if [ "$debarch" = arm64 ]; then
    kill -TERM "$controller_pid" 2>/dev/null || true
    wait "$controller_pid" 2>/dev/null || true
fi
[ -z "$fleet" ] || touch "$fleet/$arch.gone"

# Results: TAP lines from the guest, evidence files next to them.
results="$work/out/results.tap"
keep=${BEACOND_VM_ARTIFACTS:-"$top/build/vm-artifacts-$arch${fleet:+-fleet}"}
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
    # The scenarios planned that have no result line: the ones that did not run.
    sed -n 's/^# plan: //p' "$results" | while IFS= read -r title; do
        grep -qF -- " - $title" "$results" || echo "vm: did not run: $title" >&2
    done
    failed=$((failed + 1))
fi
[ "$status" -eq 0 ] || { echo "vm: qemu failed or timed out (exit $status)" >&2; failed=$((failed + 1)); }
if [ "$debarch" = arm64 ]; then
    # Independent of the guest's btmon: Bumble's second radio on the host must have heard the scenarios' iBeacon.
    heard=$(grep -c ' 0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e0' "$keep/heard-by-second-radio.txt" 2>/dev/null || true)
    if [ "${heard:-0}" -gt 0 ]; then
        echo "ok - the host's second radio heard $heard distinct frames of the scenarios' iBeacon"
        passed=$((passed + 1))
    elif [ -n "${BEACOND_VM_ONLY:-}" ]; then
        # Not a pass: the scenarios that send that iBeacon may not have been among those chosen.
        echo "# NOT CHECKED: the host's second radio heard none of the scenarios' iBeacon frames, and only scenarios $BEACOND_VM_ONLY ran (BEACOND_VM_ONLY)"
    else
        echo "not ok - the host's second radio heard none of the scenarios' iBeacon frames ($keep/host-controller.log)"
        failed=$((failed + 1))
    fi
fi
if [ -n "$fleet_pid" ]; then
    # The control node this suite started: its lines join this suite's.
    fleet_status=0
    wait "$fleet_pid" || fleet_status=$?
    cp "$fleet/fleet.log" "$keep/fleet.log" 2>/dev/null || true
    cp -r "$fleet/ansible" "$keep/fleet-ansible" 2>/dev/null || true
    if [ -s "$fleet/results.tap" ]; then
        cat "$fleet/results.tap"
        passed=$((passed + $(grep -c '^ok ' "$fleet/results.tap" || true)))
        failed=$((failed + $(grep -c '^not ok ' "$fleet/results.tap" || true)))
    fi
    if [ "$fleet_status" -ne 0 ] && ! grep -q '^not ok ' "$fleet/results.tap" 2>/dev/null; then
        echo "not ok - the fleet test's control node exited $fleet_status ($keep/fleet.log):"
        tail -n 30 "$fleet/fleet.log" | sed 's/^/#   /'
        failed=$((failed + 1))
    fi
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
