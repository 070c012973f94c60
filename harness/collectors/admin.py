"""The reference engine's admin API as the harness reads it (docs/server.md, "Admin API").

Engine answers carry engine-clock times and `engine_clock_offset_unix` (the unix time at engine
time 0); `run_time` puts an engine time on the run's axis (seconds since `meta.started_unix`).
Any other target has no admin API: `AdminUnavailable` says why (no route, wrong key, down).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx


class AdminUnavailable(Exception):
    """The admin API did not answer usefully; the message says how."""


def run_time(t_engine_s: float, answer: Mapping[str, Any], started_unix: float) -> float:
    """An engine-clock time of `answer`'s process as seconds since the run started."""
    return t_engine_s + float(answer["engine_clock_offset_unix"]) - started_unix


class AdminApi:
    def __init__(
        self, base_url: str, admin_key: str, *, timeout_s: float = 10.0, transport: httpx.BaseTransport | None = None
    ) -> None:
        """`transport`: a test seam (httpx.MockTransport)."""
        self.base_url = base_url.rstrip("/")
        self._client = httpx.Client(
            base_url=self.base_url,
            timeout=timeout_s,
            transport=transport,
            headers={"Authorization": f"Bearer {admin_key}"},
        )

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        try:
            resp = self._client.get(path, params=params or None)
        except httpx.HTTPError as err:
            raise AdminUnavailable(f"GET {self.base_url}{path}: {type(err).__name__}: {err}") from err
        if resp.status_code != 200:
            raise AdminUnavailable(f"GET {self.base_url}{path}: HTTP {resp.status_code} {resp.text[:200]}")
        try:
            body = resp.json()
        except ValueError as err:
            raise AdminUnavailable(f"GET {self.base_url}{path}: not JSON") from err
        if not isinstance(body, dict):
            raise AdminUnavailable(f"GET {self.base_url}{path}: not a JSON object")
        return body

    def events(self, since: int, limit: int) -> dict[str, Any]:
        return self.get("/admin/events", since=since, limit=limit)

    def snapshot(self) -> dict[str, Any]:
        return self.get("/admin/snapshot")

    def ledger(self) -> dict[str, Any]:
        return self.get("/admin/ledger")

    def config(self) -> dict[str, Any]:
        return self.get("/admin/config")

    def workers(self) -> dict[str, Any]:
        return self.get("/admin/workers")

    def close(self) -> None:
        self._client.close()
