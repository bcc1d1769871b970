#!/usr/bin/env python3
"""Writes the man pages beacond(8) and beacond.conf(5) from the sources users already read, so the three cannot
drift apart:

- every command, option and usage line comes from the binary's own `beacond help COMMAND` (the CLI's help texts);
- the configuration reference (every key, type, range and default), the signals and the exit codes come from the
  README's "Configuration", "Signals" and "Commands" sections; a unit test ties that key table to the config schema;
- the example file is config/beacond.conf itself.

    python3 scripts/man.py --beacond BINARY --version X.Y.Z --out DIR
"""
import argparse
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


def readme_section(readme, heading):
    """The lines under a markdown heading, up to the next heading of the same or a higher level."""
    lines = readme.splitlines()
    level = len(heading) - len(heading.lstrip('#'))
    start = lines.index(heading) + 1
    end = start
    while end < len(lines):
        m = re.match(r'^(#+) ', lines[end])
        if m and len(m.group(1)) <= level:
            break
        end += 1
    return lines[start:end]


def paragraphs(lines):
    """Markdown lines to roff: paragraphs, bullet lists, indented code blocks and tables (as .TP entries)."""
    out = []
    para = []

    def flush():
        if para:
            out.append('.PP')
            out.append(line_safe(inline(' '.join(para))))
            para.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            flush()
            i += 1
        elif line.startswith('    '):
            flush()
            block = []
            while i < len(lines) and (lines[i].startswith('    ') or not lines[i].strip()):
                block.append(lines[i][4:])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            out += ['.PP', '.RS 4', '.EX'] + [line_safe(esc(b)) for b in block] + ['.EE', '.RE']
        elif line.startswith('|'):
            flush()
            rows = []
            while i < len(lines) and lines[i].startswith('|'):
                cells = [c.strip() for c in lines[i].strip().strip('|').split('|')]
                if not all(re.fullmatch(r':?-+:?', c) for c in cells):
                    rows.append(cells)
                i += 1
            header, body = rows[0], rows[1:]
            for cells in body:
                out.append('.TP')
                out.append(line_safe(inline(cells[0])))
                rest = '; '.join(f'{header[k]}: {cells[k]}' for k in range(1, len(cells)) if cells[k])
                out.append(line_safe(inline(rest)))
        elif re.match(r'^- ', line):
            flush()
            item = [line[2:]]
            i += 1
            while i < len(lines) and lines[i].startswith('  ') and not lines[i].startswith('    '):
                item.append(lines[i].strip())
                i += 1
            out += ['.IP \\(bu 2', line_safe(inline(' '.join(item)))]
        else:
            para.append(line.strip())
            i += 1
    flush()
    return out


def help_sections(text):
    """`beacond help COMMAND` output split into its OVERVIEW, description, USAGE, OPTIONS and EXIT STATUS."""
    sections = {'description': []}
    current = 'description'
    for line in text.splitlines():
        m = re.match(r'^([A-Z][A-Z ]+):\s*(.*)$', line)
        if m:
            current = m.group(1)
            sections[current] = [m.group(2)] if m.group(2) else []
            if current == 'OVERVIEW':
                current = 'description'  # the one-line overview, then the paragraph under it
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


def beacond_8(beacond, version, readme, date):
    top = help_sections(run_help(beacond, '--help'))
    commands = [l.split()[0] for l in top['COMMANDS'] if l.strip()]
    helps = {c: help_sections(run_help(beacond, 'help', c)) for c in commands}  # each command's help, read once
    out = [f'.TH BEACOND 8 "{date}" "beacond {version}" "System Administration"',
           '.SH NAME', 'beacond \\- keep Bluetooth LE beacons (iBeacon, AltBeacon, Eddystone) on the air',
           '.SH SYNOPSIS']
    def usages(c):
        """Every USAGE line of a command (scan has two: scanning, and --expect)."""
        return [l.strip() for l in helps[c].get('USAGE', []) if l.strip()]
    for c in commands:
        for usage in usages(c):
            out += ['.PP', '.B ' + esc(usage).split(' ', 1)[0], esc(usage.split(' ', 1)[1]) if ' ' in usage else '']
    out += ['.PP', '.B beacond', '\\-\\-help | \\-\\-version']
    out += ['.SH DESCRIPTION']
    intro = []
    for line in readme.splitlines()[2:]:
        if not line.strip():
            break
        intro.append(line)
    out += paragraphs(intro)
    out += ['.SH COMMANDS']
    for c in commands:
        s = helps[c]
        out += ['.SS ' + esc(c)]
        out += ['.PP', line_safe(esc(s['OVERVIEW'][0].strip()))]
        desc = [l.strip() for l in s.get('description', [])]
        text = ' '.join(l for l in desc if l)
        if text:
            out += ['.PP', line_safe(esc(text))]
        out += ['.PP', 'Usage:']
        for k, usage in enumerate(usages(c)):
            out += (['.br'] if k else []) + ['.B ' + esc(usage)]
        for flags, text in options(s.get('OPTIONS', [])):
            out += ['.TP', '.B ' + esc(flags), line_safe(esc(text.strip()))]
        if 'EXIT STATUS' in s:
            out += ['.PP', 'Exit status: ' + esc(' '.join(l.strip() for l in s['EXIT STATUS'] if l.strip()))]
    out += ['.SH SIGNALS'] + paragraphs(readme_section(readme, '### Signals'))
    # The paragraph of the Commands section that starts with "Exit codes:".
    text = '\n'.join(readme_section(readme, '## Commands'))
    para = next(p for p in text.split('\n\n') if p.startswith('Exit codes:'))
    codes = ' '.join(para[len('Exit codes:'):].split())
    out += ['.SH EXIT STATUS', '.PP', line_safe(inline(codes))]
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


def beacond_conf_5(version, readme, example, date):
    out = [f'.TH BEACOND.CONF 5 "{date}" "beacond {version}" "File Formats"',
           '.SH NAME', 'beacond.conf \\- configuration of beacond, the Bluetooth LE beacon daemon',
           '.SH SYNOPSIS', '.I /etc/beacond/beacond.conf',
           '.SH DESCRIPTION']
    section = readme_section(readme, '## Configuration')
    table_at = next(i for i, l in enumerate(section) if l.startswith('|'))
    table_end = next(i for i in range(table_at, len(section)) if not section[i].startswith('|'))
    intro = [l.replace('The example `config/beacond.conf`:', 'The example below is the file the package installs.')
             for l in section[:table_at]]
    out += paragraphs(intro)
    out += ['.SH KEYS'] + paragraphs(section[table_at:table_end])
    # After the table: the formats, then one section per ### heading (### Mistakes is ERRORS).
    chunks, title = [], 'FORMATS'
    current = []
    for line in section[table_end:]:
        if line.startswith('### '):
            chunks.append((title, current))
            heading = line[4:].strip()
            title, current = ('ERRORS' if heading == 'Mistakes' else heading.upper()), []
        else:
            current.append(line)
    chunks.append((title, current))
    for title, lines in chunks:
        if any(l.strip() for l in lines):
            out += ['.SH ' + esc(title)] + paragraphs(lines)
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
    readme = open(os.path.join(TOP, 'README.md'), encoding='utf-8').read()
    example = open(os.path.join(TOP, 'config', 'beacond.conf'), encoding='utf-8').read()
    os.makedirs(args.out, exist_ok=True)
    for name, lines in (('beacond.8', beacond_8(args.beacond, args.version, readme, args.date)),
                        ('beacond.conf.5', beacond_conf_5(args.version, readme, example, args.date))):
        with open(os.path.join(args.out, name), 'w', encoding='utf-8') as f:
            f.write('\n'.join(l for l in lines if l != '') + '\n')


if __name__ == '__main__':
    main()
