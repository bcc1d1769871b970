#!/bin/sh
# Runs inside the VM as root (from vmtest.service): the scenarios install the package as a user does (apt-get
# install ./beacond_….deb), exercise it, upgrade it and purge it.
set -u
src=$1
out=$2
echo "guest: $(uname -m), kernel $(uname -r), systemd $(systemctl --version | head -n 1), $(bluetoothd --version 2>/dev/null | sed 's/^/BlueZ /')"
# arm64: hvc0 is the controller's UART (Tests/VM/host-controller.py); systemd puts a getty on a virtio console,
# which would write a login prompt to the controller.
[ "$(uname -m)" = aarch64 ] && systemctl mask --runtime --now serial-getty@hvc0.service
modprobe -a "$([ "$(uname -m)" = aarch64 ] && echo hci_uart || echo hci_vhci)" af_alg algif_hash algif_skcipher cmac ecdh_generic
python3 "$src/tests/vm/scenarios.py" "$out" "$src/packages"
