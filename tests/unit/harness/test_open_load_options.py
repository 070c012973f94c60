"""`kvgate run --rate` / `--trace` and `kvgate sweep` options become an open-loop plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import build_parser
from harness.commands.run import build_plan
from harness.loadgen.arrivals import ArrivalKind
from harness.loadgen.chat_workload import ChatWorkload
from harness.trace_workload import TraceWorkload
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
    assert p.open_loop is not None and (p.open_loop.max_lag_ms, p.open_loop.max_in_flight) == (80.0, 16)
    workload = p.open_loop.workload
    assert isinstance(workload, ChatWorkload) and workload.max_requests == 40
    assert (
        workload.schedule.kind,
        workload.schedule.rate_per_s,
        workload.schedule.seed,
        workload.schedule.burst_size,
    ) == (ArrivalKind.BURSTS, 3.0, 9, 5)


def test_a_trace_is_read_once_and_scaled() -> None:
    p = plan("--trace", str(MOONCAKE), "--rate-scale", "2", "--time-scale", "0.5", "--limit", "10")
    workload = p.open_loop.workload
    assert isinstance(workload, TraceWorkload) and workload.trace.format == "mooncake"
    assert (workload.rate_scale, workload.time_scale, workload.max_requests) == (2.0, 0.5, 10)


def test_without_rate_or_trace_locust_runs_as_before() -> None:
    assert plan().open_loop is None


def test_scenarios_and_an_open_loop_do_not_mix() -> None:
    with pytest.raises(KvgateError, match="--scenarios picks locust scenarios"):
        plan("--rate", "2", "--scenarios", "short_qa")


@pytest.mark.parametrize(
    "argv", [["--rate", "2", "--trace", str(MOONCAKE)], ["--rate", "0"], ["--rate", "2", "--arrivals", "gaussian"]]
)
def test_bad_open_loop_options_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["run", "--target", "http://127.0.0.1:1", *argv])
    assert exit_info.value.code == 2


def test_sweep_rates_must_rise() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sweep", "--target", "http://127.0.0.1:1", "--rates", "4,2"])
    args = build_parser().parse_args(["sweep", "--target", "http://127.0.0.1:1", "--rates", "1,2.5"])
    assert args.rates == [1.0, 2.5] and args.trace is None and args.scenarios == []
