"""Benchmark the live server: concurrent streams sustained, and what it adds to TTFT beyond the time model.

    .venv/bin/python bench/bench_server.py --streams 200 --seconds 20
    .venv/bin/python bench/bench_server.py --streams 64,128,200,256 --seconds 15 --json out.json

For each stream count it starts `kvgate serve` (default config: Llama-3.1-8B on an H100 time
model), keeps that many streaming chat requests open for the whole run (each user sends the
next request when its stream ends; the opening burst, `--warmup` seconds, is not measured),
then reads the engine's event log and replays exactly the same arrivals (same prompts, same
engine-clock arrival times) through an EngineCore on a virtual clock with zero CPU cost. That
replay is the baseline measured in the same run:

    model TTFT     the replay's first-token latency for the request (pure time model)
    engine TTFT    the live engine's own first_token event latency
    engine-added   engine TTFT - model TTFT          (target: P95 <= 20 ms)
    client-added   client TTFT - engine TTFT          (HTTP intake + SSE delivery + client parse)
    gap ratio      live mean inter-token gap / model mean inter-token gap (1.0: the time model holds)

The client is a lean raw-socket HTTP/1.1 SSE reader (a few µs per chunk), so the figures are the
server's, not a heavy client's. Both share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from record.query import percentile
from reference_engine import EngineCore, VirtualClock, load_config
from reference_engine.config import ADMIN_KEY_VAR
from reference_engine.tokenizer import apply_chat_template

_NON_EMPTY_CONTENT = re.compile(rb'"content":"[^"]')  # the first token, not the role-only chunk


@dataclass
class Sample:
    request_id: str
    key: str
    messages: list[dict]
    max_tokens: int
    sent_unix: float = 0.0
    first_unix: float | None = None
    done_unix: float | None = None
    chunk_unix: list[float] = field(default_factory=list)
    status: int = 0


async def stream_once(host: str, port: int, s: Sample, conn: list) -> None:
    """One streaming chat request on a kept-alive raw connection; records chunk arrival times."""
    body = json.dumps(
        {"model": "llama-3.1-8b", "messages": s.messages, "max_tokens": s.max_tokens, "stream": True}
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {s.key}\r\n"
        f"X-Request-Id: {s.request_id}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    if not conn:
        conn.extend(await asyncio.open_connection(host, port))
    reader, writer = conn
    s.sent_unix = time.time()
    writer.write(head.encode() + body)
    status_line = await reader.readline()
    s.status = int(status_line.split()[1])
    length = None
    while (line := await reader.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    if length is not None:  # an error answer: a plain JSON body
        await reader.readexactly(length)
        return
    while True:
        size = int(await reader.readline(), 16)
        data = await reader.readexactly(size + 2)
        if size == 0:
            break
        now = time.time()
        if s.first_unix is None and _NON_EMPTY_CONTENT.search(data):
            s.first_unix = now
        s.chunk_unix.append(now)
    s.done_unix = time.time()


async def drive(
    base_port: int, keys: list[str], system: str, num_streams: int, seconds: float, max_tokens: int, seed: int
) -> list[Sample]:
    rng = random.Random(seed)
    samples: list[Sample] = []
    stop_at = time.monotonic() + seconds

    async def user(u: int) -> None:
        conn: list = []
        n = 0
        await asyncio.sleep(rng.random())  # staggered starts, and output lengths vary: no lock-step waves
        while time.monotonic() < stop_at:
            words = " ".join(f"q{rng.randrange(10_000)}" for _ in range(rng.randrange(20, 60)))
            messages = [{"role": "system", "content": system}, {"role": "user", "content": words}]
            out_len = rng.randrange(max_tokens // 2, 3 * max_tokens // 2)
            s = Sample(f"bench-{u}-{n}", keys[u % len(keys)], messages, out_len)
            samples.append(s)
            await stream_once("127.0.0.1", base_port, s, conn)
            n += 1
        if conn:
            conn[1].close()

    await asyncio.gather(*(user(u) for u in range(num_streams)))
    return samples


def replay_ttft(config, samples: list[Sample], arrivals: dict[str, float]) -> tuple[dict[str, float], float]:
    """Model TTFT per request and the model's mean inter-token gap, from the same arrivals on a
    virtual clock: steps run back to back, requests join at their exact engine arrival times."""
    clock = VirtualClock()
    core = EngineCore(config, clock=clock)
    core.pin_prefixes()
    pending = sorted((arrivals[s.request_id], s) for s in samples if s.request_id in arrivals)
    i, requests = 0, {}

    def admit_until(t: float) -> None:
        nonlocal i
        while i < len(pending) and pending[i][0] <= t:
            at, s = pending[i]
            clock.advance_to(at)
            ids = core.tokenizer.encode(apply_chat_template(s.messages))
            requests[s.request_id] = core.add_request(
                tenant=core.authenticate(s.key).name,
                prompt_token_ids=ids,
                max_new_tokens=s.max_tokens,
                request_id=s.request_id,
                streaming=True,
            )
            i += 1

    while i < len(pending) or core.has_work():
        step = core.begin_step()
        if step is None:
            admit_until(pending[i][0] if i < len(pending) else clock.now())
            continue
        admit_until(step.t_end_s)
        clock.advance_to(step.t_end_s)
        core.end_step()
    ttft = {rid: r.first_token_s - r.arrival_s for rid, r in requests.items() if r.first_token_s is not None}
    gaps = [
        (r.finish_s - r.first_token_s) / (r.num_output_tokens - 1)
        for r in requests.values()
        if r.finish_s is not None and r.num_output_tokens > 1
    ]
    return ttft, float(np.mean(gaps))


def run_one(config_path: str, num_streams: int, seconds: float, warmup_s: float, max_tokens: int, seed: int) -> dict:
    config = load_config(config_path)
    keys = [k for t in config.tenants.values() if t.traffic_class.value == "interactive" for k in t.api_keys]
    pinned = [p.text for p in config.prefix_cache.public_prefixes if p.pinned]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    admin_key = secrets.token_urlsafe(24)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "serve",
            "--config",
            config_path,
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env={**os.environ, ADMIN_KEY_VAR: admin_key},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                if httpx.get(f"{base}/ready").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        started = time.time()
        samples = asyncio.run(
            drive(
                port,
                keys,
                pinned[0] if pinned else "You are helpful .",
                num_streams,
                warmup_s + seconds,
                max_tokens,
                seed,
            )
        )
        events = httpx.get(f"{base}/admin/events", headers={"Authorization": f"Bearer {admin_key}"}, timeout=60).json()
        metrics = httpx.get(f"{base}/metrics").text
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    cols = events["columns"]
    kind, rid, t, lat, label = (cols.index(c) for c in ("kind", "request_id", "t_s", "latency_s", "client_request_id"))
    offset = events["engine_clock_offset_unix"]
    # by the client's own id (its X-Request-Id label): the engine names requests itself
    label_of = {r[rid]: r[label] for r in events["rows"] if r[kind] in ("admitted", "queued")}
    arrivals = {r[label]: r[t] for r in events["rows"] if r[kind] in ("admitted", "queued")}
    engine_ttft = {label_of[r[rid]]: r[lat] for r in events["rows"] if r[kind] == "first_token"}
    num_tokens = {label_of[r[rid]]: r[cols.index("num_tokens")] for r in events["rows"] if r[kind] == "finished"}
    model_ttft, model_gap = replay_ttft(config, samples, arrivals)
    steady = [s for s in samples if s.sent_unix >= started + warmup_s]  # the opening burst is not steady state
    ok = [
        s
        for s in steady
        if s.status == 200 and s.first_unix is not None and s.request_id in engine_ttft and s.request_id in model_ttft
    ]
    engine = np.array([engine_ttft[s.request_id] for s in ok])
    model = np.array([model_ttft[s.request_id] for s in ok])
    client = np.array([s.first_unix - s.sent_unix for s in ok])
    intake = np.array([arrivals[s.request_id] + offset - s.sent_unix for s in ok])
    gaps = [
        (s.chunk_unix[-1] - s.first_unix) / (num_tokens[s.request_id] - 1)
        for s in ok
        if num_tokens.get(s.request_id, 0) > 1
    ]
    tokens = sum(num_tokens.get(s.request_id, 0) for s in ok)
    lag = [line for line in metrics.splitlines() if line.startswith("kvgate_engine_step_lag_seconds_")]
    p = lambda a, q: percentile(a, q) * 1000  # noqa: E731  ms
    return {
        "streams": num_streams,
        "seconds": seconds,
        "requests": len(steady),
        "completed": len(ok),
        "errors": sum(s.status != 200 for s in samples),
        "tokens_per_s": tokens / seconds,
        "engine_ttft_ms": {"p50": p(engine, 50), "p95": p(engine, 95)},
        "model_ttft_ms": {"p50": p(model, 50), "p95": p(model, 95)},
        "engine_added_ms": {"p50": p(engine - model, 50), "p95": p(engine - model, 95)},
        "client_added_ms": {"p50": p(client - engine, 50), "p95": p(client - engine, 95)},
        "client_intake_ms": {"p50": p(intake, 50), "p95": p(intake, 95)},
        "gap_ms": {
            "live": float(np.mean(gaps) * 1000),
            "model": model_gap * 1000,
            "ratio": float(np.mean(gaps)) / model_gap,
        },
        "step_lag_histogram": lag,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/default.toml")
    ap.add_argument("--streams", default="200", help="comma-separated stream counts")
    ap.add_argument("--seconds", type=float, default=20.0, help="measured seconds, after the warm-up")
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds after the opening burst not measured")
    ap.add_argument("--max-tokens", type=int, default=64, help="mean output length (uniform, ±50 %%)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    results = []
    for n in (int(x) for x in args.streams.split(",")):
        r = run_one(args.config, n, args.seconds, args.warmup, args.max_tokens, args.seed)
        results.append(r)
        print(
            f"streams {r['streams']:4d}  requests {r['completed']:5d}/{r['requests']:<5d} errors {r['errors']}  "
            f"{r['tokens_per_s']:7.0f} tok/s | TTFT p95: engine {r['engine_ttft_ms']['p95']:6.1f} ms, "
            f"model {r['model_ttft_ms']['p95']:6.1f} ms, engine-added {r['engine_added_ms']['p95']:6.1f} ms "
            f"(p50 {r['engine_added_ms']['p50']:5.1f}), client-added {r['client_added_ms']['p95']:6.1f} ms | "
            f"inter-token gap live/model {r['gap_ms']['live']:.1f}/{r['gap_ms']['model']:.1f} ms "
            f"= x{r['gap_ms']['ratio']:.2f}",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
