"""llama.cpp's KV occupancy from `GET /slots`: what its /metrics no longer says.

Current llama-server builds export no KV usage metric (`llamacpp:kv_cache_usage_ratio` was
removed; `llamacpp:n_tokens_max` is a high-water mark, not occupancy). `/slots` (on by default;
`--no-slots` turns it off; it wants the API key like every route) lists each slot with its
context size `n_ctx`, `is_processing`, and `n_prompt_tokens`: the tokens the slot's sequence
holds in the cache, its prompt and the tokens generated so far (`next_token[0].n_decoded` counts
the latter again, so it is not added). A slot keeps its tokens after a request ends, as its
prompt cache; only a processing slot's tokens are held for a request.

What a slot's `n_ctx` means depends on how the server laid out its cache (`KvLayout`), which
neither `/slots` nor `/props` says (`/props` has the same per-slot `n_ctx` and `total_slots`):

    split    (`-np N` without `--kv-unified`) the cache is cut into one part per slot, and each
             slot's n_ctx is its part: the cache is the sum of them
    unified  (`--kv-unified`; llama-server's default when `-np` is not given: four slots) one
             cache every slot may fill, and each slot's n_ctx is the whole of it

so `kvgate run --llamacpp-kv` says which, unified unless told, and

    usage = sum(n_prompt_tokens of processing slots) / the cache

is the share of the cache held by work in flight: the figure vLLM's `kv_cache_usage_perc`
gives (its cached prefix blocks count as free). Read with the wrong layout a split server's
slots can hold more than one slot's n_ctx, which no unified cache can: that answer is refused,
with the hint, rather than cut to 100 %. A slot is the unit of concurrency: the slots processing
are the requests running.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

import httpx

from harness.collectors.prometheus import bearer


class KvLayout(str, Enum):
    """How llama-server laid out its KV cache across its slots (module docstring)."""

    UNIFIED = "unified"
    SPLIT = "split"


DEFAULT_LAYOUT = KvLayout.UNIFIED
"""The layout assumed unless told (kvgate run --llamacpp-kv): llama-server's own without -np."""


class SlotsUnavailable(Exception):
    """/slots did not answer with a list of slots one can read usage from; the message says how."""


def slots_gauges(slots: Any, layout: KvLayout) -> dict[str, float]:
    """usage and num_running from a /slots answer (SlotsUnavailable if it is not one)."""
    if not isinstance(slots, list) or not slots or not all(isinstance(s, dict) and "n_ctx" in s for s in slots):
        raise SlotsUnavailable("not a list of slots with n_ctx")
    busy = [s for s in slots if s.get("is_processing")]
    if any("n_prompt_tokens" not in s for s in busy):
        raise SlotsUnavailable("a processing slot without n_prompt_tokens: this build does not say what it holds")
    sizes = [int(s["n_ctx"]) for s in slots]
    cache = sum(sizes) if layout is KvLayout.SPLIT else max(sizes)
    held = sum(int(s["n_prompt_tokens"] or 0) for s in busy)
    if held > cache:
        hint = " (-np without --kv-unified splits it: --llamacpp-kv split)" if layout is KvLayout.UNIFIED else ""
        raise SlotsUnavailable(
            f"the processing slots hold {held} tokens, more than the {layout.value} cache of {cache}{hint}"
        )
    return {"usage": held / cache if cache else 0.0, "num_running": float(len(busy))}


class SlotsReader:
    """GET <base>/slots with the target's key; usage over the cache `layout` says."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str = "",
        layout: KvLayout = DEFAULT_LAYOUT,
        timeout_s: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = f"{base_url.rstrip('/')}/slots"
        self.layout = layout
        self._client = httpx.Client(timeout=timeout_s, headers=bearer(api_key), transport=transport)

    def read(self) -> dict[str, float]:
        try:
            resp = self._client.get(self.url)
        except httpx.HTTPError as err:
            raise SlotsUnavailable(f"GET {self.url}: {type(err).__name__}") from err
        if resp.status_code != 200:
            raise SlotsUnavailable(f"GET {self.url}: HTTP {resp.status_code}")
        try:
            return slots_gauges(resp.json(), self.layout)
        except ValueError as err:
            raise SlotsUnavailable(f"GET {self.url}: not JSON") from err

    def close(self) -> None:
        self._client.close()
