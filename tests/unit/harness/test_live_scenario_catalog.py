from __future__ import annotations

from pathlib import Path

import pytest

from harness.scenario_catalog import discover, scenarios_dir, select
from record.errors import UnknownNameError

EXPECTED = {
    "batch_mix": ("BatchMix",),
    "cancel_storm": ("CancelStorm",),
    "long_output": ("LongOutput",),
    "long_prompt": ("LongPrompt",),
    "multi_turn": ("MultiTurn",),
    "pd_transfer_chaos": ("PdTransferChaos",),
    "router_chaos": ("RouterChaos",),
    "shared_prefix": ("SharedPrefix",),
    "short_qa": ("ShortQA",),
    "step_load": ("StepLoad",),
    "tenant_burst": ("TenantBurst",),
    "tier_chaos": ("TierChaos",),
    "worker_kill": ("WorkerKill",),
}


def test_every_scenario_is_one_locustfile_with_one_user_class() -> None:
    found = discover(scenarios_dir())
    assert {name: s.user_classes for name, s in found.items()} == EXPECTED
    assert all(s.path.name == f"{name}.py" for name, s in found.items())


def test_names_select_files_and_an_unknown_name_lists_the_valid_ones() -> None:
    assert [s.name for s in select(scenarios_dir(), ["short_qa", "cancel_storm", "short_qa"])] == [
        "short_qa",
        "cancel_storm",
    ]
    assert len(select(scenarios_dir(), [])) == len(EXPECTED)
    with pytest.raises(UnknownNameError, match="unknown scenario 'cancel_strom'; valid: batch_mix"):
        select(scenarios_dir(), ["cancel_strom"])


def test_helpers_and_private_files_are_not_scenarios(tmp_path: Path) -> None:
    (tmp_path / "_common.py").write_text("class Base(KvgateUser): pass\n")
    (tmp_path / "notes.py").write_text("class Other: pass\n")
    (tmp_path / "mine.py").write_text("from x import KvgateUser\nclass Mine(KvgateUser):\n    pass\n")
    assert list(discover(tmp_path)) == ["mine"]


def test_the_pd_chaos_scenario_stands_apart_from_the_default_mix() -> None:
    found = discover(scenarios_dir().parent / "pd_scenarios")
    assert {name: s.user_classes for name, s in found.items()} == {"pd_chaos": ("PdChaos",)}
    # locust walks the whole tree below `-f scenarios`: any file below it joins the default mix
    assert [p.name for p in scenarios_dir().rglob("*.py") if p.parent != scenarios_dir()] == []
