"""A fleet's collectors: every replica read at one tick, its counters as the run's increase, a hung
or dead replica marked missing without holding up the others, the fleet as their sum."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import httpx
import pytest

from harness.collectors.fleet import FLEET_SOURCE, FleetCollectors
from harness.collectors.replica import CounterIncrease
from harness.collectors.replica_spec import (
    ReplicaSpec,
    ReplicaUnreachable,
    check_replicas,
    parse_replica,
    worker_replicas,
)
from record.run_record import MISSING_SOURCE, REPLICA_COLUMNS
from tests.stub_http import stub_server

KEY = "sk-replica-key"


class FakeReplica:
    """A vLLM-like replica whose usage, prefix counters and health a test sets; it may hang."""

    def __init__(self, usage: float = 0.0) -> None:
        self.usage, self.hits, self.queries = usage, 0, 0
        self.up = True
        self.hang = threading.Event()

    def __call__(self, method: str, path: str) -> tuple[int, bytes]:
        if self.hang.is_set():
            time.sleep(1.0)
        if not self.up:
            return 503, b"down"
        if path == "/metrics":
            return 200, self.metrics().encode()
        if path == "/health":
            return 200, b"{}"
        return 404, b"{}"

    def metrics(self) -> str:
        return (
            f'vllm:kv_cache_usage_perc{{model_name="m"}} {self.usage}\n'
            'vllm:num_requests_running{model_name="m"} 1\n'
            'vllm:num_requests_waiting{model_name="m"} 0\n'
            'vllm:cache_config_info{block_size="16",num_gpu_blocks="100"} 1.0\n'
            "# TYPE vllm:prefix_cache_hits counter\n"
            f'vllm:prefix_cache_hits_total{{model_name="m"}} {self.hits}\n'
            "# TYPE vllm:prefix_cache_queries counter\n"
            f'vllm:prefix_cache_queries_total{{model_name="m"}} {self.queries}\n'
        )


@contextmanager
def replicas(*fakes: FakeReplica) -> Iterator[list[ReplicaSpec]]:
    with ExitStack() as stack:
        urls = [stack.enter_context(stub_server(fake)) for fake in fakes]
        yield [parse_replica(f"{url},name={'abcd'[i]}") for i, url in enumerate(urls)]


def test_a_counter_that_goes_down_was_reset_and_counts_from_zero() -> None:
    counters = CounterIncrease()
    counters.rebase({"hits": 100.0})
    for value in (150.0, 170.0, 20.0, 50.0):  # a restart between 170 and 20
        counters.observe({"hits": value, "new": value})
    assert counters.increase["hits"] == 70 + 50  # 100→170, then 0→50
    assert counters.increase["new"] == 20 + 20 + 30  # first seen at 150: counted from there


def test_a_tick_reads_every_replica_and_sums_them_into_the_fleets_row() -> None:
    with replicas(FakeReplica(0.2), FakeReplica(0.6)) as specs:
        fleet = FleetCollectors(specs, api_key=KEY)
        try:
            tick = fleet.sample(1.5)
        finally:
            fleet.close()
    assert [(r["replica"], r["usage"], r["t_s"]) for r in tick.replica_rows] == [("a", 0.2, 1.5), ("b", 0.6, 1.5)]
    assert tick.fleet_row is not None and tick.fleet_row["source"] == FLEET_SOURCE
    assert tick.fleet_row["usage"] == pytest.approx(0.4) and tick.fleet_row["num_running"] == 2
    assert fleet.in_flight() == 2 and fleet.stated_pool() is not None and fleet.stated_pool().num_blocks == 200


def test_a_dead_replica_is_missing_at_its_tick_and_the_fleet_has_no_row() -> None:
    down = FakeReplica(0.5)
    down.up = False
    with replicas(FakeReplica(0.2), down) as specs:
        fleet = FleetCollectors(specs, api_key=KEY)
        try:
            tick = fleet.sample(2.0)
        finally:
            fleet.close()
    assert [r["source"] for r in tick.replica_rows] == ["prometheus", MISSING_SOURCE]
    assert tick.fleet_row is None and fleet.in_flight() is None  # it cannot say what b holds
    assert fleet.replicas[1].num_missed == 1 and "HTTP 503" in fleet.replicas[1].last_error


def test_a_hung_replica_does_not_hold_up_the_others_ticks() -> None:
    hung = FakeReplica(0.5)
    with replicas(FakeReplica(0.2), hung) as specs:
        fleet = FleetCollectors(specs, api_key=KEY, wait_s=0.2)
        try:
            hung.hang.set()
            first = fleet.sample(1.0)
            second = fleet.sample(1.1)  # b is still answering the first tick's scrape
            hung.hang.clear()
        finally:
            fleet.close()
    for tick in (first, second):
        assert [r["source"] for r in tick.replica_rows] == ["prometheus", MISSING_SOURCE]
    assert "still answering an earlier scrape" in fleet.replicas[1].last_error


def test_a_replicas_run_is_its_counters_increase_and_its_pool_before_and_after() -> None:
    fake = FakeReplica()
    fake.hits, fake.queries = 1000, 5000  # counted before the run: not the run's
    with replicas(fake, FakeReplica()) as specs:
        fleet = FleetCollectors(specs, api_key=KEY)
        try:
            initial = fleet.before_load()
            fake.hits, fake.queries = 1200, 5600
            fleet.sample(1.0)
            fake.hits, fake.queries = 50, 400  # it restarted
            final = fleet.after_drain()
            rows = fleet.rows()
        finally:
            fleet.close()
    assert "prefix_cache_hits_tokens" not in initial and initial["num_blocks"] == 200
    a = rows[0]
    assert set(a) == set(REPLICA_COLUMNS)
    assert (a["prefix_cache_hits_tokens"], a["prefix_cache_queries_tokens"]) == (250, 1000)
    assert final["prefix_cache_hits_tokens"] == 250  # the fleet's: a's 250 and b's 0
    assert a["initial_num_blocks"] == a["final_num_blocks"] == 100 and a["block_tokens"] == 16


def test_preflight_names_the_replica_that_does_not_answer() -> None:
    answers = {"http://a:8000/metrics": 200, "http://b:8000/metrics": 404}

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.host == "c":
            raise httpx.ConnectError("refused")
        return httpx.Response(answers[str(request.url)])

    transport = httpx.MockTransport(answer)
    a, b, c = (parse_replica(f"http://{h}:8000") for h in "abc")
    check_replicas([a], KEY, transport=transport)
    with pytest.raises(
        ReplicaUnreachable, match=r"^replica b:8000 does not answer: GET http://b:8000/metrics: HTTP 404$"
    ):
        check_replicas([a, b], KEY, transport=transport)
    with pytest.raises(
        ReplicaUnreachable, match=r"^replica c:8000 is unreachable: GET http://c:8000/metrics: ConnectError"
    ):
        check_replicas([a, c], KEY, transport=transport)
    no_metrics = parse_replica("http://c:8000,metrics=")
    with pytest.raises(ReplicaUnreachable, match="GET http://c:8000/health"):
        check_replicas([no_metrics], KEY, transport=transport)


def test_the_reference_engines_workers_are_replicas_at_their_ports() -> None:
    class Admin:
        def workers(self) -> dict:
            return {
                "workers": [{"worker": 0, "port": 4100}, {"worker": 1, "port": 4101, "kv_events_endpoint": "tcp://x:1"}]
            }

    w0, w1 = worker_replicas(Admin())  # type: ignore[arg-type]
    assert (w0.name, w0.url, w0.metrics_url, w0.worker, w0.kv_events) == (
        "worker0",
        "http://127.0.0.1:4100",
        "http://127.0.0.1:4100/metrics",
        0,
        "",
    )
    assert (w1.name, w1.worker, w1.kv_events) == ("worker1", 1, "tcp://x:1")


def test_a_pd_pairs_sides_are_replicas_at_their_paths_named_by_role() -> None:
    class Admin:
        base_url = "http://127.0.0.1:4200"

        def workers(self) -> dict:
            sides = [(0, "prefill"), (1, "decode")]
            return {"workers": [{"worker": w, "role": r, "path": f"/replicas/{r}"} for w, r in sides]}

    prefill, decode = worker_replicas(Admin())  # type: ignore[arg-type]
    assert (prefill.name, prefill.worker, prefill.url) == ("prefill", 0, "http://127.0.0.1:4200/replicas/prefill")
    assert decode.metrics_url == "http://127.0.0.1:4200/replicas/decode/metrics"
