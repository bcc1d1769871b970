"""The output schema's page and its checker: docs/output.md's tables read as rows, the check finds what no row
describes or a wrong type, and no source file spells a JSON member by hand (each writer names them by OutputKey).
The checks of real output are in the tests that run each command (output_schema.loads / lines)."""
from __future__ import annotations

import re
from pathlib import Path

import output_schema

SOURCES = Path(__file__).resolve().parents[2] / 'Sources'


def test_the_page_has_every_report_with_its_rows():
    assert sorted(output_schema.ROWS) == sorted(output_schema.HEADINGS)
    assert output_schema.ROWS['state']['beacons[].interval_ms'] == ['number', 'null']
    assert output_schema.ROWS['check']['hci.tx_power_range'] == ['array', 'null']
    assert all(len(rows) >= 6 for rows in output_schema.ROWS.values())


def test_the_check_names_a_member_without_a_row_and_a_wrong_type():
    bad = {'ok': 'yes', 'daemons': [{'pid': 4.5, 'unit': None, 'beacons': [{'index': 1, 'rssi': -50}]}], 'eid': None}
    assert output_schema.violations('status', bad) == [
        "ok: 'yes' is not boolean", 'daemons[].pid: 4.5 is not integer', 'daemons[].beacons[].rssi: no row', 'eid: no row']
    assert output_schema.violations('scan', {'kind': 'ibeacon', 'rssi': True}) == ['rssi: True is not integer']
    assert output_schema.violations('expect', {'kind': 'expect', 'mismatches': [{'differences': [], 'rssi': None}]}) == []


def test_no_source_spells_a_json_member_by_hand():
    """A member's name is text in OutputSchema's vocabulary only: `"\\"name\\":` after `{`, `,` or a quote is a
    writer concatenating JSON (a config message's `backend = \\"mgmt\\": …` is prose, and passes)."""
    by_hand = re.compile(r'(?:[{,]|")\\"[a-z_0-9]+\\":')
    found = [f'{p.relative_to(SOURCES)}:{n}' for p in sorted(SOURCES.rglob('*.swift'))
             for n, line in enumerate(p.read_text().splitlines(), 1) if by_hand.search(line)]
    assert found == []
