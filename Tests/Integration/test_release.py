"""The release (.github/workflows, docs/packaging.md "Publishing a release"): every step the workflows take is a make
target, and each runs here as it runs there: `make signing-key` imports the key from the environment, `make publish`
makes the site GitHub Pages serves (scripts/publish.sh over make-repo.sh), `make resign` signs it again, `make
release-files` gives the release's files. The site is served over HTTP from this process and read by this machine's
apt-get, as a host reads it; deploy/apt/install.sh, which the site serves, runs as root in a mount namespace of its own
whose /etc/apt and apt's lists are temporary directories. The packages are stand-ins made with dpkg-deb
(test_repo.py's); the real ones go through the same scripts in the VM tests. actionlint (with shellcheck) checks the
workflows: actionlint from Tests/Integration/requirements.txt, shellcheck Debian's (scripts/deps.sh)."""
from __future__ import annotations

import email.utils
import functools
import hashlib
import http.server
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from test_repo import apt_policy, package

WORKFLOWS = ROOT / '.github' / 'workflows'
BASE_URL_FILE = ROOT / 'deploy' / 'apt' / 'base-url'
INSTALL = ROOT / 'deploy' / 'apt' / 'install.sh'
KEY_ENV = 'BEACOND_REPO_SIGNING_KEY'


def version() -> str:
    return subprocess.run(['sh', 'scripts/version.sh'], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def make(*args: str, env: dict | None = None, drop: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith('MAKE')}
    return subprocess.run(['make', '--no-print-directory', *args], cwd=ROOT, capture_output=True, text=True,
                          env={**base, **(env or {})}, timeout=300)


def venv_tool(name: str) -> Path:
    """A tool the venv's wheels carry (beside this Python: not resolved, so the venv's bin)."""
    path = Path(sys.executable).parent / name
    assert path.is_file() and os.access(path, os.X_OK), \
        f'{name} is not beside {sys.executable}: make venv (Tests/Integration/requirements.txt pins it)'
    return path


# -- gpg ---------------------------------------------------------------------------------------------------------

@pytest.fixture
def gnupg_homes():
    """Makes GNUPGHOMEs under a short /tmp path (gpg-agent's socket may live there: at most 107 bytes), each with its
    agent ended and its files removed afterwards."""
    top = Path(tempfile.mkdtemp(prefix='bdrel-', dir='/tmp'))
    made: list[Path] = []

    def new(name: str, create: bool = True) -> Path:
        home = top / name
        if create:
            home.mkdir(mode=0o700)
        made.append(home)
        return home
    yield new
    for home in made:
        subprocess.run(['gpgconf', '--kill', 'all'], env={**os.environ, 'GNUPGHOME': str(home)}, capture_output=True)
    shutil.rmtree(top, ignore_errors=True)


def gpg(home: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(['gpg', '--batch', *args], env={**os.environ, 'GNUPGHOME': str(home)}, capture_output=True,
                          text=True, input=input, timeout=120, check=True)


def new_key(home: Path, uid: str, passphrase: str = '') -> str:
    gpg(home, '--quiet', '--pinentry-mode', 'loopback', '--passphrase', passphrase, '--quick-gen-key', uid, 'ed25519', 'sign', '1y')
    fprs = [l.split(':')[9] for l in gpg(home, '--with-colons', '--list-secret-keys', uid).stdout.splitlines() if l.startswith('fpr:')]
    return fprs[0]


def armored_secret(home: Path, *fprs: str, passphrase: str = '') -> str:
    return gpg(home, '--pinentry-mode', 'loopback', '--passphrase', passphrase, '--armor', '--export-secret-keys', *fprs).stdout


# -- serving a site ----------------------------------------------------------------------------------------------

class Served:
    """A directory served over HTTP on 127.0.0.1, as GitHub Pages serves the site: files as they are."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass
        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), functools.partial(Quiet, directory=str(directory)))
        self.url = f'http://127.0.0.1:{self.server.server_address[1]}'
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def release_field(site: Path, name: str) -> float:
    text = (site / 'dists/stable/Release').read_text()
    return email.utils.parsedate_to_datetime(re.search(rf'^{name}: (.*)$', text, re.M).group(1)).timestamp()


def index_hashes(site: Path) -> list[tuple[str, str]]:
    return re.findall(r'^ ([0-9a-f]{64}) +\d+ (main/binary-\w+/Packages(?:\.gz)?)$', (site / 'dists/stable/InRelease').read_text(), re.M)


def verified_by(site: Path) -> str:
    """gpgv's report on InRelease with the site's own keyring (what a host installs); fails unless it verifies."""
    v = subprocess.run(['gpgv', '--keyring', str(site / 'beacond-archive-keyring.gpg'), str(site / 'dists/stable/InRelease')],
                       capture_output=True, text=True)
    assert v.returncode == 0, v.stderr
    return v.stderr


# -- the workflows -----------------------------------------------------------------------------------------------

def workflows() -> dict[str, dict]:
    files = sorted(WORKFLOWS.glob('*.yml'))
    assert files, f'no workflow in {WORKFLOWS}'
    return {f.name: yaml.safe_load(f.read_text()) for f in files}


def triggers(workflow: dict) -> dict:
    # YAML 1.1 reads the key `on` as true.
    return workflow.get('on', workflow.get(True)) or {}


def commands(script: str) -> list[list[str]]:
    """The simple commands of a run: script, each as its words, without shell keywords, variable assignments before
    the command, and redirections."""
    out = []
    for line in script.replace('\\\n', ' ').splitlines():
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        lex = shlex.shlex(line, posix=True, punctuation_chars=';&|<>')
        lex.whitespace_split = True
        words: list[str] = []
        for tok in [*lex, ';']:
            if tok in (';', '&&', '||', '|', '&'):
                while words and words[0] in ('if', 'then', 'else', 'elif', 'fi', 'do', 'done', '!'):
                    words.pop(0)
                while words and re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*=.*', words[0]):
                    words.pop(0)
                if words:
                    out.append(words)
                words = []
            else:
                words.append(tok)
        # redirections: the operator and its word, and a descriptor number before it
    cleaned = []
    for words in out:
        kept: list[str] = []
        skip = False
        for i, w in enumerate(words):
            if skip:
                skip = False
                continue
            if re.fullmatch(r'[<>]+&?', w):
                skip = True
                if kept and kept[-1].isdigit():
                    kept.pop()
                continue
            kept.append(w)
        cleaned.append(kept)
    return cleaned


def makefile_targets() -> set[str]:
    targets = set()
    for line in (ROOT / 'Makefile').read_text().splitlines():
        m = re.match(r'^([A-Za-z0-9][A-Za-z0-9_. -]*?)\s*:(?![:=])', line)
        if m:
            targets.update(m.group(1).split())
    return targets


# Plumbing that may be written inline: git and gh, echo into the step's outputs, and make's own bootstrap (the build
# job's container has Swift but no make; deps.sh --cross installs make with what `make deb` needs).
PLUMBING = {'git', 'gh', 'echo'}
BOOTSTRAP = ['sh', 'scripts/deps.sh', '--cross']
RELEASE_TARGETS = {'deb', 'test-fast', 'publish', 'release-files', 'signing-key', 'resign', 'deps-repo', 'check-release-tag'}


def test_actionlint_and_shellcheck_pass_on_the_workflows_and_the_release_scripts(tmp_path):
    actionlint = venv_tool('actionlint')
    shellcheck = shutil.which('shellcheck')
    assert shellcheck, 'shellcheck is missing: sh scripts/deps.sh installs it (Debian\'s shellcheck)'
    files = sorted(str(p) for p in WORKFLOWS.glob('*.yml'))
    assert files
    lint = [str(actionlint), '-shellcheck', str(shellcheck), '-pyflakes', '']
    r = subprocess.run([*lint, *files], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    # The same linters find what they should (shellcheck really runs on the run: scripts): a context that is not
    # available at job level, and an unquoted variable.
    bad = tmp_path / '.github' / 'workflows' / 'bad.yml'
    bad.parent.mkdir(parents=True)
    bad.write_text('on: push\njobs:\n  x:\n    runs-on: ubuntu-24.04\n    env:\n      HOME_DIR: ${{ runner.temp }}/g\n'
                   '    steps:\n      - run: ls $HOME_DIR/*\n')
    r = subprocess.run([*lint, str(bad)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and 'runner' in r.stdout and 'SC2086' in r.stdout, r.stdout + r.stderr
    scripts = [ROOT / 'scripts' / s for s in ('publish.sh', 'signing-key.sh', 'release-files.sh')] + [INSTALL]
    r = subprocess.run([str(shellcheck), '--shell=sh', *map(str, scripts)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_workflows_call_make_targets_and_nothing_else_does_work():
    targets = makefile_targets()
    called: set[str] = set()
    runs = []
    for name, workflow in workflows().items():
        for job_name, job in workflow['jobs'].items():
            for step in job['steps']:
                if 'run' not in step:
                    assert step['uses'].startswith('actions/'), (name, job_name, step)
                    continue
                runs.append(step['run'])
                for words in commands(step['run']):
                    where = f'{name} {job_name}: {" ".join(words)}'
                    if words == BOOTSTRAP:
                        assert job.get('container'), where  # only where there is no make yet
                        continue
                    if words[0] == 'sudo':
                        words = words[1:]
                    if words[0] == 'make':
                        named = [w for w in words[1:] if not w.startswith('-') and '=' not in w]
                        assert named, where
                        for t in named:
                            assert t in targets, f'{where}: no target {t} in the Makefile'
                        called.update(named)
                    else:
                        assert words[0] in PLUMBING, f'{where}: work that is not a make target'
    assert RELEASE_TARGETS <= called, RELEASE_TARGETS - called
    # The key reaches the one step that imports it, through its environment, never a command line.
    assert not any(KEY_ENV in r or 'secrets.' in r for r in runs)
    for workflow in workflows().values():
        for job in workflow['jobs'].values():
            for step in job['steps']:
                if KEY_ENV in step.get('env', {}):
                    assert step['env'][KEY_ENV] == '${{ secrets.BEACOND_REPO_SIGNING_KEY }}'
                    assert 'runner.temp' in step['env']['GNUPGHOME']
                    assert commands(step['run']) == [['make', '-s', 'signing-key']] and '>> "$GITHUB_ENV"' in step['run']


def test_the_release_runs_on_a_version_tag_and_a_weekly_re_sign():
    found = {'tag': False, 'schedule': False}
    for workflow in workflows().values():
        on = triggers(workflow)
        if 'v*' in ((on.get('push') or {}).get('tags') or []):
            found['tag'] = True
            build = next(j for j in workflow['jobs'].values() if any('make deb' == s.get('run', '').strip() for s in j['steps']))
            image = build['container']['image']
            assert image.startswith('swift:') and image.endswith('-bookworm') and '--privileged' in build['container']['options']
        if on.get('schedule'):
            cron = on['schedule'][0]['cron'].split()
            # weekly: a day of the week, every week (Valid-Until is 30 days: four chances before it)
            assert len(cron) == 5 and cron[2] == '*' and cron[3] == '*' and cron[4] != '*', cron
            found['schedule'] = True
    assert all(found.values()), found


def test_publish_and_resign_build_nothing_and_need_a_site():
    v = version()
    r = make('-n', '-B', 'publish', 'SITE=/srv/site')
    assert r.returncode == 0 and r.stdout.splitlines() == [
        f'sh scripts/publish.sh /srv/site build/beacond_{v}_amd64.deb build/beacond_{v}_arm64.deb'], r.stdout + r.stderr
    r = make('-n', '-B', 'resign', 'SITE=/srv/site')
    assert r.returncode == 0 and r.stdout.splitlines() == ['sh scripts/publish.sh /srv/site'], r.stdout + r.stderr
    for target in ('publish', 'resign'):
        r = make('-n', target)
        assert r.returncode != 0 and 'SITE=' in r.stderr, r.stderr
    r = make('-n', 'release-files')
    assert r.returncode != 0 and 'DIR=' in r.stderr, r.stderr


def test_a_release_tag_must_name_the_version_the_packages_have():
    v = version()
    r = make('check-release-tag', f'TAG=v{v}')
    assert r.returncode == 0, r.stderr
    for tag in (v, 'v0.0.0', f'v{v}.1', ''):
        r = make('check-release-tag', f'TAG={tag}')
        assert r.returncode != 0 and f'v{v}' in r.stderr and 'Version.swift' in r.stderr, (tag, r.stderr)


def test_a_missing_package_says_make_deb_first_and_publishes_nothing(tmp_path):
    missing = tmp_path / 'beacond_9.9.9_amd64.deb'
    site = tmp_path / 'site'
    for args in (('publish', f'SITE={site}'), ('release-files', f'DIR={tmp_path / "rel"}')):
        r = make(*args, f'DEBS={missing}')
        assert r.returncode != 0 and str(missing) in r.stderr and 'make deb first' in r.stderr, r.stderr
    assert not site.exists() and not (tmp_path / 'rel').exists()


def test_signing_key_imports_one_key_and_prints_only_its_fingerprint(gnupg_homes, tmp_path):
    maker = gnupg_homes('maker')
    fpr = new_key(maker, 'beacond release <release@beacond.invalid>')
    secret = armored_secret(maker, fpr)
    assert 'PRIVATE KEY BLOCK' in secret
    body = [l for l in secret.splitlines() if len(l) > 40]
    ci = gnupg_homes('ci', create=False)  # made by the target, as on a fresh runner
    r = make('-s', 'signing-key', env={KEY_ENV: secret, 'GNUPGHOME': str(ci)})
    assert r.returncode == 0, r.stderr
    assert r.stdout == f'REPO_KEY={fpr}\n', r.stdout
    assert 'PRIVATE KEY' not in r.stdout + r.stderr and not any(l in r.stdout + r.stderr for l in body)
    assert (ci.stat().st_mode & 0o777) == 0o700
    assert fpr in gpg(ci, '--with-colons', '--list-secret-keys').stdout
    # Without -s as well: make prints nothing of its own there (the workflow appends stdout to $GITHUB_ENV).
    r = make('signing-key', env={KEY_ENV: secret, 'GNUPGHOME': str(gnupg_homes('ci2', create=False))})
    assert r.returncode == 0 and r.stdout == f'REPO_KEY={fpr}\n', r.stdout + r.stderr


def test_signing_key_refuses_what_it_cannot_sign_with(gnupg_homes, tmp_path):
    maker = gnupg_homes('maker')
    one = new_key(maker, 'one <one@beacond.invalid>')
    two = new_key(maker, 'two <two@beacond.invalid>')
    locked = new_key(maker, 'locked <locked@beacond.invalid>', passphrase='sesame')
    cases = [
        (armored_secret(maker, one, two), 'one secret key, not 2'),
        (gpg(maker, '--armor', '--export', one).stdout, 'one secret key, not 0'),
        ('', f'{KEY_ENV} is empty'),
        (armored_secret(maker, locked, passphrase='sesame'), 'passphrase'),
    ]
    for i, (secret, why) in enumerate(cases):
        home = gnupg_homes(f'ci{i}', create=False)
        r = make('-s', 'signing-key', env={KEY_ENV: secret, 'GNUPGHOME': str(home)})
        assert r.returncode != 0 and why in r.stderr and 'REPO_KEY' not in r.stdout, (why, r.stdout, r.stderr)
        assert 'PRIVATE KEY' not in r.stdout + r.stderr
    # No GNUPGHOME: refused, rather than importing into the user's own keyring.
    home = tmp_path / 'home'
    home.mkdir()
    r = make('-s', 'signing-key', env={KEY_ENV: armored_secret(maker, one), 'HOME': str(home)}, drop=('GNUPGHOME',))
    assert r.returncode != 0 and 'GNUPGHOME' in r.stderr and not (home / '.gnupg').exists(), r.stderr


def test_publish_resign_and_release_files_as_the_workflow_runs_them(gnupg_homes, tmp_path):
    maker = gnupg_homes('maker')
    fpr = new_key(maker, 'beacond release <release@beacond.invalid>')
    ci = gnupg_homes('ci', create=False)
    r = make('-s', 'signing-key', env={KEY_ENV: armored_secret(maker, fpr), 'GNUPGHOME': str(ci)})
    assert r.returncode == 0, r.stderr
    env = {'GNUPGHOME': str(ci), r.stdout.strip().split('=')[0]: r.stdout.strip().split('=')[1]}
    site = tmp_path / 'site'
    served = Served(site)
    try:
        first = [package(tmp_path, '0.3.0', 'amd64'), package(tmp_path, '0.3.0', 'arm64')]
        r = make('publish', f'SITE={site}', f'REPO_URL={served.url}', f'DEBS={" ".join(map(str, first))}', env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert 'THROW-AWAY' not in r.stderr and fpr in verified_by(site)
        sources = (site / 'beacond.sources').read_text()
        assert f'URIs: {served.url}\n' in sources and 'Signed-By: /etc/apt/keyrings/beacond-archive-keyring.gpg\n' in sources
        assert (site / '.nojekyll').is_file()
        install = (site / 'install.sh').read_text()
        assert served.url in install and '@BEACOND_REPO_URL@' not in install
        assert 'Candidate: 0.3.0' in apt_policy(tmp_path, site)
        first_hashes = index_hashes(site)

        # A newer release into the same site (the gh-pages checkout): the first stays, in the pool and by hash.
        second = [package(tmp_path, '0.3.1', 'amd64'), package(tmp_path, '0.3.1', 'arm64')]
        r = make('publish', f'SITE={site}', f'REPO_URL={served.url}', f'DEBS={" ".join(map(str, second))}', env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert sorted(p.name for p in (site / 'pool/main/b/beacond').iterdir()) == [
            'beacond_0.3.0_amd64.deb', 'beacond_0.3.0_arm64.deb', 'beacond_0.3.1_amd64.deb', 'beacond_0.3.1_arm64.deb']
        for h, path in first_hashes:
            kept = site / 'dists/stable' / path.rsplit('/', 1)[0] / 'by-hash/SHA256' / h
            assert kept.is_file() and hashlib.sha256(kept.read_bytes()).hexdigest() == h, path
        policy = apt_policy(tmp_path, site, 'arm64')
        assert 'Candidate: 0.3.1' in policy and ' 0.3.0 500' in policy, policy

        # The weekly re-sign: a fresh Date and Valid-Until, the same indexes, still verified by the same key.
        date, until, hashes = release_field(site, 'Date'), release_field(site, 'Valid-Until'), index_hashes(site)
        time.sleep(1.1)
        r = make('resign', f'SITE={site}', f'REPO_URL={served.url}', env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert release_field(site, 'Date') > date and release_field(site, 'Valid-Until') > until
        assert abs(release_field(site, 'Valid-Until') - release_field(site, 'Date') - 30 * 86400) < 120
        assert index_hashes(site) == hashes and fpr in verified_by(site)
        assert 'Candidate: 0.3.1' in apt_policy(tmp_path, site)
    finally:
        served.close()

    # The release's files: both packages and a SHA256SUMS that sha256sum -c accepts.
    rel = tmp_path / 'release'
    r = make('release-files', f'DIR={rel}', f'DEBS={" ".join(map(str, second))}')
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in rel.iterdir()) == ['SHA256SUMS', 'beacond_0.3.1_amd64.deb', 'beacond_0.3.1_arm64.deb']
    check = subprocess.run(['sha256sum', '-c', 'SHA256SUMS'], cwd=rel, capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout.count(': OK') == 2, check.stdout + check.stderr
    (rel / 'beacond_0.3.1_arm64.deb').write_bytes(b'tampered')
    assert subprocess.run(['sha256sum', '-c', 'SHA256SUMS'], cwd=rel, capture_output=True).returncode != 0


def test_publish_reads_the_one_base_url():
    base = BASE_URL_FILE.read_text()
    assert re.fullmatch(r'https://[^\s/]+(/[^\s]*)?\n', base), base
    text = (ROOT / 'scripts' / 'publish.sh').read_text()
    assert 'deploy/apt/base-url' in text and base.strip() not in text


def test_publish_with_the_base_url_and_the_throw_away_key(tmp_path):
    """No REPO_URL: the address in deploy/apt/base-url; no REPO_KEY: make-repo's throw-away key, said loudly (the VM
    tests publish so, with REPO_URL)."""
    from test_repo import user_state
    base = BASE_URL_FILE.read_text().strip()
    site = tmp_path / 'site'
    r = subprocess.run(['sh', 'scripts/publish.sh', str(site), str(package(tmp_path, '0.3.0', 'amd64'))], cwd=ROOT,
                       capture_output=True, text=True, timeout=120,
                       env={**{k: v for k, v in os.environ.items() if k not in ('REPO_URL', 'REPO_KEY')},
                            'XDG_STATE_HOME': str(user_state(tmp_path))})
    try:
        assert r.returncode == 0, r.stderr
        assert 'THROW-AWAY' in r.stderr
        assert f'URIs: {base}\n' in (site / 'beacond.sources').read_text()
        assert f"'{base}'" in (site / 'install.sh').read_text()
        verified_by(site)
    finally:
        home = user_state(tmp_path) / 'beacond' / 'repo-throwaway-gnupg'
        subprocess.run(['gpgconf', '--kill', 'all'], env={**os.environ, 'GNUPGHOME': str(home)}, capture_output=True)
        shutil.rmtree(user_state(tmp_path), ignore_errors=True)


# -- install.sh --------------------------------------------------------------------------------------------------

# What install.sh writes and apt keeps, each replaced by a directory of the test in a mount namespace of its own.
SANDBOXED = {'/etc/apt/keyrings': 'keyrings', '/etc/apt/sources.list.d': 'sources.list.d', '/var/lib/apt/lists': 'lists',
             '/var/cache/apt': 'cache'}


def in_sandbox(tmp: Path, script: str, env: dict | None = None, then: str = '') -> tuple[subprocess.CompletedProcess, Path]:
    """Runs script (install.sh's text) with `sh -s` as root, as `curl … | sudo sh` does, where /etc/apt's keyrings and
    sources.list.d and apt's lists and cache are empty directories of this test (and /etc/apt/sources.list empty):
    what it writes lands there, and apt-get sees only what it added."""
    box = tmp / 'sandbox'
    for d in SANDBOXED.values():
        (box / d).mkdir(parents=True, exist_ok=True)
        (box / d).chmod(0o755)
    (box / 'lists' / 'partial').mkdir(exist_ok=True)
    (box / 'cache' / 'archives' / 'partial').mkdir(parents=True, exist_ok=True)
    mounts = [f'mount --bind {shlex.quote(str(box / d))} {target}' for target, d in SANDBOXED.items()]
    if Path('/etc/apt/sources.list').exists():
        mounts.append('mount --bind /dev/null /etc/apt/sources.list')
    inner = ' && '.join(mounts) + ' || exit 99\nsh -s\nrc=$?\n' + (f'[ $rc -ne 0 ] || {then}\n' if then else '') + 'exit $rc\n'
    r = subprocess.run(['unshare', '--mount', '--propagation', 'private', 'sh', '-c', inner], input=script,
                       capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=300)
    assert r.returncode != 99, r.stderr
    return r, box


def sandbox_files(box: Path) -> list[str]:
    return sorted(str(p.relative_to(box)) for p in box.rglob('*') if p.is_file())


@pytest.fixture(scope='module')
def served_site(tmp_path_factory):
    """A site published with REPO_URL its address here, served over HTTP; its install.sh as a host fetches it."""
    from test_repo import user_state
    tmp = tmp_path_factory.mktemp('served')
    site = tmp / 'site'
    served = Served(site)
    state = user_state(tmp)
    r = subprocess.run(['sh', 'scripts/publish.sh', str(site), str(package(tmp, '0.3.0', 'amd64')), str(package(tmp, '0.3.0', 'arm64'))],
                       cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**{k: v for k, v in os.environ.items() if k != 'REPO_KEY'}, 'REPO_URL': served.url, 'XDG_STATE_HOME': str(state)})
    assert r.returncode == 0, r.stderr
    import urllib.request
    with urllib.request.urlopen(f'{served.url}/install.sh') as f:
        script = f.read().decode()
    yield served, site, script
    served.close()
    subprocess.run(['gpgconf', '--kill', 'all'], env={**os.environ, 'GNUPGHOME': str(state / 'beacond' / 'repo-throwaway-gnupg')},
                   capture_output=True)
    shutil.rmtree(state, ignore_errors=True)


def os_release(directory: Path, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o755)
    path = directory / 'os-release'
    path.write_text(text)
    path.chmod(0o644)
    return path


DEBIAN_12 = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\nID=debian\n'
DEBIAN_11 = 'PRETTY_NAME="Debian GNU/Linux 11 (bullseye)"\nNAME="Debian GNU/Linux"\nVERSION_ID="11"\nVERSION_CODENAME=bullseye\nID=debian\n'
RASPBIAN_12 = ('PRETTY_NAME="Raspbian GNU/Linux 12 (bookworm)"\nNAME="Raspbian GNU/Linux"\nVERSION_ID="12"\n'
               'VERSION_CODENAME=bookworm\nID=raspbian\nID_LIKE=debian\n')
UBUNTU = 'PRETTY_NAME="Ubuntu {v}"\nNAME="Ubuntu"\nVERSION_ID="{v}"\nVERSION_CODENAME={c}\nID=ubuntu\nID_LIKE=debian\n'
HAOS = 'NAME="Home Assistant OS"\nVERSION="16.3"\nID=haos\nVERSION_ID=16.3\nPRETTY_NAME="Home Assistant OS 16.3"\n'
FEDORA = 'NAME="Fedora Linux"\nVERSION_ID=42\nID=fedora\nPRETTY_NAME="Fedora Linux 42 (Workstation Edition)"\n'
TRIXIE = 'PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nNAME="Debian GNU/Linux"\nVERSION_ID="13"\nVERSION_CODENAME=trixie\nID=debian\n'
SID = 'PRETTY_NAME="Debian GNU/Linux trixie/sid"\nNAME="Debian GNU/Linux"\nVERSION_CODENAME=trixie\nID=debian\n'

REFUSED = [
    ('raspbian-armhf', RASPBIAN_12, 'armhf', 'install the 64-bit Raspberry Pi OS'),
    ('debian-armel', DEBIAN_12, 'armel', 'install the 64-bit Raspberry Pi OS'),
    ('debian-i386', DEBIAN_12, 'i386', 'built for amd64 and arm64 only'),
    ('bullseye-amd64', DEBIAN_11, 'amd64', 'older than Debian 12 bookworm'),
    ('bullseye-arm64', DEBIAN_11, 'arm64', 'older than Debian 12 bookworm'),
    ('ubuntu-20.04', UBUNTU.format(v='20.04', c='focal'), 'amd64', 'older than Ubuntu 22.04'),
    ('ubuntu-22.04-arm64', UBUNTU.format(v='22.04', c='jammy'), 'arm64', 'Ubuntu 22.10 or later'),
    ('haos', HAOS, '', 'Home Assistant OS cannot install .deb packages: use a second Pi, or the add-on a later release may bring'),
    ('fedora', FEDORA, 'amd64', 'Debian, Raspberry Pi OS and Ubuntu'),
]


@pytest.mark.parametrize('name,release,arch,sentence', REFUSED, ids=[c[0] for c in REFUSED])
def test_install_sh_refuses_where_it_cannot_work_and_writes_nothing(served_site, tmp_path, name, release, arch, sentence):
    _, _, script = served_site
    env = {'BEACOND_OS_RELEASE': str(os_release(tmp_path / 'etc', release))}
    if arch:
        env['BEACOND_DPKG_ARCH'] = arch
    r, box = in_sandbox(tmp_path, script, env)
    assert r.returncode != 0 and sentence in r.stderr, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == '', r.stdout + r.stderr  # one plain sentence
    assert sandbox_files(box) == []


ACCEPTED = [
    ('bookworm-arm64', DEBIAN_12, 'arm64'),
    ('raspbian-64-bit-is-debian', DEBIAN_12, 'arm64'),
    ('trixie-amd64', TRIXIE, 'amd64'),
    ('sid-arm64', SID, 'arm64'),
    ('ubuntu-22.04-amd64', UBUNTU.format(v='22.04', c='jammy'), 'amd64'),
    ('ubuntu-24.04-arm64', UBUNTU.format(v='24.04', c='noble'), 'arm64'),
]


@pytest.mark.parametrize('name,release,arch', ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_install_sh_accepts_these_systems_and_then_needs_root(served_site, tmp_path, name, release, arch):
    """Run as a user (nobody) from a pipe, as `curl … | sh` without sudo: past every check of the system, it asks for
    root and does nothing else."""
    _, _, script = served_site
    etc = Path(tempfile.mkdtemp(prefix='bdrel-', dir='/tmp'))
    try:
        env = {**os.environ, 'BEACOND_OS_RELEASE': str(os_release(etc, release)), 'BEACOND_DPKG_ARCH': arch}
        r = subprocess.run(['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', 'sh', '-s'], input=script,
                           capture_output=True, text=True, env=env, cwd='/', timeout=60)
    finally:
        shutil.rmtree(etc)
    assert r.returncode != 0 and 'as root' in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stdout + r.stderr


def test_install_sh_from_the_source_tree_is_not_run(tmp_path):
    r, box = in_sandbox(tmp_path, INSTALL.read_text())
    assert r.returncode != 0 and 'scripts/publish.sh' in r.stderr, r.stderr
    assert sandbox_files(box) == []


def test_install_sh_adds_the_repository_and_apt_reads_it(served_site, tmp_path):
    """On this machine (its own os-release and architecture), as root: the key and the source, then apt-get update;
    afterwards apt-cache policy, in the same namespace, sees the package from the served site."""
    served, site, script = served_site
    r, box = in_sandbox(tmp_path, script, then='apt-cache policy beacond')
    assert r.returncode == 0, r.stdout + r.stderr
    assert (box / 'keyrings' / 'beacond-archive-keyring.gpg').read_bytes() == (site / 'beacond-archive-keyring.gpg').read_bytes()
    assert (box / 'sources.list.d' / 'beacond.sources').read_text() == (site / 'beacond.sources').read_text()
    for f in ('keyrings/beacond-archive-keyring.gpg', 'sources.list.d/beacond.sources'):
        assert (box / f).stat().st_mode & 0o777 == 0o644, f
    assert [f for f in sandbox_files(box) if f.startswith(('keyrings/', 'sources.list.d/'))] == [
        'keyrings/beacond-archive-keyring.gpg', 'sources.list.d/beacond.sources']
    assert 'NO_PUBKEY' not in r.stderr and not re.search(r'^[WE]:', r.stderr, re.M), r.stderr  # apt checked the signature
    assert 'sudo apt install beacond' in r.stdout, r.stdout
    assert 'Candidate: 0.3.0' in r.stdout and served.url in r.stdout, r.stdout
    # Again: the same files, nothing added beside them.
    r, box = in_sandbox(tmp_path, script, then='apt-cache policy beacond')
    assert r.returncode == 0 and 'Candidate: 0.3.0' in r.stdout, r.stdout + r.stderr
    assert [f for f in sandbox_files(box) if f.startswith(('keyrings/', 'sources.list.d/'))] == [
        'keyrings/beacond-archive-keyring.gpg', 'sources.list.d/beacond.sources']


def test_install_sh_refuses_a_site_that_serves_no_key_and_leaves_nothing(served_site, tmp_path):
    served, site, script = served_site
    key = site / 'beacond-archive-keyring.gpg'
    kept = tmp_path / 'kept.gpg'
    shutil.move(key, kept)
    try:
        r, box = in_sandbox(tmp_path, script)
    finally:
        shutil.move(kept, key)
    assert r.returncode != 0 and 'beacond-archive-keyring.gpg' in r.stderr, r.stdout + r.stderr
    assert sandbox_files(box) == [] or all(f.startswith(('lists/', 'cache/')) for f in sandbox_files(box)), sandbox_files(box)


def test_install_sh_fetches_with_apts_own_helper_where_there_is_no_curl_or_wget(served_site, tmp_path, request):
    """A minimal Debian (the swift image of the release workflow, a debootstrapped root) has neither: apt-helper."""
    served, site, script = served_site
    # A PATH without them, that apt's methods (run as _apt) may read: outside the test's own 0700 directory.
    bin_dir = Path(tempfile.mkdtemp(prefix='bdrel-bin-', dir='/tmp'))
    bin_dir.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(bin_dir))
    for d in ('/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'):
        if Path(d).is_dir() and not Path(d).is_symlink():
            for tool in Path(d).iterdir():
                if tool.name not in ('curl', 'wget') and not (bin_dir / tool.name).exists():
                    (bin_dir / tool.name).symlink_to(tool)
    r, box = in_sandbox(tmp_path, script, env={'PATH': str(bin_dir)}, then='apt-cache policy beacond')
    assert r.returncode == 0, r.stdout + r.stderr
    assert not re.search(r'^[WE]:', r.stderr, re.M), r.stderr  # not even "Download is performed unsandboxed as root"
    assert (box / 'keyrings' / 'beacond-archive-keyring.gpg').read_bytes() == (site / 'beacond-archive-keyring.gpg').read_bytes()
    assert 'Candidate: 0.3.0' in r.stdout, r.stdout


def test_publish_into_a_checkout_keeps_every_index_by_hash(tmp_path):
    """The site is a git checkout, whose files all have the checkout's time: make-repo's "the last 8 by time" cannot be
    told there, and a host that read an earlier InRelease (a CDN may serve it minutes longer) must still find the
    indexes it names. publish keeps every one."""
    from test_repo import user_state
    site = tmp_path / 'site'
    named: list[tuple[str, str]] = []
    env = {**{k: v for k, v in os.environ.items() if k != 'REPO_KEY'}, 'XDG_STATE_HOME': str(user_state(tmp_path)),
           'REPO_URL': 'http://127.0.0.1:9'}
    try:
        for i in range(9):
            r = subprocess.run(['sh', 'scripts/publish.sh', str(site), str(package(tmp_path, f'0.3.{i}', 'amd64'))], cwd=ROOT,
                               capture_output=True, text=True, timeout=120, env=env)
            assert r.returncode == 0, r.stderr
            named += index_hashes(site)
            # as a fresh checkout of gh-pages leaves them: every file the same time
            for p in site.rglob('*'):
                os.utime(p, (1_700_000_000, 1_700_000_000), follow_symlinks=False)
        for h, path in named:
            assert (site / 'dists/stable' / path.rsplit('/', 1)[0] / 'by-hash/SHA256' / h).is_file(), path
    finally:
        home = user_state(tmp_path) / 'beacond' / 'repo-throwaway-gnupg'
        subprocess.run(['gpgconf', '--kill', 'all'], env={**os.environ, 'GNUPGHOME': str(home)}, capture_output=True)
        shutil.rmtree(user_state(tmp_path), ignore_errors=True)
