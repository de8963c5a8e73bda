"""A page of another origin for browser tests of the HTTP port: a tiny HTTP server on a
loopback address of the test's choosing (127.0.0.2 is another site than 127.0.0.1)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

WAIT_S = 10.0
PAGE = b"<!doctype html><meta charset=utf-8><title>another origin</title><p>a page of some other site</p>"


class _PageHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
        pass


@contextmanager
def page_server(host: str) -> Iterator[str]:
    """Serve PAGE on `host`, a free port, in a thread; its origin "http://host:port"."""
    server = http.server.ThreadingHTTPServer((host, 0), _PageHandler)
    thread = threading.Thread(target=server.serve_forever, name="other-origin", daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(WAIT_S)
