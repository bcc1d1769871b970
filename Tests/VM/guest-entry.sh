#!/bin/sh
# Runs inside the VM as root (from vmtest.service): install beacond as a user does, then run the scenarios.
set -u
src=$1
out=$2
echo "guest: kernel $(uname -r), systemd $(systemctl --version | head -n 1)"
# /run is noexec in the guest; scripts run through sh, the binary is installed to /usr/bin.
sh "$src/scripts/install.sh" "$src/build/beacond"
modprobe -a hci_vhci af_alg algif_hash algif_skcipher cmac ecdh_generic
python3 "$src/tests/vm/scenarios.py" "$out"
