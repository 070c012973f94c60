"""llama.cpp's KV occupancy from `GET /slots`: what its /metrics no longer says.

Current llama-server builds export no KV usage metric (`llamacpp:kv_cache_usage_ratio` was
removed; `llamacpp:n_tokens_max` is a high-water mark, not occupancy). `/slots` (on by default;
`--no-slots` turns it off; it wants the API key like every route) lists each slot with its
context size `n_ctx`, `is_processing`, the prompt it holds (`n_prompt_tokens`) and the tokens it
has generated (`next_token[0].n_decoded`). A slot keeps its tokens after a request ends, as its
prompt cache; only a processing slot's tokens are held for a request, so

    usage = sum(prompt + decoded of processing slots) / sum(n_ctx of all slots)

is the share of the context held by work in flight: the figure vLLM's `kv_cache_usage_perc`
gives (its cached prefix blocks count as free). A slot is the unit of concurrency: the slots
processing are the requests running.
"""

from __future__ import annotations

from typing import Any

import httpx

from harness.collectors.prometheus import bearer


class SlotsUnavailable(Exception):
    """/slots did not answer with a list of slots; the message says how."""


def slots_gauges(slots: Any) -> dict[str, float]:
    """usage and num_running from a /slots answer (SlotsUnavailable if it is not one)."""
    if not isinstance(slots, list) or not slots or not all(isinstance(s, dict) and "n_ctx" in s for s in slots):
        raise SlotsUnavailable("not a list of slots with n_ctx")
    capacity = sum(int(s["n_ctx"]) for s in slots)
    busy = [s for s in slots if s.get("is_processing")]
    held = sum(int(s.get("n_prompt_tokens") or 0) + _decoded(s) for s in busy)
    return {"usage": min(1.0, held / capacity) if capacity else 0.0, "num_running": float(len(busy))}


def _decoded(slot: dict[str, Any]) -> int:
    nxt = slot.get("next_token")
    first = nxt[0] if isinstance(nxt, list) and nxt else nxt if isinstance(nxt, dict) else {}
    return int(first.get("n_decoded") or 0)


class SlotsReader:
    """GET <base>/slots with the target's key."""

    def __init__(
        self, base_url: str, *, api_key: str = "", timeout_s: float = 5.0, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.url = f"{base_url.rstrip('/')}/slots"
        self._client = httpx.Client(timeout=timeout_s, headers=bearer(api_key), transport=transport)

    def read(self) -> dict[str, float]:
        try:
            resp = self._client.get(self.url)
        except httpx.HTTPError as err:
            raise SlotsUnavailable(f"GET {self.url}: {type(err).__name__}") from err
        if resp.status_code != 200:
            raise SlotsUnavailable(f"GET {self.url}: HTTP {resp.status_code}")
        try:
            return slots_gauges(resp.json())
        except ValueError as err:
            raise SlotsUnavailable(f"GET {self.url}: not JSON") from err

    def close(self) -> None:
        self._client.close()
