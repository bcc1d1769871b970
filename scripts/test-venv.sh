#!/bin/sh
# A Python venv with the packages of one requirements file, made once and kept outside the checkout, for a test that
# needs another version of a tool than the test venv has (test_role.py: the oldest ansible-core the role claims).
#   sh scripts/test-venv.sh REQUIREMENTS       prints the venv's directory, made first when it is not there
#
# Where: BEACOND_VENV_CACHE, else /var/cache/beacond-venvs as root (CI), else ~/.cache/beacond-venvs. Each venv is
# NAME-HASH: NAME the requirements file's, HASH of what makes the venv (the file's contents and the interpreter's
# version, PYTHON or python3), so an unchanged file reuses the venv and a changed pin or another Python makes a new
# one. pip reads its index from the machine's own pip configuration. A venv is marked complete only once pip has
# installed everything; an interrupted one is made again. Any failure exits non-zero and says why on stderr.
set -eu
req=${1:?usage: test-venv.sh REQUIREMENTS}
python=${PYTHON:-python3}
[ -f "$req" ] || { echo "test-venv: no requirements file $req" >&2; exit 2; }
if [ -n "${BEACOND_VENV_CACHE:-}" ]; then
    cache=$BEACOND_VENV_CACHE
elif [ "$(id -u)" = 0 ]; then
    cache=/var/cache/beacond-venvs
else
    cache=${XDG_CACHE_HOME:-$HOME/.cache}/beacond-venvs
fi
version=$("$python" -c 'import sys; print(sys.version)' 2>&1) || { echo "test-venv: cannot run $python: $version" >&2; exit 2; }
hash=$({ cat "$req"; echo "$version"; } | sha256sum | cut -c 1-12)
name=$(basename "$req" .txt)-$hash
dir=$cache/$name
mkdir -p "$cache"
# One maker at a time (make's stage and a test run may ask at once); the others wait and take its venv.
exec 9>"$cache/.$name.lock"
flock 9
if [ ! -f "$dir/.complete" ]; then
    rm -rf "$dir"
    echo "test-venv: making $dir from $req ($python $(echo "$version" | head -n 1 | cut -d ' ' -f 1))" >&2
    "$python" -m venv "$dir" >&2 || { rm -rf "$dir"; echo "test-venv: $python -m venv $dir failed" >&2; exit 1; }
    if ! "$dir/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" >&2; then
        rm -rf "$dir"
        echo "test-venv: pip could not install $req (its index is the machine's pip configuration's)" >&2
        exit 1
    fi
    touch "$dir/.complete"
fi
echo "$dir"
