"""A fleet judged replica by replica: each gate that reads the target's telemetry runs on the fleet
and on every replica, and one result says which of them failed.

    result = evaluate_gate(gate, record, limits)   # as gate.evaluate, for a fleet too

A record with replicas (`record.fleet.replica_names`) is judged by the same gate code three ways
round: on the record itself (the fleet: its summed samples and pool, every event, the client's
requests) and on each replica's view (`record.fleet.replica_view`). The gates of `PER_REPLICA`
read what a replica has on its own: samples, pool state, counters, restarts, its log; the
others read the client's requests or the fleet's pool as a whole (the client cannot tell which
replica served a request, so a cancel's release or a tenant's share has no per-replica meaning).

A replica whose metrics did not answer for a while (`record.fleet.metrics_gaps`) cannot be
judged in that window by a gate of `WINDOWED` (samples and counters of the load and after): its
part is not measurable there, naming the window, and so is the fleet's, which sums it; a
failure seen outside the gap still fails. The combined outcome:

    fail            the fleet or any replica failed; the explanation names each that did
    not measurable  the fleet was not measurable, or a gap left a part not measurable
    pass            the fleet passed and so did every replica that had the signal (a replica
                    without it, e.g. no KV events configured on it, is listed, not judged)

The combined result keeps the fleet's measurements under their own names first (comparisons and
the thresholds read those), then each replica's as `metric[replica]`; its evidence is the
fleet's, with `fleet_outcome` (the fleet's own part) and `replicas` holding each replica's
outcome, explanation and evidence.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import replace

from gates.base import Gate, GateResult, Limits, Outcome
from record.fleet import describe_gaps, gaps_in, is_pd_pair, metrics_gaps, replica_names, replica_view
from record.query import Window
from record.run_record import RunRecord

PER_REPLICA: frozenset[str] = frozenset(
    {"no_oom", "memory_recovery", "memory_level_off", "capacity_after_drain", "eviction_thrash"}
)
PER_ROLE: frozenset[str] = frozenset({"cancel_release"})
"""Gates judged per replica too when the replicas are the two pools of a P/D pair (docs/pd.md):
there every request lives on both, and each pool must give back its part of a cancel (the
decode side's reservation above all)."""
WINDOWED: frozenset[str] = frozenset({"memory_recovery", "memory_level_off", "eviction_thrash"})
"""Gates that read a replica's samples or counters over the load and after it: a gap in its
metrics there leaves them not measurable. capacity_after_drain compares the pool before and
after (its own check says when either is missing); no_oom's restart watch polls /health, which
a gap in the metrics does not stop."""


PARTICIPLE = {Outcome.PASS: "passed", Outcome.FAIL: "failed", Outcome.NOT_MEASURABLE: "not measurable"}


def evaluate_gate(gate: Gate, record: RunRecord, limits: Limits) -> GateResult:
    """The gate's result on the record: per replica and for the fleet when it has replicas."""
    names = replica_names(record)
    per_replica = gate.name in PER_REPLICA or (gate.name in PER_ROLE and is_pd_pair(record))
    if not per_replica or not names:
        return gate.evaluate(record, limits)
    window = _judged_window(record)
    gaps = {name: gaps_in(metrics_gaps(record, name), window) if gate.name in WINDOWED else [] for name in names}
    parts = {name: _with_gaps(gate.evaluate(replica_view(record, name), limits), gaps[name]) for name in names}
    fleet = gate.evaluate(record, limits)
    missing = [f"{name} {describe_gaps(g)}" for name, g in gaps.items() if g]
    if missing and fleet.outcome is not Outcome.FAIL:
        fleet = fleet.with_outcome(
            Outcome.NOT_MEASURABLE, f"the fleet sums replicas whose metrics were missing: {'; '.join(missing)}"
        )
    return combine(fleet, parts, gapped={name for name, g in gaps.items() if g})


def _judged_window(record: RunRecord) -> Window:
    load = record.meta.phase("load")
    return (load.start_s, math.inf) if load is not None else (-math.inf, math.inf)


def _with_gaps(result: GateResult, gaps: list[Window]) -> GateResult:
    if not gaps:
        return result
    where = f"its metrics were missing at {describe_gaps(gaps)}"
    if result.outcome is Outcome.FAIL:
        return result.with_outcome(Outcome.FAIL, f"{result.explanation} ({where})")
    return result.with_outcome(Outcome.NOT_MEASURABLE, f"{where}: not measurable for that window")


def combine(fleet: GateResult, parts: dict[str, GateResult], gapped: Collection[str] = ()) -> GateResult:
    """One result from the fleet's and each replica's (module docstring)."""
    failed = [name for name, r in parts.items() if r.outcome is Outcome.FAIL]
    unmeasured = [name for name, r in parts.items() if r.outcome is Outcome.NOT_MEASURABLE]
    passed = [name for name, r in parts.items() if r.outcome is Outcome.PASS]
    if failed or fleet.outcome is Outcome.FAIL:
        outcome = Outcome.FAIL
    elif fleet.outcome is Outcome.NOT_MEASURABLE or gapped:
        outcome = Outcome.NOT_MEASURABLE
    else:
        outcome = Outcome.PASS
    lines = [f"failed on {text}" for text in _grouped(failed, parts, fleet)]
    lines.append(f"fleet {PARTICIPLE[fleet.outcome]}: {fleet.explanation}")
    if passed:
        lines.append(f"passed on {', '.join(passed)}")
    lines += [f"not measurable on {text}" for text in _grouped(unmeasured, parts, fleet)]
    measurements = (
        *fleet.measurements,
        *(replace(m, metric=f"{m.metric}[{name}]") for name, r in parts.items() for m in r.measurements),
    )
    evidence = {
        **fleet.evidence,
        "fleet_outcome": fleet.outcome.value,
        "replicas": {
            name: {"outcome": r.outcome.value, "explanation": r.explanation, "evidence": r.evidence}
            for name, r in parts.items()
        },
    }
    sources = tuple(dict.fromkeys([*fleet.sources, *(s for r in parts.values() for s in r.sources)]))
    return GateResult(fleet.gate, outcome, "; ".join(lines), measurements, evidence, sources)


def _grouped(names: list[str], parts: dict[str, GateResult], fleet: GateResult) -> list[str]:
    """'a, b: why' per distinct explanation (the fleet's own said once: 'a, b: as the fleet')."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(parts[name].explanation, []).append(name)
    return [
        f"{', '.join(group)}: {'as the fleet' if text == fleet.explanation else text}" for text, group in groups.items()
    ]
