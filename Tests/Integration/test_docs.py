"""The man pages and the README say what the binary says: the pages are made from the command table and the config
schema (scripts/man.py), rendered by man-db without a warning, and the README's intro names every format."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, beacond_path, run_cli


def schema() -> dict:
    return json.loads(run_cli('check-config', '--schema', check=True).stdout)


def rendered(page) -> str:
    """The page as man-db shows it, wide and without hyphenation, with whitespace collapsed."""
    if shutil.which('man') is None:
        pytest.fail('man-db is not installed (scripts/deps.sh installs it): the pages cannot be rendered')
    r = subprocess.run(['man', '--warnings', '-l', str(page)], capture_output=True, text=True,
                       env={**os.environ, 'MANWIDTH': '400', 'MAN_KEEP_FORMATTING': '', 'LANG': 'C.UTF-8'})
    assert r.returncode == 0 and r.stderr == '', r.stderr
    text = re.sub(r'.\x08', '', r.stdout)  # overstrike bold
    return ' '.join(text.replace('\u2010', '-').split())


@pytest.fixture(scope='module')
def pages(tmp_path_factory):
    out = tmp_path_factory.mktemp('man')
    subprocess.run([sys.executable, str(ROOT / 'scripts' / 'man.py'), '--beacond', str(beacond_path()), '--version', '9.9.9',
                    '--date', '2026-01-01', '--out', str(out)], check=True)
    return {name: rendered(out / name) for name in ('beacond.8', 'beacond.conf.5')}


def plain(markdown: str) -> str:
    return ' '.join(markdown.replace('`', '').replace('**', '').split())


def test_conf_page_lists_every_schema_key_with_its_type_and_default(pages):
    page = pages['beacond.conf.5']
    keys = schema()['keys']
    assert len(keys) >= 20
    for table in sorted({k['table'] for k in keys}):
        assert f'[{table}]' in page
    for k in keys:
        entry = f"{k['key']} " + ('Formats: ' + ('all' if len(k['formats']) == len(schema()['formats']) else ', '.join(k['formats'])) + '. ' if k['table'] == 'beacon' else '') \
            + f"Type: {plain(k['type'])}."
        assert entry in page, entry
        assert ('Required.' if k['required'] else f"Default: {plain(k['default'])}.") in page


def test_command_page_lists_every_command_option_signal_and_exit_status(pages):
    page = pages['beacond.8']
    top = run_cli('--help', check=True).stdout
    commands = [l.split()[0] for l in top.split('COMMANDS:')[1].split('OPTIONS:')[0].splitlines() if l.strip()]
    assert 'status' in commands and 'scan' in commands
    for c in commands:
        help_text = run_cli('help', c, check=True).stdout
        for flags in re.findall(r'^  (-\S.*?)(?:\s{2,}|$)', help_text, re.M):
            assert flags in page, f'{c}: {flags}'
        if 'EXIT STATUS:' in help_text:
            assert 'Exit status: ' + ' '.join(help_text.split('EXIT STATUS:')[1].split()) in page, c
    assert 'SIGNALS SIGHUP reloads the config' in page


def test_readme_intro_names_every_format():
    """The formats come from BeaconFormat.allCases in the help; the README's opening paragraph must keep up (the
    package's description is made from the schema's formatNames, checked in VM scenario 12)."""
    names = schema()['formatNames']
    assert len(names) == 6, names
    intro = ' '.join((ROOT / 'README.md').read_text().split('\n\n')[1].split())
    for name in names:
        assert name in intro, f'the README intro does not name {name}: {intro[:300]}'
    top = ' '.join(run_cli('--help', check=True).stdout.split())
    assert all(name in top for name in names), top


def test_readme_commands_are_the_command_table():
    """The README's command synopsis is every usage line of `beacond help`, in its order, and nothing else."""
    top = run_cli('--help', check=True).stdout
    commands = [l.split()[0] for l in top.split('COMMANDS:')[1].split('OPTIONS:')[0].splitlines() if l.strip()]
    usages = []
    for c in commands:
        if c == 'help':
            continue
        usage = run_cli('help', c, check=True).stdout.split('USAGE:')[1].split('\n\n')[0]
        usages += [' '.join(l.split()) for l in usage.strip().splitlines()]
    readme = (ROOT / 'README.md').read_text()
    block = readme.split('## Commands\n\n')[1].split('\n\n')[0]
    documented = [' '.join(l.split()) for l in block.splitlines()]
    assert documented == usages + ['beacond --help | --version | help COMMAND']


def test_readme_fits_in_one_sitting_and_names_the_current_version():
    readme = (ROOT / 'README.md').read_text()
    assert len(readme.splitlines()) <= 480, 'the README is the user guide: move proofs and measurements to docs/'
    version = subprocess.run(['sh', str(ROOT / 'scripts' / 'version.sh')], capture_output=True, text=True, check=True).stdout.strip()
    assert run_cli('--version', check=True).stdout.strip() == f'beacond {version}'
    for written in re.findall(r'beacond[ _](\d+\.\d+\.\d+)', readme):
        assert written == version, f'the README names version {written}; scripts/version.sh says {version}'


DOCS = [ROOT / 'README.md', *sorted((ROOT / 'docs').glob('*.md')), *sorted((ROOT / 'systemd').glob('*.service')),
        *sorted((ROOT / 'systemd').glob('*.timer'))]
# A section named by its title: 'see "Fleets"', '"Building the packages" above', '"X" in the README', '"X" in docs/a.md'.
SECTION_REF = re.compile(r'(?:(?:[Ss]ee|in|under|at) "(?P<a>[A-Z][^"\n]{2,80})"|"(?P<b>[A-Z][^"\n]{2,80})" (?:above|below))'
                         r'(?:,? (?:in|of) (?P<where>the README|docs/[a-z]+\.md))?')


def headings(path):
    return {re.sub(r'[`*]', '', line.lstrip('#').strip()) for line in path.read_text().splitlines() if line.startswith('#')}


def test_every_section_named_exists_and_no_page_cites_itself():
    """A reference to a section by its title ('see "Fleets"', '"Building the packages" above') names a heading of the
    page it points at; a page does not send the reader to itself by its own path."""
    dangling, selfcites = [], []
    for doc in DOCS:
        text = doc.read_text()
        for m in SECTION_REF.finditer(text):
            title = re.sub(r'[`*]', '', m.group('a') or m.group('b'))
            where = m.group('where')
            target = ROOT / 'README.md' if where == 'the README' else ROOT / where if where else (
                doc if doc.suffix == '.md' else ROOT / 'README.md')
            if title not in headings(target):
                line = text[:m.start()].count('\n') + 1
                dangling.append(f'{doc.relative_to(ROOT)}:{line}: "{title}" is no heading of {target.relative_to(ROOT)}')
        if doc.parent.name == 'docs':
            for m in re.finditer(re.escape(f'docs/{doc.name}'), text):
                selfcites.append(f'{doc.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}: cites itself')
    assert not dangling, '\n'.join(dangling)
    assert not selfcites, '\n'.join(selfcites)


# ---- the install lines (README's first screen) and the one base URL ----------------------------------------------

BASE_URL_FILE = ROOT / 'deploy' / 'apt' / 'base-url'


def install_lines(readme: str) -> list[str]:
    """The indented block after the README's `<!-- install -->` mark: what Tests/VM/scenarios.py runs verbatim."""
    assert '<!-- install -->' in readme, 'the README has no install lines (its <!-- install --> mark)'
    block = readme.split('<!-- install -->', 1)[1].lstrip('\n').split('\n\n', 1)[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


def test_the_readme_installs_in_three_lines_on_its_first_screen_from_the_one_base_url():
    readme = (ROOT / 'README.md').read_text()
    base = BASE_URL_FILE.read_text().strip()
    assert base.startswith('https://') and not base.endswith('/'), base
    assert readme.index('<!-- install -->') < len('\n'.join(readme.splitlines()[:30])), 'the install lines are not on the first screen'
    assert install_lines(readme) == [
        f'sudo curl -fsSLo /etc/apt/keyrings/beacond-archive-keyring.gpg {base}/beacond-archive-keyring.gpg',
        f'sudo curl -fsSLo /etc/apt/sources.list.d/beacond.sources {base}/beacond.sources',
        'sudo apt update && sudo apt install beacond',
    ], install_lines(readme)


def test_the_base_url_is_written_once_and_quoted_only_by_the_install_lines():
    base = BASE_URL_FILE.read_text().strip()
    host = base.split('/')[2]
    tracked = subprocess.run(['git', 'ls-files', '-z'], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split('\0')
    where = {}
    for name in filter(None, tracked):
        path = ROOT / name
        if path.is_file() and not path.is_symlink():
            try:
                text = path.read_text()
            except UnicodeDecodeError:
                continue
            if host in text:
                where[name] = [line.strip() for line in text.splitlines() if host in line]
    readme = (ROOT / 'README.md').read_text()
    assert set(where) == {'deploy/apt/base-url', 'README.md'}, f'{host} is written in {sorted(where)}: read deploy/apt/base-url instead'
    assert where['README.md'] == install_lines(readme)[:2], where['README.md']


def test_set_base_url_moves_the_file_and_the_readmes_lines_together(tmp_path):
    for name in ('scripts/set-base-url.sh', 'README.md', 'deploy/apt/base-url'):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    old = (tmp_path / 'deploy/apt/base-url').read_text().strip()
    new = old + '/fork'  # the old address inside the new one: replaced once, not for ever
    r = subprocess.run(['sh', str(tmp_path / 'scripts/set-base-url.sh'), new], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    readme = (tmp_path / 'README.md').read_text()
    assert (tmp_path / 'deploy/apt/base-url').read_text().strip() == new
    assert [l for l in install_lines(readme) if 'curl' in l] == [
        f'sudo curl -fsSLo /etc/apt/keyrings/beacond-archive-keyring.gpg {new}/beacond-archive-keyring.gpg',
        f'sudo curl -fsSLo /etc/apt/sources.list.d/beacond.sources {new}/beacond.sources']
    assert readme.replace(new, old) == (ROOT / 'README.md').read_text(), 'set-base-url changed more than the address'
    r = subprocess.run(['sh', str(tmp_path / 'scripts/set-base-url.sh'), 'http://insecure.invalid/x'], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and 'https://' in r.stderr and (tmp_path / 'deploy/apt/base-url').read_text().strip() == new, r.stderr


def test_the_readme_says_where_the_package_cannot_go():
    top = plain((ROOT / 'README.md').read_text().split('## On a Raspberry Pi', 1)[0])
    for said in ('32-bit Raspberry Pi OS (dpkg --print-architecture says armhf or armel): install the 64-bit Raspberry Pi OS',
                 'older than bookworm (Debian 12)',
                 'Home Assistant OS cannot install a .deb at all: run beacond on a second Pi'):
        assert said in top, said
    table = (ROOT / 'README.md').read_text().split('| model | radio |', 1)[1].split('\n\n', 1)[0]
    assert 'Zero W |' not in table.replace('Zero 2 W', ''), 'the Pi Zero W cannot run a 64-bit OS: it has no row'
