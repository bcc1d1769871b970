"""The output schema's rows as docs/output.md has them (OutputSchemaTests holds that page to the Swift rows), and a
check of real output against them: every member a command prints is a row of its report, with one of the row's types.
The tests that run a JSON command read its output through `loads` / `lines`."""
from __future__ import annotations

import json
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / 'docs' / 'output.md'
HEADINGS = {  # report → its heading in docs/output.md
    'state': '`state.json`', 'status': '`beacond status --json`', 'check': '`beacond status --check --json`',
    'payload': '`beacond payload --format json`', 'scan': '`beacond scan --json`', 'expect': '`beacond scan --expect FILE --json`',
}
# Members under a prefix described by another report's rows (OutputReport.inherits).
INHERITS = {'status': ('daemons[].', 'state'), 'expect': ('mismatches[].', 'expect')}
ROW = re.compile(r'^\| `(?P<path>[^`]+)` \| (?P<types>[a-z ]+) \| .* \|$')


def rows() -> dict[str, dict[str, list[str]]]:
    """report → path → types, from the page's tables."""
    out: dict[str, dict[str, list[str]]] = {}
    by_heading = {h: r for r, h in HEADINGS.items()}
    current = None
    for line in DOC.read_text().splitlines():
        if line.startswith('## '):
            current = by_heading.get(line[3:])
            out[current] = {}
        elif current and (m := ROW.match(line)):
            out[current][m['path']] = m['types'].split(' or ')
    return out


ROWS = rows()


def is_a(value, type_: str) -> bool:
    return {'string': lambda v: isinstance(v, str), 'boolean': lambda v: isinstance(v, bool),
            'integer': lambda v: isinstance(v, int) and not isinstance(v, bool),
            'number': lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            'object': lambda v: isinstance(v, dict), 'array': lambda v: isinstance(v, list),
            'null': lambda v: v is None}[type_](value)


def violations(report: str, value: dict) -> list[str]:
    """What in one object of `report` no row describes, or has none of its row's types (as OutputReport.violations)."""
    out: list[str] = []

    def row(path):
        if path in ROWS[report]:
            return ROWS[report][path]
        prefix, other = INHERITS.get(report, (None, None))
        return ROWS[other].get(path[len(prefix):]) if prefix and path.startswith(prefix) else None

    def walk(v, at):
        if not isinstance(v, dict):
            return
        for name, member in v.items():
            path = f'{at}.{name}' if at else name
            types = row(path)
            if types is None:
                out.append(f'{path}: no row')
                continue
            if not any(is_a(member, t) for t in types):
                out.append(f'{path}: {member!r} is not {" or ".join(types)}')
            for item in member if isinstance(member, list) else []:
                walk(item, path + '[]')
            walk(member, path)

    walk(value, '')
    return out


def loads(report: str, text: str):
    """One JSON object of `report`, checked against its rows."""
    value = json.loads(text)
    assert violations(report, value) == [], (report, violations(report, value), text)
    return value


def lines(report: str, text: str) -> list:
    """JSON lines of `report`, each checked."""
    return [loads(report, l) for l in text.splitlines()]
