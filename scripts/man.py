#!/usr/bin/env python3
"""Writes the man pages beacond(8) and beacond.conf(5) from the binary itself, so that they cannot drift from it:

- every command, option, usage line, signal and exit status comes from `beacond help COMMAND` (the CLI's one table
  of commands, each option declared once);
- every config key, its formats, type, range, default and meaning comes from `beacond check-config --schema` (the
  config schema the validator uses);
- the example file is config/beacond.conf itself. The README is the long guide; the pages point to it.

    python3 scripts/man.py --beacond BINARY --version X.Y.Z --out DIR
"""
import argparse
import json
import os
import re
import subprocess

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def esc(text):
    """Plain text to roff: backslashes, hyphens that are minus signs in options, and line-initial dots/quotes."""
    text = text.replace('\\', '\\e')
    text = re.sub(r'(?<![\w])-', r'\\-', text)
    return text


def inline(md):
    """A line of README markdown to roff: `code` and **bold** become bold, [text](link) keeps the text."""
    md = re.sub(r'\[([^\]]+)\]\([^)]+\)', r'\1', md)
    out = []
    for part in (re.split(r'(`[^`]*`|\*\*[^*]+\*\*)', md)):
        if part.startswith('`') and part.endswith('`') and len(part) >= 2:
            out.append('\\fB' + esc(part[1:-1]) + '\\fR')
        elif part.startswith('**') and part.endswith('**'):
            out.append('\\fB' + esc(part[2:-2]) + '\\fR')
        else:
            out.append(esc(part))
    return ''.join(out)


def line_safe(roff):
    """A roff text line may not start with a dot or an apostrophe."""
    return '\\&' + roff if roff[:1] in ('.', "'") else roff


def help_sections(text):
    """`beacond help COMMAND` output split into its OVERVIEW (up to the first blank line), description, USAGE,
    OPTIONS, SIGNALS and EXIT STATUS."""
    sections = {'description': []}
    current = 'description'
    for line in text.splitlines():
        m = re.match(r'^([A-Z][A-Z ]+):\s*(.*)$', line)
        if m:
            current = m.group(1)
            sections[current] = [m.group(2)] if m.group(2) else []
        elif current == 'OVERVIEW' and not line.strip():
            current = 'description'  # the overview, then the paragraphs under it
        else:
            sections.setdefault(current, []).append(line)
    return sections


def options(lines):
    """Help OPTIONS lines ("  -c, --config PATH   Text" plus continuation lines) as (flags, text) pairs."""
    items = []
    for line in lines:
        if not line.strip():
            continue
        m = re.match(r'^  (-\S.*?)(?:\s{2,}(.*))?$', line)
        if m and not line.startswith('   '):
            items.append([m.group(1).strip(), m.group(2) or ''])
        elif items:
            items[-1][1] += ' ' + line.strip()
    return items


def run_help(beacond, *args):
    return subprocess.run([beacond, *args], check=True, capture_output=True, text=True).stdout


def beacond_8(beacond, version, date):
    top = help_sections(run_help(beacond, '--help'))
    commands = [l.split()[0] for l in top['COMMANDS'] if l.strip()]
    helps = {c: help_sections(run_help(beacond, 'help', c)) for c in commands}  # each command's help, read once
    overview = ' '.join(l.strip() for l in top['OVERVIEW'])
    out = [f'.TH BEACOND 8 "{date}" "beacond {version}" "System Administration"',
           '.SH NAME', 'beacond \\- ' + esc(overview.replace('beacond keeps ', 'keep ', 1).rstrip('.')),
           '.SH SYNOPSIS']

    def usages(c):
        """Every USAGE line of a command (scan has two: scanning, and --expect)."""
        return [l.strip() for l in helps[c].get('USAGE', []) if l.strip()]

    def text(lines):
        return ' '.join(l.strip() for l in lines if l.strip())

    for c in commands:
        for usage in usages(c):
            out += ['.PP', '.B ' + esc(usage).split(' ', 1)[0], esc(usage.split(' ', 1)[1]) if ' ' in usage else '']
    out += ['.PP', '.B beacond', '\\-\\-help | \\-\\-version']
    out += ['.SH DESCRIPTION', '.PP', line_safe(esc(overview)),
            '.PP', 'The full guide is \\fI/usr/share/doc/beacond/README.md\\fR.']
    out += ['.SH COMMANDS']
    for c in commands:
        s = helps[c]
        out += ['.SS ' + esc(c)]
        out += ['.PP', line_safe(esc(text(s['OVERVIEW'])))]
        # The paragraphs between OVERVIEW and USAGE.
        para = []
        for line in s['description'] + ['']:
            if line.strip():
                para.append(line.strip())
            elif para:
                out += ['.PP', line_safe(esc(' '.join(para)))]
                para = []
        out += ['.PP', 'Usage:']
        for k, usage in enumerate(usages(c)):
            out += (['.br'] if k else []) + ['.B ' + esc(usage)]
        for flags, help_text in options(s.get('OPTIONS', [])):
            out += ['.TP', '.B ' + esc(flags), line_safe(esc(help_text.strip()))]
        if 'EXIT STATUS' in s:
            out += ['.PP', 'Exit status: ' + esc(text(s['EXIT STATUS']))]
    signals = [c for c in commands if 'SIGNALS' in helps[c]]
    if signals:
        out += ['.SH SIGNALS'] + sum((['.PP', line_safe(esc(text(helps[c]['SIGNALS'])))] for c in signals), [])
    out += ['.SH EXIT STATUS', '.PP', 'Each command above says what its exit status means; 64 is a usage error everywhere.']
    out += ['.SH FILES',
            '.TP', '.I /etc/beacond/beacond.conf', 'The configuration (see \\fBbeacond.conf\\fR(5)); a conffile.',
            '.TP', '.I /etc/beacond/hciN.conf', 'The configuration of the \\fBbeacond@hciN.service\\fR instance.',
            '.TP', '.I /usr/lib/systemd/system/beacond.service', 'The service, \\fBType=notify\\fR with the watchdog.',
            '.TP', '.I /usr/lib/systemd/system/beacond@.service', 'One instance per adapter.',
            '.TP', '.I /usr/lib/systemd/system/beacond-verify@.service, beacond-verify@.timer',
            'Checks from the air, with adapter hciN, that the beacons of \\fI/etc/beacond/verify/*.conf\\fR are on the air '
            '(\\fBbeacond scan \\-\\-expect\\fR), every 15 minutes; the result also goes to '
            '\\fI/var/lib/prometheus/node\\-exporter/beacond\\-verify\\-hciN.prom\\fR.',
            '.TP', '.I /run/beacond/state.json, /run/beacond\\-hciN/state.json',
            'What each running service has on the air, for \\fBbeacond status\\fR and \\fBbeacond reload\\fR; readable by every user.',
            '.TP', '.I /usr/share/beacond/prometheus/beacond\\-alerts.yml', 'Prometheus alerting rules for the verifier\\(aqs metrics.',
            '.TP', '.I /usr/share/doc/beacond/README.md', 'The full documentation.']
    out += ['.SH SEE ALSO', '\\fBbeacond.conf\\fR(5), \\fBsystemctl\\fR(1), \\fBjournalctl\\fR(1), '
            '\\fBsystemd.service\\fR(5), \\fBbtmgmt\\fR(1)']
    return out


def beacond_conf_5(beacond, version, example, date):
    schema = json.loads(run_help(beacond, 'check-config', '--schema'))
    out = [f'.TH BEACOND.CONF 5 "{date}" "beacond {version}" "File Formats"',
           '.SH NAME', 'beacond.conf \\- configuration of beacond, the Bluetooth LE beacon daemon',
           '.SH SYNOPSIS', '.I /etc/beacond/beacond.conf',
           '.SH DESCRIPTION', '.PP', line_safe(inline(schema['syntax'])),
           '.PP', 'The example below is the file the package installs. The full guide (formats, several beacons, '
           'addresses, Eddystone-EID keys) is \\fI/usr/share/doc/beacond/README.md\\fR.',
           '.SH KEYS']
    table = None
    for key in schema['keys']:
        if key['table'] != table:
            table = key['table']
            out += ['.SS ' + esc(f'[{table}]')]
        facts = []
        if key['table'] == 'beacon':
            facts.append('Formats: ' + ('all' if len(key['formats']) == len(schema['formats']) else ', '.join(key['formats'])) + '.')
        facts.append('Type: ' + key['type'] + '.')
        facts.append('Required.' if key['required'] else 'Default: ' + key['default'] + '.')
        out += ['.TP', '.B ' + esc(key['key']), line_safe(inline(' '.join(facts) + ' ' + key['help'][:1].upper() + key['help'][1:] + '.'))]
    out += ['.SH EXAMPLE', '.PP', '.RS 4', '.EX'] + [line_safe(esc(l)) for l in example.splitlines()] + ['.EE', '.RE']
    out += ['.SH SEE ALSO', '\\fBbeacond\\fR(8)']
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--beacond', required=True)
    ap.add_argument('--version', required=True)
    ap.add_argument('--date', default='', help='the date in the header (the changelog date, for reproducible pages)')
    ap.add_argument('--out', required=True)
    args = ap.parse_args()
    example = open(os.path.join(TOP, 'config', 'beacond.conf'), encoding='utf-8').read()
    os.makedirs(args.out, exist_ok=True)
    for name, lines in (('beacond.8', beacond_8(args.beacond, args.version, args.date)),
                        ('beacond.conf.5', beacond_conf_5(args.beacond, args.version, example, args.date))):
        with open(os.path.join(args.out, name), 'w', encoding='utf-8') as f:
            f.write('\n'.join(l for l in lines if l != '') + '\n')


if __name__ == '__main__':
    main()
