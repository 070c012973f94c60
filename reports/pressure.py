"""What a run's pressure summary (`meta.pressure`, record/pressure.py) says, in words.

One wording for every place that shows it: the header line and section of a run report, the
comparison, and the console of `kvgate run` and `kvgate matrix`. A PASS earned below the evict
and preempt rungs says nothing about the decisions a policy exists for, so the warning for it
is loud wherever the verdict is shown. Which rungs must be reached and which decisions count
is record/pressure.py's rule (`MUST_REACH`, `CORE_DECISIONS`); this module only words it.

    pressure_line(pressure)            "pressure: reached warn → preempt (peak live usage 93% ...); ..."
    missing_rungs_warning(pressure)    the loud line, or None when evict and preempt were reached
    decisions_warning(pressures)       the loud line for a comparison, or None
"""

from __future__ import annotations

from collections.abc import Iterable

from record.pressure import SHOWN_BY, decisions_never_run, missing_rungs
from record.run_record import Pressure, RungReached

DECISION_LABELS: dict[str, str] = {
    "evicted_sessions": "sessions evicted",
    "evicted_session_blocks": "blocks held by the evicted sessions",
    "expired_sessions": "sessions expired (idle timeout)",
    "reclaimed_cached_blocks": "cached prefix blocks reclaimed for reuse",
    "preempted_recompute": "preemptions: recompute",
    "preempted_swap": "preemptions: swap",
    "preempted_kill": "preemptions: kill",
    "preempted_mode_unknown": "preemptions (the target's counter: mode not reported)",
    "rejected_kv_capacity": "rejections: kv_capacity",
    "rejected_tenant_quota": "rejections: tenant_quota",
    "rejected_queue_deadline": "rejections: queue_deadline",
    "rejected_overload": "explicit overload refusals (429/503/529 with a reason)",
    "approximated_requests": "requests answered approximately",
    "oom": "OOMs",
}
"""The engine's answers to pressure, in the order a reader wants them; a counter this list does
not know yet is shown under its own name."""

RUNG_DECISIONS: dict[str, str] = {
    "evict": "which idle state to evict",
    "preempt": "whom to preempt (and whether to swap or recompute)",
}
"""What a policy decides at the rungs of `MUST_REACH`, for the warning."""

NOT_RECORDED = "pressure not recorded (the record predates meta.pressure)"
TARGET_DECISIONS: dict[str, str] = {"evict": "evict cached blocks", "preempt": "preempt a request"}
"""What reaching a rung of `MUST_REACH` means on a server without a ladder (record/pressure.py `SHOWN_BY`)."""
TARGET_WITNESSES: dict[str, str] = {
    "evict": "its KV cache events (--kv-events)",
    "preempt": "a preemption counter in its /metrics",
}
"""Where a server without a ladder shows each of those decisions."""


def highest_rung(pressure: Pressure) -> RungReached | None:
    """The highest rung the run reached, or None."""
    return next((r for r in reversed(pressure.rungs) if r.first_s is not None), None)


def pressure_line(pressure: Pressure | None) -> str:
    """One line: the rungs reached, the peak, the decisions that ran."""
    if pressure is None:
        return NOT_RECORDED
    if pressure.source == "none":
        return "pressure unknown: the record has neither the engine's watermark events nor the target's telemetry"
    if pressure.source == "target":
        return _target_line(pressure)
    top = highest_rung(pressure)
    first = pressure.rungs[0].rung if pressure.rungs else None
    reached = (
        "no rung reached"
        if top is None
        else f"reached {top.rung}"
        if top.rung == first
        else f"reached {first} → {top.rung}"
    )
    peak = "" if pressure.peak_usage is None else f" (peak live usage {pressure.peak_usage:.0%} of the pool)"
    d = pressure.decisions
    preemptions = sum(d.get(k, 0) for k in ("preempted_recompute", "preempted_swap", "preempted_kill"))
    return (
        f"pressure: {reached}{peak}; {d.get('evicted_sessions', 0)} sessions evicted, "
        f"{preemptions} preemptions, {d.get('expired_sessions', 0)} sessions expired"
    )


def _target_line(pressure: Pressure) -> str:
    d = pressure.decisions

    def count(key: str, what: str) -> str:
        return f"{d[key]} {what}" if key in d else f"{what} unknown"

    peak = "" if pressure.peak_usage is None else f"peak live usage {pressure.peak_usage:.0%} of the pool; "
    return (
        f"pressure (what the target showed; it has no watermark ladder): {peak}"
        f"{count('reclaimed_cached_blocks', 'cached blocks reclaimed')}, "
        f"{count('preempted_mode_unknown', 'preemptions')}, {count('rejected_overload', 'overload refusals')}"
    )


def missing_rungs_warning(pressure: Pressure | None) -> str | None:
    """The loud line for a run that never reached the rungs where policies decide; None when it
    did, or when the record predates the summary (then `pressure_line` says "not recorded")."""
    if pressure is None:
        return None
    missing = missing_rungs(pressure)
    if not missing:
        return None
    what = " or ".join(RUNG_DECISIONS.get(name, f"what to do at {name}") for name in missing)
    if pressure.source == "none":
        return (
            f"PRESSURE UNKNOWN: nothing in this record shows that the run reached the "
            f"{' and '.join(missing)} rungs: this verdict says nothing about {what}"
        )
    if pressure.source == "target":
        unknown = [TARGET_WITNESSES[name] for name in missing if not set(SHOWN_BY[name]) & set(pressure.decisions)]
        why = f" (unknown without {' or '.join(unknown)})" if unknown else ""
        return (
            f"NOT SHOWN: nothing the target reported shows that the load made it "
            f"{' or '.join(TARGET_DECISIONS[name] for name in missing)}{why}: this verdict says nothing "
            f"about what it does under that pressure"
        )
    levels = ", ".join(f"{r.rung} at {r.usage:.0%}" for r in pressure.rungs if r.rung in missing)
    peak = "unknown" if pressure.peak_usage is None else f"{pressure.peak_usage:.0%}"
    return (
        f"NEVER REACHED the {' and '.join(missing)} rung{'s' if len(missing) > 1 else ''} ({levels}; peak live "
        f"usage {peak}): the policy was never asked {what}, so this verdict says nothing about that"
    )


def decisions_warning(pressures: Iterable[Pressure | None]) -> str | None:
    """The loud line for runs compared as policies when a core decision ran in none of them."""
    known = [p for p in pressures if p is not None]
    if not known:
        return None
    never = decisions_never_run(known)
    if not never:
        return None
    names = ", ".join(name.replace("_", " ") for name in never)
    return (
        f"NOT A COMPARISON OF POLICIES ON {names.upper()}: no candidate run took "
        f"{'this decision' if len(never) == 1 else 'these decisions'} even once"
    )
