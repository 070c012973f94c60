"""salt_isolation: judged only from a probe that could tell a hit from a miss."""

from __future__ import annotations

from gates import Outcome
from tests.fixtures.records import RecordBuilder


def probe(same: int | None, other: int | None, measurable: bool) -> RecordBuilder:
    return RecordBuilder().meta(probes={"cache_salt": {
        "measurable": measurable, "same_salt_hit_tokens": same, "other_salt_hit_tokens": other,
        "source": "usage", "detail": "", "isolated": None if not measurable else other == 0}})


def test_a_different_salt_that_misses_passes_and_one_that_hits_fails(judge) -> None:
    isolated = judge(probe(384, 0, True), "salt_isolation")
    assert isolated.outcome is Outcome.PASS and isolated.headline.value == 0
    leaky = judge(probe(384, 384, True), "salt_isolation")
    assert leaky.outcome is Outcome.FAIL and leaky.headline.value == 384


def test_a_probe_that_cannot_tell_is_not_measurable_never_a_pass(judge) -> None:
    assert judge(probe(0, 0, False), "salt_isolation").outcome is Outcome.NOT_MEASURABLE
    assert judge(RecordBuilder(), "salt_isolation").outcome is Outcome.NOT_MEASURABLE
