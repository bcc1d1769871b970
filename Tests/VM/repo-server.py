#!/usr/bin/env python3
"""The published repository as a guest reaches it: a static HTTP server, as GitHub Pages serves the site the release
workflow publishes, for one connection on standard input and output. Run by qemu for each TCP connection the guest
opens to the repository's address (run.sh: -netdev user,restrict=on,guestfwd=tcp:10.0.2.100:80-cmd:…), so the guest
reaches this and nothing else: no listening port on the host, no route out.

    python3 repo-server.py SITES STATE LOG

SITES holds one published site per moment of the test (v1, v2, tampered: run.sh makes them with scripts/publish.sh,
the release's own step); STATE is a file the guest writes in its results share to say which one is published now (the
guest's "publish", as a new workflow run would; v1 when it has written none). Every request is appended to LOG,
with the site that answered it and the status.
"""
import http.server
import os
import sys

SITES, STATE, LOG = sys.argv[1:4]


def published():
    try:
        name = open(STATE).read().strip()
    except OSError:
        name = ''
    return name if name and os.path.isdir(os.path.join(SITES, name)) and '/' not in name else 'v1'


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'  # keep-alive, as apt's http method and Pages use it

    def __init__(self):
        # One connection on stdin/stdout: no socket, no server object.
        super().__init__(None, ('guest', 0), None, directory=SITES)

    def setup(self):
        self.rfile = sys.stdin.buffer
        self.wfile = sys.stdout.buffer
        self.connection = None

    def finish(self):
        self.wfile.flush()

    def translate_path(self, path):
        self.site = published()
        self.directory = os.path.join(SITES, self.site)
        return super().translate_path(path)

    def list_directory(self, path):
        self.send_error(404, 'No directory listings, as on Pages')
        return None

    def log_message(self, fmt, *args):
        with open(LOG, 'a') as f:
            f.write(f'{self.log_date_time_string()} [{getattr(self, "site", "-")}] {fmt % args}\n')


if __name__ == '__main__':
    Handler()
