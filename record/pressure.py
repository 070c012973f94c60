"""How hard a run pressed on the KV cache: the rungs of the watermark ladder it reached, when and
for how long, and which of the engine's answers to pressure ran.

A PASS says little when the load never reached the cache's limits: a run that stayed below the
evict rung never asked a policy what to evict, whom to preempt, or whether to swap or recompute,
so it cannot tell one policy from another. Every run record carries this summary
(`meta.pressure`); the console, the reports and the matrix read it from there.

    pressure = measure_pressure(record)          # from the record's tables
    record_pressure(run_dir)                     # ... and stored in its meta.json

The level comes from the engine's `watermark` events (each level change, at the end of the step
that caused it) or, for a target without events, from the usage samples against
`meta.watermarks`. Decisions are counted from the engine's events and its final state.

A server kvgate did not write (vLLM, SGLang, llama.cpp) has no watermark ladder, so no rung can be
read from it. What it shows instead is what pressure made it do (source `target`): cached prefix
blocks removed to make room (its KV cache events), preemptions (its counter, mode unknown) and
explicit overload refusals (the client's 429/503/529), beside the peak of its usage gauge. There
a rung of `MUST_REACH` counts as reached when the decision it stands for ran (`SHOWN_BY`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from record.fleet import DECIDING_POOL, is_pd_pair, replica_names, replica_view
from record.query import counter_change, live_usage, overload_refusals
from record.run_record import RUNGS, Pressure, RungReached, RunRecord

MUST_REACH: tuple[str, ...] = ("evict", "preempt")
"""The rungs where the policies' decisions act (evict idle state; preempt running work): a run
that stays below them compares nothing but admission."""

PREEMPTIONS: tuple[str, ...] = ("preempted_recompute", "preempted_swap", "preempted_kill", "preempted_mode_unknown")
"""The preemption counters: by mode from the engine's events, `mode_unknown` from a target's counter."""

CORE_DECISIONS: dict[str, tuple[str, ...]] = {
    "eviction": ("evicted_sessions",),
    "preemption": PREEMPTIONS,
    "swap": ("preempted_swap",),
    "recompute": ("preempted_recompute",),
    "session_expiry": ("expired_sessions",),
}
"""The decisions a comparison of policies is about, each with the counters that show it ran."""

SHOWN_BY: dict[str, tuple[str, ...]] = {
    "evict": ("evicted_sessions", "reclaimed_cached_blocks"),
    "preempt": PREEMPTIONS,
}
"""On a target without a ladder: the decisions that show a rung of `MUST_REACH` was reached."""


def measure_pressure(record: RunRecord) -> Pressure:
    """The pressure summary of a loaded record (pure: reads the tables, changes nothing)."""
    meta, events = record.meta, record.events
    end_s = _end_s(record)
    marks = {name: meta.watermarks[name] for name in RUNGS if name in meta.watermarks}
    watermark_events = events[events["kind"] == "watermark"]
    if meta.signals.engine_events:
        replicas = _replica_rungs(record)
        if replicas:
            deciding = replicas.get(DECIDING_POOL) if is_pd_pair(record) else None
            return Pressure(
                source="engine",
                peak_usage=_peak(record),
                rungs=deciding or [_weakest(list(rs)) for rs in zip(*replicas.values())],
                decisions=_decisions(record),
                replicas=replicas,
            )
        source = "engine"
        levels = [
            (float(t), _level(str(reason))) for t, reason in zip(watermark_events["t_s"], watermark_events["reason"])
        ]
    elif marks and len(record.samples):
        source = "samples"
        usage = live_usage(record.samples)
        levels = [(float(t), sum(u >= marks[name] for name in marks)) for t, u in zip(record.samples["t_s"], usage)]
    else:
        shown, peak = _target_decisions(record), _peak(record)
        if peak is None and set(shown) <= {"rejected_overload"}:  # the client's view alone
            return Pressure(source="none")
        return Pressure(source="target", peak_usage=peak, decisions=shown)
    rungs = [
        _rung(i, name, marks.get(name, math.nan), levels, end_s)
        for i, name in enumerate(RUNGS, start=1)
        if name in marks
    ]
    return Pressure(source=source, peak_usage=_peak(record), rungs=rungs, decisions=_decisions(record))


def record_pressure(run_dir: str | Path) -> Pressure:
    """Measure the record in `run_dir` and store the summary in its meta.json (the last step of
    writing a record: the tables must be complete)."""
    record = RunRecord.load(run_dir)
    pressure = measure_pressure(record)
    meta = record.meta.model_copy(update={"pressure": pressure})
    (record.dir / "meta.json").write_text(meta.model_dump_json(indent=2))
    return pressure


def missing_rungs(pressure: Pressure | None) -> tuple[str, ...]:
    """The rungs of `MUST_REACH` the run never reached (all of them when nothing is known)."""
    if pressure is None or pressure.source == "none":
        return MUST_REACH
    if pressure.source == "target":
        d = pressure.decisions
        return tuple(name for name in MUST_REACH if not any(d.get(c, 0) for c in SHOWN_BY[name]))
    return tuple(name for name in MUST_REACH if not pressure.reached(name))


def decisions_never_run(pressures: Iterable[Pressure | None]) -> tuple[str, ...]:
    """The core decisions that ran in none of these runs: what a comparison of them cannot judge."""
    known = [p for p in pressures if p is not None]
    return tuple(
        name
        for name, counters in CORE_DECISIONS.items()
        if not any(p.decisions.get(c, 0) for p in known for c in counters)
    )


def _replica_rungs(record: RunRecord) -> dict[str, list[RungReached]]:
    """Each replica's rungs, each read from its own view (a fleet's workers, a P/D pair's pools):
    their watermark events interleaved are no one ladder. A fleet reached a rung once every
    replica did; a P/D pair once its decode pool did (`DECIDING_POOL`)."""
    names = replica_names(record)
    return {name: measure_pressure(replica_view(record, name)).rungs for name in names} if len(names) > 1 else {}


def _weakest(rungs: list[RungReached]) -> RungReached:
    """One rung over replicas: the replica that never reached it, else the one that reached it last."""
    return max(rungs, key=lambda r: math.inf if r.first_s is None else r.first_s)


def _level(reason: str) -> int:
    """0 below warn, 1 at warn ... 6 at reject (an unknown name counts as below warn)."""
    return RUNGS.index(reason) + 1 if reason in RUNGS else 0


def _rung(index: int, name: str, usage: float, levels: list[tuple[float, int]], end_s: float) -> RungReached:
    first_s, entries, held_s, since = None, 0, 0.0, None
    for t, level in levels:
        if level >= index and since is None:
            since, entries = t, entries + 1
            first_s = t if first_s is None else first_s
        elif level < index and since is not None:
            held_s, since = held_s + t - since, None
    if since is not None:
        held_s += max(0.0, end_s - since)
    return RungReached(rung=name, usage=usage, first_s=first_s, entries=entries, held_s=held_s)


def _decisions(record: RunRecord) -> dict[str, int]:
    events = record.events
    kind = events["kind"]
    preempted = events.loc[kind == "preempted", "mode"].value_counts()
    rejected = events.loc[kind == "rejected", "reason"].value_counts()
    evicted = events[kind == "evicted"]
    counts = {
        "evicted_sessions": len(evicted),
        "evicted_session_blocks": int(evicted["num_blocks"].fillna(0).sum()),
        "expired_sessions": int((kind == "expired").sum()),
        "preempted_recompute": int(preempted.get("recompute", 0)),
        "preempted_swap": int(preempted.get("swap", 0)),
        "preempted_kill": int(preempted.get("kill", 0)),
        "rejected_kv_capacity": int(rejected.get("kv_capacity", 0)),
        "rejected_tenant_quota": int(rejected.get("tenant_quota", 0)),
        "rejected_queue_deadline": int(rejected.get("queue_deadline", 0)),
        "approximated_requests": int(events.loc[kind == "approximated", "request_id"].nunique()),
        "oom": int((kind == "oom").sum()),
    }
    reclaimed = record.meta.final.get("num_evicted_cached_blocks")
    if reclaimed is not None:
        counts["reclaimed_cached_blocks"] = int(reclaimed)
    return counts


def _target_decisions(record: RunRecord) -> dict[str, int]:
    """What a server without a ladder shows it did under pressure; a counter it does not export
    is absent (unknown), never 0."""
    final, counts = record.meta.final, {}
    if "kv_blocks_removed" in final:
        counts["reclaimed_cached_blocks"] = int(final["kv_blocks_removed"])
    preemptions = counter_change(record.meta, "num_preemptions")
    if preemptions is not None:
        counts["preempted_mode_unknown"] = int(preemptions)
    if len(record.requests):
        counts["rejected_overload"] = int(overload_refusals(record.requests).sum())
    return counts


def _peak(record: RunRecord) -> float | None:
    values = [*live_usage(record.samples).dropna()]
    events = record.events
    values += [*events.loc[events["kind"] == "watermark", "usage"].dropna()]
    return float(max(values)) if values else None


def _end_s(record: RunRecord) -> float:
    """The run's end: its duration, else its last timestamp."""
    if record.meta.duration_s:
        return float(record.meta.duration_s)
    times = [*record.events["t_s"].dropna(), *record.samples["t_s"].dropna()]
    return float(max(times)) if times else 0.0
