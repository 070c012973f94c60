"""A fleet in a run record: replicas behind a gateway, each read on its own, and the fleet as their sum.

    replica_names(record)          the replicas the record read ([] for a single target)
    replica_view(record, name)     the record as if that replica were the whole target
    metrics_gaps(record, name)     the windows in which that replica's metrics did not answer
    fleet_state(states)            meta.initial / meta.final of the fleet: its replicas' states summed
    replica_summary(record)        one row per replica and one for the fleet: what a reader compares

A gate judges a replica through its view: the replica's samples (`replica_samples.csv` without
its missed ticks), the events seen on it (`events.replica`, and for a reference-engine worker
the engine's own events of that `worker`), its pool before and after (`replicas.csv`), its run's
counters as `meta.final` (with no `meta.initial` counters, so a counter's change is the run's
increase) and its collectors (`meta.replica_collectors`). The client's requests are not in it:
the client cannot tell which replica served a request. The fleet is the record itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from record.query import Window, counter_change, flag, in_window, load_window, measured_hit_ratio, num_restarts
from record.run_record import (
    KV_EVENT_COUNTS,
    MISSING_SOURCE,
    POOL_STATE_KEYS,
    RUN_COUNTERS,
    SAMPLE_COLUMNS,
    RunRecord,
    Signals,
)

NOT_SUMMED = ("t_s", "replica", "source", "level", "fragmentation")
"""The columns of a replica's sample that a fleet's sample does not sum."""

FLEET = "fleet"
"""The name the fleet's row goes by in `replica_summary` (a replica may not take it)."""

PD_TARGET = "reference_pd"
"""meta.target.kind of a P/D pair's record (kvgate's own pair, replayed or served)."""
DECIDING_POOL = "decode"
"""The pool of a P/D pair where the policy decides: the prefill pool holds each prompt only until
it is pulled, takes only what the decode side would admit, and keeps no sessions, so it never
evicts or preempts (its requests never grow after admission)."""


def is_pd_pair(record: RunRecord) -> bool:
    """Whether the replicas are a P/D pair's prefill and decode pools."""
    return record.meta.target.get("kind") == PD_TARGET


def replica_names(record: RunRecord) -> list[str]:
    return [str(name) for name in record.replicas["replica"].dropna()]


def _row(record: RunRecord, name: str) -> pd.Series:
    rows = record.replicas[record.replicas["replica"] == name]
    if rows.empty:
        raise KeyError(f"no replica {name!r} in {record.dir} (replicas: {', '.join(replica_names(record))})")
    return rows.iloc[0]


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and value != ""


def replica_state(row: Mapping[str, Any], which: str) -> dict[str, Any]:
    """A replica's pool before (`initial`) or after (`final`) the run, in meta.initial keys."""
    state = {key: row[f"{which}_{key}"] for key in POOL_STATE_KEYS if _present(row.get(f"{which}_{key}"))}
    return {key: value if key == "usage" else int(value) for key, value in state.items()}


def replica_final(row: Mapping[str, Any]) -> dict[str, Any]:
    """meta.final of a replica's view: its pool after the drain, its run's counters and KV event
    counts, the leak check."""
    final = replica_state(row, "final")
    final.update({key: float(row[key]) for key in (*RUN_COUNTERS, *KV_EVENT_COUNTS) if _present(row.get(key))})
    reset = row.get("prefix_cache_reset_after_drain")
    if _present(reset):
        final["prefix_cache_reset_after_drain"] = bool(flag(pd.Series([reset])).iloc[0])
    return final


def replica_view(record: RunRecord, name: str) -> RunRecord:
    """The record as one replica alone would have written it (module docstring)."""
    row = _row(record, name)
    worker = row["worker"] if _present(row["worker"]) else None
    events = record.events
    mine = events["replica"] == name
    if worker is not None:
        mine |= events["worker"].astype(str) == str(worker)
    samples = record.replica_samples
    samples = samples[(samples["replica"] == name) & (samples["source"] != MISSING_SOURCE)]
    meta = record.meta.model_copy(
        update={
            "target": {"kind": "replica", "replica": name, "url": row["url"], "metrics_url": row["metrics_url"]},
            "pool": None,
            "initial": replica_state(row, "initial"),
            "final": replica_final(row),
            "signals": Signals(
                client_requests=False,
                engine_events=record.meta.signals.engine_events and worker is not None,
                prometheus=not samples.empty,
            ),
            "collectors": dict(record.meta.replica_collectors.get(name, {})),
            "replica_collectors": {},
            "probes": {},
            "pressure": None,
        }
    )
    return RunRecord(
        dir=record.dir,
        meta=meta,
        requests=record.requests.iloc[0:0],
        events=events[mine],
        samples=samples[list(SAMPLE_COLUMNS)].reset_index(drop=True),
        tenant_samples=record.tenant_samples.iloc[0:0],
        replica_samples=samples,
        replicas=record.replicas.iloc[0:0],
    )


def metrics_gaps(record: RunRecord, name: str) -> list[Window]:
    """The windows in which a replica's metrics did not answer: from its first missed tick to
    the next tick it answered (infinite: it never did again before the run ended)."""
    rows = record.replica_samples[record.replica_samples["replica"] == name].sort_values("t_s", kind="stable")
    gaps: list[Window] = []
    start: float | None = None
    for t_s, source in zip(rows["t_s"], rows["source"]):
        if source == MISSING_SOURCE:
            start = float(t_s) if start is None else start
        elif start is not None:
            gaps.append((start, float(t_s)))
            start = None
    if start is not None:
        gaps.append((start, math.inf))
    return gaps


def gaps_in(gaps: Sequence[Window], window: Window) -> list[Window]:
    """The gaps that overlap `window`."""
    return [(a, b) for a, b in gaps if a < window[1] and b > window[0]]


def describe_gaps(gaps: Sequence[Window]) -> str:
    """'t=12.0–15.5 s, t=40.1 s–end' for a reader."""
    return ", ".join(f"t={a:.1f}–{b:.1f} s" if math.isfinite(b) else f"t={a:.1f} s–end" for a, b in gaps)


def summed_samples(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The fleet's sample from its replicas' samples of one tick (`fleet_state` of what sums)."""
    return fleet_state([{k: v for k, v in row.items() if k not in NOT_SUMMED} for row in rows])


def fleet_state(states: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The fleet's pool and counters from its replicas' (`meta.initial` or `meta.final` keys): a
    key summed when every replica has it (a fleet figure missing one replica is not a figure),
    usage as live blocks over the pool, or the mean usage when no replica states its blocks, and
    the leak check passed only when it passed on every replica."""
    if not states:
        return {}
    shared = set(states[0]).intersection(*map(set, states[1:]))
    out: dict[str, Any] = {}
    for key in sorted(shared):
        values = [s[key] for s in states]
        if key == "prefix_cache_reset_after_drain":
            out[key] = all(bool(v) for v in values)
        elif key == "usage":
            continue
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            out[key] = sum(values)
    if "usage" in shared:
        usages = [float(s["usage"]) for s in states]
        out["usage"] = out["live_blocks"] / out["num_blocks"] if out.get("num_blocks") else sum(usages) / len(usages)
    if {"num_blocks", "live_blocks"} <= set(out):
        out["pool_source"] = "replicas"
    return out


def replica_summary(record: RunRecord) -> pd.DataFrame:
    """One row per replica, then the fleet: peak usage under load, prefix hits and lookups over
    the run and their ratio, preemptions, restarts, cached blocks removed, samples missed."""
    names = replica_names(record)
    if not names:
        return pd.DataFrame()
    rows = [_summary(replica_view(record, name), name) for name in names]
    missed = [int(m) for m in record.replicas["num_samples_missed"] if _present(m)]
    for row, n in zip(rows, record.replicas["num_samples_missed"]):
        row["num_samples_missed"] = int(n) if _present(n) else None
    rows.append({**_summary(record, FLEET), "num_samples_missed": sum(missed)})
    return pd.DataFrame(rows)


def _summary(view: RunRecord, name: str) -> dict[str, Any]:
    load = in_window(view.samples, "t_s", load_window(view.meta))["usage"].dropna()
    return {
        "replica": name,
        "peak_usage": float(load.max()) if len(load) else None,
        "prefix_hit_tokens": counter_change(view.meta, "prefix_cache_hits_tokens"),
        "prefix_hit_ratio": measured_hit_ratio(view),
        "preemptions": counter_change(view.meta, "num_preemptions"),
        "restarts": num_restarts(view.events),
        "cached_blocks_removed": view.meta.final.get("kv_blocks_removed"),
    }
