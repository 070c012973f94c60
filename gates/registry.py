"""The gate registry: every built-in gate, registered once, in the order verdicts list them."""

from __future__ import annotations

from gates.base import Gate
from gates.checks.approximate_answers import ApproximateAnswersGate
from gates.checks.batch_progress import BatchProgressGate
from gates.checks.cancel_release import CancelReleaseGate
from gates.checks.capacity_after_drain import CapacityAfterDrainGate
from gates.checks.eviction_thrash import EvictionThrashGate
from gates.checks.explicit_overflow import ExplicitOverflowGate
from gates.checks.goodput import GoodputGate
from gates.checks.interactive_ttft import InteractiveTtftGate
from gates.checks.memory_level_off import MemoryLevelOffGate
from gates.checks.memory_recovery import MemoryRecoveryGate
from gates.checks.no_oom import NoOomGate
from gates.checks.no_orphans import NoOrphansGate
from gates.checks.no_stranded_reservation import NoStrandedReservationGate
from gates.checks.preempted_complete import PreemptedCompleteGate
from gates.checks.prefix_isolation import PrefixIsolationGate
from gates.checks.prefix_routing import PrefixRoutingGate
from gates.checks.prefix_timing import PrefixTimingGate
from gates.checks.recompute_tax import RecomputeTaxGate
from gates.checks.rejections import RejectionsGate
from gates.checks.replica_kill import ReplicaKillGate
from gates.checks.tenant_share import TenantShareGate
from gates.checks.tier_loads import TierLoadsGate
from gates.checks.unhealthy_routing import UnhealthyRoutingGate
from record.errors import UnknownNameError


def _register(*gates: Gate) -> dict[str, Gate]:
    registry: dict[str, Gate] = {}
    for gate in gates:
        assert gate.name not in registry, f"gate {gate.name!r} registered twice"
        registry[gate.name] = gate
    return registry


GATES: dict[str, Gate] = _register(
    NoOomGate(),
    CancelReleaseGate(),
    InteractiveTtftGate(),
    TenantShareGate(),
    PrefixIsolationGate(),
    PrefixTimingGate(),
    PreemptedCompleteGate(),
    ExplicitOverflowGate(),
    MemoryRecoveryGate(),
    MemoryLevelOffGate(),
    NoOrphansGate(),
    EvictionThrashGate(),
    BatchProgressGate(),
    GoodputGate(),
    RejectionsGate(),
    ApproximateAnswersGate(),
    RecomputeTaxGate(),
    CapacityAfterDrainGate(),
    TierLoadsGate(),
    ReplicaKillGate(),
    UnhealthyRoutingGate(),
    PrefixRoutingGate(),
    NoStrandedReservationGate(),
)


def get_gate(name: str) -> Gate:
    try:
        return GATES[name]
    except KeyError:
        raise UnknownNameError("gate", name, GATES) from None
