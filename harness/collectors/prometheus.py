"""A /metrics scraper that reads the reference engine's metrics and vLLM's, SGLang's and llama.cpp's names.

Each samples.csv column has a list of candidate metrics, tried in order; the first one the
target exports wins. The reference engine exports its own `kvgate_*` names and vLLM's, so it
is read by its own (block counts included); vLLM (`vllm:kv_cache_usage_perc`, a 0..1 fraction of
the KV pool, `vllm:num_requests_running`/`_waiting`) and SGLang (`sglang:token_usage`,
`sglang:num_running_reqs`, `sglang:num_queue_reqs`) give usage and queues, without block counts.
llama.cpp (`--metrics`) gives its queue (`llamacpp:requests_processing`/`_deferred`) and, in
older builds only, `llamacpp:kv_cache_usage_ratio`; its usage otherwise comes from /slots
(harness/collectors/llamacpp_slots.py). vLLM's pool size is a label of `vllm:cache_config_info`
(`num_gpu_blocks`, `block_size`), read into `Scrape.info`; SGLang's is a gauge in tokens
(`sglang:max_total_num_tokens`: `pool_tokens`). `process_start_time_seconds` (Python's
prometheus client exports it: vLLM) shows a restart (engine_restarts.py). Series of several engines (a
multi-worker router labels each with `worker`; data-parallel vLLM by `engine`) are summed, or
averaged for ratios.

A server that wants its API key on /metrics (llama.cpp with `--api-key`, vLLM with
`--api-key`) gets the target's key as a bearer token; the key lives in the client's headers
only, never in a message or a record.

Counters (preemptions, prefix-cache queries and hits, OOMs, evicted cached blocks, recomputed
and computed tokens) are kept as run totals for `meta.final`; a name the target does not export
stays absent.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from record.run_record import SAMPLE_COLUMNS

Series = list[tuple[dict[str, str], float]]


@dataclass(frozen=True)
class Candidate:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    mean: bool = False  # a ratio: average over series instead of summing


def _kv(state: str) -> Candidate:
    return Candidate("kvgate_kv_blocks", {"state": state})


GAUGES: dict[str, tuple[Candidate, ...]] = {
    "num_blocks": (Candidate("kvgate_kv_pool_blocks"),),
    "live_blocks": (_kv("live"),),
    "retained_blocks": (_kv("retained"),),
    "pinned_blocks": (_kv("pinned"),),
    "cached_blocks": (_kv("cached"),),
    "free_blocks": (_kv("free"),),
    "pending_blocks": (_kv("pending"),),
    "usage": (
        Candidate("kvgate_kv_usage_ratio", mean=True),
        Candidate("vllm:kv_cache_usage_perc", mean=True),
        Candidate("vllm:gpu_cache_usage_perc", mean=True),
        Candidate("sglang:token_usage", mean=True),
        Candidate("llamacpp:kv_cache_usage_ratio", mean=True),
    ),
    "num_running": (
        Candidate("kvgate_requests", {"state": "running"}),
        Candidate("vllm:num_requests_running"),
        Candidate("sglang:num_running_reqs"),
        Candidate("llamacpp:requests_processing"),
    ),
    "num_waiting": (
        Candidate("kvgate_requests", {"state": "waiting"}),
        Candidate("vllm:num_requests_waiting"),
        Candidate("sglang:num_queue_reqs"),
        Candidate("llamacpp:requests_deferred"),
    ),
    "num_swapped": (Candidate("kvgate_requests", {"state": "swapped"}), Candidate("vllm:num_requests_swapped")),
    "fragmentation": (Candidate("kvgate_kv_fragmentation_ratio", mean=True),),
    "pool_tokens": (Candidate("sglang:max_total_num_tokens"),),
    "process_start_s": (Candidate("process_start_time_seconds"),),
}

COUNTERS: dict[str, tuple[Candidate, ...]] = {
    "num_preemptions": (
        Candidate("kvgate_preemptions_total"),
        Candidate("vllm:num_preemptions_total"),
        Candidate("sglang:num_retracted_requests_total"),  # SGLang retracts where vLLM preempts
    ),
    "num_oom": (Candidate("kvgate_oom_total"),),
    "num_evicted_cached_blocks": (Candidate("kvgate_cached_blocks_evicted_total"),),
    "recompute_tokens": (Candidate("kvgate_recompute_tokens_total"),),
    "computed_tokens": (Candidate("kvgate_computed_tokens_total"),),
    "orphans_reconciled": (Candidate("kvgate_orphan_blocks_reconciled_total"),),
    "prefix_cache_queries_tokens": (Candidate("vllm:prefix_cache_queries_total"),),
    "prefix_cache_hits_tokens": (
        Candidate("vllm:prefix_cache_hits_total"),
        Candidate("sglang:cached_tokens_total"),
        Candidate("llamacpp:prompt_tokens_cached_total"),
    ),
    "prefix_cache_hit_rate": (Candidate("sglang:cache_hit_rate", mean=True),),
    "prompt_tokens_computed": (Candidate("llamacpp:prompt_tokens_total"),),  # llama.cpp: cache hits not included
    "num_aborted": (Candidate("vllm:request_success_total", {"finished_reason": "abort"}),),
}

INFO_LABELS: dict[str, tuple[str, str]] = {
    "num_blocks": ("vllm:cache_config_info", "num_gpu_blocks"),
    "block_tokens": ("vllm:cache_config_info", "block_size"),
}
"""Numbers a target states as labels of an info metric: column -> (metric, label)."""

DIALECTS = (("kvgate", "kvgate_kv_"), ("vllm", "vllm:"), ("sglang", "sglang:"), ("llamacpp", "llamacpp:"))


class ScrapeError(Exception):
    """/metrics did not answer with Prometheus text."""


@dataclass(frozen=True)
class Scrape:
    dialect: str  # kvgate | vllm | sglang | llamacpp | "" (nothing recognised)
    gauges: dict[str, float]
    counters: dict[str, float]
    info: dict[str, int] = field(default_factory=dict)

    def sample_row(self, t_s: float) -> dict[str, Any] | None:
        """A samples.csv row (source prometheus), or None without a usage figure."""
        g = dict(self.gauges)
        if "usage" not in g and g.get("num_blocks"):
            g["usage"] = g.get("live_blocks", 0.0) / g["num_blocks"]
        if "usage" not in g:
            return None
        return {"t_s": t_s, **{k: v for k, v in g.items() if k in SAMPLE_COLUMNS}, "source": "prometheus"}


def bearer(api_key: str) -> dict[str, str]:
    """The Authorization header for a target's key (none without one)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def parse_metrics(text: str) -> Scrape:
    series: dict[str, Series] = defaultdict(list)
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                series[s.name].append((s.labels, s.value))
    except ValueError as err:
        raise ScrapeError(f"not Prometheus text: {err}") from err
    names = series.keys()
    dialect = next((d for d, prefix in DIALECTS if any(n.startswith(prefix) for n in names)), "")
    return Scrape(dialect, _pick(series, GAUGES), _pick(series, COUNTERS), _info(series))


def _info(series: Mapping[str, Series]) -> dict[str, int]:
    out: dict[str, int] = {}
    for column, (name, label) in INFO_LABELS.items():
        for labels, _ in series.get(name, ()):
            if str(labels.get(label, "")).isdigit():
                out[column] = int(labels[label])
                break
    return out


def _pick(series: Mapping[str, Series], table: Mapping[str, tuple[Candidate, ...]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for column, candidates in table.items():
        for c in candidates:
            values = [
                v for labels, v in series.get(c.name, ()) if all(labels.get(k) == want for k, want in c.labels.items())
            ]
            if values:
                out[column] = sum(values) / len(values) if c.mean else sum(values)
                break
    return out


class PrometheusScraper:
    """GETs `metrics_url` and parses it; the latest scrape's counters are the run totals."""

    def __init__(self, metrics_url: str, *, api_key: str = "", timeout_s: float = 10.0) -> None:
        self.metrics_url = metrics_url
        self._client = httpx.Client(timeout=timeout_s, headers=bearer(api_key))
        self.last: Scrape | None = None

    def scrape(self) -> Scrape:
        try:
            resp = self._client.get(self.metrics_url)
        except httpx.HTTPError as err:
            raise ScrapeError(f"GET {self.metrics_url}: {type(err).__name__}: {err}") from err
        if resp.status_code != 200:
            raise ScrapeError(f"GET {self.metrics_url}: HTTP {resp.status_code}")
        self.last = parse_metrics(resp.text)
        return self.last

    def close(self) -> None:
        self._client.close()
