"""tenant_share: no tenant's live KV share ever exceeds its hard cap (tenant samples).

The cap of a sample is its `cap` column, else the tenant's `max_kv_share` in meta; a tenant
with neither cannot be judged and is left out. The measured value is the highest share as a
fraction of its cap (100% = exactly at the cap); `max_share_of_cap` bounds it.
"""

from __future__ import annotations

import pandas as pd

from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.query import pool_blocks
from record.run_record import RunRecord


class TenantShareGate:
    name = "tenant_share"
    sources = (Source.TENANT_SAMPLES,)
    title = "Tenant share ≤ cap"
    metrics = {"max_share_of_cap": "highest live share of any tenant at any sample / its cap (1 = at the cap)"}

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        ts = record.tenant_samples
        if not record.meta.signals.tenant_samples or ts.empty:
            return GateResult.not_measurable(self.name, "no per-tenant samples in the record")
        judged = shares_with_caps(record).dropna(subset=["share", "cap"])
        if judged.empty:
            return GateResult.not_measurable(self.name, "no tenant sample has a share and a known cap")
        of_cap = judged["share"] / judged["cap"]
        top = judged.loc[of_cap.idxmax()]
        over = judged[of_cap > limits["max_share_of_cap"]]
        evidence = {
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
        }
        where = f"{top['tenant']} at {top['share']:.1%} of the pool (cap {top['cap']:.1%}) at t={top['t_s']:.1f} s"
        if len(over):
            explanation = f"samples over cap: {len(over)}; worst: {where}"
        else:
            explanation = f"every tenant stayed within its cap at all {len(judged)} samples; closest: {where}"
        measurement = Measurement("max_share_of_cap", float(of_cap.max()), limits["max_share_of_cap"], Unit.FRACTION)
        return GateResult.judged(self.name, [measurement], explanation, evidence)


def shares_with_caps(record: RunRecord) -> pd.DataFrame:
    """Tenant samples with `share` and `cap` filled from live blocks and meta where missing."""
    ts = record.tenant_samples.copy()
    num_blocks = pool_blocks(record)
    if num_blocks:
        ts["share"] = ts["share"].fillna(ts["live_blocks"] / num_blocks)
    meta_caps = {name: t.max_kv_share for name, t in record.meta.tenants.items()}
    ts["cap"] = ts["cap"].fillna(ts["tenant"].map(meta_caps))
    return ts
