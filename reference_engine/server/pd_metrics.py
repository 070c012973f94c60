"""Prometheus metrics of a P/D pair (reference_engine/core/pd.py): each side's families as one
engine exports them (server/metrics.py, vLLM's names where they exist), labelled
`role="prefill"` / `role="decode"`, and the link's own.

    text = render_families(pd_families(pd, {role: list(side_metrics[role].registry.collect()) ...}))

A family of the same name from both sides is one family with both roles' samples, as a scrape of
a vLLM P/D deployment reads two instances told apart by a label. The link adds
`kvgate_pd_transfers{outcome}` (started, failed, timed_out, fallback), `kvgate_pd_transfer_bytes`,
`kvgate_pd_requests{state}` and `kvgate_pd_stranded_reservation_blocks` (0 on a healthy pair).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from reference_engine.core.pd import PDCore

ROLE_LABEL = "role"


def pd_families(pd: PDCore, sides: Mapping[str, Iterable[Metric]]) -> list[Metric]:
    """Both sides' families (`sides`: each role's), labelled by role, then the link's."""
    merged: dict[str, Metric] = {}
    for role, families in sides.items():
        for family in families:
            into = merged.setdefault(family.name, Metric(family.name, family.documentation, family.type))
            into.samples += [s._replace(labels={**s.labels, ROLE_LABEL: role}) for s in family.samples]
    return [*merged.values(), *_link_families(pd)]


def _link_families(pd: PDCore) -> list[Metric]:
    transfers = CounterMetricFamily(
        "kvgate_pd_transfers", "KV transfers prefill -> decode, by outcome", labels=["outcome"]
    )
    for outcome, n in (
        ("started", pd.num_transfers),
        ("failed", pd.num_failed),
        ("timed_out", pd.num_timed_out),
        ("fallback", pd.num_fallbacks),
    ):
        transfers.add_metric([outcome], n)
    states = GaugeMetricFamily("kvgate_pd_requests", "P/D requests by state", labels=["state"])
    for state, n in sorted(Counter(r.state.value for r in pd.requests.values()).items()):
        states.add_metric([state], n)
    return [
        transfers,
        CounterMetricFamily("kvgate_pd_transfer_bytes", "KV bytes moved over the link", value=pd.link.bytes_moved),
        states,
        GaugeMetricFamily(
            "kvgate_pd_stranded_reservation_blocks",
            "Decode blocks reserved for requests no longer live",
            value=pd.stranded_blocks(),
        ),
    ]
