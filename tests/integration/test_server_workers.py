"""Multi-worker mode: kill -9 of a worker mid-stream ends its streams with worker_lost, releases its
reservations, restarts it, and the service keeps answering on the other worker meanwhile; a worker
that hangs (SIGSTOP) is found by the router's health probes and handled the same way. The
assertions are counts and states: how soon the hang is found is a figure of bench/bench_worker_hang.py."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from record.events import WORKER_EVENT_COLUMNS
from tests.integration.server_process import ADMIN, running_server, wait_until_drained
from tests.waiting import wait_for

MESSAGES = [{"role": "user", "content": "count to a thousand"}]
REASON = WORKER_EVENT_COLUMNS.index("reason")  # event rows as /admin/events serves them


def admin(base: str, path: str) -> dict:
    return httpx.get(f"{base}{path}", headers=ADMIN, timeout=10).json()


@pytest.mark.slow
def test_kill_9_of_a_worker_mid_stream(tmp_path):
    with running_server(tmp_path, workers=2, step_ms=5.0, ready_timeout_s=120) as base:
        c = openai.OpenAI(base_url=f"{base}/v1", api_key="sk-acme", max_retries=0)
        stream = iter(c.chat.completions.create(model="kvgate-tiny", messages=MESSAGES, max_tokens=1000, stream=True))
        first = next(stream)
        [reservation] = admin(base, "/admin/ledger")["reservations"]
        assert reservation["request_id"] == first.id
        victim = reservation["worker"]
        workers = admin(base, "/admin/workers")["workers"]
        old_pid = workers[victim]["pid"]
        before = admin(base, "/admin/events")["rows"]  # reading events pulls the workers' logs in now
        assert any(r[2] == "admitted" and r[3] == first.id and r[-1] == victim for r in before)
        os.kill(old_pid, signal.SIGKILL)

        with pytest.raises(openai.APIError) as lost:
            for _ in stream:
                pass
        assert lost.value.code == "worker_lost"
        assert admin(base, "/admin/ledger")["reservations"] == []

        # the other worker serves while the victim restarts; no request holds two reservations
        answer = c.chat.completions.create(model="kvgate-tiny", messages=MESSAGES, max_tokens=3)
        assert answer.kvgate["worker"] != victim and answer.choices[0].finish_reason == "length"

        wait_for(lambda: httpx.get(f"{base}/ready").status_code == 200, "the killed worker is replaced")
        replaced = admin(base, "/admin/workers")["workers"][victim]
        assert replaced["pid"] != old_pid and replaced["restarts"] == 1
        assert replaced["last_exit"] == "killed by SIGKILL" and replaced["state"] == "ready"

        rows = admin(base, "/admin/events")["rows"]
        died = [r for r in rows if r[2] == "worker_died"]
        released = [r for r in rows if r[2] == "reservation_released" and r[3] == first.id]
        assert [(r[-1], r[REASON]) for r in died] == [(victim, "killed by SIGKILL")]
        assert [(r[-1], r[REASON]) for r in released] == [(victim, "worker_lost")]

        snap = wait_until_drained(base)
        assert snap["num_reservations"] == 0 and snap["active_blocks"] == 0 and snap["unavailable"] == []
        open_metrics = httpx.get(f"{base}/metrics").text
        assert 'tenant="' not in open_metrics and 'tenant="acme"' in httpx.get(f"{base}/metrics", headers=ADMIN).text
        families = {f.name: f for f in text_string_to_metric_families(open_metrics)}
        restarts = {s.labels["worker"]: s.value for s in families["kvgate_worker_restarts"].samples}
        assert restarts == {str(victim): 1.0, str(1 - victim): 0.0}
        usage = families["vllm:kv_cache_usage_perc"].samples
        assert sorted(s.labels["worker"] for s in usage) == ["0", "1"]


HANG = "worker_hang_timeout_s = 1.0\nworker_probe_interval_s = 0.25"


async def stream_to_end(http: httpx.AsyncClient, base: str, opened: asyncio.Event) -> tuple[str, str, str]:
    """(request id, worker, how it ended: 'done' or the error code of its last event)."""
    body = {"model": "kvgate-tiny", "messages": MESSAGES, "max_tokens": 400, "stream": True}
    async with http.stream(
        "POST", f"{base}/v1/chat/completions", json=body, headers={"Authorization": "Bearer sk-acme"}
    ) as r:
        assert r.status_code == 200
        opened.set()
        ending = "done"
        async for line in r.aiter_lines():
            if line.startswith('data: {"error"'):
                ending = json.loads(line[len("data: ") :])["error"]["code"]
        return r.headers["x-request-id"], r.headers["x-kvgate-worker"], ending


@pytest.mark.slow
def test_a_hung_worker_is_killed_its_streams_end_worker_lost_and_every_other_request_succeeds(tmp_path):
    with running_server(tmp_path, workers=2, step_ms=5.0, server_toml=HANG, ready_timeout_s=120) as base:

        async def scenario() -> tuple[list, list, int]:
            async with httpx.AsyncClient(timeout=60) as http:
                opened = [asyncio.Event() for _ in range(6)]
                streams = [asyncio.create_task(stream_to_end(http, base, e)) for e in opened]
                for e in opened:
                    await e.wait()
                workers = (await http.get(f"{base}/admin/workers", headers=ADMIN)).json()["workers"]
                os.kill(workers[0]["pid"], signal.SIGSTOP)  # alive, holding its port, answering nothing
                snapshot = await http.get(f"{base}/admin/snapshot", headers=ADMIN)  # the router still answers
                short = {"model": "kvgate-tiny", "messages": MESSAGES, "max_tokens": 3}
                others = await asyncio.gather(
                    *(
                        http.post(
                            f"{base}/v1/chat/completions", json=short, headers={"Authorization": "Bearer sk-globex"}
                        )
                        for _ in range(10)
                    )
                )
                return await asyncio.gather(*streams), others, snapshot.status_code

        streams, others, snapshot_status = asyncio.run(scenario())
        assert snapshot_status == 200
        assert {ending for _, worker, ending in streams if worker == "0"} == {"worker_lost"}
        assert {ending for _, worker, ending in streams if worker == "1"} <= {"done"}
        rows = admin(base, "/admin/events")["rows"]
        [died] = [r for r in rows if r[2] == "worker_died"]
        assert died[-1] == 0 and died[REASON].startswith("hung: no answer to a health probe")
        lost = {r[3] for r in rows if r[2] == "reservation_released" and r[REASON] == "worker_lost"}
        # every request on the hung worker ended worker_lost; every other one succeeded
        assert {rid for rid, worker, _ in streams if worker == "0"} <= lost
        for answer in others:
            assert (answer.status_code, answer.json().get("error", {}).get("code")) in (
                (200, None),
                (503, "worker_lost"),
            ), answer.text
            assert (answer.status_code == 503) == (answer.headers["x-request-id"] in lost)

        wait_for(lambda: httpx.get(f"{base}/ready").status_code == 200, "the hung worker is replaced")
        replaced = admin(base, "/admin/workers")["workers"][0]
        assert replaced["restarts"] == 1 and replaced["last_exit"].startswith("hung:")
        assert wait_until_drained(base)["num_reservations"] == 0


PREFIX_AWARE = """routing = "prefix_aware"
[kv_events]
enable_kv_cache_events = true
endpoint = "tcp://127.0.0.1:0"
"""


def routed(base: str) -> list[dict]:
    rows = admin(base, "/admin/events")["rows"]
    return [dict(zip(WORKER_EVENT_COLUMNS, r)) for r in rows if r[2] == "routed"]


@pytest.mark.slow
def test_prefix_aware_routes_a_prompt_where_its_prefix_is_cached_and_forgets_it_with_its_worker(tmp_path):
    with running_server(tmp_path, workers=2, server_toml=PREFIX_AWARE, ready_timeout_s=120) as base:
        c = openai.OpenAI(base_url=f"{base}/v1", api_key="sk-acme", max_retries=0)
        document = " ".join(f"clause{i}" for i in range(600))

        def ask(question: str) -> openai.types.chat.ChatCompletion:
            messages = [{"role": "user", "content": f"{document} {question}"}]
            return c.chat.completions.create(model="kvgate-tiny", messages=messages, max_tokens=2)

        first = ask("summarise it")
        home = first.kvgate["worker"]
        workers = admin(base, "/admin/workers")
        assert workers["routing"] == "prefix_aware"
        # each worker's pinned system prompt, announced before the router listened, comes in its snapshot
        # (fetched when the worker is ready: on a busy machine it may land after the first answer)
        wait_for(
            lambda: all(
                w["kv_batches"].get("snapshots") == 1 and w["indexed_blocks"] >= 1
                for w in admin(base, "/admin/workers")["workers"]
            ),
            "every worker's snapshot",
        )
        wait_for(lambda: admin(base, "/admin/workers")["workers"][home]["indexed_blocks"] >= 37, "the index learns")
        answers = [ask(f"question {i}") for i in range(6)]
        assert {a.kvgate["worker"] for a in answers} == {home}  # an idle fleet: the prefix decides
        decisions = routed(base)
        assert [d["mode"] for d in decisions] == ["prefix_aware"] * 7
        assert decisions[0]["num_blocks"] == 0 and all(d["num_blocks"] >= 37 for d in decisions[1:])
        assert all(a.usage.prompt_tokens_details.cached_tokens >= 37 * 16 for a in answers)

        # the worker dies: its blocks leave the index with it, and nothing is routed there meanwhile
        os.kill(workers["workers"][home]["pid"], signal.SIGKILL)
        wait_for(lambda: admin(base, "/admin/workers")["workers"][home]["indexed_blocks"] == 0, "forgotten")
        ask("after the kill")
        rows = [dict(zip(WORKER_EVENT_COLUMNS, r)) for r in admin(base, "/admin/events")["rows"]]
        died = next(r["t_s"] for r in rows if r["kind"] == "worker_died")
        back = min((r["t_s"] for r in rows if r["kind"] == "worker_ready" and r["t_s"] > died), default=float("inf"))
        assert not [r for r in rows if r["kind"] == "routed" and r["worker"] == home and died <= r["t_s"] < back]

        # chaos: an emptied index knows nothing until the workers store blocks again
        chaos = httpx.post(f"{base}/admin/router/chaos", json={"restart_index": True}, headers=ADMIN, timeout=10)
        assert chaos.status_code == 200 and chaos.json()["index_restarts"] == 1
        assert all(w["indexed_blocks"] == 0 for w in admin(base, "/admin/workers")["workers"])
        bad = httpx.post(f"{base}/admin/router/chaos", json={"drop_kv_events": 2}, headers=ADMIN, timeout=10)
        assert bad.status_code == 400
