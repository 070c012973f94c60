"""How soon a hung worker's streams end with worker_lost, and what the other requests see meanwhile.

    .venv/bin/python bench/bench_worker_hang.py [--trials 3] [--hang-timeout 5] [--probe-interval 0.5]

Starts `kvgate serve --workers 2` (a test-sized model), opens streams on both workers, then
SIGSTOPs one worker: alive, holding its port, answering nothing. It measures, per trial, the time
from the SIGSTOP to the last `worker_lost` error event on a stream of the stopped worker, against
the documented bound `worker_probe_interval_s + worker_hang_timeout_s`, and sends a short
request every 50 ms from the SIGSTOP until the replacement is ready, counting how they ended:
200, or 503 worker_lost for those the router had sent to the hung worker before it was found.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from harness.target import ReferenceEngine
from reference_engine import EngineConfig, with_overrides
from reference_engine.config import save_config

MESSAGES = [{"role": "user", "content": "count to a thousand"}]
ACME = {"Authorization": "Bearer sk-acme"}


async def stream(http: httpx.AsyncClient, base: str, opened: asyncio.Event) -> tuple[str, float | None]:
    """(worker, unix time of its worker_lost error event, None if it ended normally)."""
    body = {"model": "kvgate-tiny", "messages": MESSAGES, "max_tokens": 3000, "stream": True}
    async with http.stream("POST", f"{base}/v1/chat/completions", json=body, headers=ACME) as r:
        opened.set()
        async for line in r.aiter_lines():
            if line.startswith('data: {"error"') and json.loads(line[6:])["error"]["code"] == "worker_lost":
                return r.headers["x-kvgate-worker"], time.time()
        return r.headers["x-kvgate-worker"], None


async def trial(base: str, admin: dict[str, str]) -> tuple[float, Counter[str]]:
    async with httpx.AsyncClient(timeout=120) as http:
        opened = [asyncio.Event() for _ in range(8)]
        streams = [asyncio.create_task(stream(http, base, e)) for e in opened]
        for e in opened:
            await e.wait()
        victim = (await http.get(f"{base}/admin/workers", headers=admin)).json()["workers"][0]
        stopped_unix = time.time()
        os.kill(victim["pid"], signal.SIGSTOP)
        others: Counter[str] = Counter()

        async def short() -> None:
            r = await http.post(
                f"{base}/v1/chat/completions",
                headers=ACME,
                json={"model": "kvgate-tiny", "messages": MESSAGES, "max_tokens": 3},
            )
            others[str(r.status_code) if r.status_code == 200 else f"{r.status_code} {r.json()['error']['code']}"] += 1

        shorts = []
        while (await http.get(f"{base}/ready")).status_code != 200 or time.time() - stopped_unix < 1:
            shorts.append(asyncio.create_task(short()))
            await asyncio.sleep(0.05)
        ended = await asyncio.gather(*streams)
        await asyncio.gather(*shorts)
        for task in streams:
            task.cancel()
        lost = [t for worker, t in ended if worker == "0" and t is not None]
        assert lost and len(lost) == sum(worker == "0" for worker, _ in ended), "a stream of the hung worker survived"
        return max(lost) - stopped_unix, others


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--hang-timeout", type=float, default=5.0, help="server.worker_hang_timeout_s")
    ap.add_argument("--probe-interval", type=float, default=0.5, help="server.worker_probe_interval_s")
    args = ap.parse_args()
    bound = args.hang_timeout + args.probe_interval
    config = with_overrides(
        EngineConfig(),
        {  # a test-sized model: fast steps, a small pool
            "model.name": "kvgate-tiny",
            "hardware.kv_pool_gib": 0.25,
            "sim.step_overhead_ms": 2.0,
            "tenants": {"acme": {"api_keys": ["sk-acme"], "max_active_seqs": 1000, "max_kv_share": 0.5}},
            "server.worker_hang_timeout_s": args.hang_timeout,
            "server.worker_probe_interval_s": args.probe_interval,
        },
    )
    with tempfile.TemporaryDirectory() as tmp:
        engine = ReferenceEngine(
            save_config(config, Path(tmp) / "engine.json"), workers=2, log_path=Path(tmp) / "serve.log"
        )
        admin = {"Authorization": f"Bearer {engine.admin_key}"}
        with engine as target:
            results = [asyncio.run(trial(target.url, admin)) for _ in range(args.trials)]
    times = [t for t, _ in results]
    total = sum((c for _, c in results), Counter())
    print(
        f"SIGSTOP -> last worker_lost on the hung worker's streams: median {statistics.median(times):.2f} s, "
        f"max {max(times):.2f} s over {len(times)} trials (bound: probe interval + hang timeout = {bound:g} s)"
    )
    print(
        "short requests sent while it hung and until its replacement was ready: "
        + ", ".join(f"{k}: {n}" for k, n in sorted(total.items()))
    )


if __name__ == "__main__":
    main()
