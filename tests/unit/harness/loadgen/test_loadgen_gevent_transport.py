"""The locust users' transport: idle connections are reused only while fresh, and a connection
the server closed before answering is a connection error, not a malformed answer."""

from __future__ import annotations

from geventhttpclient._parser import HTTPParseError
from geventhttpclient.response import HTTPConnectionClosed

from harness.loadgen.exchange import REUSE_IDLE_S
from harness.loadgen.gevent_transport import GeventTransport, _transport_error
from harness.loadgen.outcome import ClientCode


class Connection:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_a_fresh_connection_is_reused_and_a_stale_one_closed() -> None:
    now = [0.0]
    transport = GeventTransport("http://127.0.0.1:9", clock=lambda: now[0])
    fresh, stale = Connection(), Connection()
    transport.give_back(stale, reusable=True)
    now[0] = REUSE_IDLE_S
    transport.give_back(fresh, reusable=True)
    now[0] += REUSE_IDLE_S / 2
    assert transport._client() is fresh and not fresh.closed  # the newest, still fresh
    assert stale.closed is False and transport.num_idle == 1
    replacement = transport._client()  # the other one idled past the bound: closed, a new one made
    assert stale.closed and replacement is not stale and transport.num_idle == 0


def test_a_connection_closed_before_an_answer_is_a_connection_error() -> None:
    assert _transport_error(HTTPConnectionClosed("connection closed.")).code is ClientCode.CONNECTION_ERROR
    assert _transport_error(HTTPParseError("invalid status line")).code is ClientCode.BAD_RESPONSE
