"""The tier chaos schedule: every change undone within one cycle, failures overlapping the slow
link and the unplugged disk, and no call for a tier the engine lacks."""

from harness.loadgen.tier_chaos import restore, schedule


def test_a_cycle_turns_each_change_on_and_off_again_with_failures_around_the_rest():
    steps = schedule(["host", "disk"], slowdown=10.0, failure_rate=0.25)
    assert [s.name for s in steps] == [
        "load_failures",
        "slow_reads",
        "restore_reads",
        "detach_disk",
        "reattach_disk",
        "no_load_failures",
    ]
    by_name = {s.name: s.bodies for s in steps}
    assert by_name["slow_reads"] == ({"tier": "host", "read_slowdown": 10.0}, {"tier": "disk", "read_slowdown": 10.0})
    assert by_name["detach_disk"] == ({"tier": "disk", "attached": False},)
    assert by_name["load_failures"] == ({"load_failure_rate": 0.25},)


def test_a_host_only_engine_gets_no_disk_steps():
    steps = schedule(["host"], slowdown=10.0, failure_rate=0.25)
    assert "detach_disk" not in [s.name for s in steps]
    assert all(body.get("tier") in (None, "host") for s in steps for body in s.bodies)


def test_restore_undoes_every_change_and_nothing_without_tiers():
    assert restore(["host"]) == [
        {"tier": "host", "attached": True},
        {"tier": "host", "read_slowdown": 1.0},
        {"load_failure_rate": 0.0},
    ]
    assert restore([]) == []
