"""`--tenants` specs: each kind, its determinism, and clear errors for bad specs."""

from collections import Counter
from pathlib import Path

import pytest

from harness.replay.tenants import AssignmentSpecError, default_tenants, make_assigner
from harness.replay.trace import TraceRequest
from record.errors import UnknownNameError
from reference_engine import EngineConfig, load_config

CONFIG = load_config(Path(__file__).resolve().parents[4] / "configs" / "default.toml")


def requests(n: int, ids=lambda i: ()) -> list[TraceRequest]:
    return [
        TraceRequest(row=i + 1, arrival_s=float(i), num_prompt_tokens=100, num_output_tokens=10, prefix_ids=ids(i))
        for i in range(n)
    ]


def assign(spec: str, reqs) -> list[str]:
    assigner = make_assigner(spec, CONFIG)
    return [assigner.assign(r) for r in reqs]


def test_default_tenants_are_the_interactive_ones():
    interactive = [name for name, t in CONFIG.tenants.items() if t.traffic_class.value == "interactive"]
    assert default_tenants(CONFIG) == interactive and len(interactive) == 12
    assert default_tenants(EngineConfig()) == ["default"]  # open mode


def test_round_robin_cycles_in_trace_order():
    assert assign("round_robin:acme,batchco", requests(5)) == ["acme", "batchco", "acme", "batchco", "acme"]
    assert assign("round_robin", requests(5))[:4] == ["acme", "globex", "initech", "umbrella"]


def test_fraction_gives_the_proportions_and_the_same_answer_every_time():
    reqs = requests(20_000)
    got = assign("fraction:acme=0.5,globex=0.3,batchco=0.2", reqs)
    share = {t: n / len(reqs) for t, n in Counter(got).items()}
    assert share == pytest.approx({"acme": 0.5, "globex": 0.3, "batchco": 0.2}, abs=0.015)
    assert got == assign("fraction:acme=0.5,globex=0.3,batchco=0.2", reqs)
    assert got != assign("fraction:acme=0.5,globex=0.3,batchco=0.2;seed=1", reqs)


def test_hash_keeps_a_conversation_with_one_tenant():
    # 50 conversations of 4 turns: turns share the first two ids (id 0 is in every request)
    reqs = requests(200, ids=lambda i: (0, 1000 + i % 50, 5000 + i))
    got = assign("hash", reqs)
    by_conversation = {}
    for r, tenant in zip(reqs, got):
        by_conversation.setdefault(r.prefix_ids[1], set()).add(tenant)
    assert all(len(tenants) == 1 for tenants in by_conversation.values())
    assert len(set(got)) == len(default_tenants(CONFIG))  # spread over the interactive tenants
    assert len(set(assign("hash;depth=1", reqs))) == 1  # id 0 alone names no conversation


def test_hash_without_prefix_ids_falls_back_to_the_row():
    got = assign("hash:acme,globex", requests(400))
    assert abs(Counter(got)["acme"] - 200) < 40


@pytest.mark.parametrize(
    "spec, error, message",
    [
        ("random", UnknownNameError, "unknown tenant assignment 'random'; valid: fraction, hash, round_robin"),
        ("round_robin:acme,nobody", UnknownNameError, "unknown tenant 'nobody'; valid: acme, batchco"),
        ("fraction:acme=0.5,globex=0.4", AssignmentSpecError, "add up to 1, these add up to 0.9"),
        ("fraction:acme=0.5,globex", AssignmentSpecError, "a weight to every tenant or to none"),
        ("fraction:acme=half,globex=0.5", AssignmentSpecError, "weight of tenant 'acme' must be a number"),
        ("fraction:acme=-1,globex=2", AssignmentSpecError, "must be positive"),
        ("round_robin:acme=0.5,globex=0.5", AssignmentSpecError, "without weights"),
        ("round_robin:acme,acme", AssignmentSpecError, "listed twice"),
        ("hash;depth=0", AssignmentSpecError, "depth must be ≥ 1"),
        ("hash;depth=two", AssignmentSpecError, "must be an integer"),
        ("hash;seed=3", AssignmentSpecError, "unknown option 'seed=3' for tenant spec 'hash' \\(options: depth\\)"),
        ("round_robin:acme,", AssignmentSpecError, "empty tenant name"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec, error, message):
    with pytest.raises(error, match=message):
        make_assigner(spec, CONFIG)
