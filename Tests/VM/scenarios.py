#!/usr/bin/env python3
"""beacond end to end inside the VM: real kernel, systemd as PID 1, BlueZ's emulated controller (btvirt; on arm64 Bumble
over a UART, see CONTROLLER), with and
without bluetoothd. Evidence comes from a btmon capture of hci0 (the HCI commands the controller accepted, replayed
into the controller's advertising state) and from systemd (systemctl show, journalctl), never from beacond alone.

Writes TAP lines to OUT/results.tap and evidence files next to it.
"""
import json
import os
import re
import subprocess
import sys
import time

import btsnoop
from btsnoop import Snoop, refresh_pairs, replay

OUT = sys.argv[1]
PACKAGES = sys.argv[2]
ARM64 = os.uname().machine == 'aarch64'
# The guest's Debian release (bookworm, trixie).
RELEASE = next((l.split('=', 1)[1].strip().strip('"') for l in open('/etc/os-release') if l.startswith('VERSION_CODENAME=')), '')
SNOOP = '/var/tmp/hci.snoop'
CONF = '/etc/beacond/beacond.conf'
UUID = 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0'
# The amd64 guest's btvirt has no advertising sets (legacy advertising only, as every Raspberry Pi's radio): backend
# auto takes raw HCI there, beside bluetoothd or not. The arm64 guest's Bumble controller has sets: auto takes mgmt.
LEGACY_ONLY = not ARM64
AUTO_ONE = 'every 100 ms on hci0' if LEGACY_ONLY else 'mgmt instance'

tap = open(os.path.join(OUT, 'results.tap'), 'w', buffering=1)
counter = 0
failures = 0


def log(msg):
    print(f'[{time.monotonic():9.2f}] {msg}', flush=True)


def sh(cmd, check=False, timeout=120):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode:
        raise AssertionError(f'{cmd!r} exited {r.returncode}: {r.stderr.strip()} {r.stdout.strip()}')
    return r.stdout


def wait(pred, timeout, what, interval=0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f'timed out after {timeout} s waiting for {what}')
        time.sleep(interval)


def ibeacon(major=1, minor=1, power=-59):
    return (bytes.fromhex('0201061aff4c000215') + bytes.fromhex(UUID.replace('-', '')) + major.to_bytes(2, 'big')
            + minor.to_bytes(2, 'big') + power.to_bytes(1, 'big', signed=True))


def write_conf(minor=1, backend='auto', major=1, power=None):
    with open(CONF, 'w') as f:
        f.write(f'# written by the VM test\n[beacon]\nuuid = "{UUID}"\nmajor = {major}\nminor = {minor}\n'
                + (f'measured_power = {power}\n' if power is not None else '') + '\n'
                f'[advertising]\ninterval_ms = 100\n\n[controller]\ndevice = "hci0"\nbackend = "{backend}"\n')


def show(*props):
    out = sh(f'systemctl show beacond -p {",".join(props)}')
    return dict(line.split('=', 1) for line in out.splitlines() if '=' in line)


def status():
    return show('StatusText')['StatusText']


# ---- the controller's side: replay the btmon capture (btsnoop.py) ---------------------------------------------------

snoop = Snoop(SNOOP)


def on_air(expected, index=0):
    timeline, _ = replay(snoop.update(), index)
    return bool(timeline) and expected in timeline[-1][1]


def wait_on_air(expected, timeout=30, index=0):
    wait(lambda: on_air(expected, index), timeout, f'hci{index} advertising {expected.hex()} (btmon)')


def transitions(expected, since_us):
    """[(ts, True|False)] each time `expected` went on or off the air after since_us."""
    return btsnoop.transitions(snoop.update(), expected, since_us)


def now_us():
    return time.time_ns() // 1000


# ---- scenarios --------------------------------------------------------------------------------------------------------

def run(title, fn):
    global counter, failures
    counter += 1
    t0 = time.monotonic()
    log(f'scenario {counter}: {title}')
    try:
        note = fn() or ''
        tap.write(f'ok {counter} - {title}{" # " + note if note else ""}\n')
    except Exception as e:  # a failed check, a timeout, a tool that failed: all count as failures
        failures += 1
        tap.write(f'not ok {counter} - {title}\n')
        for line in f'{type(e).__name__}: {e}'.splitlines():
            tap.write(f'#   {line}\n')
        tap.write(f'#   StatusText: {status()}\n')
        for line in sh('journalctl -u beacond --no-pager -o cat -n 12').splitlines():
            tap.write(f'#   journal: {line}\n')
    log(f'scenario {counter} took {time.monotonic() - t0:.1f} s')


# amd64: BlueZ's emulated controller. arm64: Debian's arm64 kernel has no hci_vhci, so the controller is Bumble on
# the host, attached over a virtio console as a UART controller (hci_uart, H4), the way a Pi's radio is attached.
CONTROLLER = '/usr/bin/btattach -B /dev/hvc0 -P h4' if ARM64 else '/usr/bin/btvirt -l1 -L'


def btvirt_start():
    # arm64: the kernel sets the UART controller up after it appears, command by command over the emulated console;
    # on a loaded host one of those commands can time out, and then mgmt calls hci0 an invalid index until it is
    # attached again (what a re-plug does on a Pi). That is the harness's radio failing, not beacond: attach again,
    # and say so loudly. Setup is done when the kernel has made the controller's debugfs entries.
    for attempt in (1, 2, 3):
        sh(f'systemctl reset-failed btvirt 2>/dev/null; systemd-run --unit=btvirt {CONTROLLER}', check=True)
        wait(lambda: os.path.exists('/sys/class/bluetooth/hci0'), 20, 'hci0 to appear')
        if not ARM64 or not os.path.isdir('/sys/kernel/debug/bluetooth'):
            return
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if os.path.exists('/sys/kernel/debug/bluetooth/hci0/hci_version'):
                return
            time.sleep(0.2)
        log(f'HARNESS: THE KERNEL COULD NOT SET UP hci0 OVER THE EMULATED UART (attempt {attempt}): attaching it again; '
            f'dmesg: {sh("dmesg | grep -i hci0 | tail -n 3").strip()!r}')
        btvirt_stop()
    raise AssertionError('the kernel could not set up hci0 over the emulated UART, three times')


def btvirt_stop():
    sh('systemctl stop btvirt')
    wait(lambda: not os.path.exists('/sys/class/bluetooth/hci0'), 20, 'hci0 to disappear')


def bluetoothd(on):
    # Masked while off (a controller that appears pulls bluetooth.target in, which would start it). A mask or unmask
    # reloads systemd, several seconds under emulation: nothing is done when bluetoothd is as wanted already.
    state = sh('systemctl is-enabled bluetooth; systemctl is-active bluetooth').split()
    if on:
        if state[:1] != ['masked-runtime'] and state[-1:] == ['active']:
            return
        sh('systemctl unmask --runtime bluetooth; systemctl start bluetooth', check=True)
        wait(lambda: show_unit('bluetooth', 'ActiveState') == 'active', 20, 'bluetoothd')
    else:
        if state[:1] == ['masked-runtime'] and state[-1:] == ['inactive']:
            return
        sh('systemctl mask --runtime bluetooth; systemctl stop bluetooth')


def show_unit(unit, prop):
    return sh(f'systemctl show {unit} -p {prop} --value').strip()


def wait_advertising(fragment='', timeout=60):
    return wait(lambda: show('ActiveState')['ActiveState'] == 'active' and status().startswith('Advertising')
                and fragment in status() and status(), timeout, f'StatusText "Advertising…{fragment}" (now: {status()!r})')


def s1_hci_without_bluetoothd():
    bluetoothd(False)
    write_conf(backend='hci')
    # The package enabled and started the unit at install; the config changed since.
    assert show_unit('beacond', 'UnitFileState') == 'enabled', 'the package did not enable beacond.service'
    sh('systemctl restart beacond', check=True)
    st = wait_advertising(f'{UUID} major 1 minor 1 every 100 ms on hci0')
    wait_on_air(ibeacon())
    fields = sh('journalctl -u beacond -o json --no-pager')
    entries = [json.loads(l) for l in fields.splitlines() if l.startswith('{')]
    assert any(e.get('BEACON_UUID') == UUID and e.get('HCI_DEVICE') == 'hci0' for e in entries), 'no native journal fields'
    return f'{st} | {memory()}'


def memory():
    """The running unit's memory as the package's binary uses it on this guest's kernel (reported, not bounded: the
    bounds are the benchmark's, docs/benchmarks.md)."""
    pid = show('MainPID')['MainPID']
    def field(path, key):
        return next(int(l.split()[1]) for l in open(path) if l.startswith(key + ':')) / 1024
    return (f'peak RSS {field(f"/proc/{pid}/status", "VmHWM"):.1f} MiB, PSS {field(f"/proc/{pid}/smaps_rollup", "Pss"):.1f} MiB, '
            f'private dirty {field(f"/proc/{pid}/smaps_rollup", "Private_Dirty"):.1f} MiB')


def s1_auto_without_bluetoothd():
    write_conf(backend='auto')
    t0 = now_us()
    sh('systemctl restart beacond', check=True)
    st = wait_advertising(AUTO_ONE)
    wait_on_air(ibeacon())
    # Through mgmt on a controller without sets the kernel would send non-connectable advertising at its own
    # 100–150 ms, whatever the instance asked (100 ms here); auto takes raw HCI there instead. STATUS must say what
    # the controller was given.
    _, commands = replay(snoop.update())
    params = [p for ts, op, p, status in commands if op == 0x2006 and status == 0 and ts >= t0 and len(p) >= 4]
    assert params, 'no LE Set Advertising Parameters after the restart (btmon)'
    given = (params[-1][0] | params[-1][1] << 8, params[-1][2] | params[-1][3] << 8)
    if LEGACY_ONLY:
        assert given == (0x00A0, 0x00A0), f'backend auto on a legacy-only controller: the controller was given {given}, not the configured 100 ms'
    if given == (0x00A0, 0x00F0):
        assert '100–150 ms' in st, f'the kernel gave the controller 100–150 ms, STATUS says: {st}'
    else:
        assert f'every {given[0] * 0.625:g} ms' in st or given[0] != given[1], f'the controller was given {given}, STATUS says: {st}'
    return f'{st} | the controller was given min {given[0]:#06x} max {given[1]:#06x}'


def s1_auto_with_bluetoothd():
    bluetoothd(True)
    write_conf(backend='auto')
    sh('systemctl restart beacond', check=True)
    st = wait_advertising(AUTO_ONE)
    wait_on_air(ibeacon())
    return st


def s1e_mgmt_altbeacon_full_frame():
    # 31 bytes, the legacy maximum: the mgmt "send it twice" step cannot pad it, so its first copy is Flags alone.
    bluetoothd(True)
    with open(CONF, 'w') as f:
        f.write(f'[beacon]\nformat = "altbeacon"\nuuid = "{UUID}"\nmajor = 1\nminor = 9\nreserved = 7\n\n'
                '[controller]\ndevice = "hci0"\nbackend = "mgmt"\n')
    sh('systemctl restart beacond', check=True)
    st = wait_advertising('AltBeacon')
    expected = (bytes.fromhex('0201061bff1801beac') + bytes.fromhex(UUID.replace('-', '')) + (1).to_bytes(2, 'big')
                + (9).to_bytes(2, 'big') + (-59).to_bytes(1, 'big', signed=True) + bytes([7]))
    wait_on_air(expected)
    return st


def s1_hci_with_bluetoothd():
    write_conf(backend='hci')
    sh('systemctl restart beacond', check=True)
    st = wait(lambda: (s := status()) and (s.startswith('Advertising') or 'Failed' in s) and s, 60, 'a verdict')
    if st.startswith('Advertising'):
        wait_on_air(ibeacon())
        return 'advertises: ' + st
    assert re.search(r'\(0x[0-9A-F]{4}\) → .* \(0x[0-9A-F]{2}\)', st), f'unclear failure message: {st}'
    return 'refused with a clear message: ' + st


def reload_minor(backend, fragment):
    write_conf(backend=backend, minor=1)
    sh('systemctl restart beacond', check=True)
    wait_advertising(fragment)
    wait_on_air(ibeacon(minor=1))
    t0 = now_us()
    write_conf(backend=backend, minor=2)
    sh('systemctl reload beacond', check=True)
    wait_on_air(ibeacon(minor=2), 20)
    wait_advertising('minor 2')
    return disables_since(t0), t0


def disables_since(t0):
    """Every advertising disable (legacy or extended) and set removal the controller accepted after t0, but the
    refreshes' (a disable and at once the same enable)."""
    _, commands = replay(snoop.update())
    refreshes = refresh_pairs(commands)
    return [c for k, c in enumerate(commands) if k not in refreshes and c[0] >= t0 and c[3] == 0 and
            ((c[1] == 0x2039 and c[2][:1] == b'\x00') or (c[1] == 0x200A and c[2][:1] == b'\x00') or c[1] == 0x203C)]


def s2_reload_hci_data_in_place_and_a_new_identity_from_its_own_address():
    write_conf(backend='hci', minor=1)
    ts = now_us()
    sh('systemctl restart beacond', check=True)
    wait_advertising('every 100 ms')
    wait_on_air(ibeacon(minor=1))
    # A new measured power: the same beacon, its data changed in place.
    t0 = now_us()
    write_conf(backend='hci', minor=1, power=-65)
    sh('systemctl reload beacond', check=True)
    wait_on_air(ibeacon(minor=1, power=-65), 20)
    disables = disables_since(t0)
    assert not disables, f'advertising was disabled during a data-only reload: {[(hex(c[1]), c[2].hex()) for c in disables]}'
    before = address_of_each(ts, (ibeacon(minor=1), ibeacon(minor=1, power=-65)))
    # A new minor: another beacon to every receiver, so its own address (kept in the state directory).
    t1 = now_us()
    write_conf(backend='hci', minor=2)
    sh('systemctl reload beacond', check=True)
    wait_on_air(ibeacon(minor=2), 20)
    wait_advertising('minor 2')
    wait(lambda: address_of_each(t1, (ibeacon(minor=2),)), 20, 'minor 2 enabled from its address (btmon)')
    after = address_of_each(t1, (ibeacon(minor=2),))[ibeacon(minor=2)]
    old = set().union(*before.values())
    assert len(old) == 1 and len(after) == 1 and after != old, f'minor 1 from {old}, minor 2 from {after}'
    return f'measured power in place (no disable); minor 1 from {min(old)}, minor 2 from {min(after)}'


def s2_reload_new_minor_mgmt():
    # Through mgmt, beacond sends only Add Extended Advertising Data; what the kernel then sends to the controller is
    # the kernel's choice. Check the new bytes arrive, and report any disable the kernel made and how long it lasted.
    disables, t0 = reload_minor('mgmt', 'mgmt instance')
    if not disables:
        return 'the kernel updated the data without disabling advertising'
    tr = transitions(ibeacon(minor=1), t0)
    off = next((ts for ts, on in tr if not on), None)
    on = next((ts for ts, on in transitions(ibeacon(minor=2), t0) if on), None)
    gap = (on - off) / 1000 if off and on else 0
    # A generous bound (a loaded machine stretches everything under TCG); the figure itself is in the note.
    assert gap < 2000, f'the kernel left the beacon off the air for {gap:.0f} ms'
    return f'the kernel disabled and re-enabled advertising itself ({len(disables)} disable, {gap:.0f} ms without the beacon)'


def beacond_status_as_nobody(*args):
    """`beacond status --json` as an unprivileged user: (exit code, the object)."""
    r = subprocess.run(['runuser', '-u', 'nobody', '--', '/usr/bin/beacond', 'status', '--json', *args], capture_output=True, text=True, timeout=60)
    return r.returncode, json.loads(r.stdout)


def s3_broken_reload_keeps_beacon():
    # From a known file (the one 2b leaves; when run alone, 0's is another).
    write_conf(minor=2)
    sh('systemctl reload beacond', check=True)
    wait_on_air(ibeacon(minor=2), 20)
    with open(CONF) as f:
        good = f.read()
    with open(CONF, 'w') as f:
        f.write(good.replace('major = 1', 'major = -5'))
    # systemctl reload fails (ExecReload is beacond reload, which waits for the daemon's answer).
    r = subprocess.run(['systemctl', 'reload', 'beacond'], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0, f'systemctl reload of a broken file exited 0: {r.stdout} {r.stderr}'
    st = status()
    assert f'kept previous configuration: {CONF} has 1 error, on line 4' in st, st
    assert show('ActiveState')['ActiveState'] == 'active'
    assert on_air(ibeacon(minor=2)), 'the old beacon is not on the air any more'
    # The error text where systemctl's failure points: systemctl status shows the daemon's journal lines.
    shown = sh('systemctl status beacond --no-pager --lines=30')
    assert f'{CONF}:4:9: error: ' in shown and 'was refused' in shown, shown
    # beacond status, as a user with no privilege at all.
    code, st = beacond_status_as_nobody()
    (d,) = st['daemons']
    assert code == 1 and d['unit'] == 'beacond.service' and d['reload']['result'] == 'refused', st
    assert d['reload']['error_lines'] == [4] and all(b['on_air'] for b in d['beacons']), st
    # A good file: systemctl reload exits 0 once the new data is on the controller (btmon has it).
    with open(CONF, 'w') as f:
        f.write(good.replace('minor = 2', 'minor = 3'))
    t0 = now_us()
    sh('systemctl reload beacond', check=True)
    returned = now_us()
    wait_on_air(ibeacon(minor=3), 30)
    # btmon's own timestamp (the guest's clock, as now_us): the new data was on the controller before the reload returned.
    on = next((ts for ts, up in transitions(ibeacon(minor=3), t0) if up), None)
    assert on is not None and on <= returned, f'minor 3 on the air at {on}, systemctl reload returned at {returned}'
    code, st = beacond_status_as_nobody()
    assert code == 0 and st['ok'] and st['daemons'][0]['beacons'][0]['identity']['minor'] == 3, st
    with open(CONF, 'w') as f:
        f.write(good)
    sh('systemctl reload beacond', check=True)
    wait_on_air(ibeacon(minor=2), 30)
    return (f'broken: systemctl reload exited {r.returncode}, the error in systemctl status; good: the new data on the '
            f'controller (btmon) {(returned - on) / 1000:.0f} ms before systemctl reload returned; beacond status as nobody')


def adapter_check(user=None):
    """`beacond status --check --json` (as `user` when given): (exit code, the object)."""
    cmd = ['/usr/bin/beacond', 'status', '--check', '--json']
    if user:
        cmd = ['runuser', '-u', user, '--'] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return r.returncode, json.loads(r.stdout)


def s25_adapter_check():
    bluetoothd(True)
    write_conf(minor=2)
    sh('systemctl restart beacond', check=True)
    wait_on_air(ibeacon(minor=2))
    code, c = adapter_check()
    assert code == 0 and c['ok'], c
    assert c['bluetoothd']['running'] is True, c
    assert [x['device'] for x in c['controllers']] == ['hci0'] and c['controllers'][0]['up'] is True, c
    assert c['controllers'][0]['rfkill'] == {'soft': False, 'hard': False}, c
    if ARM64:
        # Bumble behind hci_uart: a controller with advertising sets; backend auto keeps the kernel's instances.
        assert c['mgmt']['advertising_sets'] is True and c['hci']['extended_advertising'] is True and c['hci']['sets'] > 1, c
        assert c['run']['backend'] == 'mgmt' and c['run']['family'] == 'extended', c
        seen = f"extended: {c['hci']['sets']} sets, {c['mgmt']['instances']} kernel instances, run: mgmt"
    else:
        # btvirt: legacy-only, the Pi's case: backend auto leaves mgmt for raw HCI beside bluetoothd.
        assert c['mgmt']['advertising_sets'] is False and c['hci']['extended_advertising'] is False, c
        assert c['run']['backend'] == 'hci' and c['run']['family'] == 'legacy' and 'no advertising sets' in c['run']['why'], c
        seen = f"legacy-only: {c['mgmt']['instances']} kernel instances, run: raw HCI"
    # As a user with no privilege: the controllers, rfkill, bluetoothd and the kernel's controller information.
    ucode, u = adapter_check('nobody')
    assert u['controllers'] == c['controllers'] and u['bluetoothd'] == c['bluetoothd'], u
    assert u['mgmt'] is not None and u['mgmt']['bluetooth_version'] == c['mgmt']['bluetooth_version'], u
    assert u['hci'] is None and 'CAP_NET_RAW' in (u['hci_error'] or ''), u
    assert u['mgmt']['advertising_sets'] is None and any('root only' in n for n in u['run']['notes']), u
    # A soft rfkill block (what 'rfkill block bluetooth' writes), then lifted.
    soft = sh('ls -d /sys/class/bluetooth/hci0/rfkill*/soft').split()[0]
    sh(f'echo 1 > {soft}', check=True)
    try:
        bcode, blocked = adapter_check()
    finally:
        sh(f'echo 0 > {soft}', check=True)
    assert bcode == 1 and blocked['controllers'][0]['rfkill']['soft'] is True, blocked
    assert any('soft-blocked' in p and 'rfkill unblock bluetooth' in p for p in blocked['problems']), blocked
    sh('hciconfig hci0 up')
    wait_on_air(ibeacon(minor=2), 60)
    return f'{seen}; as nobody: exit {ucode}, no LE answers (CAP_NET_RAW); rfkill soft block: exit 1 with what to do'


def gap_after(action, expected, timeout=30):
    """(off, on): when `expected` first went off the air after the action and when it came back; (None, None) when it
    never went off within the timeout."""
    t0 = now_us()
    action()
    def back():
        tr = transitions(expected, t0)
        off = next((ts for ts, on in tr if not on), None)
        on = next((ts for ts, on in tr if on and off is not None and ts >= off), None)
        return (off, on) if on else None
    try:
        return wait(back, timeout, 'the beacon back on the air')
    except AssertionError:
        if any(not on for ts, on in transitions(expected, t0)):
            raise
        return None, None


def s4_bluetoothd_restart():
    write_conf(backend='auto', minor=2)
    sh('systemctl reload beacond', check=True)
    # The reload settled first (a new minor is a new identity: a restart of the advertiser from its own address).
    wait_on_air(ibeacon(minor=2))
    wait_advertising('minor 2')
    t0 = now_us()
    off, on = gap_after(lambda: sh('systemctl restart bluetooth', check=True), ibeacon(minor=2))
    if off is None:
        return 'the instance was never off the air'
    # bluetoothd powers the controller off when it stops and removes every instance when it starts; what beacond
    # answers for is the time from that removal (the last Advertising Removed the kernel reported, a management
    # event in the capture) to its instance being on the air again.
    # The controller is usable again at the last of: the instance removal (management event Advertising Removed)
    # and the device being opened again (monitor "Open Index") before the beacon came back.
    back = [ts for ts, idx, op, pkt in snoop.update() if t0 <= ts <= on and
            (op == 8 or (op == 17 and len(pkt) >= 6 and pkt[4] | pkt[5] << 8 == 0x0024))]
    since = max(back + [off])
    reaction = (on - since) / 1e6
    # Event-driven, so normally milliseconds (the note says how many); only a missed event (waiting for a retry of the
    # backoff instead) or no recovery at all comes near the bound, which leaves room for a loaded machine.
    assert reaction <= 10.0, f'back {reaction:.3f} s after the controller was usable again (bound 10 s)'
    return (f'back {reaction * 1000:.0f} ms after the controller was usable again; off the air {(on - off) / 1000:.0f} ms '
            'in all, bluetoothd\'s power cycle included')


def s5_controller_gone_and_back():
    if not on_air(ibeacon(minor=2)):  # 4 leaves it so; where 4 does not run (arm64), set it up here
        write_conf(backend='auto', minor=2)
        sh('systemctl restart beacond', check=True)
        wait_on_air(ibeacon(minor=2), 30)
    btvirt_stop()
    wait(lambda: 'hci0' in status() and ('Waiting' in status() or 'retrying' in status()), 30, 'a waiting STATUS')
    waiting = status()
    t0 = now_us()
    btvirt_start()
    wait_on_air(ibeacon(minor=2), 30)
    snoop.update()
    new_index = next(ts for ts, idx, op, _ in snoop.records if op == 0 and ts >= t0)
    on = next(ts for ts, now in transitions(ibeacon(minor=2), t0) if now)
    back = (on - new_index) / 1e6
    # As in 4: the kernel's "registered" event brings it back at once; the bound leaves room for a loaded machine.
    assert back <= 10.0, f'advertising back {back:.3f} s after hci0 returned (bound 10 s)'
    # And hciconfig down / up.
    sh('hciconfig hci0 down', check=True)
    wait(lambda: not on_air(ibeacon(minor=2)), 20, 'advertising off after hciconfig down')
    sh('hciconfig hci0 up', check=True)
    wait_on_air(ibeacon(minor=2), 30)
    wait_advertising()
    return f'back {back * 1000:.0f} ms after hci0 returned; STATUS meanwhile: {waiting}'


def s6_boot_order():
    sh('systemctl stop beacond', check=True)
    btvirt_stop()
    try:
        sh('systemctl start beacond', check=True)  # Type=notify: returns once READY=1 arrived
        assert show('ActiveState')['ActiveState'] == 'active'
        # Each retry probes again ("Probing hci0 through the management interface" for a moment, longer on a loaded
        # host: a CI run read it there once), then waits again.
        st = wait(lambda: (lambda s: s if 'Waiting for hci0 to appear' in s else None)(status()), 10,
                  'STATUS "Waiting for hci0 to appear"')
    finally:
        # The controller back whatever happened: without it every later scenario failed too.
        btvirt_start()
    wait_on_air(ibeacon(minor=2), 30)
    wait_advertising()
    return st


def s7_stop_disables_first():
    t0 = now_us()
    sh('systemctl stop beacond', check=True)
    exit_ts = show('ExecMainExitTimestampMonotonic')  # also fetched to make sure the unit recorded an exit
    exit_wall = sh('systemctl show beacond -p ExecMainExitTimestamp --value --timestamp=us+utc').strip()
    m = re.search(r'(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\.(\d{6}) UTC', exit_wall)
    assert m, f'no exit timestamp: {exit_wall!r} {exit_ts}'
    import calendar
    exit_us = calendar.timegm(time.strptime(m.group(1), '%Y-%m-%d %H:%M:%S')) * 1_000_000 + int(m.group(2))
    off = [ts for ts, now in transitions(ibeacon(minor=2), t0) if not now]
    assert off, 'the beacon was never taken off the air'
    assert off[0] <= exit_us, f'advertising went off {(off[0] - exit_us) / 1000:.1f} ms after the process exited'
    return f'off the air {(exit_us - off[0]) / 1000:.1f} ms before the process exited'


def s8_watchdog():
    os.makedirs('/run/systemd/system/beacond.service.d', exist_ok=True)
    with open('/run/systemd/system/beacond.service.d/watchdog.conf', 'w') as f:
        f.write('[Service]\nWatchdogSec=4s\nRestartSec=1s\n')
    sh('systemctl daemon-reload && systemctl start beacond', check=True)
    wait_on_air(ibeacon(minor=2), 30)
    restarts = int(show('NRestarts')['NRestarts'])
    pid = show('MainPID')['MainPID']
    os.kill(int(pid), 19)  # SIGSTOP: the loop stops, and with it the WATCHDOG=1 pings
    wait(lambda: int(show('NRestarts')['NRestarts']) > restarts, 90, 'systemd to restart the frozen daemon')
    journal = sh('journalctl -u beacond --no-pager -o cat')
    assert 'Watchdog timeout' in journal or 'watchdog' in journal.lower(), 'no watchdog timeout in the journal'
    wait_advertising(timeout=60)
    wait_on_air(ibeacon(minor=2), 30)
    os.remove('/run/systemd/system/beacond.service.d/watchdog.conf')
    sh('systemctl daemon-reload', check=True)
    return f'restarted (NRestarts {restarts} -> {show("NRestarts")["NRestarts"]})'


def switched_off_behind(backend, fragment, command, back_within):
    """beacond on the air with `backend`, then another program sends `command` (hcitool: advertising off behind
    beacond's and the kernel's back): when the beacon left the air and came back (btmon, µs), and the journal since."""
    write_conf(backend=backend, minor=3)
    sh('systemctl restart beacond', check=True)
    wait_advertising(fragment)
    wait_on_air(ibeacon(minor=3))
    t0 = now_us()
    sh(command, check=True)
    wait(lambda: [t for t in transitions(ibeacon(minor=3), t0) if not t[1]], 10, 'the beacon taken off the air')
    wait(lambda: [t for t in transitions(ibeacon(minor=3), t0) if t[1]], back_within, 'the beacon back on the air')
    tr = transitions(ibeacon(minor=3), t0)
    off = next(ts for ts, on in tr if not on)
    on = next(ts for ts, on in tr if on and ts >= off)
    return off, on, sh(f'journalctl -u beacond --no-pager -o cat --since @{t0 // 1_000_000}')


def s10_foreign_disable_is_undone():
    # Another program (the classic recipe) switches advertising off behind beacond's back.
    off, on, journal = switched_off_behind('hci', 'minor 3', 'hcitool -i hci0 cmd 0x08 0x000a 00', 10)
    assert 'Another program sent LE Set Advertising Enable (0x200A) to hci0; re-applying the beacon' in journal
    return f'back on the air {(on - off) / 1000:.0f} ms after another program disabled it'


def s10b_mgmt_air_is_checked():
    # Advertising switched off behind the kernel's back: its instance stays registered, as after a kernel pause that
    # does not end (bluetooth-next PR #792). The legacy advertiser on the legacy-only guest, every set on the other.
    off, on, journal = switched_off_behind(
        'mgmt', 'mgmt instance', 'hcitool -i hci0 cmd 0x08 0x000a 00' if LEGACY_ONLY else 'hcitool -i hci0 cmd 0x08 0x0039 00 00', 15)
    put_back = 'was told to stop advertising' in journal
    wait_advertising('mgmt instance')
    if LEGACY_ONLY:
        # Without sets the kernel gives each instance 2 s turns and enables it again at each, even the only one:
        # it puts the beacon back itself, and beacond must not step in.
        assert not put_back, f'back {(on - off) / 1000:.0f} ms after the disable; put back by beacond: {put_back}'
        return f'back on the air {(on - off) / 1000:.0f} ms after the disable, by the kernel\'s own 2 s turn (beacond did not step in)'
    # With sets the kernel enables an instance once: nothing but beacond's watch brings it back.
    assert put_back and 2_500_000 <= on - off <= 20_000_000, f'back {(on - off) / 1000:.0f} ms after the disable; put back by beacond: {put_back}'
    return f'back on the air {(on - off) / 1000:.0f} ms after every set was switched off behind the kernel (the watch waits 3 s)'


def s24_unanswering_controller_is_power_cycled():
    # A controller that answers nothing, as a Pi's radio in its "command tx timeout" lock-up: btvirt stopped
    # (SIGSTOP). It answers again only once the kernel has closed the device, as a radio whose lock-up only a power
    # cycle ends: nothing but beacond taking hci0 down and up again brings the beacon back.
    bluetoothd(True)
    write_conf(backend='auto', minor=6)
    sh('systemctl restart beacond', check=True)
    wait_advertising(AUTO_ONE)
    wait_on_air(ibeacon(minor=6))
    pid = int(show_unit('btvirt', 'MainPID'))
    t0 = now_us()
    os.kill(pid, 19)  # SIGSTOP
    try:
        closed = wait(lambda: next((ts for ts, idx, op, _ in snoop.update() if op == 9 and ts >= t0), None), 60,
                      'the kernel to close hci0 (btmon: Close Index)')
    finally:
        os.kill(pid, 18)  # SIGCONT
    wait_on_air(ibeacon(minor=6), 60)
    on = next(ts for ts, now in transitions(ibeacon(minor=6), closed) if now)
    journal = sh(f'journalctl -u beacond --no-pager -o cat --since @{t0 // 1_000_000}')
    assert 'answered nothing 2 times in a row: taking hci0 down and up again' in journal, journal[-1500:]
    wait_advertising(AUTO_ONE)
    return (f'hci0 closed {(closed - t0) / 1e6:.1f} s after the controller stopped answering, the beacon back on the air '
            f'{(on - closed) / 1e6:.1f} s after that')


def s11_capabilities_for_mgmt():
    sh('systemctl stop beacond', check=True)
    def run_without_net_admin(backend, unit):
        write_conf(backend=backend, minor=4)
        # A state directory of its own: beacond refuses the service's, which belongs to another (dynamic) user.
        sh(f'systemctl reset-failed {unit} 2>/dev/null; systemd-run --unit={unit} -p DynamicUser=yes -p StateDirectory={unit} '
           '-p AmbientCapabilities=CAP_NET_RAW -p CapabilityBoundingSet=CAP_NET_RAW '
           '/usr/bin/beacond run --config /etc/beacond/beacond.conf', check=True)
    # backend = "mgmt" without CAP_NET_ADMIN: a clear exit 77 naming the capability.
    run_without_net_admin('mgmt', 'beacond-nocap')
    wait(lambda: show_unit('beacond-nocap', 'ActiveState') in ('failed', 'inactive'), 30, 'the forced mgmt run to exit')
    status = show_unit('beacond-nocap', 'ExecMainStatus')
    journal = sh('journalctl -u beacond-nocap --no-pager -o cat')
    assert status == '77', f'exit status {status}: {journal[-500:]}'
    assert 'CAP_NET_ADMIN' in journal, journal[-500:]
    # backend = "auto" without CAP_NET_ADMIN: falls back to raw HCI (CAP_NET_RAW is enough) and advertises.
    run_without_net_admin('auto', 'beacond-nocap-auto')
    wait_on_air(ibeacon(minor=4), 30)
    journal = sh('journalctl -u beacond-nocap-auto --no-pager -o cat')
    assert 'backend auto falls back to raw HCI commands' in journal, journal[-800:]
    sh('systemctl stop beacond-nocap-auto')
    write_conf(backend='auto', minor=2)
    sh('systemctl start beacond', check=True)
    return 'mgmt: exit 77 naming CAP_NET_ADMIN; auto: fell back to raw HCI and advertised'


def s12_mgmt_stop_while_powered_off_leaves_nothing():
    # The kernel keeps an advertising instance through a power cycle. If beacond is stopped while the adapter is off,
    # the instance must still be removed, or the kernel puts the beacon back on the air at the next power-on while
    # beacond is not running.
    write_conf(backend='mgmt', minor=5)
    sh('systemctl restart beacond', check=True)
    wait_advertising('mgmt instance')
    wait_on_air(ibeacon(minor=5))
    sh('btmgmt --index 0 power off', check=True)
    wait(lambda: not on_air(ibeacon(minor=5)), 20, 'the beacon off the air after power off')
    wait(lambda: 'powered' in status(), 20, f'a STATUS that waits for power (now {status()!r})')
    sh('systemctl stop beacond', check=True)
    t0 = now_us()
    sh('btmgmt --index 0 power on', check=True)
    time.sleep(3)
    came_back = [ts for ts, on in transitions(ibeacon(minor=5), t0) if on]
    info = sh('btmgmt --index 0 advinfo')
    assert not came_back, f'the beacon came back on the air {(came_back[0] - t0) / 1000:.0f} ms after power-on with beacond stopped; advinfo: {info}'
    # The stop itself removed the instance (through a moment of power when the kernel refuses it powered off).
    journal = sh('journalctl -u beacond --no-pager -o cat -n 20').split('Received SIGTERM')[-1]
    assert 'Advertising instance 5 removed on hci0' in journal or 'to remove advertising instance 5, and off again' in journal, journal[-600:]
    write_conf(backend='auto', minor=2)
    sh('systemctl start beacond', check=True)
    wait_on_air(ibeacon(minor=2), 30)
    return 'nothing on the air after power-on; ' + ' '.join(l.strip() for l in info.splitlines() if 'nstance' in l)[:120]


def s9_privilege():
    pid = show('MainPID')['MainPID']
    fields = dict(l.split(':', 1) for l in open(f'/proc/{pid}/status').read().splitlines() if ':' in l)
    uid = int(fields['Uid'].split()[1])
    caps = {k: int(fields[k].strip(), 16) for k in ('CapEff', 'CapPrm', 'CapBnd', 'CapAmb', 'CapInh')}
    want = (1 << 12) | (1 << 13)  # CAP_NET_ADMIN, CAP_NET_RAW
    assert uid != 0, 'runs as root'
    for k in ('CapEff', 'CapPrm', 'CapBnd', 'CapAmb'):
        assert caps[k] == want, f'{k} = {caps[k]:#x}, want {want:#x}'
    online = sh('systemd-analyze security beacond --no-pager | tail -n 1')
    offline = sh('systemd-analyze security --offline=true /usr/lib/systemd/system/beacond.service --no-pager | tail -n 1')
    level = lambda s: re.search(r'(\d+\.\d)', s).group(1)
    assert level(online) == level(offline), f'online {online!r} vs offline {offline!r}'
    assert float(level(online)) <= 1.5, online
    return f'uid {uid}, CapEff {caps["CapEff"]:#x}, exposure {level(online)}'


# ---- the package: fresh install, purge, upgrade -----------------------------------------------------------------------

APT = 'DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends'
# What the system itself changes while the scenarios run, not the package: logs, apt's and dpkg's own books,
# bluetoothd's and systemd's state, caches, the test's captures.
NOISE = re.compile(r'^/(proc|sys|dev|run|tmp|mnt)(/|$)|^/var/(log|tmp|cache|backups)(/|$)|^/var/lib/(apt|dpkg|bluetooth|ucf)(/|$)'
                   r'|^/var/lib/systemd/(timers|random-seed|catalog|coredump|rfkill|backlight|pstore|linger)(/|$)'
                   r'|^/etc/ld\.so\.cache$|^/root/\.')


def snapshot():
    out = sh('find / -xdev -print 2>/dev/null', timeout=300)
    return {p for p in out.splitlines() if not NOISE.search(p)}


BASELINE = None


def dpkg_version():
    return sh("dpkg-query -W -f='${Status} ${Version}' beacond 2>/dev/null").strip()


# ---- the published repository (run.sh serves it at REPO; Tests/VM/repo-server.py) ---------------------------------

REPO = 'http://10.0.2.100'
SRC = os.path.dirname(PACKAGES)
REPO_FILES = ('/etc/apt/sources.list.d/beacond.sources', '/etc/apt/keyrings/beacond-archive-keyring.gpg')


def readme_install_lines():
    """The README's install lines as written (the indented block after its `<!-- install -->` mark), with the one
    base URL (deploy/apt/base-url) replaced by where run.sh serves the repository: nothing else changed."""
    base = open(os.path.join(SRC, 'base-url')).read().strip()
    readme = open(os.path.join(SRC, 'README.md')).read()
    assert '<!-- install -->' in readme, 'the README has no install lines (no <!-- install --> mark)'
    block = readme.split('<!-- install -->', 1)[1].lstrip('\n').split('\n\n', 1)[0]
    lines = [l.strip() for l in block.splitlines() if l.strip()]
    assert lines and all(l.startswith('sudo ') or l.startswith('curl ') for l in lines), block
    assert sum(base in l for l in lines) >= 2, f'the install lines do not fetch from {base}: {lines}'
    return [l.split('  #', 1)[0].strip().replace(base, REPO) for l in lines]


def publish(site):
    """A new site on the repository's address, as a new release's workflow run publishes one."""
    with open(os.path.join(OUT, 'repo-published'), 'w') as f:
        f.write(site + '\n')


def network_up():
    """The guest's one network: qemu's, restricted to the repository's address (run.sh)."""
    os.makedirs('/run/systemd/network', exist_ok=True)
    with open('/run/systemd/network/20-vm.network', 'w') as f:
        f.write('[Match]\nName=en* eth*\n\n[Network]\nDHCP=ipv4\n')
    sh('systemctl start systemd-networkd', check=True)
    wait(lambda: '10.0.2.' in sh('cat /proc/net/fib_trie'), 60, 'an address from qemu')


def s0_fresh_install_waits_for_a_uuid():
    global BASELINE
    bluetoothd(False)
    network_up()
    BASELINE = snapshot()
    since = now_us()
    # As a user does on a stock system: the README's lines, one after another, nothing answered (stdin is empty: a
    # prompt would fail the line).
    out = ''
    for line in readme_install_lines():
        r = subprocess.run(line, shell=True, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
        out += f'$ {line}\n{r.stdout}{r.stderr}'
        assert r.returncode == 0, f'{line!r} exited {r.returncode}: {(r.stdout + r.stderr)[-800:]}'
    assert dpkg_version().startswith('install ok installed'), out[-800:]
    policy = sh('apt-cache policy beacond')
    assert f'{REPO} stable/main' in policy, policy
    assert show_unit('beacond', 'UnitFileState') == 'enabled', 'not enabled on install'
    st = wait(lambda: show('ActiveState')['ActiveState'] == 'active' and status().startswith('Not advertising') and status(),
              30, f'an active unit whose STATUS says it is not advertising (now {status()!r})')
    assert f"'beacond gen-uuid --set {CONF}'" in st, st
    check = sh(f'beacond check-config')
    assert 'no beacon yet' in check, check
    time.sleep(2)
    timeline, commands = replay(snoop.update())
    ours = [c for c in commands if c[0] >= since]
    assert not ours, f'beacond sent HCI commands without a uuid: {[hex(c[1]) for c in ours]}'
    # The user sets a UUID and reloads: the beacon goes on the air with it.
    uuid = sh(f'beacond gen-uuid --set {CONF}', check=True).strip()
    sh('systemctl reload beacond', check=True)
    st = wait_advertising(uuid)
    expected = bytes.fromhex('0201061aff4c000215' + uuid.replace('-', '')) + (1).to_bytes(2, 'big') * 2 + (-59).to_bytes(1, 'big', signed=True)
    wait_on_air(expected)
    # The package's pages and description come from the binary's command table and schema (scripts/man.py).
    for page in ('/usr/share/man/man8/beacond.8.gz', '/usr/share/man/man5/beacond.conf.5.gz'):
        assert os.path.exists(page), f'{page} is missing'
    names = json.loads(sh('beacond check-config --schema', check=True))['formatNames']
    description = ' '.join(sh("dpkg-query -W -f='${Description}' beacond", check=True).split())
    assert all(n in description for n in names), f'the package description does not name every format {names}: {description}'
    return f'{len(readme_install_lines())} README lines installed {dpkg_version().split()[-1]} from the repository; {st[:60]}…; man pages and a description naming {len(names)} formats'


def apt_update():
    """`sudo apt update` as the README's troubleshooting rows quote it: (exit status, what it printed)."""
    r = subprocess.run('sudo apt update', shell=True, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


def unit_starts(cursor):
    """The start jobs systemd finished for beacond.service since the journal cursor (its own "Started" messages)."""
    entries = [json.loads(l) for l in sh(f"journalctl --after-cursor='{cursor}' -u beacond.service -o json").splitlines() if l.startswith('{')]
    return [e.get('MESSAGE', '') for e in entries if e.get('JOB_TYPE') == 'start' and e.get('JOB_RESULT') == 'done']


def s0b_repository_upgrade_tamper_expiry():
    """What a user of the repository lives through after the install: a new release published, then `sudo apt update
    && sudo apt upgrade`; an InRelease altered on its way; an index no one re-signed. The beacon and the edited config
    are scenario 0's."""
    conf = open(CONF).read()
    uuid = re.search(r'^uuid = "([0-9A-F-]+)"', conf, flags=re.M).group(1)
    expected = bytes.fromhex('0201061aff4c000215' + uuid.replace('-', '')) + (1).to_bytes(2, 'big') * 2 + (-59).to_bytes(1, 'big', signed=True)
    wait_on_air(expected)
    before = dpkg_version().split()[-1]
    pid = show('MainPID')['MainPID']
    cursor = sh('journalctl -n 1 --show-cursor -o cat').strip().splitlines()[-1].split('-- cursor: ', 1)[1]
    publish('v2')

    def upgrade():
        r = subprocess.run('sudo apt update && sudo apt upgrade -y', shell=True, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f'apt upgrade exited {r.returncode} (a conffile prompt reads an empty stdin): {(r.stdout + r.stderr)[-800:]}'
    off, on = gap_after(upgrade, expected, timeout=60)
    after = dpkg_version().split()[-1]
    assert after == before + '+next1', f'{before} → {after}'
    assert open(CONF).read() == conf, 'the edited config was not kept'
    assert not os.path.exists(CONF + '.dpkg-dist') and not os.path.exists(CONF + '.dpkg-old'), 'dpkg offered a config it should not have'
    new_pid = wait(lambda: (lambda p: p not in ('0', pid) and p)(show('MainPID')['MainPID']), 30, 'a new main process')
    wait_on_air(expected)
    starts = wait(lambda: unit_starts(cursor), 10, "systemd's message that it started beacond.service")
    assert len(starts) == 1, f'beacond.service was started {len(starts)} times by the upgrade, not once: {starts}'
    gap = (on - off) / 1e6 if off else 0.0
    # Only a restart may be off the air: the old process kept the beacon on the air while dpkg unpacked the new binary
    # (a stop in prerm would take it off before). The binary's ctime is when dpkg put it in place.
    unpacked = os.stat('/usr/bin/beacond').st_ctime_ns // 1000
    assert not off or off >= unpacked, \
        f'the beacon went off the air {(unpacked - off) / 1e6:.3f} s before the new binary was unpacked: the upgrade stopped beacond, not only restarted it'
    # The bound is on beacond and its unit, not on the emulator: what of the gap the guest stood still (its vCPU
    # starved by a loaded host, with_stall_probe) is left out. A guest merely slowed down (TCG beside the integration
    # tests and three other guests: 2.3 and 3.9 s in cold CI runs, 0.60–0.64 s idle, the exec alone 1.3 s against
    # 0.4) is measured by the same restart right after, as postinst does it (daemon-reload, deb-systemd-invoke): the
    # upgrade may cost at most 2 s, or 2.5 times that restart. One restart is one sample of a guest whose pace a loaded
    # host sets: a warm CI run measured 2.886 s against 2.204 s, a cold one 10.316 s against 5.642 s, the same commands
    # each time with the guest busier with dpkg's writes. A stop before the unpack fails above, whatever the timing.
    own = btsnoop.beyond_stalls((off, on), btsnoop.read_stalls(STALLS)) / 1000 if off else 0.0
    # Where the gap went, for a failure: the unit's journal around it, in seconds from the beacon's leaving the air.
    unit_log = [(int(t.split('.')[0]) * 1e6 + int((t.split('.') + ['0'])[1].ljust(6, '0')[:6]) - off, m) for t, m in
                (line.split(' ', 1) for line in sh(f'journalctl -u beacond --no-pager -o short-unix --since=@{int(off // 1_000_000) - 3}').splitlines()
                 if line[:1].isdigit() and ' ' in line)] if off else []
    r_off, r_on = gap_after(lambda: sh('systemctl --system daemon-reload && deb-systemd-invoke restart beacond.service', check=True),
                            expected, timeout=60)
    restart = btsnoop.beyond_stalls((r_off, r_on), btsnoop.read_stalls(STALLS)) / 1000 if r_off else 0.0
    assert own <= 2.0 or own <= restart * 2.5, \
        (f'the beacon was off the air {gap:.3f} s across the upgrade, {own:.3f} s of it while the guest ran (at most 2 s, or 2.5 times the same restart\'s {restart:.3f} s); '
         f'the unit meanwhile: ' + '; '.join(f'{us / 1e6:+.3f} s {m.split(": ", 1)[-1][:100]}' for us, m in unit_log if us <= gap * 1e6 + 1e6))

    # An InRelease altered between the site and the host: apt refuses it, says so and goes on with the index it had
    # (a warning: `apt update` itself exits 0 there).
    publish('tampered')
    policy = sh('apt-cache policy beacond')
    code, out = apt_update()
    refused = next((l for l in out.splitlines() if 'BADSIG' in l and REPO in l), '').strip()
    assert refused and 'The repository is not updated and the previous index files will be used' in out, f'apt took a tampered InRelease (exit {code}): {out[-800:]}'
    assert sh('apt-cache policy beacond') == policy, 'apt changed its index after a tampered InRelease'

    # The index no one re-signed: its 30 days of Valid-Until past (the host's clock moved on 31 days, then back).
    publish('v2')
    real = time.time()
    t0 = time.monotonic()
    sh(f'date -s @{int(real + 31 * 86400)}', check=True)
    try:
        code, out = apt_update()
    finally:
        sh(f'date -s @{int(real + time.monotonic() - t0)}', check=True)
    expired = next((l for l in out.splitlines() if 'expired' in l), '').strip()
    assert code != 0 and expired and REPO in expired, f'apt did not say the index of {REPO} expired (exit {code}): {out[-800:]}'
    code, out = apt_update()
    assert code == 0, f'apt update with the clock back: exit {code}: {out[-600:]}'
    return (f'{before} → {after} by apt upgrade, no prompt, the edited config kept, started once (pid {pid} → {new_pid}), '
            f'off the air {gap:.3f} s, after the unpack ({own:.3f} s while the guest ran; the same restart right after: {restart:.3f} s); tampered: {refused[:90]}; expired: {expired[:110]}')


def s13_purge_leaves_nothing():
    sh('beacond gen-uuid --set /etc/beacond/beacond.conf --replace', check=True)  # an edited conffile, as a user leaves it
    sh('cp /etc/beacond/beacond.conf /etc/beacond/hci1.conf', check=True)  # and a file of their own
    since = now_us()
    out = sh('DEBIAN_FRONTEND=noninteractive apt-get purge -y -q beacond 2>&1', check=True, timeout=300)
    assert 'beacond' not in sh('dpkg-query -W -f="${Package}\n" 2>/dev/null').split(), out[-600:]
    # The repository the user added with the README's lines is theirs: purge leaves it. Then it goes, by hand.
    kept = [p for p in REPO_FILES if os.path.exists(p)]
    assert kept == list(REPO_FILES), f'purge removed the repository the user added: only {kept} left'
    for p in REPO_FILES:
        os.remove(p)
    assert show_unit('beacond', 'LoadState') == 'not-found', show_unit('beacond', 'LoadState')
    left = sorted(snapshot() - BASELINE)
    assert not left, f'left behind after purge: {left[:20]}'
    assert not [p for p in os.listdir('/var/lib/dpkg/info') if p.startswith('beacond.')], 'dpkg still has beacond files'
    time.sleep(1)
    timeline, _ = replay(snoop.update())
    assert timeline and not [d for d in timeline[-1][1] if d], f'still on the air after purge: {timeline[-1][1]}'
    return f'{len(BASELINE)} paths before install, the same after purge'


def second_adapter_instance():
    """beacond@hci1 on a second emulated controller, beside beacond.service: both active and on the air, each with its
    own state directory. Returns the instance's main PID. amd64 only (the arm64 kernel has no hci_vhci)."""
    sh('systemctl reset-failed btvirt1 2>/dev/null; systemd-run --unit=btvirt1 /usr/bin/btvirt -l1 -L', check=True)
    wait(lambda: os.path.exists('/sys/class/bluetooth/hci1'), 20, 'hci1 to appear')
    with open('/etc/beacond/hci1.conf', 'w') as f:
        f.write(f'[beacon]\nuuid = "{UUID}"\nmajor = 1\nminor = 9\n\n[controller]\nbackend = "hci"\n')
    sh('systemctl reset-failed beacond@hci1 2>/dev/null; systemctl start beacond@hci1')
    # Active, or failed at least once (Restart= then keeps it "activating"): either way the answer is in.
    wait(lambda: show_unit('beacond@hci1', 'ActiveState') == 'active' or show_unit('beacond@hci1', 'Result') != 'success',
         60, 'beacond@hci1 to start')
    result = show_unit('beacond@hci1', 'Result') + ' ' + show_unit('beacond@hci1', 'ExecMainStatus')
    assert show_unit('beacond@hci1', 'ActiveState') == 'active', f'beacond@hci1 beside beacond.service: {result}'
    wait_on_air(ibeacon(minor=9), 30, index=1)
    wait_on_air(ibeacon(minor=7), 30, index=0)
    # Each unit its own state directory, side by side (beacond.service here advertises through mgmt: no address).
    assert os.path.isdir('/var/lib/private/beacond'), 'no state directory for beacond.service'
    assert os.path.exists('/var/lib/private/beacond-hci1/addresses'), 'no /var/lib/private/beacond-hci1/addresses'
    return show_unit('beacond@hci1', 'MainPID')


def s14_upgrade_keeps_the_edited_conffile():
    out = sh(f'{APT} {PACKAGES}/previous.deb 2>&1', check=True, timeout=300)
    assert dpkg_version() == 'install ok installed 0.1.0', dpkg_version() + out[-400:]
    write_conf(minor=7)  # the user's edit
    edited = open(CONF).read()
    sh('systemctl reload beacond', check=True)
    wait_on_air(ibeacon(minor=7))
    instance_before = None if ARM64 else second_adapter_instance()
    before = show('MainPID', 'ExecMainStartTimestampMonotonic')
    out = sh(f'{APT} -o Dpkg::Options::=--force-confold {PACKAGES}/current.deb 2>&1', check=True, timeout=300)
    current = sh(f'dpkg-deb -f {PACKAGES}/current.deb Version', check=True).strip()
    assert dpkg_version() == f'install ok installed {current}', dpkg_version() + out[-400:]
    assert open(CONF).read() == edited, 'the edited conffile was not kept'
    dist = CONF + '.dpkg-dist'
    assert os.path.exists(dist), f'no {dist}: dpkg did not see the default change ({out[-400:]})'
    after = wait(lambda: (lambda a: a['MainPID'] not in ('0', before['MainPID']) and a)(show('MainPID', 'ExecMainStartTimestampMonotonic')),
                 30, 'a new main process')
    wait_advertising('minor 7')
    wait_on_air(ibeacon(minor=7))
    note = ''
    if instance_before:
        # The running instance got the new binary too.
        instance_after = wait(lambda: (lambda p: p not in ('0', instance_before) and p)(show_unit('beacond@hci1', 'MainPID')),
                              30, f'a new main process for beacond@hci1 (still {instance_before})')
        wait_on_air(ibeacon(minor=9), 30, index=1)
        # beacond status finds both units, each from its own runtime directory.
        code, st = wait(lambda: (r := beacond_status_as_nobody()) and r[0] == 0 and len(r[1]['daemons']) == 2 and r, 30,
                        'beacond status to list beacond.service and beacond@hci1')
        units = {d['unit']: d for d in st['daemons']}
        assert set(units) == {'beacond.service', 'beacond@hci1.service'}, st
        assert units['beacond@hci1.service']['state_file'] == '/run/beacond-hci1/state.json', st
        assert units['beacond@hci1.service']['beacons'][0]['identity']['minor'] == 9, st
        code1, one = beacond_status_as_nobody('--device', 'hci1')
        assert code1 == 0 and [d['unit'] for d in one['daemons']] == ['beacond@hci1.service'], one
        sh('systemctl stop beacond@hci1; systemctl stop btvirt1; rm -f /etc/beacond/hci1.conf')
        note = f'; beacond@hci1 beside it, pid {instance_before} → {instance_after}'
    return f'0.1.0 → {dpkg_version().split()[-1]}, pid {before["MainPID"]} → {after["MainPID"]}, edit kept, new default in .dpkg-dist{note}'


# ---- several beacons ----------------------------------------------------------------------------------------------

ALT = (bytes.fromhex('0201061bff1801beac') + bytes.fromhex(UUID.replace('-', '')) + (2).to_bytes(2, 'big')
       + (3).to_bytes(2, 'big') + (-59).to_bytes(1, 'big', signed=True) + bytes([0]))
EDDY = (bytes.fromhex('0201060303aafe1716aafe00') + (-18).to_bytes(1, 'big', signed=True)
        + bytes.fromhex('00112233445566778899') + bytes.fromhex('a1b2c3d4e5f6') + b'\x00\x00')
THREE = (f'[[beacon]]\nuuid = "{UUID}"\nmajor = 1\nminor = 1\n\n'
         f'[[beacon]]\nformat = "altbeacon"\nuuid = "{UUID}"\nmajor = 2\nminor = 3\n\n'
         '[[beacon]]\nformat = "eddystone-uid"\nnamespace = "00112233445566778899"\ninstance = "a1b2c3d4e5f6"\n\n')


def settled_commands(timeout=2.0):
    """replay's commands once the capture does not end in the middle of a refresh (its disable captured, its enable
    not yet: a slower guest showed one, read as a disable the reload should not have made)."""
    deadline = time.monotonic() + timeout
    while True:
        _, commands = replay(snoop.update())
        last = commands[-1] if commands else None
        if last is None or not (last[1] in (0x200A, 0x2039) and last[2][:1] == b'\x00') or time.monotonic() > deadline:
            return commands
        time.sleep(0.05)


def leaving_one_beacon(fn):
    """Runs a several-beacons scenario, then puts back the single-beacon file the later scenarios start from, passed
    or failed."""
    def go():
        try:
            return fn()
        finally:
            write_conf(backend='auto', minor=2)
            sh('systemctl restart beacond')
    return go


def ever_on_air(expected, since_us):
    """`expected` was on the air at some moment after since_us (on already then, or put on after)."""
    return btsnoop.ever_on(replay(snoop.update())[0], expected, since_us)


def random_addresses(since_us, frames):
    """(frame, random address) each time advertising with one of `frames` was enabled after since_us: the last
    LE Set Random Address the controller accepted before a legacy enable, and each set's LE Set Advertising Set
    Random Address before its enable; most significant byte first. (The kernel enables its own advertising, and sets
    random addresses of its own: only what went out with these frames counts.)"""
    _, commands = replay(snoop.update())
    fmt = lambda b: ':'.join(f'{x:02X}' for x in reversed(b))
    legacy, legacy_data, sets, set_data, out = None, b'', {}, {}, []
    for ts, op, p, st in commands:
        if st != 0:
            continue
        if op == 0x2005 and len(p) >= 6:
            legacy = fmt(p[:6])
        elif op == 0x2008 and p:
            legacy_data = bytes(p[1:1 + p[0]])
        elif op == 0x2035 and len(p) >= 7:
            sets[p[0]] = fmt(p[1:7])
        elif op == 0x2037 and len(p) >= 4:
            set_data[p[0]] = bytes(p[4:4 + p[3]])
        elif ts >= since_us and op == 0x200A and p[:1] == b'\x01' and legacy_data in frames:
            out.append((legacy_data, legacy or 'public'))
        elif ts >= since_us and op == 0x2039 and p[:1] == b'\x01' and len(p) >= 2:
            handles = [p[2 + 4 * k] for k in range(p[1]) if 2 + 4 * k < len(p)]
            out += [(set_data[h], sets.get(h, 'public')) for h in handles if set_data.get(h) in frames]
    return out


def legacy_addresses(since_us, until_us, frames, own=None, raced=None):
    """frame → the addresses (MSB first, or 'public') it was on the air from between since_us and until_us, from every
    accepted command the capture has (the kernel's and beacond's): the legacy advertiser's data, enable, own address
    type (LE Set Advertising Parameters) and random address (LE Set Random Address, whoever wrote it).
    With `own` (beacond's addresses) and a list `raced`: an enable whose random address another program wrote after
    beacond wrote one of `own` since the last disable (the kernel starting its scan between a time slice's address and
    its enable, which no host sharing a controller can exclude: the enable was already out) is left out of the result
    and appended to `raced` as (frame, address, µs on the air from it)."""
    _, commands = replay(snoop.update())
    fmt = lambda b: ':'.join(f'{x:02X}' for x in reversed(b))
    state = {'random': None, 'own': 0, 'data': b'', 'on': False, 'race': False}
    written = []  # the random addresses written since the last disable
    out, since = {}, None
    def close(ts):
        if since is not None and state['on'] and state['data'] in frames and ts > since_us and since < until_us:
            address = fmt(state['random']) if state['own'] == 1 and state['random'] else 'public'
            if state['race'] and raced is not None:
                raced.append((state['data'], address, min(ts, until_us) - max(since, since_us)))
            else:
                out.setdefault(state['data'], set()).add(address)
    for ts, op, p, st in commands:
        if st != 0 or op not in (0x2005, 0x2006, 0x2008, 0x200A):
            continue
        close(ts)
        since = ts
        if op == 0x2005 and len(p) >= 6:
            state['random'] = bytes(p[:6])
            written.append(fmt(p[:6]))
        elif op == 0x2006 and len(p) >= 6:
            state['own'] = p[5]
        elif op == 0x2008 and p:
            state['data'] = bytes(p[1:1 + p[0]])
        elif op == 0x200A and p:
            state['on'] = p[0] == 1
            state['race'] = bool(state['on'] and own and state['own'] == 1 and written and written[-1] not in own
                                 and any(a in own for a in written[:-1]))
            if not state['on']:
                written = []
    close(until_us)
    return out


def kernel_random_addresses(since_us, until_us):
    """The addresses the kernel wrote with LE Set Random Address between since_us and until_us (the btmon capture
    has no sender; beacond's own are its static ones, kept in the state directory)."""
    _, commands = replay(snoop.update())
    fmt = lambda b: ':'.join(f'{x:02X}' for x in reversed(b))
    return {fmt(p[:6]) for ts, op, p, st in commands if op == 0x2005 and st == 0 and since_us <= ts <= until_us and len(p) >= 6}


def address_of_each(since_us, frames):
    """frame → the set of random addresses it went out from after since_us."""
    by = {}
    for frame, address in random_addresses(since_us, frames):
        by.setdefault(frame, set()).add(address)
    return by


def kept_addresses(path):
    """The state directory's addresses file: identity → address."""
    out = {}
    for line in open(path).read().splitlines():
        if line and not line.startswith('#'):
            address, key = line.split(' ', 1)
            out[key] = address
    return out


def s15_mgmt_three_beacons_beside_bluetoothd():
    bluetoothd(True)
    with open(CONF, 'w') as f:
        f.write(THREE + '[controller]\ndevice = "hci0"\nbackend = "mgmt"\n')
    t0 = now_us()
    sh('systemctl restart beacond', check=True)
    st = wait_advertising('3 beacons')
    assert '3 instances' in st, st
    for frame in (ibeacon(), ALT, EDDY):
        wait(lambda: ever_on_air(frame, t0), 30, f'{frame.hex()[:24]}… on the air (btmon)')
    journal = sh('journalctl -u beacond --no-pager -o cat --since=-2min')
    assert all(f'Beacon {k} of 3: ' in journal for k in (1, 2, 3)), 'no journal line per beacon'
    # For the record (the README's "Address" says what the kernel does per instance): the random address each frame
    # went out from, as the kernel told the controller (btmon), over a few seconds.
    time.sleep(6)
    kernel = {f.hex()[:14]: sorted(a) for f, a in address_of_each(t0, (ibeacon(), ALT, EDDY)).items()}
    # For the record only: on the arm64 guest (a controller with 240 sets) btmgmt advinfo did not finish in 120 s.
    info = sh('timeout 15 btmgmt --index 0 advinfo', timeout=30)
    return f'{st} | kernel-chosen addresses per frame: {kernel} | {" ".join(info.split())[:160]}'


def s16_hci_three_beacons_each_from_its_own_static_address():
    bluetoothd(False)
    with open(CONF, 'w') as f:
        f.write(THREE + '[controller]\ndevice = "hci0"\nbackend = "hci"\n')
    t0 = now_us()
    sh('systemctl restart beacond', check=True)
    st = wait_advertising('3 beacons')
    for frame in (ibeacon(), ALT, EDDY):
        wait(lambda: ever_on_air(frame, t0), 30, f'{frame.hex()[:24]}… on the air (btmon)')
    frames = (ibeacon(), ALT, EDDY)
    wait(lambda: len(address_of_each(t0, frames)) == 3, 30, 'each beacon enabled from its address (btmon)')
    # The three beacons' entries (earlier scenarios' beacons keep theirs in the same file).
    kept = {k: a for k, a in kept_addresses('/var/lib/beacond/addresses').items()
            if k in (f'ibeacon {UUID} 1 1', f'altbeacon {UUID} 2 3', 'eddystone-uid 00112233445566778899 a1b2c3d4e5f6')}
    assert len(kept) == 3 and all(re.fullmatch(r'[C-F][0-9A-F](:[0-9A-F]{2}){5}', a) for a in kept.values()), \
        f'not three random static addresses: {kept}'
    first = address_of_each(t0, frames)
    assert all(len(a) == 1 for a in first.values()) and len({min(a) for a in first.values()}) == 3, \
        f'not one address per beacon: {first}'
    assert {min(a) for a in first.values()} == set(kept.values()), f'the controller was given {first}, the state directory keeps {kept}'
    # The same address per beacon after a restart with the file reordered (and it is the one in StateDirectory=,
    # private to the dynamic user).
    blocks = ['[[beacon]]' + b for b in THREE.split('[[beacon]]')[1:]]
    with open(CONF, 'w') as f:
        f.write(''.join(reversed(blocks)) + '[controller]\ndevice = "hci0"\nbackend = "hci"\n')
    t1 = now_us()
    sh('systemctl restart beacond', check=True)
    wait_advertising('3 beacons')
    wait(lambda: len(address_of_each(t1, frames)) == 3, 30, 'advertising enabled again after the restart')
    again = address_of_each(t1, frames)
    assert again == first, f'after the restart with the file reordered: {again}, before {first}'
    assert os.path.islink('/var/lib/beacond') or os.path.isdir('/var/lib/private/beacond'), 'not systemd\'s StateDirectory'
    # Remove one beacon: the other two stay on the air, the removed one goes.
    with open(CONF, 'w') as f:
        f.write(THREE.split('[[beacon]]\nformat = "altbeacon"')[0] + '[[beacon]]\nformat = "eddystone-uid"'
                + THREE.split('[[beacon]]\nformat = "eddystone-uid"')[1] + '[controller]\ndevice = "hci0"\nbackend = "hci"\n')
    t2 = now_us()
    sh('systemctl reload beacond', check=True)
    st2 = wait_advertising('2 beacons')
    time.sleep(2)
    assert not ever_on_air(ALT, now_us() - 1_500_000), 'the removed AltBeacon is still on the air'
    assert ever_on_air(ibeacon(), now_us() - 1_500_000) and ever_on_air(EDDY, now_us() - 1_500_000), 'the others left the air'
    commands = settled_commands()
    # Extended sets: no disable but the removed beacon's and the refreshes'. (On a legacy-only controller each time
    # slice restarts the one advertiser from its beacon's own address, so a legacy disable is every slot's.)
    refreshes = refresh_pairs(commands)
    disables = [c for k, c in enumerate(commands) if k not in refreshes and c[0] >= t2 and c[3] == 0 and c[1] == 0x2039
                and c[2][:1] == b'\x00' and not (len(c[2]) >= 3 and c[2][1] == 1 and c[2][2] == 1)]
    assert not disables, f'the reload disabled what it should not have: {[(hex(c[1]), c[2].hex()) for c in disables]}'
    return f'{st} | after removing one: {st2} | addresses {sorted(kept.values())}, each beacon\'s the same after a restart with the file reordered'


STALL_PROBE = r"""
import sys, time
# Wakes every 10 ms and writes each wake-up that came 10 ms late or more: a time the guest did not run (the host
# starved its vCPUs), when beacond, the emulated controller and btmon stood still too. (At Nice=-10 it runs before
# them whenever the guest runs at all; from 30 ms late, as it was, a loaded host's many shorter stalls went uncounted
# and one beacon's gap in VM scenario 23 measured 400.3 ms of 408 against its 400.)
# Lateness is measured on the monotonic clock and written in the wall clock's terms (btmon's): a step of the wall
# clock (scenario 0b sets it 31 days ahead and back) is no stall.
out = open(sys.argv[1], 'w', buffering=1)
prev = time.monotonic()
while True:
    time.sleep(0.01)
    now, wall = time.monotonic(), time.time()
    if now - prev >= 0.02:
        out.write(f'{int((wall - (now - prev) + 0.01) * 1e6)} {int(wall * 1e6)}\n')
    prev = now
"""
STALLS = '/run/stalls'


def with_stall_probe(fn):
    """Runs a scenario with the stall probe running, passed or failed; its result line says how long the guest stood
    still in all."""
    def go():
        with open('/run/stall-probe.py', 'w') as f:
            f.write(STALL_PROBE)
        sh(f'rm -f {STALLS}; systemctl reset-failed stall-probe 2>/dev/null; '
           f'systemd-run --unit=stall-probe -p Nice=-10 /usr/bin/python3 /run/stall-probe.py {STALLS}', check=True)
        try:
            line = fn()
        finally:
            sh('systemctl stop stall-probe')
        stalls = btsnoop.read_stalls(STALLS)
        return f'{line} | the guest stood still {len(stalls)} times, {sum(e - s for s, e in stalls) / 1000:.0f} ms in all'
    return go


def longest_gaps(frames, since, until):
    """Each frame's longest time off the air in the window, less what of it the guest stood still (the stall probe)
    and the controller had a command of beacond's (the emulated controller and the kernel answer in milliseconds here,
    tens of them on a loaded host; a Pi's radio in about one), and that longest gap as measured: ({frame: ms beacond is
    answerable for}, {frame: ms measured})."""
    stalls = btsnoop.read_stalls(STALLS) + btsnoop.round_trips(snoop.update(), since, until)
    own, raw = {}, {}
    for f in frames:
        gaps = btsnoop.gap_intervals(snoop.update(), f, since, until)
        own[f.hex()[:14]] = max((btsnoop.beyond_stalls(g, stalls) for g in gaps), default=0)
        raw[f.hex()[:14]] = max(((e - s) / 1000 for s, e in gaps), default=0)
    return own, raw


def stated_round():
    """The longest interval STATUS states for a beacon now (ms): what the time slices achieve on this controller, their
    slots lengthened when a restart costs more than SliceTiming allows for (a loaded warm CI run: 173 ms slots, each
    beacon every 520 ms)."""
    return max((int(x) for x in re.findall(r'every (\d+) ms', status())), default=0)


def s23_pi_default_beside_bluetoothd():
    """What a Raspberry Pi with Raspberry Pi OS gets by default: bluetoothd running, a controller without advertising
    sets, backend auto, no address setting. Through the kernel's management interface that was one beacon at the
    kernel's 100–150 ms, and three beacons in 2 s turns from private addresses that change."""
    bluetoothd(True)
    frames = (ibeacon(), ALT, EDDY)
    # The 400 ms bounds (or the stated round, when the slots were lengthened) are on beacond's time slices, not on the
    # emulator: a probe says when the guest stood still (with_stall_probe).
    # One beacon: the controller is given exactly the configured interval.
    write_conf(backend='auto', minor=1)
    t0 = now_us()
    sh('systemctl restart beacond', check=True)
    one = wait_advertising('every 100 ms on hci0')
    wait_on_air(ibeacon())
    _, commands = replay(snoop.update())
    params = [p for ts, op, p, st in commands if op == 0x2006 and st == 0 and ts >= t0 and len(p) >= 4]
    assert params, 'no LE Set Advertising Parameters after the restart (btmon)'
    given = {(p[0] | p[1] << 8, p[2] | p[3] << 8) for p in params}
    assert given == {(0x00A0, 0x00A0)}, f'the controller was given {sorted(given)}, not the configured 100 ms (0x00A0)'
    journal = sh('journalctl -u beacond --no-pager -o cat --since=-2min')
    assert 'has no advertising sets' in journal and 'backend auto uses raw HCI commands beside bluetoothd' in journal, journal[-800:]
    # Three beacons, no address setting: each on the air again within 400 ms, each from its own fixed address.
    with open(CONF, 'w') as f:
        f.write(THREE + '[controller]\ndevice = "hci0"\n')
    t1 = now_us()
    sh('systemctl restart beacond', check=True)
    three = wait_advertising('3 beacons')
    for frame in frames:
        wait(lambda: ever_on_air(frame, t1), 30, f'{frame.hex()[:24]}… on the air (btmon)')
    rates, measured, rounds = [], [], []
    # 400 ms, or the round STATUS states when the slots were lengthened for a slow restart (the guest's pace): no beacon
    # is off the air for longer than beacond says it takes to come round.
    def bound():
        return max(400, rounds[-1] if rounds else 0)
    def measure(since):
        start = now_us()
        time.sleep(6)
        end = now_us()
        gaps, raw = longest_gaps(frames, start, end)
        measured.append(raw)
        rounds.append(stated_round())
        by = address_of_each(since, frames)
        # For the record: the HCI commands the controller got per second while the three took turns.
        _, commands = replay(snoop.update())
        rates.append(sum(1 for c in commands if start <= c[0] <= end) / ((end - start) / 1e6))
        return gaps, by
    gaps, by = measure(t1)
    assert all(g <= bound() for g in gaps.values()), f'a beacon off the air for longer than {bound()} ms while the guest ran: {gaps} (ms; measured {measured[-1]}; {status()})'
    assert len(by) == 3 and all(len(a) == 1 for a in by.values()) and len({min(a) for a in by.values()}) == 3, \
        f'not one fixed address per beacon: {by}'
    assert all(re.fullmatch(r'[C-F][0-9A-F](:[0-9A-F]{2}){5}', min(a)) for a in by.values()), f'not static random addresses: {by}'
    # bluetoothd restarts (it powers the adapter off and on): the same three, the same addresses, the same gaps.
    t2 = now_us()
    sh('systemctl restart bluetooth', check=True)
    for frame in frames:
        wait(lambda: [t for t in transitions(frame, t2) if t[1]], 60, f'{frame.hex()[:24]}… back after bluetoothd restarted')
    wait_advertising('3 beacons')
    t3 = now_us()
    gaps2, by2 = measure(t3)
    assert all(g <= bound() for g in gaps2.values()), f'after bluetoothd restarted, a beacon off the air for longer than {bound()} ms while the guest ran: {gaps2} (ms; measured {measured[-1]}; {status()})'
    assert by2 == by, f'other addresses after bluetoothd restarted: {by2}, before {by}'
    fmt = lambda g: ', '.join(f'{v:.0f}' for v in g.values())
    # Home Assistant's active discovery on the same adapter (bluetoothd's filtered LE discovery, which the kernel
    # restarts every 10.24 s with a random address of its own): each beacon one address all along (its own or the
    # public one, never the kernel's), never off the air for more than 400 ms; after it, each back on its own.
    own = {f: min(a) for f, a in by2.items()}
    t4 = now_us()
    sh('bluetoothctl --timeout 23 scan le >/dev/null 2>&1', timeout=60)
    t5 = now_us()
    raced = []
    during = legacy_addresses(t4, t5, frames, own=set(own.values()), raced=raced)
    kernel = kernel_random_addresses(t4, t5) - set(own.values())
    starts = sum(1 for ts, op, p, st in replay(snoop.update())[1] if op == 0x200C and p[:1] == b'\x01' and t4 <= ts <= t5)
    assert starts >= 2, f'discovery did not restart the scan ({starts} starts seen in btmon)'
    assert all(not (a & kernel) for a in during.values()), f'a beacon went out from the kernel\'s address {kernel}: {during}'
    # Where the kernel's address landed between a slice's own address and its enable (a CI run saw it once, under
    # load), the beacon leaves it within about a slot: the slot ends, and beacond, seeing the kernel's command, moves
    # every beacon to the public address (which `later` below checks).
    held = {}
    for frame, address, us in raced:
        key = (frame.hex()[:14], address)
        held[key] = held.get(key, 0) + us
    assert all(us <= 200_000 for us in held.values()), f'a beacon stayed on the kernel\'s address it raced with (µs): {held}'
    # The first start moves each beacon from its own address to the public one, once; from the second start on, one.
    t_second = sorted(ts for ts, op, p, st in replay(snoop.update())[1] if op == 0x200C and p[:1] == b'\x01' and t4 <= ts <= t5)[1]
    later = legacy_addresses(t_second - 1_000_000, t5, frames)
    assert all(a == {'public'} for a in later.values()) and len(later) == 3, f'not one address each while discovery ran: {later}'
    # The first start moves all three to the public address amid the kernel's scan commands (a raced or withheld
    # enable, then a restart of the advertiser): a loaded cold CI run measured 473 ms there, 402 while the guest ran,
    # 200 ms before to 270 ms after the start, when the restart still began the turns again at the first beacon. 600 ms
    # there, 400 from the second start on, as the addresses above.
    move = (t4, t_second - 1_000_000)
    gaps_move, raw_move = longest_gaps(frames, *move)
    gaps3, raw3 = longest_gaps(frames, t_second - 1_000_000, t5)
    assert all(g <= 600 for g in gaps_move.values()), f'a beacon off the air for longer than 600 ms while discovery moved them to the public address: {gaps_move} (ms; measured {raw_move})'
    assert all(g <= 400 for g in gaps3.values()), f'a beacon off the air for longer than 400 ms during discovery while the guest ran: {gaps3} (ms; measured {raw3})'
    wait(lambda: all(legacy_addresses(now_us() - 3_000_000, now_us(), frames).get(f) == {own[f]} for f in frames), 60,
         'each beacon back on its own address after discovery')
    t6 = now_us()
    gaps4, raw4 = longest_gaps(frames, t5, t6)
    rounds.append(stated_round())
    assert all(g <= bound() for g in gaps4.values()), f'a beacon off the air for longer than {bound()} ms after discovery while the guest ran: {gaps4} (ms; measured {raw4}; {status()})'
    return (f'one beacon: given {sorted(given)} | {three} | longest gaps {fmt(gaps)} ms, after a bluetoothd restart '
            f'{fmt(gaps2)} ms | addresses {sorted(min(a) for a in by.values())} | '
            f'{" and ".join(f"{r:.0f}" for r in rates)} HCI commands per second | active discovery ({starts} scan starts, '
            f'the kernel\'s addresses {sorted(kernel)}): one address each, longest gaps {fmt(gaps3)} ms; back on its own '
            f'{(t6 - t5) / 1e6:.0f} s after, longest gaps {fmt(gaps4)} ms | as measured, stalls included: {fmt(measured[0])}, '
            f'{fmt(measured[1])}, {fmt(raw3)}, {fmt(raw4)} ms | stated rounds {", ".join(map(str, rounds))} ms')


# ---- private addresses beside another scanner (#52) -------------------------------------------------------------------

PAUSED_STATIC = ibeacon(major=23, minor=1)
PAUSED_RPA = ibeacon(major=23, minor=2)


def legacy_on_air(since_us, until_us, match):
    """[(start, end, frame, address)]: each time the legacy advertiser was on with a frame `match` takes, between
    since_us and until_us (clipped to them), and the address it went out from (MSB first, or 'public'), from every
    accepted command the capture has (the kernel's and beacond's), read as legacy_addresses reads them; for frames
    that change (an Eddystone-EID's)."""
    _, commands = replay(snoop.update())
    fmt = lambda b: ':'.join(f'{x:02X}' for x in reversed(b))
    state = {'random': None, 'own': 0, 'data': b'', 'on': False, 'since': None}
    out = []
    def close(ts):
        since = state['since']
        if since is not None and state['on'] and match(state['data']) and ts > since_us and since < until_us:
            address = fmt(state['random']) if state['own'] == 1 and state['random'] else 'public'
            out.append((max(since, since_us), min(ts, until_us), state['data'], address))
    for ts, op, p, st in commands:
        if st != 0 or op not in (0x2005, 0x2006, 0x2008, 0x200A):
            continue
        close(ts)
        state['since'] = ts
        if op == 0x2005 and len(p) >= 6:
            state['random'] = bytes(p[:6])
        elif op == 0x2006 and len(p) >= 6:
            state['own'] = p[5]
        elif op == 0x2008 and p:
            state['data'] = bytes(p[1:1 + p[0]])
        elif op == 0x200A and p:
            state['on'] = p[0] == 1
    close(until_us)
    return out


def aes128(key, block):
    """AES-128 of one block, from the guest's libgcrypt through ctypes (the image has no other AES; python3 has none)."""
    import ctypes
    g = ctypes.CDLL('libgcrypt.so.20')
    g.gcry_check_version.restype = ctypes.c_char_p
    g.gcry_check_version.argtypes = [ctypes.c_char_p]
    g.gcry_cipher_open.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_int, ctypes.c_uint]
    g.gcry_cipher_setkey.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    g.gcry_cipher_encrypt.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    g.gcry_cipher_close.argtypes = [ctypes.c_void_p]
    for f in ('gcry_cipher_open', 'gcry_cipher_setkey', 'gcry_cipher_encrypt'):
        getattr(g, f).restype = ctypes.c_uint
    g.gcry_check_version(None)
    h = ctypes.c_void_p()
    assert g.gcry_cipher_open(ctypes.byref(h), 7, 1, 0) == 0, 'gcry_cipher_open (AES-128, ECB) failed'  # GCRY_CIPHER_AES128, MODE_ECB
    try:
        assert g.gcry_cipher_setkey(h, key, 16) == 0, 'gcry_cipher_setkey failed'
        out = ctypes.create_string_buffer(16)
        assert g.gcry_cipher_encrypt(h, out, 16, block, 16) == 0, 'gcry_cipher_encrypt failed'
        return out.raw
    finally:
        g.gcry_cipher_close(h)


def resolves(irk_hex, address):
    """`address` (MSB first) is a resolvable private address of the key: prand's top bits 01, and the Core's ah() (Vol 3
    Part H §2.2.2: AES-128 under the IRK over 13 zero bytes and prand, its low 24 bits) gives its hash. The key as its
    file holds it (what `beacond irk` prints for Home Assistant, which resolves so: bluetooth-data-tools); checked
    against the Core's sample (IRK ec0234a357c8ad05341010a60a397d9b resolves 70:81:94:0D:FB:AA) below."""
    a = bytes.fromhex(address.replace(':', ''))
    return a[0] >> 6 == 1 and aes128(bytes.fromhex(irk_hex), bytes(13) + a[:3])[13:] == a[3:]


def s23b_private_beacons_pause_beside_discovery():
    """#52 on the Pi default (bluetoothd, the legacy-only btvirt, backend auto): while Home Assistant's active discovery
    runs the controller refuses beacond's random address; a static beacon goes out from the public address, and the
    beacons whose address is private (a resolvable one, an Eddystone-EID) pause: never from the public address, nothing
    of theirs on the air, beacond status names them paused; after the scan each is back from its own private address.
    Read from btmon (every accepted command, the kernel's and beacond's), as 23's addresses are."""
    assert resolves('ec0234a357c8ad05341010a60a397d9b', '70:81:94:0D:FB:AA') \
        and not resolves('ec0234a357c8ad05341010a60a397d9b', '70:81:94:0D:FB:AB'), 'ah() does not give the Core\'s sample'
    bluetoothd(True)
    sh('rm -f /etc/beacond/keys/vm-door.irk /etc/beacond/keys/vm-eid.key', check=True)
    sh('beacond gen-key /etc/beacond/keys/vm-door.irk && beacond gen-key /etc/beacond/keys/vm-eid.key', check=True)
    irk = open('/etc/beacond/keys/vm-door.irk').read().strip()
    with open(CONF, 'w') as f:
        f.write(f'[[beacon]]\nuuid = "{UUID}"\nmajor = 23\nminor = 1\n\n'
                f'[[beacon]]\nuuid = "{UUID}"\nmajor = 23\nminor = 2\naddress = "resolvable"\nresolving_key_file = "vm-door.irk"\n\n'
                '[[beacon]]\nformat = "eddystone-eid"\nidentity_key_file = "vm-eid.key"\nrotation_exponent = 3\nmeasured_power = -20\n\n'
                '[controller]\ndevice = "hci0"\n')
    is_eid = lambda d: d.startswith(EID_PREFIX)
    kinds = {'static': lambda d: d == PAUSED_STATIC, 'resolvable': lambda d: d == PAUSED_RPA, 'eid': is_eid}

    def by_kind(since, until):
        """kind → [(start, end, frame, address)] on the air between since and until."""
        spans = legacy_on_air(since, until, lambda d: any(m(d) for m in kinds.values()))
        return {k: [s for s in spans if m(s[2])] for k, m in kinds.items()}

    def addresses(spans):
        return {s[3] for s in spans}

    t0 = now_us()
    sh('systemctl restart beacond', check=True)
    wait_advertising('3 beacons')
    before = wait(lambda: (b := by_kind(t0, now_us())) and all(b.values()) and b, 30, 'the three beacons on the air (btmon)')
    assert all(re.fullmatch(r'[C-F][0-9A-F](:[0-9A-F]{2}){5}', a) for a in addresses(before['static'])), f'the static beacon: {addresses(before["static"])}'
    assert all(resolves(irk, a) for a in addresses(before['resolvable'])), f'the resolvable beacon from addresses its key does not resolve: {addresses(before["resolvable"])}'
    assert all(a != 'public' and int(a[:2], 16) >> 6 == 0 for a in addresses(before['eid'])), f'the EID not from non-resolvable addresses: {addresses(before["eid"])}'
    # Home Assistant's active discovery on the same adapter (as 23's, shorter: its first start and the kernel's restart
    # 10.24 s later fit in it).
    t4 = now_us()
    scan = subprocess.Popen('exec bluetoothctl --timeout 14 scan le >/dev/null 2>&1', shell=True)
    try:
        def paused_in_status():
            code, st = beacond_status_as_nobody()
            b = (st.get('daemons') or [{}])[0].get('beacons') or []
            text = status()
            if [x.get('on_air') for x in b] == [True, False, False] and '2 of 3 beacons paused' in text:
                return code, st, text
            return None
        code, st, text = wait(paused_in_status, 12, 'beacond status --json and STATUS to name the two private beacons paused')
        assert scan.poll() is None, 'discovery ended before beacond status named the beacons paused'
    finally:
        try:
            scan.wait(timeout=60)
        except subprocess.TimeoutExpired:
            scan.kill()
            scan.wait()
    t5 = now_us()
    b = st['daemons'][0]['beacons']
    assert code != 0, f'beacond status exited 0 with two beacons paused: {st}'
    assert b[0]['paused'] is None and 'another program scans' in (b[0]['address_held_back'] or ''), b[0]
    assert all('another program scans' in (x['paused'] or '') for x in b[1:]), b[1:]
    for n in (2, 3):
        assert any(f'beacon {n} is not on the air' in p and 'another program scans' in p for p in st['problems']), st['problems']
    # The scan as the controller had it: its first start, and its end (the disable after the last start; bluetoothd
    # sends it when bluetoothctl has gone).
    def scan_enables(since):
        """(µs, 1 or 0) of each LE Set Scan Enable the controller accepted after since."""
        return [(ts, p[0]) for ts, op, p, s in replay(snoop.update())[1] if op == 0x200C and s == 0 and p and ts >= since]
    starts = [ts for ts, on in scan_enables(t4) if on == 1]
    assert starts, 'discovery started no scan (btmon)'
    end = wait(lambda: next((ts for ts, on in scan_enables(starts[-1]) if on == 0), None), 20, 'the scan\'s end (btmon)')
    refused = sum(1 for ts, op, p, s in replay(snoop.update())[1] if op == 0x2005 and s != 0 and t4 <= ts <= end)
    # From the first start on, beacond sees the kernel's scan commands (or the controller refuses its random address):
    # each private beacon is paused at once; 2 s after that start, nothing of theirs is on the air until the scan's end.
    # (beacond usually moves before any refusal, as scenario 23 shows: `refused` is only reported.)
    during = by_kind(starts[0] + 2_000_000, end)
    on_while_paused = [(k, (e - s) // 1000, a) for k in ('resolvable', 'eid') for s, e, _, a in during[k]]
    assert not on_while_paused, f'a private beacon on the air while discovery ran (kind, ms, address): {on_while_paused}'
    assert 'public' in addresses(during['static']), f'the static beacon not from the public address during discovery: {addresses(during["static"])}'
    # Back after the scan, each from its own private address, within 25 s of the scan's end (beacond tries the own
    # addresses every 10 s once a whole period went by without the scan: 10 to 20 s).
    after = wait(lambda: (a := by_kind(end, now_us())) and a['resolvable'] and a['eid'] and a, 40,
                 'the resolvable beacon and the EID back on the air after discovery (btmon)', interval=1.0)
    back = {k: (after[k][0][0] - end) / 1e6 for k in ('resolvable', 'eid')}
    assert back['resolvable'] <= 25 and back['eid'] <= 25, f'back only after (s): {back}'
    assert all(resolves(irk, a) for a in addresses(after['resolvable'])), f'back from addresses its key does not resolve: {addresses(after["resolvable"])}'
    assert all(a != 'public' and int(a[:2], 16) >> 6 == 0 for a in addresses(after['eid'])), f'the EID back from {addresses(after["eid"])}'
    # Never from the public address: before, during or after discovery.
    public = [(k, s, a) for k in ('resolvable', 'eid') for s, _, _, a in by_kind(t0, now_us())[k] if a == 'public']
    assert not public, f'a private beacon from the public address (kind, µs, address): {public}'
    return (f'{len(starts)} scan starts, {refused} random addresses refused; during discovery: STATUS "{text}", '
            f'beacond status exit {code}, the static beacon from {sorted(addresses(during["static"]))}, nothing of the '
            f'resolvable beacon or the EID on the air from 2 s after the first start to the scan\'s end '
            f'({(end - starts[0] - 2_000_000) / 1e6:.1f} s); back {", ".join(f"{k} {v:.1f} s" for k, v in back.items())} '
            f'after it (resolvable from {sorted(addresses(after["resolvable"]))}, the EID from '
            f'{sorted(addresses(after["eid"]))}); never from the public address')


# ---- Eddystone-EID ----------------------------------------------------------------------------------------------------

EID_PREFIX = bytes.fromhex('0201060303aafe0d16aafe30ec')


def s21_eid_key_as_a_credential():
    bluetoothd(False)
    sh('rm -f /etc/beacond/keys/shop.key', check=True)
    assert oct(os.stat('/etc/beacond/keys').st_mode & 0o777) == '0o700', 'the package did not make /etc/beacond/keys 0700'
    sh('beacond gen-key /etc/beacond/keys/shop.key', check=True)
    key = open('/etc/beacond/keys/shop.key').read().strip()
    assert oct(os.stat('/etc/beacond/keys/shop.key').st_mode & 0o777) == '0o600'
    with open(CONF, 'w') as f:
        f.write('[beacon]\nformat = "eddystone-eid"\nidentity_key_file = "shop.key"\nrotation_exponent = 3\nmeasured_power = -20\n\n'
                '[controller]\ndevice = "hci0"\nbackend = "auto"\n')
    t0 = now_us()
    sh('systemctl restart beacond', check=True)
    st = wait_advertising('Eddystone-EID')
    time.sleep(20)  # K = 3: a new EID every 8 s, so two or three boundaries
    timeline, _ = replay(snoop.update())
    first_seen = {}
    for ts, datas in timeline:
        for d in datas:
            if ts >= t0 and d.startswith(EID_PREFIX):
                first_seen.setdefault(d, ts)
    assert len(first_seen) >= 2, f'{len(first_seen)} EIDs on the air in 20 s at K = 3'
    # Each is the frame root's CLI computes from the same key file for the moment it went on the air (or the second
    # before: the controller's clock and the replay's are not the same tick).
    for d, ts in first_seen.items():
        t = ts // 1_000_000
        expected = {sh(f'beacond payload -c {CONF} --time {x}', check=True).strip() for x in (t - 1, t)}
        assert d.hex() in expected, f'{d.hex()} on the air at {t}; beacond payload says {expected}'
    addresses = address_of_each(t0, tuple(first_seen))
    assert all(len(a) == 1 for a in addresses.values()), addresses
    flat = [min(a) for a in addresses.values()]
    assert len(set(flat)) == len(flat) and all(int(a[:2], 16) >> 6 == 0 for a in flat), f'not a new non-resolvable address each period: {flat}'
    pid = show('MainPID')['MainPID']
    uid = next(l.split()[1] for l in open(f'/proc/{pid}/status') if l.startswith('Uid:'))
    assert uid != '0', 'beacond runs as root'
    creds = sh('ls -l /run/credentials/beacond.service/').strip().replace('\n', '; ')
    journal = sh('journalctl -u beacond --no-pager -o cat --since=-5min')
    assert key.lower() not in journal.lower(), 'the identity key is in the journal'
    steps = eid_follows_clock_steps()
    return f'{st} | {len(first_seen)} EIDs from {flat}, uid {uid}; credentials: {creds} | {steps}'


def eid_follows_clock_steps():
    """A step of the wall clock (a Pi without a real-time clock boots with fake-hwclock's time and steps at its NTP
    sync) moves the EID period at once: at K = 10 the boundary timer alone would keep the old period's EID on the
    air for up to 17 minutes. Forward 2048 s (two periods), then back again, each checked from btmon."""
    sh(f"sed -i 's/^rotation_exponent = .*/rotation_exponent = 10/' {CONF}", check=True)
    sh('systemctl reload beacond', check=True)
    def eid_now():
        return bytes.fromhex(sh(f'beacond payload -c {CONF} --time $(date +%s)', check=True).strip())
    wait_on_air(eid_now(), 10)
    out = []
    for delta in (2048, -2048):
        t0 = time.monotonic()
        sh(f'date -s @$(( $(date +%s) + {delta} )) >/dev/null', check=True)
        expected = eid_now()
        # A bound only a missed step breaks (without the watch: up to 17 min at K = 10); it takes under a second.
        wait_on_air(expected, 20)
        out.append(f'{delta:+d} s: the new period\'s EID on the air within {time.monotonic() - t0:.1f} s')
    journal = sh('journalctl -u beacond --no-pager -o cat --since=-1min')
    assert 'The wall clock was set' in journal, journal[-500:]
    return '; '.join(out)


# ---- ownership: what beacond put on the controller comes off again ----------------------------------------------

def heard_since(since_us):
    """Every frame on the air at some moment after since_us (the kernel rotates mgmt instances on a legacy
    controller: a window of a few seconds sees them all)."""
    timeline, _ = replay(snoop.update())
    before = [datas for ts, datas in timeline if ts < since_us]
    out = set(before[-1]) if before else set()
    for ts, datas in timeline:
        if ts >= since_us:
            out |= datas
    return out - {b''}


def killed_then_one_beacon(backend, fragment):
    """Three beacons on the air, the config cut to one, then SIGKILL: systemd restarts beacond (Restart=on-failure)
    with one beacon, and the killed run's other two must go, then everything at stop."""
    with open(CONF, 'w') as f:
        f.write(THREE + f'[controller]\ndevice = "hci0"\nbackend = "{backend}"\n')
    t0 = now_us()
    sh('systemctl restart beacond', check=True)
    wait_advertising('3 beacons')
    for frame in (ibeacon(), ALT, EDDY):
        wait(lambda: ever_on_air(frame, t0), 30, f'{frame.hex()[:24]}… on the air (btmon)')
    record = sh('cat /var/lib/beacond/owned 2>&1')
    write_conf(backend=backend, minor=1)
    pid = show('MainPID')['MainPID']
    sh('systemctl kill -s KILL beacond', check=True)
    wait(lambda: show('MainPID')['MainPID'] not in ('0', pid), 60, 'systemd to start beacond again')
    st = wait_advertising(fragment)
    t1 = now_us()
    time.sleep(7)  # the kernel gives each mgmt instance 2 s on a legacy controller: three of them fit in 6 s
    heard = heard_since(t1)
    assert ibeacon() in heard, f'the one beacon is not on the air: {[d.hex()[:24] for d in heard]}'
    left = [name for name, frame in (('AltBeacon', ALT), ('Eddystone-UID', EDDY)) if frame in heard]
    assert not left, f'the killed run\'s {", ".join(left)} still on the air after the start with one beacon; record was {record!r}'
    sh('systemctl stop beacond', check=True)
    t2 = now_us()
    time.sleep(5)
    after = heard_since(t2 + 500_000)
    assert not after & {ibeacon(), ALT, EDDY}, f'on the air after stop: {[d.hex()[:24] for d in after]}'
    sh('systemctl start beacond', check=True)
    return f'{st} | record before the kill: {" / ".join(l for l in record.splitlines() if not l.startswith("#"))}'


def s17_hci_kill_then_fewer_beacons():
    bluetoothd(False)
    return killed_then_one_beacon('hci', 'minor 1 every')


def s18_mgmt_kill_then_fewer_beacons():
    bluetoothd(False)
    return killed_then_one_beacon('mgmt', 'mgmt instance')


FOREIGN = bytes.fromhex('020106') + bytes.fromhex('08ffffff464f524549')  # Flags, manufacturer 0xFFFF "FOREI"
FOREIGN2 = bytes.fromhex('020106') + bytes.fromhex('08ffffff464f524532')  # "FORE2"


def s19_mgmt_foreign_instances_survive():
    """Another program's instances, one added before beacond starts (Read Advertising Features lists it) and one
    while it runs (an Advertising Added event): beacond takes neither, and its stop leaves both on the air."""
    bluetoothd(False)
    sh('systemctl stop beacond', check=True)
    sh('btmgmt --index 0 clr-adv; btmgmt --index 0 power on')
    sh(f'btmgmt --index 0 add-adv -d {FOREIGN.hex()} 1', check=True)
    write_conf(backend='mgmt', minor=1)
    t0 = now_us()
    sh('systemctl start beacond', check=True)
    wait_advertising('mgmt instance 5')
    sh(f'btmgmt --index 0 add-adv -d {FOREIGN2.hex()} 4', check=True)
    time.sleep(1)
    with open(CONF, 'w') as f:
        f.write(THREE + '[controller]\ndevice = "hci0"\nbackend = "mgmt"\n')
    sh('systemctl reload beacond', check=True)
    st = wait_advertising('3 beacons')
    assert 'instance 4' not in st and 'instance 1' not in st, f'beacond took another program\'s instance: {st}'
    journal = sh('journalctl -u beacond --no-pager -o cat --since=-1min')
    assert re.search(r'Advertising instance 4 on hci0 belongs to another program', journal), journal[-800:]
    t1 = now_us()
    time.sleep(11)  # five instances, 2 s each
    heard = heard_since(t1)
    missing = [n for n, f in (('iBeacon', ibeacon()), ('AltBeacon', ALT), ('Eddystone-UID', EDDY), ('foreign 1', FOREIGN),
                              ('foreign 4', FOREIGN2)) if f not in heard]
    assert not missing, f'not on the air beside each other: {missing}'
    sh('systemctl stop beacond', check=True)
    t2 = now_us()
    time.sleep(5)
    after = heard_since(t2 + 500_000)
    assert FOREIGN in after and FOREIGN2 in after, f'another program\'s instance went with beacond\'s stop: {[d.hex() for d in after]}'
    assert not after & {ibeacon(), ALT, EDDY}, f'beacond\'s beacons on the air after stop: {[d.hex()[:24] for d in after]}'
    sh('btmgmt --index 0 clr-adv')
    write_conf(backend='auto', minor=2)
    sh('systemctl start beacond', check=True)
    return f'{st} | both foreign instances on the air before, beside and after beacond'


# ---- the fleet: this guest as one host of an Ansible-managed fleet ---------------------------------------------------

FLEET = os.path.join(PACKAGES, '..', 'fleet')


def s22_fleet_host():
    """The host side of the fleet test (Tests/VM/fleet.py on the VM host drives it; amd64 only): this
    guest becomes a fresh host (no beacond; sshd on the network, the control node's key), says so, and waits while
    the control node runs the Ansible role against it and checks the results from the controller's side. The
    verdicts are the fleet test's own lines; this line says whether this host took part to the end."""
    sh('systemctl stop beacond; apt-get purge -y -q beacond 2>&1; rm -rf /etc/beacond /var/lib/beacond* /var/lib/private/beacond*',
       timeout=300)
    assert not os.path.exists('/usr/bin/beacond'), 'beacond still installed after purge'
    bluetoothd(True)  # as on a Pi
    if not ARM64:
        # A second radio on the same virtual air for the verifier (beacond-verify@hci1): one btvirt with two controllers
        # (btdev reports one controller's advertising to another of the same process only). No other btvirt left over.
        sh("systemctl stop 'btvirt*'")
        wait(lambda: not os.listdir('/sys/class/bluetooth'), 20, 'every controller to go')
        sh('systemctl reset-failed btvirt 2>/dev/null; systemd-run --unit=btvirt /usr/bin/btvirt -l2 -L', check=True)
        wait(lambda: sorted(os.listdir('/sys/class/bluetooth')) == ['hci0', 'hci1'], 20, 'hci0 and hci1 (and no other)')
    # The fleet test's own capture (btsnoop.py reads it over SSH, whole, for every check: the suite's capture is large
    # by now). Everything the role makes the controllers do comes after it starts.
    start_btmon('btmon-fleet', '/var/tmp/fleet.snoop', 30)
    with open('/etc/systemd/network/20-fleet.network', 'w') as f:
        f.write('[Match]\nName=en* eth*\n\n[Network]\nDHCP=ipv4\n')
    sh('systemctl start systemd-networkd', check=True)
    wait(lambda: '10.0.2.' in sh('networkctl status 2>/dev/null; cat /proc/net/fib_trie'), 60, 'an address from qemu')
    key = wait(lambda: os.path.exists(f'{FLEET}/authorized_keys') and open(f'{FLEET}/authorized_keys').read(),
               int(open(f'{FLEET}/../fleet-enabled').read().strip() or 1500), "the control node's key (fleet.py on the VM host)")
    os.makedirs('/root/.ssh', mode=0o700, exist_ok=True)
    with open('/root/.ssh/authorized_keys', 'w') as f:
        f.write(key)
    os.chmod('/root/.ssh/authorized_keys', 0o600)
    sh('systemctl start ssh', check=True)
    with open(os.path.join(OUT, 'fleet-ready'), 'w') as f:
        f.write(sh('hostname').strip() + '\n')
    verdict = wait(lambda: os.path.exists(f'{FLEET}/done') and open(f'{FLEET}/done').read().strip(), 3000,
                   'the fleet test to finish')
    assert verdict.startswith('ok'), f'the fleet test: {verdict}'
    return verdict


MUTE_CONTROLLER = r"""
import os, sys, time
# A controller that registers and then answers nothing: the kernel's setup (HCI Reset first) times out, as on a
# Pi whose radio is stuck ("Opcode 0x0c03 failed: -110"), and mgmt calls the device an invalid index.
fd = os.open('/dev/vhci', os.O_RDWR)
os.write(fd, bytes([0xFF, 0x00]))  # HCI_VENDOR_PKT: create a primary controller
reply = os.read(fd, 4)
open(sys.argv[1], 'w').write(str(reply[2] | reply[3] << 8))
while True:
    os.read(fd, 1024)  # commands from the kernel, never answered
"""


def s20_setup_failed_device_goes_to_raw_hci():
    """An hciN that exists but whose kernel setup failed: mgmt says Invalid Index. beacond must say what it sees and,
    with backend auto, try raw HCI (which brings the device up again) instead of waiting for it to appear."""
    with open('/run/mute-controller.py', 'w') as f:
        f.write(MUTE_CONTROLLER)
    sh('rm -f /run/mute-index; systemctl reset-failed mute-controller 2>/dev/null; '
       'systemd-run --unit=mute-controller /usr/bin/python3 /run/mute-controller.py /run/mute-index', check=True)
    try:
        index = wait(lambda: os.path.exists('/run/mute-index') and open('/run/mute-index').read().strip(), 20, 'the mute controller to register')
        dev = f'hci{index}'
        # The kernel's own word that the setup failed (mgmt then answers Invalid Index for it: btmon shows it).
        info = wait(lambda: next((l for l in sh('dmesg').splitlines() if f'{dev}: Opcode 0x0c03 failed' in l), None), 60,
                    f'the kernel to give up setting {dev} up')
        with open('/run/badsetup.conf', 'w') as f:
            f.write(f'[beacon]\nuuid = "{UUID}"\nmajor = 1\nminor = 20\n\n[controller]\ndevice = "{dev}"\nbackend = "auto"\n')
        sh('systemctl reset-failed beacond-badsetup 2>/dev/null; systemd-run --unit=beacond-badsetup -p DynamicUser=yes -p StateDirectory=beacond-badsetup '
           '-p AmbientCapabilities="CAP_NET_ADMIN CAP_NET_RAW" -p CapabilityBoundingSet="CAP_NET_ADMIN CAP_NET_RAW" '
           '/usr/bin/beacond run --config /run/badsetup.conf', check=True)
        journal = lambda: sh('journalctl -u beacond-badsetup --no-pager -o cat')
        wait(lambda: 'calls it an invalid index' in journal(), 30, f'beacond to say what it sees of {dev}')
        wait(lambda: f'Using raw HCI commands on {dev}' in journal(), 30, 'the fall back to raw HCI')
        j = journal()
        assert f'Waiting for {dev} to appear' not in j, j[-800:]
        assert 'backend auto falls back to raw HCI commands' in j, j[-800:]
        return f'kernel: {info.strip()[-50:]} | beacond: ' + ' / '.join(l[:90] for l in j.splitlines() if 'invalid index' in l or 'Using raw HCI' in l)[:300]
    finally:
        sh('systemctl stop beacond-badsetup mute-controller 2>/dev/null; rm -f /run/badsetup.conf')


def start_btmon(unit, path, timeout):
    """A btmon capture of every controller into `path` (btsnoop), as the unit `unit`. Its decoded text goes nowhere:
    in the journal it was 220,000 lines in the fleet guest, which journald stored under emulation (that guest alone:
    352 s with them, 274 s without); the artifacts' btmon.txt is decoded from the capture at the end."""
    sh(f'rm -f {path}; systemctl reset-failed {unit} 2>/dev/null; '
       f'systemd-run --unit={unit} -p StandardOutput=null /usr/bin/btmon -w {path}', check=True)
    wait(lambda: os.path.exists(path) and os.path.getsize(path) >= 16, timeout, 'btmon to start')


def main():
    start_btmon('btmon-capture', SNOOP, 10)
    btvirt_start()
    # amd64 runs everything but the fleet (22), which has a guest of its own. The arm64 guests are several times slower
    # under TCG. The Debian 12 one (where most Pis are; the amd64 guest's release, kernel, BlueZ and systemd) runs what
    # the arm64 package and a controller with sets change: the install from the repository, its upgrade there (0b,
    # which stands for 14's upgrade from a file there) and the purge of that package, raw HCI and
    # mgmt with sets, reloads, the controller gone and back over its UART, kills, status --check; what only systemd
    # decides with the same unit files (3's refused reload, 7's stop, 8's watchdog, 9's privileges) runs on the amd64
    # guest of the same release. The Debian 13 one only what its kernel 6.12, BlueZ 5.82 and systemd 257 change: the
    # install (with gen-uuid --set and a reload), raw HCI on that kernel, mgmt with its sets beside bluetoothd (one
    # beacon and three instances), and the purge.
    if ARM64 and RELEASE == 'trixie':
        only = {'0', '1a', '1c', '15', '13'}
    elif ARM64:
        only = {'0', '0b', '1a', '1c', '1e', '2a', '5', '10b', '13', '15', '16', '17', '18', '25'}
    else:
        only = None
    fleet = os.path.exists(os.path.join(PACKAGES, '..', 'fleet-enabled'))
    if fleet:
        # The fleet guest (run.sh with BEACOND_VM_FLEET): a fresh host for the control node, nothing else.
        only = {'22'}
        tap.write('# the fleet guest: scenario 22 only; the other scenarios run in the amd64 suite\n')
    chosen = os.path.join(PACKAGES, '..', 'only')
    if os.path.exists(chosen):
        # A quick look at a few (run.sh's BEACOND_VM_ONLY); 0 installs the package, so it always runs.
        picked = set(open(chosen).read().split()) | {'0'}
        only = picked if only is None else only & picked
        tap.write(f'# ONLY scenarios {" ".join(sorted(only))}: not the whole suite\n')

    planned = []

    def run_(title, fn):
        if only is None or title.split('.')[0] in only:
            planned.append((title, fn))
    try:
        run_('0. fresh install by the README\'s lines from the signed repository served as Pages serves it: enabled, active, STATUS asks for a uuid, no HCI command; gen-uuid --set and reload put it on the air', s0_fresh_install_waits_for_a_uuid)
        run_('0b. the repository: a newer version published, then apt upgrade: the edited config kept with no prompt, started once, off the air only for a restart after the unpack; a tampered InRelease refused; an index past its Valid-Until named by apt', with_stall_probe(s0b_repository_upgrade_tamper_expiry))
        run_('1a. enable --now with backend=hci, bluetoothd stopped: active, exact bytes on air, journal fields; the memory it uses, reported', s1_hci_without_bluetoothd)
        run_('1b. backend=auto, bluetoothd stopped: raw HCI at the configured interval on a legacy-only controller (mgmt on one with sets), exact bytes on air', s1_auto_without_bluetoothd)
        run_('1c. backend=auto, bluetoothd running: raw HCI on a legacy-only controller (mgmt on one with sets), exact bytes on air', s1_auto_with_bluetoothd)
        run_('1e. mgmt with bluetoothd: an AltBeacon, whose 31 bytes fill the frame: exact bytes on air', s1e_mgmt_altbeacon_full_frame)
        run_('1d. backend=hci, bluetoothd running: works or fails with a clear message', s1_hci_with_bluetoothd)
        run_('2a. reload (backend=hci): a new measured power in place, no disable; a new minor, a new identity, from its own address', s2_reload_hci_data_in_place_and_a_new_identity_from_its_own_address)
        run_('2b. reload with a new minor (mgmt): new bytes on air; any disable is the kernel\'s and short', s2_reload_new_minor_mgmt)
        run_('3. reload with a broken config: systemctl reload fails, still active, old bytes on air, PATH:LINE:COL in systemctl status and beacond status (as nobody); a good one: on the air when systemctl reload returns', s3_broken_reload_keeps_beacon)
        run_('4. restart bluetoothd: the instance is back as soon as the controller is usable', s4_bluetoothd_restart)
        run_('5. btvirt killed and restarted, hciconfig down/up: back as soon as hci0 returns', s5_controller_gone_and_back)
        run_('6. beacond started before hci0 exists: READY, waiting, then advertising', s6_boot_order)
        run_('7. systemctl stop: advertising off before the process exits', s7_stop_disables_first)
        run_('8. watchdog: a frozen daemon is restarted by systemd and advertises again', s8_watchdog)
        run_('9. privilege: unprivileged user, exactly CAP_NET_ADMIN and CAP_NET_RAW, exposure as offline', s9_privilege)
        run_('10. backend=hci: another program disables advertising, beacond puts the beacon back', s10_foreign_disable_is_undone)
        run_('10b. backend=mgmt: advertising switched off behind the kernel, its instance still registered: beacond sees it on the raw channel and adds the instance again', s10b_mgmt_air_is_checked)
        run_('11. without CAP_NET_ADMIN: backend=mgmt exits 77 naming it, auto falls back to raw HCI', s11_capabilities_for_mgmt)
        run_('12. mgmt: stopped while the adapter is powered off, nothing comes back at power-on', s12_mgmt_stop_while_powered_off_leaves_nothing)
        run_('15. backend=mgmt beside bluetoothd: three beacons (iBeacon, AltBeacon, Eddystone-UID) on three instances, each on the air', leaving_one_beacon(s15_mgmt_three_beacons_beside_bluetoothd))
        run_('23. the Raspberry Pi default: bluetoothd running, a legacy-only controller, backend auto: one beacon at its configured interval, three each back within 400 ms from its own fixed address, and so again after bluetoothd restarts; beside active discovery (Home Assistant\'s scanner) each keeps one address, never the kernel\'s, and goes back to its own after', leaving_one_beacon(with_stall_probe(s23_pi_default_beside_bluetoothd)))
        run_('23b. beside active discovery on the legacy-only controller (bluetoothd, backend auto), beacons with private addresses: a static iBeacon from the public address, an iBeacon from a resolvable address and an Eddystone-EID paused (nothing of theirs on the air, never from the public address; beacond status names them paused), each back from its own private address within 25 s after', leaving_one_beacon(s23b_private_beacons_pause_beside_discovery))
        run_('24. a controller that answers nothing until it is power-cycled (btvirt stopped until the kernel closes hci0): beacond takes hci0 down and up again, and the beacon is back', s24_unanswering_controller_is_power_cycled)
        run_('16. hci: three beacons, each from its own static address kept in the state directory, the same after a restart with the file reordered; a reload removing one leaves the others', leaving_one_beacon(s16_hci_three_beacons_each_from_its_own_static_address))
        run_('17. hci: three beacons, then SIGKILL and a start with one: the killed run\'s other two leave the air, and stop leaves nothing', s17_hci_kill_then_fewer_beacons)
        run_('18. mgmt: three beacons, then SIGKILL and a start with one: the killed run\'s other two instances go, and stop leaves nothing', s18_mgmt_kill_then_fewer_beacons)
        run_('19. mgmt: another program\'s instances (one from before the start, one added meanwhile) are neither taken nor removed', s19_mgmt_foreign_instances_survive)
        run_('20. an hciN whose kernel setup failed (mgmt: Invalid Index): beacond says so and backend auto tries raw HCI, not "waiting to appear"', s20_setup_failed_device_goes_to_raw_hci)
        run_('21. Eddystone-EID with its key in /etc/beacond/keys as a credential of the DynamicUser service: the EIDs on the air for their moments, a new address each period, the key never in the journal; a step of the wall clock either way moves the EID at once', leaving_one_beacon(s21_eid_key_as_a_credential))
        run_('25. beacond status --check beside bluetoothd: the controller as it is (amd64 btvirt legacy-only: run would use raw HCI; arm64 Bumble with sets: mgmt), as nobody without the LE answers, and a soft rfkill block with what to do', s25_adapter_check)
        run_('13. apt-get purge: nothing left behind (files, units, enablement, state), nothing on the air', s13_purge_leaves_nothing)
        run_('14. upgrade from the previous package with an edited conffile (and beacond@hci1 running beside it on amd64): edit kept, new default as .dpkg-dist, both restarted, beacons back; beacond status lists both units', s14_upgrade_keeps_the_edited_conffile)
        if fleet:
            run_('22. a fresh host of an Ansible-managed fleet, driven by the control node on the VM host (Tests/VM/fleet.py): sshd, the network, the role, the checks', s22_fleet_host)
        else:
            tap.write('# the fleet scenario (22) runs in a guest of its own: make vm-test-fleet, or make test\n')
        # The plan first, so that a run cut off by the host's timeout can say which scenarios never ran.
        for title, _ in planned:
            tap.write(f'# plan: {title}\n')
        tap.flush()
        for title, fn in planned:
            run(title, fn)
            tap.flush()
    finally:
        tap.write(f'1..{counter}\n')
        sh(f'cp {SNOOP} {OUT}/hci.snoop; btmon -r {SNOOP} > {OUT}/btmon.txt 2>&1; '
           f'[ ! -f /var/tmp/fleet.snoop ] || cp /var/tmp/fleet.snoop {OUT}/fleet.snoop; '
           f'journalctl -b --no-pager -o short-monotonic > {OUT}/journal.txt')
        tap.write('# done\n')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
