#!/usr/bin/env python3
"""Checks that a binary loads on a target's libraries: every symbol version it needs (readelf's .gnu.version_r) is
defined by that library as the target has it (the library's .gnu.version_d), and every Depends version is at most the
target's package version. build-deb.sh runs it on the arm64 binary against the bookworm sysroot (scripts/sysroot.sh).

    check-abi.py BINARY SYSROOT VERSIONS_FILE DEPENDS

VERSIONS_FILE: lines "package version" (the sysroot's); DEPENDS: the package's Depends field. Prints the highest
version needed of each library and exits 1 naming every version or dependency the target lacks. readelf reads ELF of
any architecture; dpkg --compare-versions compares Debian versions.
"""
import os
import re
import subprocess
import sys

LIBDIRS = ('usr/lib/aarch64-linux-gnu', 'lib/aarch64-linux-gnu', 'usr/lib', 'lib')


def readelf(*args):
    return subprocess.run(['readelf', *args], check=True, capture_output=True, text=True).stdout


def needed_versions(binary):
    """{library soname: {version names}} from the binary's version needs."""
    out, lib = {}, None
    for line in readelf('-VW', binary).splitlines():
        m = re.search(r'File: (\S+)\s+Cnt:', line)
        if m:
            lib = m.group(1)
            out.setdefault(lib, set())
            continue
        m = re.search(r'Name: (\S+)\s+Flags:', line)
        if m and lib:
            out[lib].add(m.group(1))
    return out


def defined_versions(library):
    """The version names a shared library defines."""
    names, section = set(), False
    for line in readelf('-VW', library).splitlines():
        if line.startswith('Version definition section'):
            section = True
        elif line.startswith('Version needs section') or line.startswith('Version symbols section'):
            section = False
        elif section:
            m = re.search(r'Name: (\S+)', line)
            if m:
                names.add(m.group(1))
    return names


def find(sysroot, soname):
    for d in LIBDIRS:
        p = os.path.join(sysroot, d, soname)
        if os.path.exists(p):
            return p
    return None


def version_key(v):
    """GLIBC_2.36 → (2, 36), for saying the highest."""
    return tuple(int(x) for x in re.findall(r'\d+', v))


def main():
    binary, sysroot, versions_file, depends = sys.argv[1:5]
    problems = []
    for lib, needed in sorted(needed_versions(binary).items()):
        path = find(sysroot, lib)
        if path is None:
            problems.append(f'{lib} is not in the target ({sysroot})')
            continue
        have = defined_versions(path)
        missing = sorted(needed - have, key=version_key)
        if missing:
            problems.append(f'{lib}: the binary needs {", ".join(missing)}, which the target\'s {lib} does not define')
        print(f'check-abi: {lib}: highest version needed {max(needed, key=version_key) if needed else "none"}')
    target = dict(line.split() for line in open(versions_file) if line.strip())
    for dep in (d.strip() for d in depends.split(',')):
        m = re.fullmatch(r'(\S+)\s*\(>=\s*([^)]+)\)', dep)
        if not m or m.group(1) not in target:
            continue
        name, version = m.groups()
        if subprocess.run(['dpkg', '--compare-versions', version, 'le', target[name]]).returncode != 0:
            problems.append(f'Depends {name} (>= {version}), but the target has {name} {target[name]}')
        else:
            print(f'check-abi: Depends {name} (>= {version}): the target has {target[name]}')
    for p in problems:
        print(f'check-abi: {p}', file=sys.stderr)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
