"""A tiny HTTP server on 127.0.0.1 for tests that need a target which is not the reference
engine (a vLLM-like metrics endpoint, a server that answers nonsense). One function decides
every answer; the server runs in a thread and is stopped when the context ends."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Answer = Callable[[str, str], tuple[int, bytes]]
"""(method, path) -> (status, body)."""


@contextmanager
def stub_server(answer: Answer, seen: list[tuple[str, str, dict[str, str]]] | None = None) -> Iterator[str]:
    """Serve `answer` on a free loopback port; yields the base URL. `seen`, when given, gets
    (method, path, headers) of every request, for tests of what a client sends."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self._reply("GET")

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._reply("POST")

        def _reply(self, method: str) -> None:
            if seen is not None:
                seen.append((method, self.path, dict(self.headers)))
            status, body = answer(method, self.path)
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
