"""`make repo` (scripts/make-repo.sh) with Debian's own tools: apt-ftparchive indexes, gpg signs, and apt itself
(this machine's apt-get, on a sandboxed state directory) reads the result as a host would. The packages are small
stand-ins made with dpkg-deb (the real ones go through the same script in the VM fleet test)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT

SCRIPT = ROOT / 'scripts' / 'make-repo.sh'


def package(tmp: Path, version: str, arch: str) -> Path:
    d = tmp / f'pkg-{version}-{arch}'
    (d / 'DEBIAN').mkdir(parents=True, exist_ok=True)
    (d / 'DEBIAN' / 'control').write_text(f'Package: beacond\nVersion: {version}\nArchitecture: {arch}\n'
                                          'Maintainer: test <test@beacond.invalid>\nDescription: a stand-in\n')
    (d / 'usr' / 'share' / 'doc' / 'beacond').mkdir(parents=True, exist_ok=True)
    (d / 'usr' / 'share' / 'doc' / 'beacond' / 'version').write_text(version + '\n')
    out = tmp / f'beacond_{version}_{arch}.deb'
    subprocess.run(['dpkg-deb', '--root-owner-group', '--build', str(d), str(out)], check=True, capture_output=True)
    return out


def user_state(tmp: Path) -> Path:
    """The user's state directory (the throw-away key's home), apart from the repository: a short path, since
    gpg-agent's socket lives in it and a unix socket's path has at most 107 bytes."""
    import hashlib
    return Path('/tmp') / f'beacond-state-{hashlib.sha256(str(tmp).encode()).hexdigest()[:10]}'


@pytest.fixture(autouse=True)
def gpg_agents_end(tmp_path):
    """After each test, the gpg-agents its keys started end (the throw-away key's, in the user's state directory, and
    a test's own GNUPGHOME's), and that state directory goes: each run left an agent per test behind."""
    yield
    state = user_state(tmp_path)
    for home in (state / 'beacond' / 'repo-throwaway-gnupg', tmp_path / 'gnupg'):
        if home.is_dir():
            subprocess.run(['gpgconf', '--kill', 'all'], env={**os.environ, 'GNUPGHOME': str(home)}, capture_output=True)
    import shutil
    shutil.rmtree(state, ignore_errors=True)


def make_repo(repo: Path, *debs: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    state = {'XDG_STATE_HOME': str(user_state(repo.parent))}
    return subprocess.run(['sh', str(SCRIPT), str(repo), *map(str, debs)], capture_output=True, text=True,
                          env={**os.environ, **state, **(env or {})}, timeout=120)


def apt_policy(tmp: Path, repo: Path, arch: str = 'amd64') -> str:
    """apt-get update and apt-cache policy as a host with this repository as its only source sees it."""
    d = tmp / f'apt-{arch}'
    for sub in ('lists/partial', 'cache/archives/partial', 'sources'):
        (d / sub).mkdir(parents=True, exist_ok=True)
    # The README installs the key in /etc/apt/keyrings: the source must name it there (here, the repository's copy).
    sources = (repo / 'beacond.sources').read_text()
    assert 'Signed-By: /etc/apt/keyrings/beacond-archive-keyring.gpg\n' in sources, sources
    (d / 'sources' / 'beacond.sources').write_text(
        sources.replace('/etc/apt/keyrings/beacond-archive-keyring.gpg', str(repo / 'beacond-archive-keyring.gpg')))
    opts = ['-o', f'Dir::State::Lists={d}/lists', '-o', f'Dir::Cache={d}/cache', '-o', 'Dir::Etc::SourceList=/dev/null',
            '-o', f'Dir::Etc::SourceParts={d}/sources', '-o', f'APT::Architecture={arch}', '-o', 'Debug::NoLocking=1']
    r = subprocess.run(['apt-get', *opts, 'update'], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and 'NO_PUBKEY' not in r.stderr and 'not signed' not in r.stderr, r.stdout + r.stderr
    return subprocess.run(['apt-cache', *opts, 'policy', 'beacond'], capture_output=True, text=True, check=True).stdout


def test_a_throw_away_key_is_said_loudly_reused_and_every_version_stays(tmp_path):
    repo = tmp_path / 'repo'
    r = make_repo(repo, package(tmp_path, '0.3.0', 'amd64'), package(tmp_path, '0.3.0', 'arm64'))
    assert r.returncode == 0, r.stderr
    assert 'WARNING: REPO_KEY is not set: this repository is signed with a THROW-AWAY key' in r.stderr
    throwaway = user_state(tmp_path) / 'beacond' / 'repo-throwaway-gnupg'
    first_key = (throwaway / 'beacond-key-id').read_text().strip()
    # The private key is in the user's state directory, not in the published tree nor beside it.
    assert not (repo.parent / 'repo-throwaway-gnupg').exists()
    assert not [p for p in repo.rglob('*') if 'private-keys' in p.name or 'gnupg' in p.name], list(repo.rglob('*'))
    for f in ('dists/stable/InRelease', 'dists/stable/Release', 'dists/stable/Release.gpg',
              'dists/stable/main/binary-amd64/Packages.gz', 'dists/stable/main/binary-arm64/Packages',
              'beacond-archive-keyring.gpg', 'beacond-archive-keyring.asc', 'beacond.sources'):
        assert (repo / f).is_file(), f
    release = (repo / 'dists/stable/Release').read_text()
    assert 'Architectures: amd64 arm64' in release and 'Components: main' in release and 'SHA256:' in release
    # The signatures check with the public key alone (gpgv, as apt runs it).
    v = subprocess.run(['gpgv', '--keyring', str(repo / 'beacond-archive-keyring.gpg'), str(repo / 'dists/stable/InRelease')],
                       capture_output=True, text=True)
    assert v.returncode == 0, v.stderr
    # A newer version: the same key signs, and the older one stays in the index (a host can go back to it).
    r = make_repo(repo, package(tmp_path, '0.3.1', 'amd64'), package(tmp_path, '0.3.1', 'arm64'))
    assert r.returncode == 0 and (throwaway / 'beacond-key-id').read_text().strip() == first_key
    packages = (repo / 'dists/stable/main/binary-arm64/Packages').read_text()
    assert 'Version: 0.3.0' in packages and 'Version: 0.3.1' in packages
    policy = apt_policy(tmp_path, repo)
    assert 'Candidate: 0.3.1' in policy and ' 0.3.0 500' in policy, policy


def test_the_users_key_signs_without_a_warning_and_a_bad_package_is_refused(tmp_path):
    home = tmp_path / 'gnupg'
    home.mkdir(mode=0o700)
    env = {'GNUPGHOME': str(home)}
    subprocess.run(['gpg', '--batch', '--quiet', '--passphrase', '', '--quick-gen-key', 'fleet key <fleet@beacond.invalid>',
                    'ed25519', 'sign', '1y'], check=True, capture_output=True, env={**os.environ, **env})
    fpr = next(l.split(':')[9] for l in subprocess.run(['gpg', '--batch', '--with-colons', '--list-secret-keys'], env={**os.environ, **env},
                                                       capture_output=True, text=True, check=True).stdout.splitlines() if l.startswith('fpr:'))
    repo = tmp_path / 'repo'
    r = make_repo(repo, package(tmp_path, '0.3.0', 'amd64'), env={**env, 'REPO_KEY': fpr})
    assert r.returncode == 0, r.stderr
    assert 'THROW-AWAY' not in r.stderr and f'signed by {fpr}' in r.stderr
    assert not (tmp_path / 'repo-throwaway-gnupg').exists() and not user_state(tmp_path).exists()
    listed = subprocess.run(['gpg', '--batch', '--with-colons', '--show-keys', str(repo / 'beacond-archive-keyring.gpg')],
                            capture_output=True, text=True, check=True).stdout
    assert fpr in listed
    assert 'Candidate: 0.3.0' in apt_policy(tmp_path, repo)
    # A key that is not there, and a file that is not a beacond package: refused, nothing signed.
    r = make_repo(tmp_path / 'other', package(tmp_path, '0.3.0', 'amd64'), env={**env, 'REPO_KEY': 'nobody@nowhere.invalid'})
    assert r.returncode == 2 and "no secret key 'nobody@nowhere.invalid'" in r.stderr
    stranger = package(tmp_path, '1.0', 'amd64')
    text = (tmp_path / 'pkg-1.0-amd64' / 'DEBIAN' / 'control').read_text().replace('Package: beacond', 'Package: other')
    (tmp_path / 'pkg-1.0-amd64' / 'DEBIAN' / 'control').write_text(text)
    subprocess.run(['dpkg-deb', '--root-owner-group', '--build', str(tmp_path / 'pkg-1.0-amd64'), str(stranger)], check=True, capture_output=True)
    r = make_repo(tmp_path / 'third', stranger)
    assert r.returncode == 2 and 'is not a beacond package' in r.stderr


def test_the_index_expires_and_a_rebuild_never_shows_a_host_a_mix(tmp_path):
    """Valid-Until (REPO_VALID_DAYS, 30 by default), so an old signed index is not accepted forever; and the indexes
    by hash (Acquire-By-Hash), the previous ones kept, the Release files renamed in last: a host that read the
    previous InRelease still gets the indexes it names, and one that reads the new one gets the new ones."""
    import email.utils
    import re
    import time
    repo = tmp_path / 'repo'
    assert make_repo(repo, package(tmp_path, '0.3.0', 'amd64')).returncode == 0
    release = (repo / 'dists/stable/Release').read_text()
    until = email.utils.parsedate_to_datetime(re.search(r'^Valid-Until: (.*)$', release, re.M).group(1)).timestamp()
    date = email.utils.parsedate_to_datetime(re.search(r'^Date: (.*)$', release, re.M).group(1)).timestamp()
    assert abs(until - date - 30 * 86400) < 120 and abs(date - time.time()) < 120, release
    assert 'Acquire-By-Hash: yes' in release and 'MD5Sum:' not in release, release
    old = (repo / 'dists/stable/InRelease').read_text()
    old_hashes = re.findall(r'^ ([0-9a-f]{64}) +\d+ (main/binary-\w+/Packages(?:\.gz)?)$', old, re.M)
    assert len(old_hashes) == 4, old
    r = make_repo(repo, package(tmp_path, '0.3.1', 'amd64'), env={'REPO_VALID_DAYS': '7'})
    assert r.returncode == 0, r.stderr
    new = (repo / 'dists/stable/InRelease').read_text()
    new_hashes = re.findall(r'^ ([0-9a-f]{64}) +\d+ (main/binary-\w+/Packages(?:\.gz)?)$', new, re.M)
    assert set(new_hashes) != set(old_hashes)
    # Every index either InRelease names is there under its hash, with that content.
    import hashlib
    for h, path in old_hashes + new_hashes:
        f = repo / 'dists/stable' / path.rsplit('/', 1)[0] / 'by-hash/SHA256' / h
        assert f.is_file() and hashlib.sha256(f.read_bytes()).hexdigest() == h, (path, h)
    assert not list((repo / 'dists').glob('.*')), list((repo / 'dists').iterdir())  # no staging tree left
    # apt fetches the indexes by hash: with the plain names gone it still reads the repository.
    for arch in ('amd64', 'arm64'):
        for f in ('Packages', 'Packages.gz'):
            (repo / f'dists/stable/main/binary-{arch}/{f}').unlink()
    assert 'Candidate: 0.3.1' in apt_policy(tmp_path, repo)
    r = make_repo(repo, package(tmp_path, '0.3.1', 'amd64'), env={'REPO_VALID_DAYS': 'soon'})
    assert r.returncode == 2 and 'REPO_VALID_DAYS must be a whole number of days' in r.stderr


def test_another_build_of_a_served_version_is_refused_and_nothing_served_is_rewritten(tmp_path):
    """A host installing while make repo replaced a .deb in place got "Hash Sum mismatch", as did any host reading one
    of the kept by-hash indexes, which name the old bytes. Another build of a version the pool has is refused, naming
    both files; the same bytes again change nothing; a new version goes in under a temporary name, then renamed."""
    repo = tmp_path / 'repo'
    first = package(tmp_path, '0.3.0', 'amd64')
    assert make_repo(repo, first).returncode == 0
    served = repo / 'pool/main/b/beacond/beacond_0.3.0_amd64.deb'
    before = served.stat()
    index = (repo / 'dists/stable/main/binary-amd64/Packages').read_text()
    # The same version built again: other bytes (another file inside).
    (tmp_path / 'pkg-0.3.0-amd64' / 'usr' / 'share' / 'doc' / 'beacond' / 'rebuilt').write_text('yes\n')
    rebuilt = tmp_path / 'rebuilt' / 'beacond_0.3.0_amd64.deb'
    rebuilt.parent.mkdir()
    subprocess.run(['dpkg-deb', '--root-owner-group', '--build', str(tmp_path / 'pkg-0.3.0-amd64'), str(rebuilt)],
                   check=True, capture_output=True)
    assert rebuilt.read_bytes() != served.read_bytes()
    r = make_repo(repo, package(tmp_path, '0.3.1', 'amd64'), rebuilt)
    assert r.returncode == 2, r.stderr
    assert f'{rebuilt}' in r.stderr and 'pool/main/b/beacond/beacond_0.3.0_amd64.deb' in r.stderr, r.stderr
    assert 'bump the version' in r.stderr, r.stderr
    # Nothing changed: not the served package, not the index, and not the other package given with it.
    assert served.read_bytes() == first.read_bytes() and served.stat().st_ino == before.st_ino
    assert (repo / 'dists/stable/main/binary-amd64/Packages').read_text() == index
    assert not (repo / 'pool/main/b/beacond/beacond_0.3.1_amd64.deb').exists()
    # The same bytes again: accepted, and the served file is not rewritten (not even in place).
    r = make_repo(repo, first, package(tmp_path, '0.3.1', 'amd64'))
    assert r.returncode == 0, r.stderr
    after = served.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert 'Version: 0.3.1' in (repo / 'dists/stable/main/binary-amd64/Packages').read_text()
    # No temporary file left in the pool.
    assert sorted(p.name for p in (repo / 'pool/main/b/beacond').iterdir()) == ['beacond_0.3.0_amd64.deb', 'beacond_0.3.1_amd64.deb']


def test_two_builds_of_one_version_given_at_once_are_refused(tmp_path):
    one = package(tmp_path, '0.3.0', 'amd64')
    (tmp_path / 'pkg-0.3.0-amd64' / 'usr' / 'share' / 'doc' / 'beacond' / 'rebuilt').write_text('yes\n')
    other = tmp_path / 'other' / 'beacond_0.3.0_amd64.deb'
    other.parent.mkdir()
    subprocess.run(['dpkg-deb', '--root-owner-group', '--build', str(tmp_path / 'pkg-0.3.0-amd64'), str(other)],
                   check=True, capture_output=True)
    r = make_repo(tmp_path / 'repo', one, other)
    assert r.returncode == 2 and str(one) in r.stderr and str(other) in r.stderr, r.stderr
    assert not list((tmp_path / 'repo' / 'pool/main/b/beacond').iterdir())


@pytest.mark.parametrize('days,why', [
    ('010', None),            # read as octal: 8 days
    ('3650', None),
    ('0', 'from 1 to 3650'),
    ('3651', 'from 1 to 3650'),
    ('99999999999999999999', 'from 1 to 3650'),  # overflowed the shell's arithmetic
    ('1e3', 'a whole number of days'),
    ('7 ', 'a whole number of days'),
    ('-5', 'a whole number of days'),
])
def test_repo_valid_days_is_a_decimal_count_of_days_in_a_sane_range(tmp_path, days, why):
    import email.utils
    import re
    repo = tmp_path / 'repo'
    r = make_repo(repo, package(tmp_path, '0.3.0', 'amd64'), env={'REPO_VALID_DAYS': days})
    if why is not None:
        assert r.returncode == 2 and 'REPO_VALID_DAYS' in r.stderr and why in r.stderr, r.stderr
        assert not (repo / 'dists').exists()
        return
    assert r.returncode == 0, r.stderr
    release = (repo / 'dists/stable/Release').read_text()
    until = email.utils.parsedate_to_datetime(re.search(r'^Valid-Until: (.*)$', release, re.M).group(1)).timestamp()
    date = email.utils.parsedate_to_datetime(re.search(r'^Date: (.*)$', release, re.M).group(1)).timestamp()
    assert abs(until - date - int(days, 10) * 86400) < 120, release


def test_without_a_package_it_re_signs_what_the_pool_has(tmp_path):
    """The scheduled re-sign: no package given, a repository that has some: indexed and signed again, with a fresh
    Date and Valid-Until, nothing added; an empty pool is still refused."""
    import email.utils
    import re
    import time
    repo = tmp_path / 'repo'
    r = make_repo(repo)
    assert r.returncode == 2 and 'no packages given (make deb first)' in r.stderr, r.stderr
    assert make_repo(repo, package(tmp_path, '0.3.0', 'amd64'), env={'REPO_VALID_DAYS': '2'}).returncode == 0
    before = (repo / 'dists/stable/Release').read_text()
    pool = sorted(p.name for p in (repo / 'pool/main/b/beacond').iterdir())
    time.sleep(1.1)  # Date has a resolution of one second
    r = make_repo(repo)
    assert r.returncode == 0, r.stderr
    after = (repo / 'dists/stable/Release').read_text()

    def field(text: str, name: str) -> float:
        return email.utils.parsedate_to_datetime(re.search(rf'^{name}: (.*)$', text, re.M).group(1)).timestamp()
    assert field(after, 'Date') > field(before, 'Date') and abs(field(after, 'Date') - time.time()) < 120, (before, after)
    assert abs(field(after, 'Valid-Until') - field(after, 'Date') - 30 * 86400) < 120, after
    # The same indexes (nothing added), signed anew.
    hashes = lambda text: re.findall(r'^ ([0-9a-f]{64}) +\d+ (main/\S+)$', text, re.M)  # noqa: E731
    assert hashes(after) == hashes(before)
    assert sorted(p.name for p in (repo / 'pool/main/b/beacond').iterdir()) == pool
    v = subprocess.run(['gpgv', '--keyring', str(repo / 'beacond-archive-keyring.gpg'), str(repo / 'dists/stable/InRelease')],
                       capture_output=True, text=True)
    assert v.returncode == 0, v.stderr
    assert 'Candidate: 0.3.0' in apt_policy(tmp_path, repo)


def test_the_source_names_repo_url_when_it_is_served_elsewhere(tmp_path):
    repo = tmp_path / 'repo'
    assert make_repo(repo, package(tmp_path, '0.3.0', 'amd64')).returncode == 0
    assert f'URIs: file:{repo}\n' in (repo / 'beacond.sources').read_text()
    r = make_repo(repo, env={'REPO_URL': 'https://example.invalid/beacond'})
    assert r.returncode == 0, r.stderr
    sources = (repo / 'beacond.sources').read_text()
    assert [l for l in sources.splitlines() if l.startswith('URIs:')] == ['URIs: https://example.invalid/beacond'], sources
    r = make_repo(repo, env={'REPO_URL': 'https://example.invalid/a b'})
    assert r.returncode == 2 and 'REPO_URL' in r.stderr, r.stderr
    assert 'URIs: https://example.invalid/beacond\n' in (repo / 'beacond.sources').read_text()


def test_repo_by_hash_keep_all_keeps_every_index(tmp_path):
    """REPO_BY_HASH_KEEP=all (scripts/publish.sh: a git checkout of the site keeps no file times, by which "the last 8"
    are told): no index by hash is removed; by default the last 8 of each stay."""
    repo, kept = tmp_path / 'repo', tmp_path / 'kept'
    for i in range(10):
        deb = package(tmp_path, f'0.3.{i}', 'amd64')
        assert make_repo(repo, deb).returncode == 0
        r = make_repo(kept, deb, env={'REPO_BY_HASH_KEEP': 'all'})
        assert r.returncode == 0, r.stderr
    by_hash = lambda top: len(list((top / 'dists/stable/main/binary-amd64/by-hash/SHA256').iterdir()))  # noqa: E731
    assert by_hash(repo) == 16 and by_hash(kept) == 20
    r = make_repo(kept, env={'REPO_BY_HASH_KEEP': 'some'})
    assert r.returncode == 2 and 'REPO_BY_HASH_KEEP' in r.stderr, r.stderr


def new_key(home: Path, uid: str) -> str:
    """A signing key without a passphrase in GNUPGHOME home, with this user id: its fingerprint."""
    home.mkdir(mode=0o700, exist_ok=True)
    env = {**os.environ, 'GNUPGHOME': str(home)}
    before = set(fingerprints(home))
    subprocess.run(['gpg', '--batch', '--quiet', '--passphrase', '', '--quick-gen-key', uid, 'ed25519', 'sign', '1y'],
                   check=True, capture_output=True, env=env)
    (fpr,) = set(fingerprints(home)) - before
    return fpr


def fingerprints(home: Path, *args: str) -> list[str]:
    """The primary keys' fingerprints gpg lists (--list-keys, or --show-keys FILE)."""
    out = subprocess.run(['gpg', '--batch', '--with-colons', *(args or ['--list-keys'])], capture_output=True, text=True,
                         env={**os.environ, 'GNUPGHOME': str(home)}).stdout
    lines = out.splitlines()
    return [l.split(':')[9] for prev, l in zip(lines, lines[1:]) if prev.split(':')[0] in ('pub', 'sec') and l.startswith('fpr:')]


def test_repo_key_given_as_a_user_id_is_one_key_and_only_its_public_key_is_published(tmp_path):
    """REPO_KEY as a user id signed with the first secret key gpg found, and the published keyring held every public
    key that matched it: another's key with the same address was trusted by every host. apt's way: one signing key, by
    fingerprint."""
    home = tmp_path / 'gnupg'
    mine = new_key(home, 'fleet key <fleet@beacond.invalid>')
    # Someone else's public key with the same address, imported into the same keyring (no secret key of it here).
    theirs = new_key(tmp_path / 'gnupg-other', 'impostor <fleet@beacond.invalid>')
    public = subprocess.run(['gpg', '--batch', '--export', theirs], capture_output=True, check=True,
                            env={**os.environ, 'GNUPGHOME': str(tmp_path / 'gnupg-other')}).stdout
    subprocess.run(['gpg', '--batch', '--quiet', '--import'], input=public, check=True, capture_output=True,
                   env={**os.environ, 'GNUPGHOME': str(home)})
    env = {'GNUPGHOME': str(home), 'REPO_KEY': 'fleet@beacond.invalid'}
    repo = tmp_path / 'repo'
    r = make_repo(repo, package(tmp_path, '0.3.0', 'amd64'), env=env)
    assert r.returncode == 0, r.stderr
    for keyring in ('beacond-archive-keyring.gpg', 'beacond-archive-keyring.asc'):
        assert fingerprints(home, '--show-keys', str(repo / keyring)) == [mine], keyring
    assert f'signed by {mine}' in r.stderr, r.stderr
    # A second secret key with that address: which one signs? Refused, naming both; nothing added, nothing signed.
    second = new_key(home, 'fleet key, new <fleet@beacond.invalid>')
    fresh = tmp_path / 'fresh'
    r = make_repo(fresh, package(tmp_path, '0.3.1', 'amd64'), env=env)
    assert r.returncode == 2 and 'fleet@beacond.invalid' in r.stderr and mine in r.stderr and second in r.stderr, r.stderr
    assert 'fingerprint' in r.stderr, r.stderr
    assert not (fresh / 'dists').exists() and not list(fresh.rglob('*.deb')), list(fresh.rglob('*'))
    # By fingerprint: that one, alone.
    r = make_repo(fresh, package(tmp_path, '0.3.1', 'amd64'), env={**env, 'REPO_KEY': second})
    assert r.returncode == 0 and f'signed by {second}' in r.stderr, r.stderr
    assert fingerprints(home, '--show-keys', str(fresh / 'beacond-archive-keyring.gpg')) == [second]
    # None: refused before anything is added.
    r = make_repo(tmp_path / 'none', package(tmp_path, '0.3.1', 'amd64'), env={**env, 'REPO_KEY': 'nobody@beacond.invalid'})
    assert r.returncode == 2 and "no secret key 'nobody@beacond.invalid'" in r.stderr, r.stderr
    assert not list((tmp_path / 'none').rglob('*.deb'))
    for h in (home, tmp_path / 'gnupg-other'):
        subprocess.run(['gpgconf', '--kill', 'all'], env={**os.environ, 'GNUPGHOME': str(h)}, capture_output=True)


def locked(path: Path) -> bool:
    """Whether something holds a lock on this directory (flock, as make-repo.sh takes it)."""
    import fcntl
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_a_run_waits_for_another_on_the_same_repository_and_leaves_no_lock_file(tmp_path):
    """Two runs at once removed each other's dists/.stable.new (its staging tree). A run holds a lock on the
    repository directory itself (flock: no lock file in the published tree, nor beside it), and a second waits until
    the first is done before it touches anything."""
    import fcntl
    import time
    repo = tmp_path / 'repo'
    assert make_repo(repo, package(tmp_path, '0.3.0', 'amd64')).returncode == 0
    # The lock ends with the run: not held on by a process it started (gpg's agent lives on).
    assert not locked(repo)
    fd = os.open(repo, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    state = {'XDG_STATE_HOME': str(user_state(tmp_path))}
    second = subprocess.Popen(['sh', str(SCRIPT), str(repo), str(package(tmp_path, '0.3.1', 'amd64'))],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **state})
    try:
        time.sleep(3)
        assert second.poll() is None, second.communicate()
        assert not (repo / 'dists' / '.stable.new').exists()
        assert not (repo / 'pool/main/b/beacond/beacond_0.3.1_amd64.deb').exists()
    finally:
        os.close(fd)
    _, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert 'Version: 0.3.1' in (repo / 'dists/stable/main/binary-amd64/Packages').read_text()
    # Two runs started together: both done, both packages in the index, no staging tree left.
    runs = [subprocess.Popen(['sh', str(SCRIPT), str(repo), str(package(tmp_path, f'0.4.{i}', 'amd64'))],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **state})
            for i in range(2)]
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
    packages = (repo / 'dists/stable/main/binary-amd64/Packages').read_text()
    assert 'Version: 0.4.0' in packages and 'Version: 0.4.1' in packages, packages
    assert not list((repo / 'dists').glob('.*'))
    # Nothing but the repository's own files in it, and nothing beside it.
    assert sorted(p.name for p in repo.iterdir()) == ['beacond-archive-keyring.asc', 'beacond-archive-keyring.gpg',
                                                      'beacond.sources', 'dists', 'pool']
    assert not [p for p in tmp_path.iterdir() if 'lock' in p.name], list(tmp_path.iterdir())
    assert not locked(repo)
