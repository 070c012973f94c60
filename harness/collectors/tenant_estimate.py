"""Each tenant's KV share estimated from the client: its requests in flight and their tokens.

    pool = PoolCapacity(num_blocks=160, block_tokens=128)        # vLLM: vllm:cache_config_info
    rows = estimate_tenant_rows(requests, times, pool, caps)      # tenant_samples.csv rows
    status = record_tenant_estimate(run_dir, writer, pool, caps)  # after the load: read, estimate, append

vLLM, SGLang and llama.cpp have no tenants, so no engine count of a tenant's blocks exists. The
client knows who sent what: at time t a request sent at `sent_s` and answered by `done_s` holds

    prompt_tokens + completion_tokens × (t − first_token_s) / (done_s − first_token_s)

tokens (its prompt as the run's token model counts it, or as the server's usage reported it;
the answer's tokens streamed so far, assumed to arrive at a steady rate), rounded up to whole
blocks as an engine allocates them. A tenant's share is the sum over its requests in flight
over the pool's capacity, which the target must state (vLLM's `num_gpu_blocks` × `block_size`,
SGLang's `max_total_num_tokens`); without it nothing is estimated. A request refused with a
status (429, 503, ...) held nothing and is left out; one without a status (cut before its
first byte) may have been in prefill and counts.

What it gets wrong (docs/targets.md): a prefix shared by several requests is counted once per
request (over), as is a queued request's prompt before the engine allocates it (over); blocks
the engine frees after the client hung up or read the last token are not counted (under: a
cancel's blocks stay held until the engine notices). Rows carry `source` ESTIMATED_SOURCE, so
a gate and a report say so, and the engine's own count, where it exists, stays preferred.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.collectors.prometheus import Scrape
from record.run_record import ESTIMATED_SOURCE, CollectorStatus, RunRecord, RunRecordWriter

NAME = "tenant_estimate"
"""Its key in meta.collectors (and gates.sources.Source.TENANT_ESTIMATE's value)."""
GRID_S = 0.5
"""Sample spacing when the record has no samples of its own to align with."""
CHUNK = 256
"""Sample times estimated at once: a CHUNK × requests matrix bounds the memory."""


@dataclass(frozen=True)
class PoolCapacity:
    """The KV pool as the target states it: `num_blocks` blocks of `block_tokens` tokens (a pool
    counted in tokens, SGLang's, is blocks of one token)."""

    num_blocks: int
    block_tokens: int
    source: str = ""

    @property
    def num_tokens(self) -> int:
        return self.num_blocks * self.block_tokens


def scraped_pool(scrape: Scrape | None) -> PoolCapacity | None:
    """The pool a target's /metrics states: vLLM's blocks (`vllm:cache_config_info`), SGLang's
    tokens (`sglang:max_total_num_tokens`); None when it states neither."""
    if scrape is None:
        return None
    num_blocks, block_tokens = scrape.info.get("num_blocks"), scrape.info.get("block_tokens")
    if num_blocks and block_tokens:
        return PoolCapacity(num_blocks, block_tokens, "vllm:cache_config_info")
    pool_tokens = scrape.gauges.get("pool_tokens")
    if pool_tokens:
        return PoolCapacity(int(pool_tokens), 1, "sglang:max_total_num_tokens")
    return None


def estimate_tenant_rows(
    requests: pd.DataFrame, times: Sequence[float], pool: PoolCapacity, caps: Mapping[str, float]
) -> list[dict[str, Any]]:
    """One row per tenant (those with requests, and those with a cap) per time in `times`."""
    held = requests[requests["http_status"].isna() | (requests["http_status"] == 200)]
    held = held.dropna(subset=["sent_s"])
    tenants = sorted({*held["tenant"].dropna().astype(str), *caps})
    if not tenants or not len(times):
        return []
    sent = held["sent_s"].to_numpy(float)
    done = held["done_s"].fillna(np.inf).to_numpy(float)
    first = held["first_token_s"].to_numpy(float)
    prompt = held["prompt_tokens"].fillna(0).to_numpy(float)
    answer = held["completion_tokens"].fillna(0).to_numpy(float)
    owner = pd.Categorical(held["tenant"].astype(str), categories=tenants).codes
    rows: list[dict[str, Any]] = []
    grid = np.asarray(times, float)
    for start in range(0, len(grid), CHUNK):
        t = grid[start : start + CHUNK, None]
        in_flight = (sent <= t) & (t < done)
        span = done - first
        with np.errstate(divide="ignore", invalid="ignore"):
            streamed = np.where(span > 0, np.clip((t - first) / span, 0.0, 1.0), 0.0)
        streamed = np.nan_to_num(streamed)  # no first token: nothing streamed yet
        tokens = prompt + answer * streamed
        blocks = np.where(in_flight, np.ceil(tokens / pool.block_tokens), 0.0)
        per_tenant = np.zeros((len(t), len(tenants)))
        for k in range(len(tenants)):
            per_tenant[:, k] = blocks[:, owner == k].sum(axis=1)
        for i, t_s in enumerate(t[:, 0]):
            for k, tenant in enumerate(tenants):
                rows.append(
                    {
                        "t_s": float(t_s),
                        "tenant": tenant,
                        "live_blocks": int(per_tenant[i, k]),
                        "share": per_tenant[i, k] / pool.num_blocks,
                        "cap": caps.get(tenant),
                        "source": ESTIMATED_SOURCE,
                    }
                )
    return rows


def estimate_times(samples: pd.DataFrame, requests: pd.DataFrame) -> list[float]:
    """The record's sample times (the estimate lines up with the engine's own count), else a
    GRID_S grid from the first request sent to the last answered."""
    times = sorted(samples["t_s"].dropna().unique())
    if times:
        return [float(t) for t in times]
    if requests.empty or requests["sent_s"].isna().all():
        return []
    start = float(requests["sent_s"].min())
    end = float(requests["done_s"].max()) if requests["done_s"].notna().any() else start
    return [start + GRID_S * k for k in range(int(math.floor((end - start) / GRID_S)) + 1)]


def record_tenant_estimate(
    run_dir: Path, writer: RunRecordWriter, pool: PoolCapacity | None, caps: Mapping[str, float]
) -> CollectorStatus:
    """Estimate from the record's requests so far (the load is over), append the rows to its
    tenant_samples, and say what was done: meta.collectors[NAME]."""
    if pool is None:
        return CollectorStatus(
            available=False,
            detail="the target states no KV pool capacity (vLLM: vllm:cache_config_info num_gpu_blocks, "
            "SGLang: sglang:max_total_num_tokens): a tenant's tokens are no share of anything known",
        )
    requests, samples = (RunRecord.table(run_dir, name) for name in ("requests", "samples"))
    rows = estimate_tenant_rows(requests, estimate_times(samples, requests), pool, caps)
    if not rows:
        return CollectorStatus(available=False, detail="no request was in flight at any sample")
    writer.append("tenant_samples", rows)
    capped = ", ".join(f"{name} {cap:.0%}" for name, cap in sorted(caps.items())) or "none"
    return CollectorStatus(
        available=True,
        detail=f"each tenant's requests in flight and their prompt and streamed tokens, over "
        f"{pool.num_blocks} blocks of {pool.block_tokens} tokens ({pool.source}); caps: {capped}",
    )
