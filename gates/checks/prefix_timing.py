"""prefix_timing: another tenant, or another cache_salt, cannot tell a cached prompt by its TTFT.

A prefix-cache hit answers sooner, and a client can time that without any `cached_tokens` in
the usage (a gateway that strips it, llama.cpp): the timing side channel that lets one tenant
test guesses of another's prompts. Before the load the timing probe (harness/collectors/
timing_probe.py) times cold and warm prompts, interleaved in a random order: primed and repeated
by the same party, and primed by it and sent by another (another tenant, or another salt).

The test is the ROC AUC of cold against warm TTFTs (gates/auc.py): how often the longer of one
cold and one warm TTFT is the cold one. An AUC of at least 0.75 is *distinguishable*.
- The same party's warm prompts must be distinguishable from its cold ones with 95 %
  confidence (the AUC's lower bound ≥ `min_same_party_auc`): the probe proves that the cache
  works and that the clock can see it. Otherwise (prefix caching off, too much noise for the
  samples) nothing can be told of another party: not measurable, never a pass.
- Another party's AUC must stay below `max_other_tenant_auc` / `max_other_salt_auc` (0.75: a
  leak-free pair of 24 samples each passes it about once in 600 runs; a leak shows the same
  party's ≈ 1). vLLM without cache_salt fails the cross-tenant pair; with a salt per tenant
  (the salt pair) it passes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gates.auc import Auc, roc_auc
from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.run_record import RunRecord

KINDS = {"cross_tenant": ("max_other_tenant_auc", "tenant"), "cache_salt": ("max_other_salt_auc", "salt")}
MIN_SAMPLES = 8  # per condition: below this no interval means anything


class PrefixTimingGate:
    name = "prefix_timing"
    sources = (Source.PROBES,)
    title = "Cached prompts not told apart by another party's TTFT"
    metrics = {
        "min_same_party_auc": "lower 95 % bound the same party's cold/warm TTFT AUC must reach (else not measurable)",
        "max_other_tenant_auc": "AUC of cold against warm TTFTs of prompts tenant A cached, sent by tenant B",
        "max_other_salt_auc": "AUC of cold against warm TTFTs of prompts salt A cached, sent with salt B",
    }

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        probes: dict[str, dict[str, Any]] = record.meta.probes
        ran = {kind: probes[f"timing_{kind}"] for kind in KINDS if f"timing_{kind}" in probes}
        if not ran:
            return GateResult.not_measurable(
                self.name, "no timing probe ran before the load (kvgate run --probes timing sends one)"
            )
        measurements, lines, evidence = [], [], {}
        for kind, probe in ran.items():
            metric, party = KINDS[kind]
            judged = _judge(probe, limits["min_same_party_auc"], limits[metric], party)
            evidence[kind] = judged.evidence
            lines.append(f"{kind.replace('_', ' ')}: {judged.line}")
            if judged.other is not None:
                measurements.append(Measurement(metric, judged.other.value, limits[metric], Unit.SCORE))
        if not measurements:
            return GateResult.not_measurable(self.name, "; ".join(lines), evidence)
        return GateResult.judged(self.name, measurements, "; ".join(lines), evidence)


class _Judged:
    """One pair's finding: the other party's AUC when the same party's was distinguishable."""

    def __init__(self, line: str, evidence: dict[str, Any], other: Auc | None = None) -> None:
        self.line, self.evidence, self.other = line, evidence, other


def _judge(probe: dict[str, Any], min_same: float, max_other: float, party: str) -> _Judged:
    if not probe.get("sent"):
        return _Judged(f"not sent ({probe.get('detail', '')})", {"detail": probe.get("detail", "")})
    ttft: dict[str, list[float]] = probe["ttft_s"]
    evidence: dict[str, Any] = {
        "prompt_tokens": probe.get("prompt_tokens"),
        "rounds": probe.get("rounds"),
        "num_failed": probe.get("num_failed"),
        "median_ttft_ms": {c: round(float(np.median(v)) * 1000, 2) for c, v in ttft.items() if v},
    }
    if min(len(v) for v in ttft.values()) < MIN_SAMPLES:
        return _Judged(f"fewer than {MIN_SAMPLES} timed requests of a condition were served", evidence)
    same = roc_auc(ttft["same_cold"], ttft["same_warm"])
    evidence["same_party"] = same.as_dict()
    if same.low < min_same:
        return _Judged(
            f"the same {party}'s cached prompts were not told from fresh ones ({same.text()}, lower bound "
            f"< {min_same:g}): no prefix cache, or too much noise; isolation cannot be told",
            evidence,
        )
    other = roc_auc(ttft["other_cold"], ttft["other_warm"])
    evidence["other_party"] = other.as_dict()
    told = "tells" if other.value > max_other else "does not tell"
    return _Judged(
        f"same {party} {same.text()}; another {party} {told} them ({other.text()}), "
        f"{probe.get('rounds')} rounds of {probe.get('prompt_tokens')}-token prompts",
        evidence,
        other,
    )
