"""no_stranded_reservation: after the drain, a P/D pair's decode side holds no blocks reserved for
a request that is no longer live (docs/pd.md).

The decode side reserves its blocks before it pulls a prompt's KV from the prefill side; an
abort during the pull must release them. Where it does not (vLLM #46283: a NIXL connector's
aborted remote load), the blocks are held by nobody and the decode pool shrinks with every such
abort until it admits nothing. The witness is the engine's own count after the drain
(`meta.final.pd.stranded_reservation_blocks`); a record without a P/D pair is not measurable
and does not count towards a partial verdict (it could never be measured there).
"""

from __future__ import annotations

from gates.base import GateResult, Limits, Measurement, Unit
from gates.sources import Source
from record.run_record import RunRecord


class NoStrandedReservationGate:
    name = "no_stranded_reservation"
    sources = (Source.ENGINE_STATE,)
    title = "No stranded decode reservation (P/D)"
    metrics = {"max_blocks": "decode blocks reserved for requests no longer live, after the drain"}

    def evaluate(self, record: RunRecord, limits: Limits) -> GateResult:
        pd = record.meta.final.get("pd")
        if not isinstance(pd, dict) or "stranded_reservation_blocks" not in pd:
            return GateResult.not_measurable(
                self.name, "no P/D pair in this record: no decode reservations to count", applies=False
            )
        stranded = int(pd["stranded_reservation_blocks"])
        evidence = {key: pd[key] for key in sorted(pd)}
        explanation = (
            f"{stranded} decode blocks reserved for requests no longer live, after {pd['num_transfers']} transfers"
        )
        return GateResult.judged(
            self.name, [Measurement("max_blocks", stranded, limits["max_blocks"], Unit.COUNT)], explanation, evidence
        )
