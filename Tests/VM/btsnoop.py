#!/usr/bin/env python3
"""The controller's side of the VM tests: reads the btsnoop file `btmon -w` writes (monitor format) and replays the
HCI commands each controller accepted into its advertising state, so a test sees what is on the air without asking
beacond. Imported by scenarios.py; run by the fleet test over SSH:

    python3 btsnoop.py SNOOP [--index N] [--seen-since UNIX_US] [--since UNIX_US [--gaps]] [--also HEX]... HEX...

prints what hciN advertises now (one hex line per frame) and exits 0 when every HEX frame is among them, 1 when one
is not (with --seen-since: was on the air at no moment after it, for beacons that take turns), and with --since, 3
when anything else went on the air after UNIX_US (only these frames, or nothing while the kernel restarts
advertising, were on the air since). --gaps also prints, for the first HEX, each time it was off
the air after UNIX_US and for how long ("gap 23.4 ms"). --also names a frame that may be on the air too (one of them,
for a beacon whose frame changes: an Eddystone-EID's at a period boundary).
"""
import struct
import sys

BTSNOOP_UNIX_EPOCH_US = 0x00DCDDB30F2F8000  # btsnoop counts µs from year 0


class Snoop:
    """Reads the btsnoop (monitor format) file btmon writes, incrementally."""

    def __init__(self, path):
        self.path = path
        self.offset = 16
        self.records = []

    def update(self):
        with open(self.path, 'rb') as f:
            f.seek(self.offset)
            data = f.read()
        i = 0
        while i + 24 <= len(data):
            _orig, incl, flags, _drops, ts = struct.unpack('>IIIIq', data[i:i + 24])
            if i + 24 + incl > len(data):
                break
            self.records.append((ts - BTSNOOP_UNIX_EPOCH_US, flags >> 16, flags & 0xFFFF, data[i + 24:i + 24 + incl]))
            i += 24 + incl
        self.offset += i
        return self.records


def is_refresh(disable, enable):
    """Whether two accepted commands (opcode, params) in a row are a refresh: a disable and at once the enable of the
    same advertiser or sets (raw HCI's, every 2 s, for a controller that stops by itself)."""
    (a, p), (b, q) = disable, enable
    return a == b and a in (0x200A, 0x2039) and p[:1] == b'\x00' and q[:1] == b'\x01' and p[1:] == q[1:]


def refresh_pairs(commands):
    """The indices in replay's `commands` of every refresh's two commands."""
    out = set()
    for k in range(len(commands) - 1):
        if is_refresh(commands[k][1:3], commands[k + 1][1:3]):
            out |= {k, k + 1}
    return out


class Replayer:
    """The advertising state of controller hciINDEX after each command it accepted (replay's timeline and commands),
    kept between calls: each call goes on from the records it saw last. A scenario polls the growing capture many
    times (every wait() does); replaying it whole each time cost the emulated guests most of their CPU."""

    def __init__(self, index):
        self.index = index
        self.seen = 0
        self.pending = {}
        self.held = None  # (ts, opcode, params) of a disable whose entry waits for the next command
        self.legacy = {'data': b'', 'enabled': False}
        self.sets = {}
        self.timeline = []
        self.commands = []  # (ts, opcode, params, status)
        self.round_trips = []  # (command sent µs, its Command Complete or Status µs): the controller's time

    def on_air(self):
        datas = set()
        if self.legacy['enabled']:
            datas.add(self.legacy['data'])
        for s in self.sets.values():
            if s.get('enabled'):
                datas.add(s.get('data', b''))
        return datas

    def apply_enable(self, opcode, p):
        if opcode == 0x200A:
            self.legacy['enabled'] = p[0] == 1
        elif len(p) >= 2:
            if p[1] == 0 and p[0] == 0:
                for s in self.sets.values():
                    s['enabled'] = False
            for k in range(p[1]):
                if 2 + 4 * k < len(p):
                    self.sets.setdefault(p[2 + 4 * k], {})['enabled'] = p[0] == 1

    def feed(self, records):
        """Goes on from where it stopped; returns (timeline, commands) as replay() does."""
        timeline = self.timeline
        for ts, idx, op, pkt in records[self.seen:]:
            if idx != self.index:
                continue
            if op in (0, 1, 9):  # new index, deleted index, closed index (down): nothing of the old state is on air
                if self.held is not None:
                    timeline.append((self.held[0], self.on_air()))
                    self.held = None
                self.legacy = {'data': b'', 'enabled': False}
                self.sets = {}
                timeline.append((ts, self.on_air()))
                continue
            if op == 2 and len(pkt) >= 3:
                self.pending[pkt[0] | pkt[1] << 8] = (ts, pkt[3:])
                continue
            if op != 3 or len(pkt) < 3:
                continue
            if pkt[0] == 0x0E and len(pkt) >= 6:
                opcode, status = pkt[3] | pkt[4] << 8, pkt[5]
            elif pkt[0] == 0x0F and len(pkt) >= 6:
                status, opcode = pkt[2], pkt[4] | pkt[5] << 8
            else:
                continue
            if opcode not in self.pending:
                continue
            cts, p = self.pending.pop(opcode)
            self.commands.append((cts, opcode, p, status))
            self.round_trips.append((cts, ts))
            if status != 0:
                continue
            if self.held is not None:
                hts, hop, hp = self.held
                self.held = None
                if is_refresh((hop, hp), (opcode, p)):
                    # The refresh's enable: the state is back as it was before the disable.
                    self.apply_enable(opcode, p)
                    continue
                timeline.append((hts, self.on_air()))
            if opcode == 0x0C03:
                self.legacy = {'data': b'', 'enabled': False}
                self.sets = {}
            elif opcode == 0x2008 and p:
                self.legacy['data'] = bytes(p[1:1 + p[0]])
            elif opcode in (0x200A, 0x2039) and p:
                self.apply_enable(opcode, p)
                if p[0] == 0:
                    self.held = (ts, opcode, p)
                    continue
            elif opcode == 0x2037 and len(p) >= 4:
                self.sets.setdefault(p[0], {})['data'] = bytes(p[4:4 + p[3]])
            elif opcode == 0x203C and p:
                self.sets.pop(p[0], None)
            elif opcode == 0x203D:
                self.sets = {}
            timeline.append((ts, self.on_air()))
        self.seen = len(records)
        # A disable still waiting for its next command counts as off until then (not kept: a refresh's enable may
        # still come and take it back).
        if self.held is not None:
            return timeline + [(self.held[0], self.on_air())], self.commands
        return timeline, self.commands


_replayers = {}


def replay(records, index=0):
    """The advertising state of controller hciINDEX after each command it accepted, as a timeline of (unix µs,
    on-air datas), and the commands with their statuses. A refresh (a disable and at once the same enable, nothing
    between: raw HCI's, every 2 s) leaves no entry: it is off the air for milliseconds, less than one advertising
    interval. `records` that grow (Snoop.update's list) are replayed from where the last call stopped; the lists
    returned are the replayer's own (read them, do not change them)."""
    key = (id(records), index)
    r = _replayers.get(key)
    if r is None or r.seen > len(records):
        r = _replayers[key] = Replayer(index)
    return r.feed(records)


def round_trips(records, since_us, until_us, index=0):
    """Each (sent µs, answered µs) of a command to hciINDEX answered within the window: while the controller (and the
    kernel between) had it, beacond was waiting, not deciding."""
    replay(records, index)
    r = _replayers[(id(records), index)]
    return [(s, e) for s, e in r.round_trips if e >= since_us and s <= until_us]


def ever_on(timeline, expected, since_us):
    """`expected` was on the air at some moment at or after since_us: on already then, or put on after."""
    before = [datas for ts, datas in timeline if ts < since_us]
    return bool(before and expected in before[-1]) or any(expected in datas for ts, datas in timeline if ts >= since_us)


def transitions(records, expected, since_us, index=0):
    """[(ts, True|False)] each time `expected` went on or off the air of hciINDEX after since_us."""
    timeline, _ = replay(records, index)
    out, last = [], None
    for ts, datas in timeline:
        now = expected in datas
        if now != last and ts >= since_us:
            out.append((ts, now))
        last = now
    return out


def gap_intervals(records, expected, since_us, until_us=None, index=0):
    """Each time (start µs, end µs) `expected` was off the air of hciINDEX after since_us: without until_us, each gap
    that began and ended after since_us; with it, every moment off the air within the window, its edges too (off the
    whole window: the window)."""
    off = None
    if until_us is not None:
        timeline, _ = replay(records, index)
        before = [datas for ts, datas in timeline if ts <= since_us]
        off = None if before and expected in before[-1] else since_us
    out = []
    for ts, on in transitions(records, expected, since_us, index):
        if until_us is not None and ts > until_us:
            break
        if not on and off is None:
            off = ts
        elif on and off is not None:
            out.append((off, ts))
            off = None
    if until_us is not None and off is not None:
        out.append((off, until_us))
    return out


def gaps(records, expected, since_us, until_us=None, index=0):
    """Each time (ms) `expected` was off the air of hciINDEX after since_us (gap_intervals' lengths)."""
    return [(end - start) / 1000 for start, end in gap_intervals(records, expected, since_us, until_us, index)]


def beyond_stalls(gap, stalls):
    """How long (ms) the gap (start µs, end µs) lasted while the guest ran: its length less its overlap with the
    stalls (start µs, end µs) a probe in the guest saw (read_stalls), overlapping stalls counted once."""
    start, end = gap
    stalled, reach = 0, start
    for s, e in sorted(stalls):
        s, e = max(s, reach), min(e, end)
        if e > s:
            stalled += e - s
            reach = e
    return (end - start - stalled) / 1000


def read_stalls(path):
    """The stalls the guest's probe wrote (one "start_us end_us" line each); none when it wrote nothing."""
    try:
        with open(path) as f:
            return [tuple(int(x) for x in line.split()) for line in f if len(line.split()) == 2]
    except FileNotFoundError:
        return []


def verdict(timeline, wanted, also, seen_since=None, since=None):
    """main's answer: (exit status, what is on the air now, what else was on the air since `since`). 1 when a wanted
    frame is not on the air now, or, with seen_since, was at no moment after it (a beacon that takes turns is on the
    air in its own slot only); 3 when, with since, a frame neither wanted nor in `also` was on the air after it."""
    now = timeline[-1][1] if timeline else set()
    if seen_since is not None:
        if not all(ever_on(timeline, w, seen_since) for w in wanted):
            return 1, now, set()
    elif not all(w in now for w in wanted):
        return 1, now, set()
    if since is not None:
        allowed = set(wanted) | set(also)
        others = {d for ts, datas in timeline if ts >= since for d in datas if d not in allowed}
        if others:
            return 3, now, others
    return 0, now, set()


def main(argv):
    import argparse
    p = argparse.ArgumentParser(description='What a controller advertises, from a btmon capture.')
    p.add_argument('snoop')
    p.add_argument('--index', type=int, default=0)
    p.add_argument('--since', type=int, help='also fail (3) when other frames were on the air after this Unix time in µs')
    p.add_argument('--gaps', action='store_true', help='print how long the first frame was off the air each time')
    p.add_argument('--also', action='append', default=[], help='a frame that may be on the air too')
    p.add_argument('--seen-since', type=int, help='each frame on the air at some moment after this Unix time in µs, '
                   'not necessarily now (a beacon that takes turns with others is on the air in its own slot only); '
                   'with --since, also nothing else after that')
    p.add_argument('frames', nargs='*')
    a = p.parse_intermixed_args(argv)
    records = Snoop(a.snoop).update()
    timeline, _ = replay(records, a.index)
    wanted = [bytes.fromhex(f) for f in a.frames]
    rc, now, others = verdict(timeline, wanted, {bytes.fromhex(f) for f in a.also}, a.seen_since, a.since)
    if a.seen_since is None:
        for d in sorted(now):
            print(d.hex())
    if rc != 1 and a.since is not None and a.gaps and wanted:
        for g in gaps(records, wanted[0], a.since, index=a.index):
            print(f'gap {g:.1f} ms')
    if others:
        print('also on the air since then: ' + ' '.join(sorted(d.hex() for d in others)))
    return rc

if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
