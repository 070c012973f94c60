"""Multi-worker mode: kill -9 of a worker mid-stream ends its streams with worker_lost, releases its
reservations, restarts it, and the service keeps answering on the other worker meanwhile."""

from __future__ import annotations

import os
import signal
import time

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.server_process import ADMIN, running_server, wait_until_drained

MESSAGES = [{"role": "user", "content": "count to a thousand"}]


def admin(base: str, path: str) -> dict:
    return httpx.get(f"{base}{path}", headers=ADMIN, timeout=10).json()


@pytest.mark.slow
def test_kill_9_of_a_worker_mid_stream(tmp_path):
    with running_server(tmp_path, workers=2, step_ms=5.0, ready_timeout_s=120) as base:
        c = openai.OpenAI(base_url=f"{base}/v1", api_key="sk-acme", max_retries=0)
        stream = iter(c.chat.completions.create(model="kvgate-tiny", messages=MESSAGES, max_tokens=1000,
                                                stream=True))
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

        deadline = time.monotonic() + 60
        while httpx.get(f"{base}/ready").status_code != 200:
            assert time.monotonic() < deadline, "the killed worker was not replaced"
            time.sleep(0.1)
        replaced = admin(base, "/admin/workers")["workers"][victim]
        assert replaced["pid"] != old_pid and replaced["restarts"] == 1
        assert replaced["last_exit"] == "killed by SIGKILL" and replaced["state"] == "ready"

        rows = admin(base, "/admin/events")["rows"]
        died = [r for r in rows if r[2] == "worker_died"]
        released = [r for r in rows if r[2] == "reservation_released" and r[3] == first.id]
        assert [(r[-1], r[10]) for r in died] == [(victim, "killed by SIGKILL")]
        assert [(r[-1], r[10]) for r in released] == [(victim, "worker_lost")]

        snap = wait_until_drained(base)
        assert snap["num_reservations"] == 0 and snap["active_blocks"] == 0 and snap["unavailable"] == []
        families = {f.name: f for f in text_string_to_metric_families(httpx.get(f"{base}/metrics").text)}
        restarts = {s.labels["worker"]: s.value for s in families["kvgate_worker_restarts"].samples}
        assert restarts == {str(victim): 1.0, str(1 - victim): 0.0}
        usage = families["vllm:kv_cache_usage_perc"].samples
        assert sorted(s.labels["worker"] for s in usage) == ["0", "1"]
