"""Questions gates and reports ask of a run record: time windows, id joins, percentiles.

Kept in one place so every gate reads phases, booleans and engine ids the same way (a CSV
boolean column with gaps loads as strings; an engine id may be empty on the client side).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from record.outcomes import NOT_OVERLOAD_CODES, OVERLOAD_STATUSES, Status
from record.run_record import HIT_COUNTERS, RunMeta, RunRecord

Window = tuple[float, float]

WHOLE_RUN: Window = (-math.inf, math.inf)

EXPLICIT_STATUSES = (400, 410, *OVERLOAD_STATUSES)
"""HTTP statuses that are an explicit answer to overflow (with an OpenAI error code)."""


def phase_window(meta: RunMeta, name: str) -> Window | None:
    phase = meta.phase(name)
    return None if phase is None else (phase.start_s, phase.end_s)


def load_window(meta: RunMeta) -> Window:
    """The pressure window: the `load` phase, or the whole run when the record has no phases."""
    return phase_window(meta, "load") or WHOLE_RUN


def after_load_window(meta: RunMeta) -> Window | None:
    """Everything after the load: from the end of `load` (or the start of `cooldown`) on, open
    at the end. A record's last sample can sit exactly at the cooldown's end (replay takes the
    first sample at or after the drain and ends the phase there) or just after it (a live
    run's collectors stop after the phase ends): it is the one that shows what was left, so a
    window closed at the cooldown's end would miss it. None without a load phase."""
    cooldown = phase_window(meta, "cooldown")
    if cooldown is not None:
        return (cooldown[0], math.inf)
    load = phase_window(meta, "load")
    return None if load is None else (load[1], math.inf)


def window_duration_s(record: RunRecord, window: Window) -> float | None:
    """A window's length; an open-ended one is clipped to the run's duration."""
    start, end = window
    if math.isinf(end):
        if not record.meta.duration_s:
            return None  # the run's duration is unknown, so an open window has no length
        end = record.meta.duration_s
    if math.isinf(start):
        start = 0.0
    return None if end <= start else end - start


def in_window(df: pd.DataFrame, column: str, window: Window) -> pd.DataFrame:
    start, end = window
    t = df[column]
    return df[(t >= start) & (t < end)]


def requests_in_phase(record: RunRecord, name: str) -> pd.DataFrame:
    """Requests of a phase: by the `phase` column when the client tagged it, else by send time.

    Without any phases in the record, `load` means the whole run and other phases are empty.
    """
    requests = record.requests
    tagged = requests["phase"].dropna()
    if len(tagged):
        return requests[requests["phase"] == name]
    window = phase_window(record.meta, name)
    if window is None:
        return requests if name == "load" and not record.meta.phases else requests.iloc[0:0]
    return in_window(requests, "sent_s", window)


def flag(series: pd.Series) -> pd.Series:
    """A boolean column as loaded from CSV (bools, 'True'/'False' strings or gaps) -> bool."""
    if series.dtype == bool:
        return series
    return series.astype(str).str.strip().str.lower().isin(("true", "1", "yes"))


def engine_ids(requests: pd.DataFrame) -> pd.Series:
    """The id the engine logged a request under: `engine_request_id`, else the client id."""
    eid = requests["engine_request_id"]
    return eid.where(eid.notna() & (eid.astype(str) != ""), requests["request_id"]).astype(str)


def intended_cancels(requests: pd.DataFrame) -> pd.Series:
    """The requests cancelled on purpose: status `cancelled`, or flagged `cancel_intended` (a
    cancel the client meant, whatever status it ended with)."""
    return (requests["status"] == "cancelled") | flag(requests["cancel_intended"])


def overload_refusals(requests: pd.DataFrame) -> pd.Series:
    """The requests refused for overload: `record.outcomes.is_overload_refusal` over a table."""
    code = requests["error_code"]
    return (
        requests["http_status"].isin(OVERLOAD_STATUSES)
        & (requests["status"] == Status.ERROR.value)
        & code.notna()
        & (code.astype(str) != "")
        & ~code.isin(NOT_OVERLOAD_CODES)
    )


def events_of(record: RunRecord, *kinds: str) -> pd.DataFrame:
    events = record.events
    return events[events["kind"].isin(kinds)]


def prefix_hit_rate(record: RunRecord, window: Window) -> float | None:
    """Prefix-cache hit tokens / prompt tokens of the requests scheduled in `window`, every tier
    together (`prefix_hit_rates_by_tier`). None when nothing was scheduled in the window or the
    prompt sizes are unknown."""
    by_tier = prefix_hit_rates_by_tier(record, window)
    return None if by_tier is None else sum(by_tier.values())


def prefix_hit_rates_by_tier(record: RunRecord, window: Window) -> dict[str, float] | None:
    """Of the prompt tokens of the requests scheduled in `window`, the share each tier served:
    `gpu` from the `num_tokens` of `scheduled` events (hits in the GPU pool), `host` and `disk`
    from their `tier_load` events that ended `ok` (blocks loaded back from a lower tier; those
    that failed or were slower than re-prefilling were computed). A request's prompt is the
    `num_tokens` of the event it emitted on arrival, `admitted` or `queued` (one or the other,
    never both). None when nothing was scheduled in the window or the prompt sizes are unknown.
    `WHOLE_RUN` takes every event, with or without a time."""
    events = record.events
    scheduled = scheduled_in(record, window)
    if scheduled.empty:
        return None
    prompt_tokens = scheduled_prompt_tokens(record, window).sum()
    if not prompt_tokens:
        return None
    rates = {"gpu": float(scheduled["num_tokens"].fillna(0).sum() / prompt_tokens)}
    loads = events[(events["kind"] == "tier_load") & (events["reason"] == "ok")]
    loads = loads[loads["request_id"].isin(scheduled["request_id"])]
    for tier, tokens in loads.groupby("mode")["num_tokens"].sum().items():
        rates[str(tier)] = float(tokens / prompt_tokens)
    return rates


def scheduled_in(record: RunRecord, window: Window) -> pd.DataFrame:
    """The `scheduled` events in `window` (every one, with or without a time, for `WHOLE_RUN`)."""
    scheduled = events_of(record, "scheduled")
    return scheduled if window == WHOLE_RUN else in_window(scheduled, "t_s", window)


def scheduled_prompt_tokens(record: RunRecord, window: Window) -> pd.Series:
    """The prompt tokens of each request scheduled in `window` (one value per `scheduled` event,
    NaN where the arrival is unknown): the denominator of `prefix_hit_rates_by_tier`, and the
    weights of its requests."""
    events = record.events
    arrivals = events[events["kind"].isin(("admitted", "queued"))].drop_duplicates("request_id")
    return arrivals.set_index("request_id")["num_tokens"].reindex(scheduled_in(record, window)["request_id"])


def counter_prefix_hit_rate(meta: RunMeta) -> float | None:
    """Prefix-cache hit tokens / prompt tokens looked up over the run, from the target's counters
    (vLLM's `prefix_cache_hits`/`_queries`; llama.cpp's cached and computed prompt tokens): the
    change from `meta.initial` to `meta.final`, or the final totals when the run did not record
    the counters at its start. None without the counters or without a lookup."""

    def lookups(state: dict) -> float | None:
        if "prefix_cache_hits_tokens" not in state:
            return None
        if "prefix_cache_queries_tokens" in state:
            return float(state["prefix_cache_queries_tokens"])
        if "prompt_tokens_computed" in state:
            return float(state["prompt_tokens_computed"]) + float(state["prefix_cache_hits_tokens"])
        return None

    final_lookups, initial_lookups = lookups(meta.final), lookups(meta.initial)
    if final_lookups is None:
        return None
    hits = float(meta.final["prefix_cache_hits_tokens"])
    if initial_lookups is not None:
        final_lookups -= initial_lookups
        hits -= float(meta.initial["prefix_cache_hits_tokens"])
    return hits / final_lookups if final_lookups > 0 else None


def measured_hit_ratio(record: RunRecord) -> float | None:
    """The prefix-cache hit ratio of the load, as the target itself counted it: from the engine's
    events (`prefix_hit_rate`, every tier), else from its replicas' counters from the load's start
    on (`replica_hit_ratio`), else from its counters' change over the whole run, the baseline's
    requests included (`counter_prefix_hit_rate`). None when nothing says."""
    window = load_window(record.meta)
    if record.meta.signals.engine_events:
        rate = prefix_hit_rate(record, window)
        if rate is not None:
            return rate
    rate = replica_hit_ratio(record.replica_samples, (window[0], math.inf))
    return rate if rate is not None else counter_prefix_hit_rate(record.meta)


def replica_hit_ratio(samples: pd.DataFrame, window: Window) -> float | None:
    """Prefix hits / lookups in `window` from replicas' samples (replica_samples.csv, whose
    counters are each replica's increase so far): per replica, its last reading in the window
    minus its last before it (0 without one), summed over the replicas. None without lookups."""
    read = samples.dropna(subset=list(HIT_COUNTERS))
    hits = lookups = 0.0
    for _, rows in read.sort_values("t_s", kind="stable").groupby("replica"):
        before, upto = rows[rows["t_s"] < window[0]], rows[rows["t_s"] < window[1]]
        if upto.empty:
            continue
        start = before[list(HIT_COUNTERS)].iloc[-1] if len(before) else 0.0
        change = upto[list(HIT_COUNTERS)].iloc[-1] - start
        lookups, hits = lookups + float(change.iloc[0]), hits + float(change.iloc[1])
    return hits / lookups if lookups > 0 else None


def num_restarts(events: pd.DataFrame) -> int:
    """Engine restarts seen from outside: per replica (or the one target), the larger count of
    its two witnesses (the scraped start time and /health may both see one restart), summed."""
    restarts = events[events["kind"] == "engine_restart"]
    if restarts.empty:
        return 0
    by_witness = restarts.groupby([restarts["replica"].fillna(""), restarts["reason"]]).size()
    return int(by_witness.groupby(level=0).max().sum())


def counter_change(meta: RunMeta, name: str) -> float | None:
    """A target counter's change over the run (`meta.final` minus `meta.initial`; the final total
    when the start was not recorded). None when the target does not export it."""
    if name not in meta.final:
        return None
    return float(meta.final[name]) - float(meta.initial.get(name, 0.0))


def pool_blocks(record: RunRecord) -> int | None:
    """The pool size in blocks, from meta.pool or the samples."""
    if record.meta.pool is not None:
        return record.meta.pool.num_blocks
    blocks = record.samples["num_blocks"].dropna()
    return int(blocks.max()) if len(blocks) else None


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile by nearest rank: the smallest value with at least q % of the values at
    or below it (the value of rank ceil(n·q/100), numpy's "inverted_cdf"), never interpolated. Of
    100 values, P99 is the 99th smallest, not the maximum. Every percentile kvgate shows (gates,
    reports, replay, benchmarks) comes from here; an infinite value (a request that never got an
    answer) stays infinite. NaN for no values."""
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        return math.nan
    return float(np.percentile(arr, q, method="inverted_cdf"))


def worst(values: pd.Series, ids: pd.Series, n: int = 5) -> list[dict]:
    """The n largest values with their ids: the evidence a human opens first."""
    order = values.sort_values(ascending=False, kind="stable").index[:n]
    return [{"request_id": str(ids[i]), "value": float(values[i])} for i in order]


def live_usage(samples: pd.DataFrame) -> pd.Series:
    """Live blocks / pool per sample (`usage`, else computed from block counts)."""
    return samples["usage"].fillna(samples["live_blocks"] / samples["num_blocks"])


def active_usage(samples: pd.DataFrame) -> pd.Series:
    """Usage by work in flight: live minus retained state (idle sessions, pins). A scraped
    target without block counts (vLLM's usage already counts only running requests) keeps `usage`."""
    active = (samples["live_blocks"] - samples["retained_blocks"]) / samples["num_blocks"]
    return active.fillna(live_usage(samples))


def ttft_ms(requests: pd.DataFrame, traffic_class: str) -> pd.Series:
    """TTFT in ms of one class's requests, indexed like `requests`. A timeout without a first
    token is infinite (the user waited and got nothing); cancels and explicit errors have none."""
    rows = requests[requests["traffic_class"] == traffic_class]
    answered = rows["ttft_s"].dropna() * 1000.0
    hung = rows[(rows["status"] == "timeout") & rows["ttft_s"].isna()]
    return pd.concat([answered, pd.Series(math.inf, index=hung.index)])
