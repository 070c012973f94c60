"""Clients that try to hold the server or flood its log, against a real `kvgate serve`: slow
headers and slow bodies are answered 408 and closed, connections past `server.max_connections`
503, a client gone mid-upload costs one log line (no traceback), and an HTTP/1.0 client gets
no chunked encoding. The server's deadlines are short here; the client waits much longer, so a
test never depends on how fast the machine is: it waits for the server to act."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.integration.server_process import running_server

pytestmark = pytest.mark.slow

CLIENT_WAIT_S = 60.0  # far longer than any server deadline below: only a server that never acts fails
DEADLINES = "header_timeout_s = 0.5\nbody_timeout_s = 0.5"
BODY = json.dumps({"model": "kvgate-tiny", "prompt": "tell me a story", "max_tokens": 3, "stream": True}).encode()


def connect(base: str) -> socket.socket:
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.settimeout(CLIENT_WAIT_S)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def head(path: str = "/v1/completions", *, version: str = "1.1", length: int = len(BODY)) -> bytes:
    return (
        f"POST {path} HTTP/{version}\r\nHost: kvgate\r\nAuthorization: Bearer sk-acme\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def test_slow_headers_and_slow_bodies_are_answered_408_and_closed(tmp_path: Path) -> None:
    with running_server(tmp_path, server_toml=DEADLINES) as base:
        silent, slow_headers, slow_body = connect(base), connect(base), connect(base)
        slow_headers.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: kvgate\r\n")  # and never the rest
        slow_body.sendall(head() + BODY[:10])  # and never the rest
        for sock in (silent, slow_headers, slow_body):
            answer = read_until_closed(sock)
            assert answer.startswith(b"HTTP/1.1 408 ") and b"request_timeout" in answer, answer


def test_a_client_gone_mid_upload_costs_one_log_line(tmp_path: Path) -> None:
    with running_server(tmp_path, server_toml=DEADLINES, log_level="info") as base:
        for _ in range(3):
            sock = connect(base)
            sock.sendall(head(length=10_000) + BODY)
            sock.close()
        done = connect(base)  # a whole request after them: the server has read the three by then
        done.sendall(head(version="1.0") + BODY)
        read_until_closed(done)
    log = (tmp_path / "serve.log").read_text()
    assert log.count("the client disconnected before its request body was complete") == 3
    assert "Traceback" not in log


def test_an_http_1_0_client_gets_a_whole_response_without_chunks(tmp_path: Path) -> None:
    with running_server(tmp_path) as base:
        sock = connect(base)
        sock.sendall(head(version="1.0") + BODY)
        answer = read_until_closed(sock)
    headers, _, body = answer.partition(b"\r\n\r\n")
    assert headers.startswith(b"HTTP/1.1 200 ") and b"transfer-encoding" not in headers.lower()
    [length] = [
        int(line.split(b":")[1]) for line in headers.split(b"\r\n") if line.lower().startswith(b"content-length")
    ]
    assert len(body) == length and body.endswith(b"data: [DONE]\n\n")


def test_connections_past_the_limit_are_refused_503(tmp_path: Path) -> None:
    with running_server(tmp_path, server_toml="max_connections = 4") as base:
        held = [connect(base) for _ in range(4)]
        refused = connect(base)
        answer = read_until_closed(refused)
        assert answer.startswith(b"HTTP/1.1 503 ") and b"too_many_connections" in answer
        held.pop().close()
        for sock in held:  # the held ones are served as usual
            sock.sendall(head(version="1.0") + BODY)
            assert read_until_closed(sock).startswith(b"HTTP/1.1 200 ")
