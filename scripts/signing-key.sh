#!/bin/sh
# Imports the apt repository's signing key from the environment into GNUPGHOME, for make publish and make resign:
#   BEACOND_REPO_SIGNING_KEY="$(gpg --armor --export-secret-keys FPR)" GNUPGHOME=DIR sh scripts/signing-key.sh
# prints one line, REPO_KEY=<the key's 40-hex fingerprint> (the release workflow appends it to $GITHUB_ENV), and
# nothing of the key itself. Refused, with nothing left imported: GNUPGHOME unset (a directory of its own, not the
# user's ~/.gnupg; made 0700 when missing), an empty variable, armor holding no secret key or more than one (which one
# would sign?), and a key that cannot sign here without a prompt (a passphrase: CI has nobody to type it; or expired),
# which is deleted again.
set -eu
say() { echo "signing-key: $*" >&2; }
[ -n "${GNUPGHOME:-}" ] || { say "GNUPGHOME must be set to a directory of its own (the workflow's is under the runner's temp directory): refusing to import into ~/.gnupg"; exit 2; }
[ -n "${BEACOND_REPO_SIGNING_KEY:-}" ] || { say "BEACOND_REPO_SIGNING_KEY is empty: it must hold the armored secret key (gpg --armor --export-secret-keys FPR; the repository secret of that name)"; exit 2; }
command -v gpg >/dev/null 2>&1 || { say "gpg is missing (make deps-repo)"; exit 2; }
mkdir -p "$GNUPGHOME"
chmod 0700 "$GNUPGHOME"

# What the armor holds, read without importing it: its secret keys (sec) and their fingerprints (the fpr after each).
listing=$(printf '%s\n' "$BEACOND_REPO_SIGNING_KEY" | gpg --batch --with-colons --show-keys 2>/dev/null || true)
count=$(printf '%s\n' "$listing" | grep -c '^sec:' || true)
[ "$count" -eq 1 ] || { say "BEACOND_REPO_SIGNING_KEY must hold one secret key, not $count (export the signing key alone: gpg --armor --export-secret-keys FPR)"; exit 2; }
fpr=$(printf '%s\n' "$listing" | awk -F: '$1 == "sec" { want = 1; next } want && $1 == "fpr" { print $10; exit }')
case $fpr in
    [0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F]*) ;;
    *) say "could not read the key's fingerprint"; exit 2 ;;
esac
[ "${#fpr}" -eq 40 ] || { say "the key's fingerprint $fpr is not a 40-digit (v4) one"; exit 2; }

log=$(mktemp)
trap 'rm -f "$log"' EXIT
printf '%s\n' "$BEACOND_REPO_SIGNING_KEY" | gpg --batch --quiet --import >"$log" 2>&1 || { cat "$log" >&2; say "gpg could not import the key"; exit 1; }
# It must sign here and now, with no one to type a passphrase.
if ! echo "beacond" | gpg --batch --quiet --pinentry-mode error --local-user "$fpr" --clearsign >/dev/null 2>"$log"; then
    sed 's/^/signing-key: gpg: /' "$log" >&2
    gpg --batch --quiet --yes --delete-secret-and-public-keys "$fpr" >/dev/null 2>&1 || true
    say "the key $fpr cannot sign without a prompt: it needs a passphrase (CI has nobody to type it: export a key without one), or it has expired"
    exit 2
fi
echo "REPO_KEY=$fpr"
