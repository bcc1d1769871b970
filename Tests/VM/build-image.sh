#!/bin/sh
# Builds the minimal Debian guest for the VM test: systemd, udev, kmod, dbus, bluez (bluetoothd, btmon,
# hciconfig), bluez-test-tools (btvirt), python3, apt and init-system-helpers (the package is installed with
# apt-get), curl and sudo (the README's install lines, run verbatim against the repository served from the host, as
# on a stock Raspberry Pi OS, which has both), the Debian kernel and a small initramfs; on amd64, for the fleet scenario's guest, an Ansible-managed host
# as a Pi is one: openssh-server (not started at boot) and python3-apt (Ansible's apt module). The arm64 guests are
# no fleet hosts, and leave those two out: every package there is configured under qemu-user.
#   sh Tests/VM/build-image.sh OUTDIR [ARCH]   writes OUTDIR/rootfs.ext4, OUTDIR/vmlinuz, OUTDIR/initrd.img
# ARCH amd64 (the default): Debian 12 bookworm. ARCH arm64: Debian 13 trixie (kernel 6.12, BlueZ 5.82, what
# Raspberry Pi OS is based on now). ARCH arm64-bookworm: Debian 12 (kernel 6.1, BlueZ 5.66, glibc 2.36, systemd 252,
# what most Pis in the field run). Both arm64 guests are debootstrapped through trixie's qemu-aarch64
# (scripts/arm64-emulator.sh).
# The test payload (the package, the scenarios) is not in the image: it comes over 9p at run time, so the image
# only changes when this file does (run.sh caches it keyed by this file's hash and the architecture).
set -eu
out=$1
arch=${2:-amd64}
fleet_host=""
case $arch in
    amd64) suite=bookworm; kernel=linux-image-amd64; fleet_host=,openssh-server,python3-apt ;;
    arm64) suite=trixie; kernel=linux-image-arm64
           sh "$(dirname "$0")/../../scripts/arm64-emulator.sh" >/dev/null ;;
    arm64-bookworm) suite=bookworm; kernel=linux-image-arm64
           sh "$(dirname "$0")/../../scripts/arm64-emulator.sh" >/dev/null ;;
    *) echo "build-image: ARCH amd64, arm64 or arm64-bookworm, not $arch" >&2; exit 2 ;;
esac
# The Debian architecture (arm64-bookworm is an arm64 guest).
debarch=${arch%%-*}
mkdir -p "$out"
root="$out/root"
rm -rf "$root"

# The mirror this machine's apt already uses; no host name is written into the project.
mirror=$(apt-get indextargets --format '$(URI)' 2>/dev/null | sed -n 's|^\(.*\)/dists/bookworm/main/.*|\1/|p' | head -n 1)
if [ -z "$mirror" ]; then
    echo "build-image: cannot find a bookworm mirror in this machine's apt configuration" >&2
    exit 1
fi

# libgcrypt20: the package Depends on it (Eddystone-EID's AES); the guest has no network to fetch it at install.
debootstrap --variant=minbase --arch="$debarch" \
    --include=systemd,systemd-sysv,udev,kmod,dbus,bluez,bluez-test-tools,libsystemd0,libgcrypt20,python3,procps,init-system-helpers,initramfs-tools,zstd,curl,sudo$fleet_host \
    "$suite" "$root" "$mirror"

# A small initramfs: only what finds a virtio disk with ext4 on it.
echo 'MODULES=list' > "$root/etc/initramfs-tools/conf.d/beacond-vm.conf"
printf 'virtio_pci\nvirtio_mmio\nvirtio_blk\next4\n' >> "$root/etc/initramfs-tools/modules"
mount -t proc proc "$root/proc"
trap 'umount "$root/proc" 2>/dev/null || true' EXIT
DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -q --no-install-recommends "$kernel"
umount "$root/proc"
trap - EXIT
cp "$root"/boot/vmlinuz-* "$out/vmlinuz"
cp "$root"/boot/initrd.img-* "$out/initrd.img"

# Guest setup: a hostname, the root file system, no timers or services that only slow a test boot.
echo beacond-vm > "$root/etc/hostname"
echo '/dev/vda / ext4 rw,relatime 0 1' > "$root/etc/fstab"
for unit in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer man-db.timer dpkg-db-backup.timer \
            systemd-tmpfiles-clean.timer getty@tty1.service; do
    ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
# sshd only for the fleet scenario, which starts it (with the network) when it begins.
chroot "$root" systemctl disable ssh.service ssh.socket >/dev/null 2>&1 || true
mkdir -p "$root/mnt/src" "$root/mnt/out" "$root/etc/systemd/system/multi-user.target.wants"
# The test entry: mount the payload and results shares, run the payload's own entry script, power off.
cat > "$root/usr/local/sbin/vmtest-entry" <<'SH'
#!/bin/sh
modprobe -a 9p 9pnet_virtio 2>/dev/null
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro src /mnt/src
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out /mnt/out
sh /mnt/src/tests/vm/guest-entry.sh /mnt/src /mnt/out > /mnt/out/guest.log 2>&1
echo "vmtest-entry: guest-entry exited $?" > /dev/console
sync
systemctl poweroff --no-block
SH
chmod 0755 "$root/usr/local/sbin/vmtest-entry"
cat > "$root/etc/systemd/system/vmtest.service" <<'UNIT'
[Unit]
Description=beacond end-to-end test
After=multi-user.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/vmtest-entry
StandardOutput=journal+console
StandardError=journal+console
UNIT
ln -sf /etc/systemd/system/vmtest.service "$root/etc/systemd/system/multi-user.target.wants/vmtest.service"

# No mirror, package lists or bootstrap log left in the image.
rm -rf "$root/var/lib/apt/lists/"* "$root/var/cache/apt/"*.bin "$root/var/cache/apt/archives/"*.deb
rm -f "$root/etc/apt/sources.list" "$root/etc/apt/sources.list.d/"* "$root/var/log/bootstrap.log"
rm -rf "$root/debootstrap"

mke2fs -q -t ext4 -L root -d "$root" "$out/rootfs.ext4" 3G
rm -rf "$root"
echo "build-image: $(du -h "$out/rootfs.ext4" | cut -f1) rootfs (sparse), kernel $(basename "$(readlink -f "$out/vmlinuz")")"
