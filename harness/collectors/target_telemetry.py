"""KV telemetry of an engine without kvgate's admin API (vLLM, SGLang, llama.cpp), from outside.

    telemetry = TargetTelemetry(base_url, scraper, api_key=key, kv_events_endpoint="tcp://...")
    telemetry.start()                         # the KV event subscriber, if an endpoint was given
    initial = telemetry.before_load()         # reset the prefix cache (cold start), pool state
    scrape = telemetry.complete(scrape)        # each tick: llama.cpp usage from /slots (llamacpp_kv: its layout)
    final = telemetry.after_drain()            # leak check: reset, then the pool state; event counts
    telemetry.statuses()                       # meta.collectors: each source, available or why not

Pool state in the keys `meta.initial`/`meta.final` use (gates/checks/capacity_after_drain.py),
from vLLM's usage and pool size (`vllm:cache_config_info`): vLLM's free count includes its cached
prefix blocks, and it holds no idle sessions nor promised blocks, so

    live = round(usage × num_blocks), free = num_blocks − live, cached = retained = pinned = pending = 0

A target that states no pool size has no block counts: capacity_after_drain is not measurable
there, and the status says so. Every request here carries the target's key; none is recorded.
"""

from __future__ import annotations

from typing import Any

from harness.collectors.kv_events import KvEventSubscriber
from harness.collectors.llamacpp_slots import DEFAULT_LAYOUT, KvLayout, SlotsReader, SlotsUnavailable
from harness.collectors.prefix_cache import ResetResult, prefix_client, reset_prefix_cache
from harness.collectors.prometheus import PrometheusScraper, Scrape, ScrapeError
from record.run_record import CollectorStatus

KVGATE_POOL = ("num_blocks", "live_blocks", "free_blocks", "cached_blocks", "retained_blocks", "pinned_blocks")


def scrape_pool_state(scrape: Scrape) -> dict[str, Any] | None:
    """The pool in meta.initial/final keys from a scrape with usage and a pool size; else None.
    kvgate's own engine (a worker read as a replica) states every block count."""
    g = scrape.gauges
    if "num_running" not in g:
        return None
    held = g["num_running"] + g.get("num_waiting", 0.0) + g.get("num_swapped", 0.0)
    if all(key in g for key in KVGATE_POOL):
        pool = {key: int(g[key]) for key in KVGATE_POOL}
        return {
            **pool,
            "pending_blocks": int(g.get("pending_blocks", 0)),
            "requests_in_engine": int(held),
            "usage": pool["live_blocks"] / pool["num_blocks"] if pool["num_blocks"] else 0.0,
            "pool_source": "prometheus",
        }
    num_blocks, usage = scrape.info.get("num_blocks"), g.get("usage")
    if not num_blocks or usage is None:
        return None
    live = round(usage * num_blocks)
    return {
        "num_blocks": num_blocks,
        "live_blocks": live,
        "free_blocks": num_blocks - live,
        "cached_blocks": 0,
        "retained_blocks": 0,
        "pinned_blocks": 0,
        "pending_blocks": 0,
        "requests_in_engine": int(held),
        "usage": usage,
        "pool_source": "prometheus",
    }


class TargetTelemetry:
    """Owns the outside collectors of one run; `statuses` only ever gains entries."""

    def __init__(
        self,
        base_url: str,
        scraper: PrometheusScraper | None,
        *,
        api_key: str = "",
        kv_events_endpoint: str = "",
        kv_events_topic: str = "",
        llamacpp_kv: KvLayout = DEFAULT_LAYOUT,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.scraper = scraper
        self._status: dict[str, CollectorStatus] = {}
        self._client = prefix_client(api_key)
        self._api_key = api_key
        self._slots: SlotsReader | None = None
        self._llamacpp_kv = llamacpp_kv
        self.kv_events: KvEventSubscriber | None = None
        if kv_events_endpoint:
            try:
                self.kv_events = KvEventSubscriber(kv_events_endpoint, kv_events_topic)
            except ImportError as err:
                self._set("kv_events", False, f"pyzmq and msgspec are needed ({err})")
        else:
            self._set("kv_events", False, "no --kv-events endpoint given (vLLM: start it with --kv-events-config)")

    def _set(self, name: str, available: bool, detail: str) -> None:
        self._status[name] = CollectorStatus(available=available, detail=detail)

    def start(self) -> None:
        if self.kv_events is not None:
            self.kv_events.start()

    # ------------------------------------------------------------ each tick
    def complete(self, scrape: Scrape) -> Scrape:
        """A llama.cpp scrape without a usage metric gets usage and running slots from /slots."""
        if scrape.dialect != "llamacpp" or "usage" in scrape.gauges:
            return scrape
        if self._slots is None:
            self._slots = SlotsReader(self.base_url, api_key=self._api_key, layout=self._llamacpp_kv)
        try:
            gauges = self._slots.read()
        except SlotsUnavailable as err:
            self._set("llamacpp_slots", False, f"{err} (llama-server without --no-slots, with the key)")
            return scrape
        self._set(
            "llamacpp_slots",
            True,
            f"usage and running slots from GET /slots, over a {self._llamacpp_kv.value} KV cache (--llamacpp-kv)",
        )
        return Scrape(scrape.dialect, {**scrape.gauges, **gauges}, scrape.counters, scrape.info)

    # ------------------------------------------------------------ run phases
    def before_load(self) -> dict[str, Any]:
        """Cold start (reset: the run's prefix hits are its own); the pool as the run begins."""
        self._reset("before the run")
        return self._state("initial")

    def after_drain(self) -> dict[str, Any]:
        """The leak check: reset the prefix cache (refused while a block is held), then the pool
        state, which must show no block in use; and the KV event counts."""
        final: dict[str, Any] = {}
        reset = self._reset("after the drain")
        if reset.available:
            final["prefix_cache_reset_after_drain"] = reset.ok
        final.update(self._state("final"))
        if self.kv_events is not None:
            self.kv_events.stop()
            stats = self.kv_events.stats
            final.update(stats.final())
            self._set(
                "kv_events",
                stats.num_batches > 0,
                f"{stats.num_batches} event batches from {self.kv_events.endpoint}"
                if stats.num_batches
                else f"no event batch arrived from {self.kv_events.endpoint} (is --kv-events-config set?)",
            )
        return final

    def _reset(self, when: str) -> ResetResult:
        result = reset_prefix_cache(self._client, self.base_url)
        self._set("prefix_cache_reset", result.available, f"{when}: {result.detail}")
        return result

    def _scrape(self) -> Scrape | None:
        if self.scraper is None:
            return None
        try:
            return self.complete(self.scraper.scrape())
        except ScrapeError:
            return None

    def _state(self, which: str) -> dict[str, Any]:
        """Pool state and the counters (so a run's hits are its own: final minus initial)."""
        scrape = self._scrape()
        if scrape is None:
            self._set("pool_state", False, f"{which}: no /metrics scrape")
            return {}
        self._set(
            "preemptions",
            "num_preemptions" in scrape.counters,
            "the preemption counter before the run and after the drain (pressure, not OOM)"
            if "num_preemptions" in scrape.counters
            else "no preemption counter in /metrics (vLLM: vllm:num_preemptions_total, "
            "SGLang: sglang:num_retracted_requests_total)",
        )
        pool = scrape_pool_state(scrape)
        if pool is None:
            self._set(
                "pool_state",
                False,
                f"{which}: the target states no pool size and usage (vLLM's vllm:cache_config_info num_gpu_blocks)",
            )
            return dict(scrape.counters)
        self._set("pool_state", True, "blocks from usage × vllm:cache_config_info num_gpu_blocks")
        return {**scrape.counters, **pool}

    def statuses(self) -> dict[str, CollectorStatus]:
        return dict(self._status)

    def close(self) -> None:
        if self.kv_events is not None:
            self.kv_events.stop()
        if self._slots is not None:
            self._slots.close()
        self._client.close()
