"""rejections: refusing work is bounded per traffic class, and no tenant under its cap is refused
for its quota.

**Share refused.** Over the requests offered in the load phase (intended cancels left out), per
group of traffic (gates/slo.py `GROUPS`: critical chat, interactive with a longer prompt, batch,
system), the share refused explicitly for overload — HTTP 429 (`kv_capacity`, `tenant_quota` or
`queue_deadline` on the reference engine), 503 or 529 with an error code that is not an OOM
(`record.query.overload_refusals`) — must stay within the group's bound. Some refusals are the healthy answer to
overload (the reject rung, a queue deadline, a tenant at its cap, a long document first);
refusing most of the work is not, and no other gate sees it (`interactive_ttft` judges only the
answers).

**Refused under its cap.** Admission charges a tenant the worst case of everything it has in
flight (prompt + max_tokens of each admitted or queued request) plus its idle sessions, so its
live share can never cross its cap; a refusal for the KV share (`tenant_quota` with limit
`kv_share`) is right whenever that charge plus the new request's estimate would pass it, even
while the tenant's live share is far below it. A refusal is *under its cap* — a failure — when
even a generous reading of the charge leaves room: the worst-case estimates of the tenant's
requests in the engine at that moment (rebuilt from the event log: `admitted`/`queued` estimates
until each request's `finished`, in `seq` order) plus the tenant's live blocks then (the
`rejected` event's `value`; they include its sessions, and count its running requests a second
time) plus the refused estimate still fit `floor(max_kv_share × pool)`. Judged that way, a
correct engine never trips it; a leaked reservation, a cap computed wrong or a charge counted
twice does. Refusals for `max_active_seqs` or `max_reserved_tokens` are limits the tenant
reached, not its share, and are left to the share bounds. With several workers, each has its own
pool and ledger: a tenant is judged per worker, each pool an equal share of the record's.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gates import slo
from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.query import intended_cancels, overload_refusals, pool_blocks, requests_in_phase
from record.run_record import RunRecord

UNDER_CAP = "max_refused_under_cap"


class RejectionsGate:
    name = "rejections"
    sources = (Source.CLIENT_REQUESTS, Source.ENGINE_EVENTS)
    title = "Refusals bounded, none under the cap"
    metrics = {
        **slo.group_metrics("offered under load that were refused for overload"),
        UNDER_CAP: "tenant_quota refusals for the KV share while the tenant's worst case left room under its cap",
    }

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        measurements: list[Measurement] = []
        found: list[str] = []
        evidence: dict = {}
        if record.meta.signals.client_requests:
            measurements, found, evidence["refused_by_group_and_code"] = _refused_shares(record, limits)
        under_cap = refusals_under_cap(record)
        if under_cap is not None:
            measurements.append(Measurement(UNDER_CAP, len(under_cap), limits[UNDER_CAP], Unit.COUNT))
            found.append(f"{len(under_cap)} tenant_quota refusals under the cap")
            evidence["refused_under_cap"] = under_cap.head(5).to_dict("records")
        if not measurements:
            return GateResult.not_measurable(
                self.name, "no client requests under load and no engine events with tenant caps in the record"
            )
        explanation = "refused under load: " + ", ".join(found)
        return GateResult.judged(self.name, measurements, explanation, evidence)


def _refused_shares(record: RunRecord, limits: Limits) -> tuple[list[Measurement], list[str], dict[str, int]]:
    """The refused share of each group offered under load, a phrase saying each, and the refusals
    counted by group and error code."""
    measurements, found = [], []
    load = requests_in_phase(record, "load")
    offered = load[~intended_cancels(load)]
    refused = overload_refusals(offered)
    groups = slo.group_of(offered, limits)
    for group in slo.GROUPS:
        metric, of_group = slo.group_metric(group), groups == group
        if of_group.any():
            share = float(refused[of_group].mean())
            measurements.append(Measurement(metric, share, limits[metric], Unit.FRACTION))
            found.append(f"{group} {share:.1%} of {int(of_group.sum())}")
    codes = offered.loc[refused, "error_code"].fillna("none").groupby(groups[refused]).value_counts()
    return measurements, found, {f"{group}/{code}": int(n) for (group, code), n in codes.sort_index().items()}


def refusals_under_cap(record: RunRecord) -> pd.DataFrame | None:
    """The `tenant_quota`/`kv_share` refusals that left room under the cap (see the module
    docstring): request_id, tenant, t_s, and the charge it was judged on. None when the record
    cannot say (no engine events, no pool size or no tenant caps)."""
    num_blocks = pool_blocks(record)
    caps = {name: t.max_kv_share for name, t in record.meta.tenants.items()}
    if not record.meta.signals.engine_events or not num_blocks or not caps:
        return None
    events = record.events.assign(worker=record.events["worker"].fillna(""))
    share_refusals = events[
        (events["kind"] == "rejected") & (events["reason"] == "tenant_quota") & (events["mode"] == "kv_share")
    ]
    columns = ["request_id", "tenant", "t_s", "worker", "reserved_blocks", "live_blocks", "need_blocks", "cap_blocks"]
    if share_refusals.empty:
        return pd.DataFrame(columns=columns)
    engine_blocks = num_blocks / max(1, events["worker"].replace("", np.nan).nunique())
    reserved = _reserved_at(events, share_refusals)
    judged = share_refusals.assign(
        reserved_blocks=reserved,
        live_blocks=share_refusals["tenant_live_blocks"].fillna(0),
        need_blocks=share_refusals["num_blocks"].fillna(0),
        cap_blocks=share_refusals["tenant"].map(lambda t: math.floor(caps.get(t, math.inf) * engine_blocks)),
    )
    room = judged["reserved_blocks"] + judged["live_blocks"] + judged["need_blocks"] <= judged["cap_blocks"]
    return judged.loc[room, columns].reset_index(drop=True)


def _reserved_at(events: pd.DataFrame, refusals: pd.DataFrame) -> pd.Series:
    """Per refusal: the worst-case blocks of its tenant's requests in the engine (on its worker)
    just before it — every `admitted`/`queued` estimate before it in `seq` order whose request's
    `finished` event comes after it. O(events log events)."""
    arrivals = events[events["kind"].isin(("admitted", "queued"))]
    ends = events[events["kind"] == "finished"].drop_duplicates("request_id", keep="last")
    end_seq = arrivals["request_id"].map(ends.set_index("request_id")["seq"])
    changes = pd.concat(
        [
            pd.DataFrame(
                {
                    "worker": arrivals["worker"],
                    "tenant": arrivals["tenant"],
                    "seq": arrivals["seq"],
                    "delta": arrivals["num_blocks"].fillna(0),
                }
            ),
            pd.DataFrame(
                {
                    "worker": arrivals["worker"],
                    "tenant": arrivals["tenant"],
                    "seq": end_seq,
                    "delta": -arrivals["num_blocks"].fillna(0),
                }
            ).dropna(subset=["seq"]),
        ]
    ).sort_values("seq", kind="stable")
    reserved = pd.Series(0.0, index=refusals.index)
    for (worker, tenant), at in refusals.groupby(["worker", "tenant"]):
        mine = changes[(changes["worker"] == worker) & (changes["tenant"] == tenant)]
        running = np.concatenate(([0.0], mine["delta"].cumsum().to_numpy()))  # [0]: before its first change
        reserved[at.index] = running[np.searchsorted(mine["seq"].to_numpy(), at["seq"].to_numpy(), side="left")]
    return reserved
