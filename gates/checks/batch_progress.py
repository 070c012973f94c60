"""batch_progress: batch work may pause at peak, but it resumes and does not starve.

Over batch requests that were not cancelled on purpose nor refused explicitly at admission (a
429 `kv_capacity` or `tenant_quota` is an answer, not starvation): the P95 wait for the first
token is bounded (a timeout waited forever), and most of them complete. A 429 `queue_deadline`
is different: the request was accepted into the queue and waited there until its deadline
without ever starting, which is what starvation looks like from the batch client's side, so it
counts as a batch request that did not complete (without it, a scheduler that never runs batch
would hide behind the deadline and the gate could not fail). `watermark` events entering
`pause_batch` are kept as evidence that batch did pause at peak.

A batch request the run's stop cut off (`unfinished`) before it could have waited the bound
(`p95_max_wait_s`) is left out: sent a moment before the stop, it had no chance to complete,
and counting it would fail short runs by chance. One still open after waiting that long counts
as not completed (the other gates count every unfinished request as not served). So is one whose
replica died under it (`worker_lost`: a fleet under a replica kill): it did not starve, it was
lost with the work in flight there, which `replica_kill` judges.
"""

from __future__ import annotations

from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.outcomes import Status
from record.query import EXPLICIT_STATUSES, events_of, intended_cancels, percentile, ttft_ms, worst
from record.run_record import RunRecord

WAITED_OUT = "queue_deadline"
"""The error code of a request that waited in the queue until its deadline and never started."""
LOST_WITH_REPLICA = "worker_lost"
"""The error code of a request whose replica (engine worker) died while it was in flight."""


class BatchProgressGate:
    name = "batch_progress"
    sources = (Source.CLIENT_REQUESTS, Source.ENGINE_EVENTS)
    title = "Batch resumes without starving"
    metrics = {
        "p95_max_wait_s": "P95 wait for the first token of batch requests, seconds (timeouts: forever)",
        "min_completed_fraction": "share of batch requests not refused at admission that complete",
    }

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        req = record.requests
        if not record.meta.signals.client_requests or req.empty:
            return GateResult.not_measurable(self.name, "no client requests in the record")
        batch = req[(req["traffic_class"] == "batch") & ~intended_cancels(req)]
        load = record.meta.phase("load")
        cut = (batch["status"] == Status.UNFINISHED.value) & (
            (load.end_s - batch["sent_s"] < limits["p95_max_wait_s"]) if load is not None else False
        )
        lost = batch["error_code"] == LOST_WITH_REPLICA
        batch = batch[~cut & ~lost]
        refused = (
            (batch["status"] == "error")
            & batch["http_status"].isin(EXPLICIT_STATUSES)
            & (batch["error_code"] != WAITED_OUT)
        )
        served = batch[~refused]
        if served.empty:
            why = "no batch traffic in this run" if batch.empty else "every batch request was refused explicitly"
            return GateResult.not_measurable(self.name, why)
        wait_s = ttft_ms(served, "batch") / 1000.0
        completed = float((served["status"] == "ok").mean())
        measurements = [
            Measurement(
                "min_completed_fraction", completed, limits["min_completed_fraction"], Unit.FRACTION, is_max=False
            )
        ]
        evidence: dict = {
            "num_batch": len(batch),
            "num_cut_by_stop": int(cut.sum()),
            "num_lost_with_replica": int(lost.sum()),
            "num_refused": int(refused.sum()),
            "num_waited_out": int((served["error_code"] == WAITED_OUT).sum()),
            "not_completed": served.loc[served["status"] != "ok", "request_id"].head(5).tolist(),
        }
        explanation = f"{completed:.0%} of {len(served)} admitted batch requests completed"
        if len(wait_s):
            p95 = percentile(wait_s, 95)
            measurements.insert(0, Measurement("p95_max_wait_s", p95, limits["p95_max_wait_s"], Unit.SECONDS))
            evidence["worst_waits"] = worst(wait_s, served["request_id"])
            explanation += f", P95 wait {p95:.1f} s"
        if record.meta.signals.engine_events:
            pauses = events_of(record, "watermark")
            evidence["pause_batch_entries"] = int((pauses["reason"] == "pause_batch").sum())
        return GateResult.judged(self.name, measurements, explanation, evidence)
