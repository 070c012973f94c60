"""tenant_share: no tenant's live KV share ever exceeds its hard cap (tenant samples).

The cap of a sample is its `cap` column, else the tenant's `max_kv_share` in meta; a tenant
with neither cannot be judged and is left out. The measured value is the highest share as a
fraction of its cap (100% = exactly at the cap); `max_share_of_cap` bounds it.

Two sources, the engine's own first: its count of each tenant's live blocks (kvgate's engine,
replay), else, on a target that knows no tenants, the client's estimate from each tenant's
requests in flight and their tokens (harness/collectors/tenant_estimate.py; docs/targets.md
says what it over- and under-counts). When a record has both, the evidence says how far the
estimate strayed from the engine's count.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.query import pool_blocks
from record.run_record import ESTIMATED_SOURCE, RunRecord

ESTIMATED = " (estimated from the client's in-flight requests)"


class TenantShareGate:
    name = "tenant_share"
    sources = (Source.TENANT_SAMPLES, Source.TENANT_ESTIMATE)
    title = "Tenant share ≤ cap"
    metrics = {"max_share_of_cap": "highest live share of any tenant at any sample / its cap (1 = at the cap)"}

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        ts = shares_with_caps(record)
        is_estimate = ts["source"] == ESTIMATED_SOURCE
        engine, estimate = ts[~is_estimate], ts[is_estimate]
        if record.meta.signals.tenant_samples and len(engine):
            compared = {"estimate_vs_engine": estimate_error(engine, estimate)} if len(estimate) else {}
            return _judge(self.name, engine, limits, "", compared).resting_on(Source.TENANT_SAMPLES)
        if Source.TENANT_ESTIMATE.is_in(record.meta) and len(estimate):
            if estimate["cap"].isna().all():
                return GateResult.not_measurable(
                    self.name,
                    "tenant shares estimated from the client, but no tenant has a cap: the target enforces "
                    "none of kvgate's (kvgate run --tenant-caps names the caps to hold it to)",
                ).resting_on(Source.TENANT_ESTIMATE)
            return _judge(self.name, estimate, limits, ESTIMATED).resting_on(Source.TENANT_ESTIMATE)
        status = record.meta.collectors.get(Source.TENANT_ESTIMATE.value)
        why = f"; the client's estimate: {status.detail}" if status is not None and not status.available else ""
        return GateResult.not_measurable(self.name, f"no per-tenant samples in the record{why}")


def _judge(
    gate: str, samples: pd.DataFrame, limits: Limits, source_note: str, extra: dict[str, Any] | None = None
) -> GateResult:
    judged = samples.dropna(subset=["share", "cap"])
    if judged.empty:
        return GateResult.not_measurable(gate, "no tenant sample has a share and a known cap" + source_note)
    of_cap = judged["share"] / judged["cap"]
    top = judged.loc[of_cap.idxmax()]
    over = judged[of_cap > limits["max_share_of_cap"]]
    evidence: dict[str, Any] = {
        "source": ESTIMATED_SOURCE if source_note else "engine",
        "num_samples": len(judged),
        "num_samples_over_cap": len(over),
        "tenants_over_cap": sorted(over["tenant"].unique()),
        "worst_sample": {
            "t_s": top["t_s"],
            "tenant": top["tenant"],
            "live_blocks": top["live_blocks"],
            "share": top["share"],
            "cap": top["cap"],
        },
        **(extra or {}),
    }
    where = f"{top['tenant']} at {top['share']:.1%} of the pool (cap {top['cap']:.1%}) at t={top['t_s']:.1f} s"
    if len(over):
        explanation = f"samples over cap: {len(over)}; worst: {where}{source_note}"
    else:
        explanation = f"every tenant stayed within its cap at all {len(judged)} samples; closest: {where}{source_note}"
    measurement = Measurement("max_share_of_cap", float(of_cap.max()), limits["max_share_of_cap"], Unit.FRACTION)
    return GateResult.judged(gate, [measurement], explanation, evidence)


def estimate_error(engine: pd.DataFrame, estimate: pd.DataFrame) -> dict[str, Any]:
    """How the client's estimate compares with the engine's own count, at the samples both have
    (same time, same tenant): the mean and largest gap in share, and each one's peak share."""
    key = ["t", "tenant"]
    both = pd.merge(
        engine.assign(t=engine["t_s"].round(6))[[*key, "share"]],
        estimate.assign(t=estimate["t_s"].round(6))[[*key, "share"]],
        on=key,
        suffixes=("_engine", "_estimate"),
    ).dropna()
    if both.empty:
        return {"num_samples": 0}
    gap = both["share_estimate"] - both["share_engine"]
    return {
        "num_samples": len(both),
        "mean_abs_share_gap": float(gap.abs().mean()),
        "max_abs_share_gap": float(gap.abs().max()),
        "mean_share_gap": float(gap.mean()),
        "peak_share_engine": float(both["share_engine"].max()),
        "peak_share_estimate": float(both["share_estimate"].max()),
    }


def shares_with_caps(record: RunRecord) -> pd.DataFrame:
    """Tenant samples with `share` and `cap` filled from live blocks and meta where missing."""
    ts = record.tenant_samples.copy()
    num_blocks = pool_blocks(record)
    if num_blocks:
        ts["share"] = ts["share"].fillna(ts["live_blocks"] / num_blocks)
    meta_caps = {name: t.max_kv_share for name, t in record.meta.tenants.items()}
    ts["cap"] = ts["cap"].fillna(ts["tenant"].map(meta_caps))
    return ts
