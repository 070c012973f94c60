"""The rows of a comparison: per run a number, how to show it, which way is better, and what it
has to do with the gate table above it.

A row's number is read from the run's summary (reports/summary.py), its pressure summary, or
its verdict: the recompute tax is the `recompute_tax` gate's own measurement, never a second
computation of it. `gate_note` says why a row can differ from a gate's value (another window,
another population) in words, without restating a threshold. Rows marked `deciding` make the
overall ranking (reports/decision.py); rows without a direction (`better` None) are shown and
never ranked: more evictions or preemptions are not worse by themselves, their cost shows in
hit ratio, re-prefilled tokens and goodput. `estimate` gives a ranked row's number with its
sampling noise where the run's requests say it (reports/estimates.py: TTFT and prefix hits by
request, served tokens and refusals as counts); the rest have only the spread of repeats.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

from gates import Unit
from gates.base import format_value
from gates.noise import Estimate, count_estimate
from record.run_record import RUNGS
from reports.compared import ComparedRun
from reports.estimates import goodput_tokens_estimate, hit_ratio_estimate, ttft_estimate
from reports.pressure import DECISION_LABELS, highest_rung
from reports.summary import TRAFFIC_CLASSES

T = TypeVar("T")

TIE_BREAK = "goodput_tokens"
"""The metric that breaks a tie of mean ranks in the overall decision: serving more wins."""


class Better(Enum):
    HIGHER = "higher"
    LOWER = "lower"


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    value: Callable[[ComparedRun], float | None]
    fmt: Callable[[float], str]
    better: Better | None = None
    gate_note: str = ""
    deciding: bool = False
    estimate: Callable[[ComparedRun], Estimate | None] | None = None  # None: the value, no sampling noise

    def estimate_of(self, run: ComparedRun) -> Estimate | None:
        """The run's number with its sampling noise where known (gates/noise.py)."""
        if self.estimate is not None:
            return self.estimate(run)
        value = self.value(run)
        return None if value is None else Estimate(value)


def count(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def share(value: float) -> str:
    return format_value(value, Unit.FRACTION)


def milliseconds(value: float) -> str:
    return format_value(value, Unit.MILLISECONDS)


def per_second(value: float) -> str:
    return f"{value:,.2f}/s" if value < 100 else f"{value:,.0f}/s"


def seconds(value: float) -> str:
    return f"{value:.1f} s"


def rung(value: float) -> str:
    """A rung by its position on the ladder (1 = warn); 0 is below every rung."""
    return RUNGS[int(value) - 1] if value >= 1 else "none"


def comparison_metrics(runs: Sequence[ComparedRun]) -> list[Metric]:
    """Every row in page order. Rows per class, reason or tenant exist for the keys some run has."""
    summaries = [r.summary for r in runs]
    classes = [c for c in TRAFFIC_CLASSES if any(c in s.p95_ttft_ms or c in s.goodput_rps_by_class for s in summaries)]
    eviction_reasons = sorted({k for s in summaries for k in (s.evicted_sessions_by_reason or {})})
    reasons = sorted({k for s in summaries for k in s.rejections})
    tenants = sorted({k for s in summaries for k in s.rejections_by_tenant})
    lower = {k for s in summaries for k in (s.prefix_hit_ratio_by_tier or {})} - {"gpu"}
    tiers = ["gpu", *sorted(lower)] if lower else []  # one row per tier once any run has a lower one
    return [
        *_pressure_rows(),
        Metric(
            "prefix_hit_ratio",
            "prefix hit ratio (load)",
            lambda r: r.summary.prefix_hit_ratio,
            share,
            Better.HIGHER,
            "the number eviction_thrash reports and bounds by min_prefix_hit_rate",
            deciding=True,
            estimate=lambda r: hit_ratio_estimate(r.record, r.summary.prefix_hit_ratio),
        ),
        *(
            Metric(
                f"prefix_hit_ratio:{tier}",
                f"prefix hit ratio: {tier}",
                _by_key(lambda r, k: (r.summary.prefix_hit_ratio_by_tier or {}).get(k), tier),
                share,
                Better.HIGHER,
                "the row above, by the tier the hit tokens came from (host, disk: loaded back)",
            )
            for tier in tiers
        ),
        *(
            Metric(
                f"evicted_sessions:{reason}",
                f"sessions evicted: {reason}",
                _by_key(lambda r, k: _get(r.summary.evicted_sessions_by_reason, k), reason),
                count,
                gate_note="whole run, sessions (`evicted` events) by reason",
            )
            for reason in eviction_reasons
        ),
        Metric(
            "evicted_blocks",
            "blocks of evicted sessions",
            lambda r: r.summary.evicted_blocks,
            count,
            gate_note="whole run; eviction_thrash judges the load phase's rate per second, as a share of the pool",
        ),
        Metric(
            "reclaimed_cached_blocks",
            "cached prefix blocks reclaimed",
            lambda r: r.summary.evicted_cached_blocks,
            count,
            gate_note="eviction_thrash reports it and does not judge it",
        ),
        Metric(
            "reprefill_tokens",
            "re-prefill tokens",
            _reprefill_total,
            count,
            Better.LOWER,
            "the two rows below added up; no gate",
            deciding=True,
        ),
        Metric(
            "reprefill_preempted",
            "re-prefill: recompute preemptions",
            lambda r: r.summary.reprefill_preempted_tokens,
            count,
            Better.LOWER,
            "computed tokens discarded by recompute preemptions (`preempted.num_tokens`, else "
            "meta.final.recompute_tokens); recompute_tax divides the same by every token computed",
        ),
        Metric(
            "reprefill_rebuilt",
            "re-prefill: rebuilt sessions",
            lambda r: r.summary.reprefill_rebuilt_tokens,
            count,
            Better.LOWER,
            "prompt tokens of turns whose session KV was gone (`session_rebuilt`), less "
            "their prefix-cache hits; the turns' new messages are included",
        ),
        Metric(
            "recompute_tax",
            "recompute tax",
            _gate_value("recompute_tax"),
            share,
            Better.LOWER,
            "the recompute_tax gate's own measurement; n/a where the verdict has no such gate",
        ),
        Metric(
            "peak_live_usage",
            "peak live usage",
            lambda r: r.summary.peak_live_usage,
            share,
            gate_note="whole run; memory_level_off judges the load phase's peak",
        ),
        *(
            Metric(
                f"p95_ttft:{c}",
                f"P95 TTFT {c} (load)",
                _by_key(lambda r, k: r.summary.p95_ttft_ms.get(k), c),
                milliseconds,
                Better.LOWER,
                _TTFT_NOTES[c],
                deciding=c == "interactive",
                estimate=_by_key(lambda r, k: ttft_estimate(r.record, k, 95), c),
            )
            for c in classes
        ),
        Metric(
            "goodput_tokens",
            "goodput (completion tokens/s, load)",
            lambda r: r.summary.goodput_tokens_per_s,
            per_second,
            Better.HIGHER,
            "completion tokens of ok answers per second of the load phase; no gate",
            deciding=True,
            estimate=lambda r: goodput_tokens_estimate(r.record),
        ),
        Metric(
            "goodput_requests",
            "goodput (ok requests/s, load)",
            lambda r: r.summary.goodput_rps,
            per_second,
            Better.HIGHER,
            _GOODPUT_NOTE,
        ),
        *(
            Metric(
                f"goodput:{c}",
                f"goodput {c} (ok requests/s, load)",
                _by_key(lambda r, k: r.summary.goodput_rps_by_class.get(k), c),
                per_second,
                Better.HIGHER,
                _GOODPUT_NOTE,
            )
            for c in classes
        ),
        Metric(
            "unanswered",
            "requests without an answer",
            lambda r: float(sum(r.summary.rejections.values())),
            count,
            Better.LOWER,
            _UNANSWERED_NOTE,
            deciding=True,
            estimate=lambda r: count_estimate(sum(r.summary.rejections.values())),
        ),
        *(
            Metric(
                f"rejected:{reason}",
                f"no answer: {reason}",
                _by_key(lambda r, k: r.summary.rejections.get(k, 0), reason),
                count,
                gate_note="client view, whole run",
            )
            for reason in reasons
        ),
        *(
            Metric(
                f"tenant:{tenant}",
                f"no answer, tenant {tenant}",
                _by_key(lambda r, k: r.summary.rejections_by_tenant.get(k, 0), tenant),
                count,
                gate_note="client view, whole run; the rejections gate judges refusals per class and a tenant "
                "refused under its cap",
            )
            for tenant in tenants
        ),
    ]


_TTFT_NOTES = {
    "interactive": "every interactive request of the load phase, long prompts and timeouts (as never) included; "
    "interactive_ttft judges critical requests only (short prompts), so its value above differs",
    "batch": "no gate judges batch TTFT; batch_progress bounds the wait of batch requests not refused at admission",
    "system": "no gate judges it",
}

_GOODPUT_NOTE = (
    "ok answers per second of the load phase, whatever their TTFT; the goodput gate judges the share "
    "of offered critical interactive requests answered within the TTFT objective"
)

_PRESSURE_NOTE = "no gate: the pressure the verdicts above were earned under"

_UNANSWERED_NOTE = (
    "client view, whole run: errors and timeouts; explicit_overflow judges timeouts and unexplained "
    "errors, the rejections gate explicit refusals per class"
)


def _pressure_rows() -> list[Metric]:
    """What the verdicts above were earned under (meta.pressure): not ranked, not judged."""
    held = [
        Metric(f"held:{name}", f"time at or above {name}", _by_key(_held_s, name), seconds, gate_note=_PRESSURE_NOTE)
        for name in ("evict", "preempt")
    ]
    decisions = [
        Metric(f"decision:{key}", DECISION_LABELS[key], _by_key(_decision, key), count, gate_note=note)
        for key, note in (
            ("evicted_sessions", "no gate judges the count; eviction_thrash judges their rate under load"),
            ("expired_sessions", "no gate"),
            ("preempted_recompute", "preempted_complete judges whether preempted requests complete"),
            ("preempted_swap", "preempted_complete judges whether preempted requests complete"),
            ("preempted_kill", "a killed request does not complete: preempted_complete counts it"),
            ("approximated_requests", "the approximate_answers gate judges their share per class"),
        )
    ]
    return [
        Metric("highest_rung", "highest rung reached", _highest_rung, rung, gate_note=_PRESSURE_NOTE),
        *held,
        *decisions,
    ]


def _highest_rung(run: ComparedRun) -> float | None:
    pressure = run.summary.pressure
    if pressure is None or pressure.source == "none":
        return None
    top = highest_rung(pressure)
    return 0.0 if top is None else float(RUNGS.index(top.rung) + 1)


def _held_s(run: ComparedRun, name: str) -> float | None:
    pressure = run.summary.pressure
    reached = None if pressure is None else pressure.rung(name)
    return None if reached is None else reached.held_s


def _decision(run: ComparedRun, key: str) -> float | None:
    pressure = run.summary.pressure
    return None if pressure is None or key not in pressure.decisions else float(pressure.decisions[key])


def _reprefill_total(run: ComparedRun) -> float | None:
    preempted, rebuilt = run.summary.reprefill_preempted_tokens, run.summary.reprefill_rebuilt_tokens
    return None if preempted is None or rebuilt is None else float(preempted + rebuilt)


def _by_key(read: Callable[[ComparedRun, str], T], key: str) -> Callable[[ComparedRun], T]:
    """`read` with `key` bound now: a lambda written in a loop would see the loop's last key."""
    return lambda run: read(run, key)


def _gate_value(gate: str) -> Callable[[ComparedRun], float | None]:
    def value(run: ComparedRun) -> float | None:
        result = run.verdict.result(gate)
        return None if result is None or result.headline is None else result.headline.value

    return value


def _get(counts: dict[str, int] | None, key: str) -> float | None:
    return None if counts is None else float(counts.get(key, 0))
