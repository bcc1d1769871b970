"""Where libc is called from: SystemCalls, and the two modules that wrap C libraries of their own (HCITransport's
libbluetooth sockets, SystemdSupport's sd-event and journal). BeaconCore imports it for libm's pow (the distance
model). Every other module gets its system calls and constants from SystemCalls (docs/internals.md)."""
from __future__ import annotations

from pathlib import Path

SOURCES = Path(__file__).resolve().parents[2] / 'Sources'
MAY_IMPORT_LIBC = {'SystemCalls', 'HCITransport', 'SystemdSupport', 'BeaconCore'}


def test_only_the_system_modules_import_glibc():
    offenders = sorted(str(f.relative_to(SOURCES)) for f in SOURCES.glob('*/*.swift')
                       if f.parent.name not in MAY_IMPORT_LIBC and 'import Glibc' in f.read_text().splitlines())
    assert offenders == [], f'these call libc directly; give SystemCalls the call or the constant instead: {offenders}'


def test_beaconcore_takes_only_libm_from_libc():
    users = sorted(f.name for f in (SOURCES / 'BeaconCore').glob('*.swift') if 'import Glibc' in f.read_text().splitlines())
    assert users == ['Ranging.swift']
