"""Where libc is called from: SystemCalls only. The modules that wrap C libraries of their own (HCITransport's
Bluetooth sockets, SystemdSupport's sd-event and journal) take those libraries' constants from their own C modules,
and errno values and system calls from SystemCalls; the pure modules depend on none of them (docs/internals.md)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

SOURCES = Path(__file__).resolve().parents[2] / 'Sources'
PACKAGE = SOURCES.parent / 'Package.swift'


def target_dependencies() -> dict[str, list[str]]:
    """Package.swift's targets and their direct dependencies, read from its .target(name:, dependencies:) lines."""
    import re
    text = PACKAGE.read_text()
    out = {}
    for m in re.finditer(r'\.(?:target|executableTarget)\(name: "(\w+)"(?:, dependencies: \[([^\]]*)\])?', text):
        out[m.group(1)] = re.findall(r'"(\w+)"', m.group(2) or '')
    return out


def test_the_pure_modules_depend_on_no_system_module():
    """BeaconCore, HCIHost, Mgmt and DaemonCore (and BluetoothHCI under them) reach no system call, transport or
    libsystemd, directly or through another module: libm's pow comes from the header-only CMath (it came from
    SystemCalls)."""
    deps = target_dependencies()
    def closure(t, seen=None):
        seen = set() if seen is None else seen
        for d in deps.get(t, []):
            if d not in seen:
                seen.add(d)
                closure(d, seen)
        return seen
    for pure in ('SystemConditions', 'BluetoothHCI', 'BeaconCore', 'HCIHost', 'Mgmt', 'DaemonCore'):
        assert pure in deps, f'no target {pure} in Package.swift'
        bad = closure(pure) & {'SystemCalls', 'HCITransport', 'SystemdSupport', 'Connections', 'CSystemd', 'CBluetooth', 'CLinux'}
        assert not bad, f'{pure} depends on {sorted(bad)}'


def test_only_systemcalls_imports_glibc():
    offenders = sorted(str(f.relative_to(SOURCES)) for f in SOURCES.glob('*/*.swift')
                       if f.parent.name != 'SystemCalls' and 'import Glibc' in f.read_text().splitlines())
    assert offenders == [], f'these call libc directly; give SystemCalls the call or the constant instead: {offenders}'
    # As the issue puts it: grep -l 'import Glibc' Sources lists only Sources/SystemCalls.
    listed = subprocess.run(['grep', '-rl', '--include=*.swift', 'import Glibc', str(SOURCES)], capture_output=True, text=True).stdout.split()
    assert listed and all(Path(f).parent.name == 'SystemCalls' for f in listed), listed


def test_the_address_rules_are_written_once():
    """The mgmt rule (the kernel advertises a non-connectable beacon from an address it picks and rotates) and the
    telemetry-follows-UID rule live in BeaconCore/AddressPlan.swift; nothing else decides them again. Each format's
    address is one row of data (#52), in BeaconCore/FormatAddress.swift alone."""
    for phrase in ('picks and rotates', 'kernelCanGive(', 'address == .itsUIDs, b.address == nil'):
        users = sorted(str(f.relative_to(SOURCES)) for f in SOURCES.glob('*/*.swift') if phrase in f.read_text())
        owners = [u for u in users if u != 'BeaconCore/AddressPlan.swift']
        if phrase == 'kernelCanGive(':
            owners = [u for u in owners if u != 'BeaconCore/ConfigValidator.swift']  # the validator asks the plan
        assert 'BeaconCore/AddressPlan.swift' in users and owners == [], (phrase, users)
    rows = sorted(str(f.relative_to(SOURCES)) for f in SOURCES.glob('*/*.swift') if 'FormatAddressRule(address:' in f.read_text())
    assert rows == ['BeaconCore/FormatAddress.swift'], rows


def test_beacondapp_decides_nothing_about_statuses_and_events():
    """The shells carry commands; what a status or an event means is decided in the pure modules (HCIHost, Mgmt,
    DaemonCore), with unit tests. No BeacondApp file names a status or takes an event apart."""
    words = ('HCIStatus', 'MgmtStatus', '.leMeta(', '.hardwareError(', '.commandComplete(', '.commandStatus(', '.newSettings(',
             '.advertisingRemoved(', '.advertisingAdded(', '.indexRemoved', '.status(.', 'f.status ==', 'status == .')
    found = sorted(f'{f.name}: {w}' for f in (SOURCES / 'BeacondApp').glob('*.swift') for w in words if w in f.read_text())
    assert found == [], found


# What counts as a switch over failures in a shell: a `switch` on an error, an errno, a failure (`f`), a problem or
# its kind, or a close reason; a failure enum's own `switch self` (BeacondApp has no other); a case that takes a
# `.failure(` apart by its kinds; a `catch` that picks errors by a condition.
FAILURE_SWITCHES = (
    re.compile(r'\bswitch\s+(?:[\w.]+\.)?(?:error|errno|failure|f|problem|reason|kind|self)\s*\{'),
    re.compile(r'\bcase\s+\.failure\(\.'),
    re.compile(r'\bcatch\b[^{]*\bwhere\b'),
)

def failure_switches() -> dict[str, int]:
    found: dict[str, int] = {}
    for f in sorted((SOURCES / 'BeacondApp').glob('*.swift')):
        n = sum(1 for line in f.read_text().splitlines() for p in FAILURE_SWITCHES if p.search(line))
        if n:
            found[f.name] = n
    return found


def test_beacondapp_switches_over_no_failures():
    """Shells by rule (#45): what a failure means (which exit, which message, retry or not) is decided in the pure
    modules, with unit tests (HCIDecisions, MgmtDecisions, StartupExit, the Lifecycle); a BeacondApp file carries
    the decision out and switches over no failure's kinds."""
    assert failure_switches() == {}


def test_the_failure_switch_rule_sees_switches():
    """The rule's patterns catch what they are for (a rule that matches nothing would pass anything)."""
    samples = ('switch error {', 'switch e.errno {', 'let why: String = switch f {', 'switch p.kind {', 'case .failure(.step(let f)): x',
               '} catch let e as SystemError where e.errno == .noEntry {', 'switch reason {')
    assert all(any(p.search(s) for p in FAILURE_SWITCHES) for s in samples)
    assert not any(p.search('switch result {') or p.search('case .failure(let f):') for p in FAILURE_SWITCHES)
