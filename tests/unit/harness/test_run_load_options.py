"""`kvgate run --rate` / `--trace`, `kvgate sweep` and the locust worker options become a plan:
open-loop settings (which locust's master reads) and workers here or on other hosts."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import build_parser
from harness.commands.run import build_plan
from harness.loadgen.arrivals import ArrivalKind
from harness.loadgen.chat_workload import ChatWorkload
from harness.loadgen.trace_workload import TraceWorkload
from harness.loadgen.workloads import workload_of
from harness.locust_process import Master
from record.errors import KvgateError

MOONCAKE = Path(__file__).resolve().parents[2] / "data" / "traces" / "mooncake" / "conversation_trace_head200.jsonl"


def plan(*argv: str):
    return build_plan(build_parser().parse_args(["run", "--target", "http://127.0.0.1:1", *argv]))


def test_a_rate_replaces_locust_by_an_open_loop() -> None:
    p = plan(
        "--rate",
        "3",
        "--arrivals",
        "bursts",
        "--burst-size",
        "5",
        "--seed",
        "9",
        "--limit",
        "40",
        "--max-lag-ms",
        "80",
        "--max-in-flight",
        "16",
    )
    assert p.scenarios == [] and p.mixed_dir is None and p.scenario_names() == ["open_loop_chat"]
    assert (p.settings.max_lag_ms, p.settings.max_in_flight) == (80.0, 16)
    workload = p.open_loop
    assert isinstance(workload, ChatWorkload) and workload.max_requests == 40
    assert workload_of(p.settings) == workload  # what the locust master reads from the settings
    assert (
        workload.schedule.kind,
        workload.schedule.rate_per_s,
        workload.schedule.seed,
        workload.schedule.burst_size,
    ) == (ArrivalKind.BURSTS, 3.0, 9, 5)


def test_a_trace_is_read_once_and_scaled() -> None:
    p = plan("--trace", str(MOONCAKE), "--rate-scale", "2", "--time-scale", "0.5", "--limit", "10")
    workload = p.open_loop
    assert isinstance(workload, TraceWorkload) and workload.trace.format == "mooncake"
    assert (workload.rate_scale, workload.time_scale, workload.max_requests) == (2.0, 0.5, 10)


def test_without_rate_or_trace_locust_runs_the_scenarios() -> None:
    p = plan()
    assert p.open_loop is None and p.settings.rate == 0 and not p.settings.trace


def test_workers_on_other_hosts_are_a_master_to_wait_for() -> None:
    p = plan("--rate", "2", "--master-bind", "10.9.8.7:5557", "--expect-workers", "2", "--workers-wait", "9")
    assert p.master == Master("10.9.8.7", 5557, 2, 9.0) and p.processes == 0
    assert plan("--processes", "2").master is None


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--master-bind", "10.9.8.7:5557"], "--master-bind needs --expect-workers"),
        (["--expect-workers", "2"], "--expect-workers is for --master-bind"),
        (["--master-bind", "10.9.8.7:5557", "--expect-workers", "2", "--processes", "2"], "pick one"),
    ],
)
def test_worker_options_that_do_not_fit_together_are_refused(argv: list[str], said: str) -> None:
    with pytest.raises(KvgateError, match=said):
        plan(*argv)


def test_scenarios_and_an_open_loop_do_not_mix() -> None:
    with pytest.raises(KvgateError, match="--scenarios picks locust scenarios"):
        plan("--rate", "2", "--scenarios", "short_qa")


@pytest.mark.parametrize(
    "argv",
    [
        ["--rate", "2", "--trace", str(MOONCAKE)],
        ["--rate", "0"],
        ["--rate", "2", "--arrivals", "gaussian"],
        ["--master-bind", "nohost"],
        ["--master-bind", "10.0.0.1:99999"],
    ],
)
def test_bad_open_loop_options_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["run", "--target", "http://127.0.0.1:1", *argv])
    assert exit_info.value.code == 2


def test_sweep_rates_must_rise() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sweep", "--target", "http://127.0.0.1:1", "--rates", "4,2"])
    args = build_parser().parse_args(
        ["sweep", "--target", "http://127.0.0.1:1", "--rates", "1,2.5", "--processes", "2"]
    )
    assert args.rates == [1.0, 2.5] and args.trace is None and args.scenarios == [] and args.processes == 2
