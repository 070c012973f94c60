"""What the release gate compares of a run: every gate's value and the headline metrics, with noise.

    measured = measure(record, verdict)     # {key: (RegressionMetric, Estimate)}, gates/regression.py

Headline metrics (their `[regression]` budget key in brackets): TTFT median and P95 under load
per traffic class [ttft_median, ttft_p95] (bootstrapped over the class's requests), the goodput
gate's share [goodput] (a share of the offered requests), the prefix hit ratio [prefix_hit_ratio]
(bootstrapped by request), re-prefill tokens [reprefill_tokens], the cancel_release gate's P99
[cancel_release_p99], preemptions [preemptions] and requests without an answer [rejections]
(counts: Poisson), peak live usage [peak_usage], the recompute_tax gate's value [recompute_tax].
Every other gate with a value is `gate.<name>` [gate_values], worse in the direction its limit
bounds. A number the record cannot give is left out, never 0. Numbers without per-request
samples are judged only from the spread of three or more baseline runs.
"""

from __future__ import annotations

from gates import Outcome, Unit, Verdict
from gates.budgets import Worse
from gates.checks.goodput import GoodputGate
from gates.comparison import measured_goodput
from gates.noise import Estimate, count_estimate
from gates.regression import Measured, RegressionMetric
from record.run_record import RunRecord
from reports.estimates import hit_ratio_estimate, ttft_estimate
from reports.summary import TRAFFIC_CLASSES, summarize

_OWN_KEYS = {"cancel_release": "cancel_release_p99", "recompute_tax": "recompute_tax", GoodputGate.name: "goodput"}
"""Gates whose value is a headline metric of its own budget (the rest share `gate_values`)."""


def measure(record: RunRecord, verdict: Verdict) -> Measured:
    summary = summarize(record)
    found: dict[str, tuple[RegressionMetric, Estimate | None]] = {}

    def add(key: str, budget_key: str, label: str, unit: Unit, estimate: Estimate | None, worse: Worse) -> None:
        found[key] = (RegressionMetric(key, budget_key, label, unit, worse), estimate)

    for c in TRAFFIC_CLASSES:
        for q, name in ((50, "ttft_median"), (95, "ttft_p95")):
            label = f"{'median' if q == 50 else 'P95'} TTFT {c}"
            add(f"{name}.{c}", name, label, Unit.MILLISECONDS, ttft_estimate(record, c, q), Worse.HIGHER)
    goodput = measured_goodput(verdict)
    share = None if goodput is None else goodput.estimate()
    add("goodput", "goodput", "goodput (chat served in time)", Unit.FRACTION, share, Worse.LOWER)
    hit_ratio = hit_ratio_estimate(record, summary.prefix_hit_ratio)
    add("prefix_hit_ratio", "prefix_hit_ratio", "prefix hit ratio", Unit.FRACTION, hit_ratio, Worse.LOWER)
    preempted, rebuilt = summary.reprefill_preempted_tokens, summary.reprefill_rebuilt_tokens
    reprefill = None if preempted is None or rebuilt is None else Estimate(preempted + rebuilt)
    add("reprefill_tokens", "reprefill_tokens", "re-prefill tokens", Unit.COUNT, reprefill, Worse.HIGHER)
    preemptions = None if summary.num_preemptions is None else count_estimate(summary.num_preemptions)
    add("preemptions", "preemptions", "preemptions", Unit.COUNT, preemptions, Worse.HIGHER)
    peak = None if summary.peak_live_usage is None else Estimate(summary.peak_live_usage)
    add("peak_usage", "peak_usage", "peak live usage", Unit.FRACTION, peak, Worse.HIGHER)
    unanswered = count_estimate(sum(summary.rejections.values()))
    add("rejections", "rejections", "requests without an answer", Unit.COUNT, unanswered, Worse.HIGHER)
    for result in verdict.results:
        head = result.headline
        if head is None or result.outcome is Outcome.NOT_MEASURABLE or result.gate == GoodputGate.name:
            continue
        worse = Worse.HIGHER if head.is_max else Worse.LOWER
        budget_key = _OWN_KEYS.get(result.gate, "gate_values")
        key = budget_key if budget_key != "gate_values" else f"gate.{result.gate}"
        add(key, budget_key, f"{result.gate} (gate value)", head.unit, Estimate(head.value), worse)
    return {key: (metric, estimate) for key, (metric, estimate) in found.items() if estimate is not None}
