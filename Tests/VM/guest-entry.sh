#!/bin/sh
# Runs inside the VM as root (from vmtest.service): the scenarios install the package as a user does (apt-get
# install ./beacond_….deb), exercise it, upgrade it and purge it.
set -u
src=$1
out=$2
echo "guest: $(uname -m), kernel $(uname -r), systemd $(systemctl --version | head -n 1), $(bluetoothd --version 2>/dev/null | sed 's/^/BlueZ /')"
modprobe -a hci_vhci af_alg algif_hash algif_skcipher cmac ecdh_generic
python3 "$src/tests/vm/scenarios.py" "$out" "$src/packages"
