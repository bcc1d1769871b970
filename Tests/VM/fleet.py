#!/usr/bin/env python3
"""The fleet test's control node: the example playbook (deploy/ansible) with ansible-core, over SSH, against the fleet
guest (an amd64 Debian 12 guest with btvirt, booted for this alone), a Pi as the role sees one: an iBeacon with its minor from the inventory,
an Eddystone-EID beacon whose key comes from Ansible Vault, an iBeacon from a resolvable address whose resolving key
comes from Vault too (both in beacond_keys), and a verifier on a second btvirt radio. One guest: the
role's behaviour does not depend on the architecture (the package picked by it is checked), and an emulated arm64
host made each playbook run several times slower. Run by Tests/VM/run.sh (BEACOND_VM_FLEET), with this machine's venv.

    python fleet.py DIR          DIR holds the suite's registration (amd64.host)

What it checks, each from the controller's side (the btmon capture in the guest, replayed by btsnoop.py over SSH),
never from beacond's own word:
  1. the first run installs the package picked by architecture, renders the config, puts the exact frame and the EID
     the specification computes on the air, with the key file 0600 and the key nowhere in the output; the verifier
     checks the beacons from the air with the second radio, the resolvable one's addresses resolved with its copy
     of the host's key (beacond-verify@hci1: exit 0, and its metrics say so);
  2. a second run changes nothing, and runs no module (no Python) on the host;
  3. an inventory mistake (major 70000) fails at the role's check-config with beacond's own message, the running
     config stays as it was, and the host keeps advertising the old frames throughout; a malformed EID key from Vault
     fails the same way, in --check --diff as in a real run;
  4. a new package version in the signed repository (make-repo.sh) reaches the host through the role's
     beacond_version: latest: the new version installed, the conffile kept, a new main process, the frames back on
     the air; the host's key made newer than its service (a restart an earlier run lost) makes the role restart it.
Writes TAP lines to DIR/results.tap and tells the guest it is done (its src/fleet/done).
"""
import hashlib
import http.server
import json
import os
import re
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

FLEET = os.path.abspath(sys.argv[1])
HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, '..', '..'))
ANSIBLE_DIR = os.path.join(TOP, 'deploy', 'ansible')
BIN = os.path.dirname(sys.executable)
ARCHES = ('amd64',)
NAMES = {'amd64': 'pi-amd64'}
MINOR = {'amd64': 1}
MAJOR = 7
# The minor of the host's iBeacon from a resolvable address (address = "resolvable", resolving_key_file door.irk).
RPA_MINOR = 3
SNOOP = '/var/tmp/fleet.snoop'  # the guest's capture since its fleet scenario began

sys.path.insert(0, os.path.join(TOP, 'Tests', 'Integration'))
from harness.lab import wait_for  # noqa: E402

results = open(os.path.join(FLEET, 'results.tap'), 'w', buffering=1)
work = tempfile.mkdtemp(prefix='beacond-fleet-')
logs = os.path.join(FLEET, 'ansible')
os.makedirs(logs, exist_ok=True)
hosts = {}
failures = 0
counter = 0


def log(msg):
    print(f'[{time.strftime("%H:%M:%S")}] {msg}', flush=True)


def read_host(arch):
    with open(os.path.join(FLEET, f'{arch}.host')) as f:
        return dict(line.strip().split('=', 1) for line in f if '=' in line)


def ssh(arch, command, timeout=300, check=True):
    h = hosts[arch]
    r = subprocess.run(['ssh', '-i', os.path.join(work, 'id'), '-p', h['port'], '-o', 'StrictHostKeyChecking=no',
                        '-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=ERROR', '-o', 'ConnectTimeout=30',
                        '-o', 'BatchMode=yes', 'root@127.0.0.1', command], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode:
        raise AssertionError(f'{NAMES[arch]}: {command!r} exited {r.returncode}: {r.stderr.strip()[-400:]} {r.stdout.strip()[-400:]}')
    return r


def ibeacon(uuid, major, minor, power=-59):
    """The frame, written out from Apple's layout, independently of beacond's code."""
    return (bytes.fromhex('0201061aff4c000215') + bytes.fromhex(uuid.replace('-', '')) + major.to_bytes(2, 'big')
            + minor.to_bytes(2, 'big') + power.to_bytes(1, 'big', signed=True))


def on_air(arch, *frames, since_us=None, also=()):
    """The guest's controller (hci0) advertises every one of `frames` now, by its btmon capture; with since_us, nothing
    but them and `also` was on the air after that moment (the kernel may restart its advertising now and then, so off
    for a moment is allowed)."""
    args = (f' --since {since_us}' if since_us else '') + ''.join(f' --also {f.hex()}' for f in also)
    r = ssh(arch, f'python3 /mnt/src/tests/vm/btsnoop.py {SNOOP}{args} ' + ' '.join(f.hex() for f in frames), check=False)
    return r.returncode == 0, r.returncode, r.stdout.strip()


def stayed_on_air(arch, frame, since_us, also=()):
    """`frame` on the air in the last 5 s and nothing but it and `also` since since_us. On a legacy-only radio the
    host's beacons take turns, so `frame` is the one on the air now only in its own slot (a loaded cold CI run asked
    "now" for 10 s, each question an SSH round trip of seconds, and missed it)."""
    seen = guest_now_us(arch) - 5_000_000
    args = f' --seen-since {seen} --since {since_us}' + ''.join(f' --also {f.hex()}' for f in also)
    r = ssh(arch, f'python3 /mnt/src/tests/vm/btsnoop.py {SNOOP}{args} {frame.hex()}', check=False)
    return r.returncode == 0, r.returncode, r.stdout.strip()


EID_PREFIX = bytes.fromhex('0201060303aafe0d16aafe30')
EID_K = 10


def eid_frames(key, t):
    """The Eddystone-EID frames of `key` (K = 10, -20 dBm at 0 m) for the periods around Unix time t: the one on the
    air is one of them, whichever side of a boundary a check falls (test_eid.eid: the specification's computation on
    OpenSSL's AES, independent of beacond's)."""
    from test_eid import eid
    return [EID_PREFIX + (-20).to_bytes(1, 'big', signed=True) + eid(key, EID_K, t + d * (1 << EID_K)) for d in (-1, 0, 1)]


def eid_on_air(arch, key):
    """Its EID for this moment (or the one before) on the air in the last 5 s: on a legacy-only radio it takes turns
    with the iBeacon, so it is on the air in its own slot only, and a check of \"now\" falls in the other one half the
    time (a loaded warm CI run missed it in every one of its checks for 60 s)."""
    now_us = guest_now_us(arch)
    for f in eid_frames(key, now_us // 1_000_000)[:2]:
        r = ssh(arch, f'python3 /mnt/src/tests/vm/btsnoop.py {SNOOP} --seen-since {now_us - 5_000_000} {f.hex()}', check=False)
        if r.returncode == 0:
            return True
    return False


def seen_on_air(arch, frame):
    """`frame` on the air in the last 5 s (by the guest's capture): on a legacy-only radio it takes turns with the
    host's other beacons (eid_on_air)."""
    now_us = guest_now_us(arch)
    r = ssh(arch, f'python3 /mnt/src/tests/vm/btsnoop.py {SNOOP} --seen-since {now_us - 5_000_000} {frame.hex()}', check=False)
    return r.returncode == 0


def guest_now_us(arch):
    return int(ssh(arch, 'date +%s%6N').stdout.strip())


def conf_sha(arch):
    return ssh(arch, "sha256sum < /etc/beacond/beacond.conf | cut -d ' ' -f 1").stdout.strip()


def main_pid(arch):
    return ssh(arch, 'systemctl show beacond -p MainPID --value').stdout.strip()


def installed_version(arch):
    return ssh(arch, "dpkg-query -W -f '${Version}' beacond").stdout.strip()


ALL_AT_ONCE = ['-e', '{"beacond_batches": ["100%"]}']
VAULT = []  # the Vault vars file and password options, once made


def playbook(name, *extra, expect_ok=True):
    """Runs the example playbook; returns (exit code, output). Its output is kept in DIR/ansible/NAME.log."""
    # The junit callback (ansible-core's own) records each task's time per host: docs/fleet.md's per-host figures.
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ANSIBLE_DIR, 'ansible.cfg'), ANSIBLE_FORCE_COLOR='0',
               ANSIBLE_NOCOLOR='1', ANSIBLE_LOCAL_TEMP=os.path.join(work, 'ansible-tmp'), ANSIBLE_STDOUT_CALLBACK='default',
               ANSIBLE_CALLBACKS_ENABLED='junit', JUNIT_OUTPUT_DIR=os.path.join(logs, f'{name}-junit'), JUNIT_TASK_CLASS='yes',
               PATH=BIN + os.pathsep + os.environ.get('PATH', ''))
    t0 = time.monotonic()
    cpu0 = os.times()
    r = subprocess.run([os.path.join(BIN, 'ansible-playbook'), '-i', os.path.join(work, 'inventory.yml'),
                        os.path.join(ANSIBLE_DIR, 'playbook.yml'), *VAULT, *extra], capture_output=True, text=True, env=env,
                       timeout=1800, cwd=ANSIBLE_DIR)
    took = time.monotonic() - t0
    cpu1 = os.times()
    cpu = (cpu1.children_user - cpu0.children_user) + (cpu1.children_system - cpu0.children_system)
    with open(os.path.join(logs, f'{name}.log'), 'w') as f:
        f.write(r.stdout + r.stderr)
    log(f'ansible-playbook {name}: exit {r.returncode} in {took:.0f} s, control node CPU {cpu:.1f} s; task time per host: {per_host(name)}')
    if expect_ok and r.returncode:
        raise AssertionError(f'ansible-playbook exited {r.returncode}: ' + (r.stdout + r.stderr)[-1500:])
    return r.returncode, r.stdout + r.stderr, took


def per_host(name):
    """Seconds of task time per host in a run (the junit callback's testcases), for docs/fleet.md."""
    import glob
    import xml.etree.ElementTree as ET
    hosts_ = {}
    for path in glob.glob(os.path.join(logs, f'{name}-junit', '*.xml')):
        for tc in ET.parse(path).getroot().iter('testcase'):
            m = re.match(r'^\[([^\]]+)\]', tc.get('name', ''))
            if m and m.group(1) != 'include':
                hosts_[m.group(1)] = hosts_.get(m.group(1), 0.0) + float(tc.get('time') or 0)
    return ', '.join(f'{h} {t:.0f} s' for h, t in sorted(hosts_.items()))


# Actions that Ansible runs on the control node, and raw (a shell command on the host, no Python there): any other
# action starts Python on the host.
WITHOUT_PYTHON = {'assert', 'set_fact', 'fail', 'debug', 'meta', 'include_tasks', 'import_tasks', 'raw'}


def modules_run(name):
    """host → the tasks of a run that started Python on it (a module): the junit testcases that were not skipped,
    each task's action read from the role's file at the line the junit callback names."""
    import glob
    import xml.etree.ElementTree as ET
    ran, files = {}, {}
    for path in glob.glob(os.path.join(logs, f'{name}-junit', '*.xml')):
        for tc in ET.parse(path).getroot().iter('testcase'):
            m = re.match(r'^\[([^\]]+)\]', tc.get('name', ''))
            if not m or tc.find('skipped') is not None or 'Validating arguments against arg spec' in tc.get('name', ''):
                continue
            file, line = tc.get('classname', '').rsplit(':', 1)
            if file not in files:
                with open(file) as f:
                    files[file] = f.read().splitlines()
            task = files[file][int(line) - 1:]
            action = next((a.group(1) for a in (re.match(r'^\s+(?:ansible\.builtin\.)?(\w+):', t) for t in task[1:])
                           if a and a.group(1) not in ('name', 'when', 'vars', 'loop', 'register', 'tags')), '?')
            if action not in WITHOUT_PYTHON:
                ran.setdefault(m.group(1), []).append(f'{os.path.basename(file)}:{line} {action}')
    return ran


def each(fn):
    """fn(arch) for both guests at once (each check is a few SSH round trips into an emulated machine); their notes in
    order, or the first failure."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(len(ARCHES)) as pool:
        return [f.result() for f in [pool.submit(fn, a) for a in ARCHES]]


def recap(output):
    """PLAY RECAP: host → {ok, changed, failed, …}."""
    out = {}
    for line in output.splitlines():
        m = re.match(r'^(\S+)\s+:\s+(.*)$', line)
        if m and 'ok=' in m.group(2):
            out[m.group(1)] = {k: int(v) for k, v in re.findall(r'(\w+)=(\d+)', m.group(2))}
    return out


def tap(ok, title, note=''):
    global failures, counter
    counter += 1
    if not ok:
        failures += 1
    results.write(f'{"ok" if ok else "not ok"} {counter} - fleet: {title}{" # " + note if note and ok else ""}\n')
    if not ok and note:
        for line in note.splitlines()[-25:]:
            results.write(f'#   {line}\n')


def step(title, fn):
    log(f'step: {title}')
    try:
        note = fn() or ''
        tap(True, title, note)
        return True
    except Exception as e:  # a failed check, a timeout, a tool that failed
        tap(False, title, f'{type(e).__name__}: {e}')
        log(f'FAILED: {e}')
        return False


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(directory):
    """A static web server for the repository on a loopback port (the guests reach it as qemu's 10.0.2.2)."""
    handler = lambda *a, **kw: QuietHandler(*a, directory=directory, **kw)
    server = socketserver.ThreadingTCPServer(('127.0.0.1', 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


NEW_DEFAULT = '# The next release changed this default config.\n'


def next_version(deb, version, out):
    """A stand-in for the next release: the same package with a higher version and a changed default config (the
    repository, apt's upgrade and dpkg's conffile handling are what is under test, not a change of behaviour), made by
    Tests/VM/repack.sh as the suites' previous and next releases are."""
    default = subprocess.run(['dpkg-deb', '--fsys-tarfile', deb], check=True, capture_output=True).stdout
    conf = os.path.join(tempfile.mkdtemp(dir=work), 'beacond.conf')
    text = subprocess.run(['tar', '-xO', './etc/beacond/beacond.conf'], input=default, check=True, capture_output=True).stdout
    with open(conf, 'wb') as f:
        f.write(text + NEW_DEFAULT.encode())
    subprocess.run(['sh', os.path.join(HERE, 'repack.sh'), deb, out, version, conf], check=True, capture_output=True)
    return out


def vault(work, values):
    """A vars file holding each of `values` (name → value) encrypted with Ansible Vault (as a fleet keeps its keys),
    and its password file."""
    password = os.path.join(work, 'vault-password')
    with open(password, 'w') as f:
        f.write(os.urandom(16).hex() + '\n')
    secrets = os.path.join(work, 'secrets.yml')
    with open(secrets, 'w') as f:
        for name, value in values.items():
            r = subprocess.run([os.path.join(BIN, 'ansible-vault'), 'encrypt_string', '--vault-password-file', password,
                                '--name', name, value], capture_output=True, text=True, check=True)
            assert value not in r.stdout
            f.write(r.stdout)
    return ['-e', f'@{secrets}', '--vault-password-file', password]


def main():
    global hosts
    try:
        hosts = {a: read_host(a) for a in ARCHES}
        subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C', 'beacond fleet test', '-f',
                        os.path.join(work, 'id')], check=True)
        pub = open(os.path.join(work, 'id.pub')).read()
        for a in ARCHES:
            with open(os.path.join(hosts[a]['src'], 'authorized_keys'), 'w') as f:
                f.write(pub)
        log('waiting for the guest to finish its suite and be ready')
        for a in ARCHES:
            def ready(a=a):
                if os.path.exists(os.path.join(FLEET, f'{a}.gone')):
                    raise AssertionError(f'the {a} suite ended before its guest was ready for the fleet test')
                return os.path.exists(os.path.join(hosts[a]['out'], 'fleet-ready'))
            wait_for(ready, 3600, interval=2, what=f'the {a} guest to be ready')
            wait_for(lambda a=a: ssh(a, 'true', check=False).returncode == 0, 180, interval=1, what=f'sshd on the {a} guest')
            log(f'{a} guest ready, sshd on 127.0.0.1:{hosts[a]["port"]}')
        run_fleet()
    except Exception as e:
        tap(False, 'the fleet test could not run', f'{type(e).__name__}: {e}')
    finally:
        verdict = 'ok' if failures == 0 and counter > 0 else f'failed: {failures} of {counter} fleet checks'
        for a in ARCHES:
            try:
                with open(os.path.join(hosts[a]['src'], 'done'), 'w') as f:
                    f.write(verdict + '\n')
            except (KeyError, OSError):
                pass
        results.close()
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


def run_fleet():
    debs = {a: hosts[a]['deb'] for a in ARCHES}
    # The control node's own beacond (the amd64 package's binary runs here) makes the fleet's one UUID.
    x = os.path.join(work, 'control-node')
    subprocess.run(['dpkg-deb', '-x', debs['amd64'], x], check=True)
    uuid = subprocess.run([os.path.join(x, 'usr', 'bin', 'beacond'), 'gen-uuid'], check=True, capture_output=True,
                          text=True).stdout.strip()
    version = subprocess.run(['dpkg-deb', '-f', debs['amd64'], 'Version'], check=True, capture_output=True,
                             text=True).stdout.strip()
    log(f'fleet UUID {uuid}, package {version}')
    frames = {a: ibeacon(uuid, MAJOR, MINOR[a]) for a in ARCHES}
    # The host also has an Eddystone-EID beacon, and an iBeacon from a resolvable address, their keys from Ansible Vault.
    key = os.urandom(16).hex().upper()
    irk = os.urandom(16).hex().upper()
    global VAULT
    VAULT = vault(work, {'vault_shop7_eid_key': key, 'vault_shop7_door_irk': irk})
    eid_beacon = {'format': 'eddystone-eid', 'identity_key_file': 'shop7-2.key', 'rotation_exponent': EID_K, 'measured_power': -20}
    rpa_beacon = {'uuid': '{{ beacond_uuid }}', 'major': '{{ shop_major }}', 'minor': RPA_MINOR, 'address': 'resolvable',
                  'resolving_key_file': 'door.irk'}
    rpa_frame = ibeacon(uuid, MAJOR, RPA_MINOR)
    inventory = os.path.join(work, 'inventory.yml')
    with open(inventory, 'w') as f:
        json.dump({'all': {
            'vars': {'ansible_user': 'root', 'ansible_ssh_private_key_file': os.path.join(work, 'id'),
                     'ansible_ssh_common_args': '-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR',
                     'ansible_python_interpreter': '/usr/bin/python3',
                     'beacond_package': debs, 'beacond_uuid': uuid,
                     # The role's [advertising] variable, at 1 s: the guest's legacy-only btvirt makes the two beacons
                     # take turns, and at 100 ms their turns cost the emulated guest a sixth of a core for the whole
                     # run (what the role does with it is the same at any interval).
                     'beacond_advertising': {'interval_ms': 1000},
                     'beacond_beacons': [{'uuid': '{{ beacond_uuid }}', 'major': '{{ shop_major }}', 'minor': '{{ shelf_minor }}'}]},
            'children': {'beacons': {'children': {'shop7': {
                'vars': {'shop_major': MAJOR},
                'hosts': {NAMES[a]: {'ansible_host': '127.0.0.1', 'ansible_port': int(hosts[a]['port']), 'shelf_minor': MINOR[a],
                                     'beacond_verify': True, 'beacond_verify_device': 'hci1', 'beacond_verify_hosts': [NAMES['amd64']],
                                     'beacond_beacons': [{'uuid': '{{ beacond_uuid }}', 'major': '{{ shop_major }}',
                                                          'minor': '{{ shelf_minor }}'}, eid_beacon, rpa_beacon],
                                     'beacond_keys': {'shop7-2.key': '{{ vault_shop7_eid_key }}',
                                                      'door.irk': '{{ vault_shop7_door_irk }}'}}
                          for a in ARCHES}}}}}}}, f, indent=1)

    state = {}

    def first_run():
        _, out, took = playbook('1-first-run', *ALL_AT_ONCE)

        def check(a):
            # (In the last 5 s: it takes turns with the host's two other beacons on the legacy-only radio.)
            wait_for(lambda: seen_on_air(a, frames[a]), 60, interval=1, what=f'{NAMES[a]} advertising {frames[a].hex()} (btmon)')
            conf = ssh(a, 'cat /etc/beacond/beacond.conf').stdout
            assert f'minor = {MINOR[a]}' in conf and f'uuid = "{uuid}"' in conf, conf
            arch, installed = ssh(a, 'dpkg --print-architecture').stdout.strip(), installed_version(a)
            state[a] = {'sha': conf_sha(a)}
            assert installed == version and arch == a, (installed, arch)
            wait_for(lambda: eid_on_air(a, key), 60, interval=1, what=f'{NAMES[a]} advertising its EID (btmon)')
            wait_for(lambda: seen_on_air(a, rpa_frame), 60, interval=1, what=f'{NAMES[a]} advertising minor {RPA_MINOR} (btmon)')
            modes = ssh(a, 'stat -c %a /etc/beacond/keys/shop7-2.key /etc/beacond/keys/door.irk').stdout.split()
            assert modes == ['600', '600'], f'the key files are mode {modes}'
            return (f'{NAMES[a]} ({arch}) minor {MINOR[a]}, its Eddystone-EID and minor {RPA_MINOR} (resolvable) on the air '
                    '(their keys from Vault, 0600)')
        notes = each(check)
        for secret in (key, irk):
            assert secret not in out and secret.lower() not in out, 'a key is in the playbook output'
        return '; '.join(notes) + f'; {took:.0f} s'

    def verifier():
        # The role enabled the timer; run the check now instead of waiting for it.
        r = ssh('amd64', 'systemctl start beacond-verify@hci1.service; echo "exit $?"; '
                         'systemctl show beacond-verify@hci1.service -p Result --value; '
                         'cat /var/lib/prometheus/node-exporter/beacond-verify-hci1.prom', check=False, timeout=180)
        journal = ssh('amd64', 'journalctl -u beacond-verify@hci1.service -o cat --no-pager | tail -n 12', check=False).stdout
        assert r.stdout.startswith('exit 0\nsuccess\n'), r.stdout[:300] + journal
        from prometheus_client.parser import text_string_to_metric_families
        metrics = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for fam in text_string_to_metric_families(r.stdout.split('\n', 2)[2]) for s in fam.samples}
        assert metrics[('beacond_verify_success', (('device', 'hci1'),))] == 1.0, metrics
        heard = sorted(((dict(l), v) for (n, l), v in metrics.items() if n == 'beacond_verify_beacon_heard'), key=lambda h: h[0]['beacon'])
        assert [v for _, v in heard] == [1.0, 1.0, 1.0], metrics
        mismatch = [v for (n, _), v in metrics.items() if n == 'beacond_verify_beacon_mismatch']
        assert mismatch == [0.0, 0.0, 0.0], metrics
        # Each beacon by its identifiers, as alerting rules select it (deploy/prometheus/beacond-alerts.yml): the
        # iBeacon by uuid, major and minor; the Eddystone-EID by its key's name (the verifier's copy), resolved.
        assert {k: heard[0][0].get(k) for k in ('format', 'uuid', 'major', 'minor', 'device')} == {
            'format': 'ibeacon', 'uuid': uuid, 'major': str(MAJOR), 'minor': str(MINOR['amd64']), 'device': 'hci1'}, heard
        assert {k: heard[1][0].get(k) for k in ('format', 'key_file', 'device')} == {
            'format': 'eddystone-eid', 'key_file': 'pi-amd64--shop7-2.key', 'device': 'hci1'}, heard
        # The resolvable iBeacon: heard (not a mismatch) only from addresses that resolve under the verifier's copy of
        # its key, which the verify config names as HOST--NAME; the verifier holds the keys its configs name, no more.
        assert {k: heard[2][0].get(k) for k in ('format', 'uuid', 'major', 'minor', 'device')} == {
            'format': 'ibeacon', 'uuid': uuid, 'major': str(MAJOR), 'minor': str(RPA_MINOR), 'device': 'hci1'}, heard
        conf = ssh('amd64', 'cat /etc/beacond/verify/pi-amd64.conf').stdout
        assert 'resolving_key_file = "pi-amd64--door.irk"\n' in conf, conf
        copies = ssh('amd64', 'ls /etc/beacond/verify/keys').stdout.split()
        assert copies == ['pi-amd64--door.irk', 'pi-amd64--shop7-2.key'], copies
        timer = ssh('amd64', 'systemctl is-enabled beacond-verify@hci1.timer; systemctl is-active beacond-verify@hci1.timer').stdout.split()
        assert timer == ['enabled', 'active'], timer
        # Its interval beside the metrics (the role's default 15min, from /etc/default/beacond-verify-hci1), for the
        # alerting rules' BeaconVerifierStale.
        interval = ssh('amd64', 'cat /var/lib/prometheus/node-exporter/beacond-verify-hci1.interval.prom').stdout
        assert 'beacond_verify_interval_seconds{device="hci1"} 900\n' in interval, interval
        # The textfile directory replaced by a symlink by whoever owns /var/lib/prometheus (prometheus-node-exporter
        # makes it the prometheus user's home; this guest has no such user, so nobody plays it): the verifier, root,
        # must not write through it.
        r = ssh('amd64', 'p=/var/lib/prometheus; d=$p/node-exporter; chown nobody $p; '
                         'runuser -u nobody -- sh -c "mv $d $d.real && ln -s /etc/cron.d $d"; '
                         'systemctl start beacond-verify@hci1.service; echo "exit $?"; echo "--- cron.d"; ls /etc/cron.d; '
                         'rm $d && mv $d.real $d && chown root $p; echo "--- journal"; '
                         'journalctl -u beacond-verify@hci1.service -o cat --no-pager | tail -n 8', check=False, timeout=180)
        status, rest = r.stdout.split('\n--- cron.d\n', 1)
        cron, journal = rest.split('--- journal\n', 1)
        assert status == 'exit 1', r.stdout
        assert not any(name.startswith('beacond-verify') for name in cron.split()), cron
        # beacond's refusal, or systemd-tmpfiles' (which runs first, and follows no such link either).
        assert any(w in journal.lower() for w in ('not followed', 'unsafe path transition', 'not a directory')), journal
        return ('beacond-verify@hci1 heard pi-amd64\'s three beacons from the second btvirt radio (the iBeacon, the EID resolved with its copy of the key, and the iBeacon from addresses that resolve under its copy of door.irk): exit 0, beacond_verify_success 1, its interval 900 s beside it; the timer enabled; '
                'with the textfile directory a symlink to /etc/cron.d: the check failed and wrote nothing there')

    def second_run():
        _, out, took = playbook('2-second-run', *ALL_AT_ONCE)
        r = recap(out)
        assert set(r) >= set(NAMES.values()) and all(r[n]['changed'] == 0 and r[n]['failed'] == 0 for n in NAMES.values()), r
        # The role's promise (docs/fleet.md): with nothing to change, no module runs, so no Python starts on a host.
        ran = modules_run('2-second-run')
        assert not ran, f'modules ran on hosts with nothing to change: {ran}'
        return f'changed=0, no module run on the host ({took:.0f} s)'

    def mistake():
        since = dict(zip(ARCHES, each(guest_now_us)))
        bad = os.path.join(work, 'mistake.yml')
        with open(bad, 'w') as f:
            json.dump({'shop_major': 70000}, f)
        code, out, took = playbook('3-mistake', '-e', f'@{bad}', expect_ok=False)
        assert code != 0, 'the play did not fail'
        message = "error: 'major' in [[beacon]] #1 must be from 0 to 65535, found 70000"
        assert message in out, out[-1500:]
        # Refused at the role's check on the host, before anything was replaced (not at the template's validate:).
        assert 'TASK [beacond : Run beacond check-config on them]' in out, out[-1500:]
        def check(a):
            assert conf_sha(a) == state[a]['sha'], 'the config changed'
            eids = eid_frames(key, since[a] // 1_000_000)
            ok, rc, now = stayed_on_air(a, frames[a], since[a], also=eids + [rpa_frame])
            assert ok, f'{NAMES[a]}: the old frame is not on the air, or another was meanwhile (btsnoop exit {rc}: {now})'
            return f'{NAMES[a]}: its config unchanged, its frame on the air and no other since the run began'
        notes = each(check)
        r = recap(out)
        return f'beacond\'s message in the play ("{message}"); {"; ".join(notes)}; recap {r}'

    def bad_key():
        # A malformed key from Vault (31 hex digits) for a new EID beacon on pi-amd64: refused by beacond before anything
        # is replaced, in --check --diff as in a real run; the old config, the keys and the frame stay.
        since = guest_now_us('amd64')
        pid = main_pid('amd64')
        extra = os.path.join(work, 'bad-key.yml')
        with open(extra, 'w') as f:
            json.dump({'beacond_beacons': [{'uuid': uuid, 'major': MAJOR, 'minor': MINOR['amd64']}, eid_beacon, rpa_beacon,
                                           {'format': 'eddystone-eid', 'identity_key_file': 'new.key'}],
                       'beacond_keys': {'shop7-2.key': key, 'door.irk': irk, 'new.key': key[:31]}}, f)
        message = 'holds 31 hex digits; an Eddystone-EID identity key is 128 bits: 32 hex digits'
        notes = []
        for name, flags in (('3b-bad-key-check', ['--check', '--diff']), ('3c-bad-key', [])):
            code, out, took = playbook(name, '--limit', NAMES['amd64'], '-e', f'@{extra}', *flags, expect_ok=False)
            assert code != 0 and message in out, out[-1500:]
            assert key[:31] not in out and key[:31].lower() not in out, 'the key is in the playbook output'
            notes.append(f'{" ".join(flags) or "a real run"}: failed with beacond\'s message ({took:.0f} s)')
        assert conf_sha('amd64') == state['amd64']['sha'], 'the config changed'
        assert ssh('amd64', 'ls /etc/beacond/keys').stdout.split() == ['door.irk', 'shop7-2.key'], 'a key was put in place'
        assert main_pid('amd64') == pid, 'beacond was restarted'
        ok, rc, now = stayed_on_air('amd64', frames['amd64'], since, also=eid_frames(key, since // 1_000_000) + [rpa_frame])
        assert ok, f'the old frame is not on the air, or another was meanwhile (btsnoop exit {rc}: {now})'
        return '; '.join(notes) + '; the config, the keys and the process unchanged, the frame on the air throughout'

    def upgrade():
        repo = os.path.join(work, 'repo')
        make_repo = ['sh', os.path.join(TOP, 'scripts', 'make-repo.sh'), repo]
        subprocess.run(make_repo + [debs[a] for a in ARCHES], check=True, capture_output=True)
        new = f'{version}+fleet1'
        nexts = [next_version(debs[a], new, os.path.join(work, f'beacond_{new}_{a}.deb')) for a in ARCHES]
        r = subprocess.run(make_repo + nexts, check=True, capture_output=True, text=True)
        assert 'THROW-AWAY key' in r.stderr, 'make-repo.sh did not warn about its throw-away key'
        port = serve(repo)
        # An earlier run that copied the host's key and then lost its connection: Ansible dropped its restart, and the
        # key in place is newer than the running service. This run must restart it (the probe compares the two).
        ssh('amd64', 'sleep 1; touch /etc/beacond/keys/shop7-2.key')
        before = dict(zip(ARCHES, each(main_pid)))
        since = dict(zip(ARCHES, each(guest_now_us)))
        repo_vars = os.path.join(work, 'repository.yml')
        # The new version through the role (beacond_version: latest), with dpkg told to keep the edited conffile.
        with open(repo_vars, 'w') as f:
            json.dump({'beacond_package': '', 'beacond_version': 'latest',
                       'beacond_apt_repository': {'url': f'http://10.0.2.2:{port}/', 'key': os.path.join(repo, 'beacond-archive-keyring.gpg')}}, f)
        _, out, took = playbook('4-upgrade', '-e', f'@{repo_vars}', *ALL_AT_ONCE)
        restarted = re.search(r'TASK \[beacond : Restart beacond, which started before its newest key was written\][^\n]*\n(?:[^\n]*\n)*?changed: \[pi-amd64\]', out)
        assert restarted, 'the lost restart did not happen: ' + out[-1500:]

        def check(a):
            got = installed_version(a)
            assert got == new, f'{NAMES[a]} has {got}, not {new}'
            assert conf_sha(a) == state[a]['sha'], 'the conffile was not kept'
            dist = ssh(a, 'cat /etc/beacond/beacond.conf.dpkg-dist', check=False).stdout
            assert dist.endswith(NEW_DEFAULT), f'{NAMES[a]}: no .dpkg-dist with the new default ({dist[-200:]!r})'
            pid = main_pid(a)
            assert pid not in ('0', before[a]), f'{NAMES[a]}: no new main process ({before[a]} → {pid})'
            wait_for(lambda: on_air(a, frames[a])[0], 60, interval=1, what=f'{NAMES[a]} advertising again')
            wait_for(lambda: eid_on_air(a, key), 60, interval=1, what=f'{NAMES[a]} advertising its EID again')
            # For docs/fleet.md: how long the upgrade's restart kept the beacon off the air (the controller's side).
            gaps = ssh(a, f'python3 /mnt/src/tests/vm/btsnoop.py {SNOOP} --since {since[a]} --gaps {frames[a].hex()} 2>/dev/null', check=False).stdout
            gaps = re.findall(r'^gap (\S+ ms)$', gaps, flags=re.M)
            policy = ssh(a, 'apt-cache policy beacond').stdout
            assert '10.0.2.2' in policy, policy
            return f'{NAMES[a]} {version} → {got} through the role, pid {before[a]} → {pid}, off the air {" + ".join(gaps) or "never"}'
        notes = each(check)
        return '; '.join(notes) + (f'; the edited conffile kept, the new default beside it as .dpkg-dist; frames back ({took:.0f} s); '
                                   'its key newer than its service (a lost restart): the role restarted it')

    for title, fn in (('the first run installs the package for the host\'s architecture and puts its frames on the air (an iBeacon, an Eddystone-EID and a resolvable iBeacon whose keys came from Vault)', first_run),
                      ('the verifier (pi-amd64, second radio hci1) hears the beacons from the air, the resolvable one with its copy of the key', verifier),
                      ('a second run changes nothing', second_run),
                      ('major 70000 in the inventory fails at the role\'s beacond check-config with beacond\'s message; the host keeps the old config and frames on the air', mistake),
                      ('a malformed EID key from Vault fails the play with beacond\'s message before anything is replaced, in --check --diff as in a real run: config, keys, process and frame unchanged', bad_key),
                      ('a new version in the signed repository reaches the host through the role: the edited conffile kept (the new default as .dpkg-dist), restarted, back on the air', upgrade)):
        step(title, fn)


if __name__ == '__main__':
    sys.exit(main())
