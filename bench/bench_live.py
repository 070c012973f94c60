"""The live server against a mock that does no KV work, driven by one streaming HTTP client:
what `kvgate serve` adds on top of its time model, per token and per request.

    .venv/bin/python bench/bench_live.py                      # 1/16/64/128/256 streams, ≈ 2 min
    .venv/bin/python bench/bench_live.py --streams 1,64 --seconds 4
    .venv/bin/python bench/bench_live.py --timer              # the step timer; engine step period
    .venv/bin/python bench/bench_live.py --intake             # 400 × 32K-token prompts at once

Client. An httpx streaming client reading SSE lines and parsing each chunk's JSON, as guidellm's
and aiperf's OpenAI backends do. guidellm and aiperf themselves need a Hugging Face tokenizer to
make their synthetic prompts, which an offline machine cannot download; this client sends the
same kind of load (N users, each sending its next streaming chat request when the last ends).

Servers. `kvgate serve` (default config: Llama-3.1-8B on an H100 time model) and a mock (this
file, `--serve-mock`): the same ASGI stack (uvicorn, httptools), no engine, no KV; each request
sleeps its TTFT, then sends one chunk per token every ITL, each built with `json.dumps` as a
mock server does. The two are measured interleaved at every stream count; the mock is given
kvgate's *modelled* TTFT and ITL at that count (from a zero-CPU replay of kvgate's own
arrivals on a virtual clock), so both send tokens at the same rate and the comparison is fair.

    added TTFT    client TTFT − modelled TTFT (kvgate: the replay's; mock: the TTFT it sleeps)
    CPU/token     the server process's CPU time over the round ÷ tokens the client received
    tokens/s      tokens the client received per second of the measured window
    gap ÷ ITL     P95 of the client's inter-chunk gaps ÷ modelled ITL (the replay's mean decode
                  gap; the mock's ITL)
    chunks/token  SSE content chunks ÷ tokens (1.00: every token its own chunk)

Targets (ratios in one run): gap ÷ ITL ≤ 1.2 at P95 up to 256 streams; kvgate's CPU per token ≤
the mock's at every count; kvgate's added TTFT P95 ≤ 0.5 × the mock's from 16 streams up. The
client shares the machine's cores with both servers, so on a busy machine every figure is high:
the ratios between the two servers are what the run can compare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import replay_ttft  # noqa: E402  (the zero-CPU replay of the same arrivals)

from record.query import percentile  # noqa: E402
from reference_engine import load_config  # noqa: E402
from reference_engine.config import ADMIN_KEY_VAR  # noqa: E402

MODEL = "llama-3.1-8b"


# --------------------------------------------------------------------------- the mock server
def mock_app():
    """An OpenAI-shaped streaming chat endpoint with no engine behind it (see the docstring).
    TTFT and ITL come per request in `X-Mock-Ttft-Ms` / `X-Mock-Itl-Ms`."""

    async def app(scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["path"] != "/v1/chat/completions":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        req = json.loads(body)
        headers = dict(scope["headers"])
        ttft_s = float(headers.get(b"x-mock-ttft-ms", b"20")) / 1000
        itl_s = float(headers.get(b"x-mock-itl-ms", b"10")) / 1000
        loop = asyncio.get_running_loop()
        t = loop.time() + ttft_s
        await asyncio.sleep(ttft_s)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
            }
        )
        rid, created = f"chatcmpl-mock-{secrets.token_hex(4)}", int(time.time())

        def chunk(delta: dict, finish: str | None) -> bytes:
            return (
                b"data: "
                + json.dumps(
                    {
                        "id": rid,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": req["model"],
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                    }
                ).encode()
                + b"\n\n"
            )

        await send(
            {"type": "http.response.body", "body": chunk({"role": "assistant", "content": ""}, None), "more_body": True}
        )
        for i in range(req.get("max_tokens", 16)):
            if i:
                t += itl_s
                await asyncio.sleep(max(0.0, t - loop.time()))
            await send(
                {
                    "type": "http.response.body",
                    "body": chunk({"content": f"{' ' if i else ''}tok{i}"}, None),
                    "more_body": True,
                }
            )
        await send(
            {"type": "http.response.body", "body": chunk({}, "length") + b"data: [DONE]\n\n", "more_body": False}
        )

    return app


def serve_mock(port: int) -> None:
    import uvicorn

    uvicorn.run(mock_app(), host="127.0.0.1", port=port, http="httptools", log_level="warning", access_log=False)


# ------------------------------------------------------------------------------- processes
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    name: str
    proc: subprocess.Popen
    base: str

    def cpu_s(self) -> float:
        """User + system CPU seconds of the server process so far (/proc/<pid>/stat)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def start(name: str, argv: list[str], ready_path: str, env: dict[str, str] | None = None) -> Server:
    port = free_port()
    proc = subprocess.Popen([sys.executable, *argv, "--port", str(port)], env={**os.environ, **(env or {})})
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + ready_path).status_code == 200:
                return Server(name, proc, base)
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{name} did not get ready within 60 s")


def start_kvgate(config_path: str, admin_key: str) -> Server:
    return start(
        "kvgate",
        ["-m", "harness.cli", "serve", "--config", config_path, "--log-level", "warning"],
        "/ready",
        {ADMIN_KEY_VAR: admin_key},
    )


def start_mock() -> Server:
    return start("mock", [str(Path(__file__).resolve()), "--serve-mock"], "/health")


# ---------------------------------------------------------------------------------- client
@dataclass
class Sample:
    request_id: str  # the client's label (X-Request-Id)
    key: str
    messages: list[dict]
    max_tokens: int
    sent: float = 0.0
    status: int = 0
    error: str | None = None  # a transport error instead of a response
    chunks: list[float] = field(default_factory=list)  # arrival of each SSE chunk with content

    @property
    def ttft_s(self) -> float | None:
        return self.chunks[0] - self.sent if self.chunks else None


async def stream_one(client: httpx.AsyncClient, base: str, s: Sample, headers: dict[str, str]) -> None:
    """One streaming chat request, read as an OpenAI client reads it: SSE lines, JSON per chunk."""
    body = {"model": MODEL, "messages": s.messages, "max_tokens": s.max_tokens, "stream": True}
    s.sent = time.time()
    async with client.stream(
        "POST",
        base + "/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {s.key}", "X-Request-Id": s.request_id, **headers},
    ) as r:
        s.status = r.status_code
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choices = json.loads(line[6:]).get("choices") or [{}]
            if choices[0].get("delta", {}).get("content"):
                s.chunks.append(time.time())


async def drive(
    base: str,
    keys: list[str],
    system: str,
    num_streams: int,
    seconds: float,
    max_tokens: int,
    tag: str,
    seed: int,
    headers: dict[str, str],
) -> list[Sample]:
    rng = random.Random(seed)
    samples: list[Sample] = []
    stop_at = time.monotonic() + seconds

    async def user(u: int, client: httpx.AsyncClient) -> None:
        n = 0
        await asyncio.sleep(rng.random() * min(1.0, seconds / 4))  # staggered starts: no lock-step waves
        while time.monotonic() < stop_at:
            words = " ".join(f"q{rng.randrange(10_000)}" for _ in range(rng.randrange(20, 60)))
            s = Sample(
                f"{tag}-{u}-{n}",
                keys[u % len(keys)],
                [{"role": "system", "content": system}, {"role": "user", "content": words}],
                max_tokens,
            )
            samples.append(s)
            try:
                await stream_one(client, base, s, headers)
            except httpx.TransportError as err:  # counted as an error (status 0), the user goes on
                s.status, s.error = 0, type(err).__name__
            n += 1

    limits = httpx.Limits(max_connections=num_streams + 8, max_keepalive_connections=num_streams + 8)
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:
        await asyncio.gather(*(user(u, client) for u in range(num_streams)))
    return samples


def gaps_s(samples: list[Sample]) -> np.ndarray:
    return np.concatenate([np.diff(s.chunks) for s in samples if len(s.chunks) > 1] or [np.zeros(0)])


# ------------------------------------------------------------------------------ live rounds
def kvgate_model(server: Server, admin_key: str, config, samples: list[Sample]) -> tuple[dict[str, float], float, dict]:
    """Modelled TTFT per label and the modelled decode gap, from a replay of kvgate's arrivals;
    and the engine's output token count per label."""
    events = httpx.get(
        server.base + "/admin/events", headers={"Authorization": f"Bearer {admin_key}"}, timeout=120
    ).json()
    cols = events["columns"]
    kind, rid, t, label = (cols.index(c) for c in ("kind", "request_id", "t_s", "client_request_id"))
    ours = {s.request_id for s in samples}
    label_of = {r[rid]: r[label] for r in events["rows"] if r[kind] in ("admitted", "queued") and r[label] in ours}
    arrivals = {
        label_of[r[rid]]: r[t] for r in events["rows"] if r[rid] in label_of and r[kind] in ("admitted", "queued")
    }
    num_tokens = {
        label_of[r[rid]]: r[cols.index("num_tokens")]
        for r in events["rows"]
        if r[kind] == "finished" and r[rid] in label_of
    }
    model_ttft, model_gap = replay_ttft(config, samples, arrivals)
    return model_ttft, model_gap, num_tokens


def summarize(
    name: str,
    samples: list[Sample],
    warmup_until: float,
    window_s: float,
    cpu_s: float,
    model_ttft: dict[str, float],
    itl_s: float,
    num_tokens: dict[str, int] | None,
) -> dict:
    steady = [
        s for s in samples if s.sent >= warmup_until and s.status == 200 and s.chunks and s.request_id in model_ttft
    ]
    added = np.array([s.ttft_s - model_ttft[s.request_id] for s in steady]) * 1000
    gaps = gaps_s(steady)
    received = sum(len(s.chunks) for s in samples)
    in_window = sum(sum(1 for c in s.chunks if c >= warmup_until) for s in samples)
    out = {
        "server": name,
        "requests": len(steady),
        "errors": sum(s.status != 200 for s in samples if s.status or s.error),
        "tokens_per_s": in_window / window_s,
        "cpu_us_per_token": cpu_s / max(1, received) * 1e6,
        "added_ttft_ms": {"p50": percentile(added, 50), "p95": percentile(added, 95)},
        "gap_ms": {"p50": percentile(gaps, 50) * 1000, "p95": percentile(gaps, 95) * 1000},
        "itl_ms": itl_s * 1000,
        "gap_p95_over_itl": percentile(gaps, 95) / itl_s,
    }
    if num_tokens is not None:
        done = [s for s in samples if s.request_id in num_tokens and s.status == 200]
        out["chunks_per_token"] = sum(len(s.chunks) for s in done) / max(1, sum(num_tokens[s.request_id] for s in done))
    return out


def run_level(
    kvgate: Server,
    mock: Server,
    admin_key: str,
    config,
    keys: list[str],
    system: str,
    num_streams: int,
    seconds: float,
    warmup_s: float,
    max_tokens: int,
    seed: int,
) -> list[dict]:
    total = warmup_s + seconds
    tag = f"L{num_streams}-{secrets.token_hex(2)}"
    cpu0, t0 = kvgate.cpu_s(), time.time()
    ks = asyncio.run(drive(kvgate.base, keys, system, num_streams, total, max_tokens, tag, seed, {}))
    k_cpu = kvgate.cpu_s() - cpu0
    model_ttft, model_gap, num_tokens = kvgate_model(kvgate, admin_key, config, ks)
    kv = summarize("kvgate", ks, t0 + warmup_s, seconds, k_cpu, model_ttft, model_gap, num_tokens)
    ttft_model_s = statistics.median(model_ttft.values()) if model_ttft else 0.02
    mock_headers = {"X-Mock-Ttft-Ms": f"{ttft_model_s * 1000:.3f}", "X-Mock-Itl-Ms": f"{model_gap * 1000:.3f}"}
    cpu0, t0 = mock.cpu_s(), time.time()
    ms = asyncio.run(drive(mock.base, keys, system, num_streams, total, max_tokens, tag + "m", seed, mock_headers))
    m_cpu = mock.cpu_s() - cpu0
    mk = summarize("mock", ms, t0 + warmup_s, seconds, m_cpu, {s.request_id: ttft_model_s for s in ms}, model_gap, None)
    return [kv, mk]


def live(args) -> list[dict]:
    config = load_config(args.config)
    keys = [k for t in config.tenants.values() if t.traffic_class.value == "interactive" for k in t.api_keys]
    pinned = [p.text for p in config.prefix_cache.public_prefixes if p.pinned]
    admin_key = secrets.token_urlsafe(24)
    kvgate, mock = start_kvgate(args.config, admin_key), start_mock()
    rows = []
    try:
        for n in (int(x) for x in args.streams.split(",")):
            kv, mk = run_level(
                kvgate,
                mock,
                admin_key,
                config,
                keys,
                pinned[0] if pinned else "You are helpful .",
                n,
                args.seconds,
                args.warmup,
                args.max_tokens,
                args.seed,
            )
            rows.append({"streams": n, "kvgate": kv, "mock": mk})
            print(
                f"streams {n:4d} | kvgate {kv['tokens_per_s']:6.0f} tok/s, CPU {kv['cpu_us_per_token']:5.0f} µs/tok, "
                f"added TTFT p95 {kv['added_ttft_ms']['p95']:6.1f} ms, gap p95 {kv['gap_ms']['p95']:5.1f} ms "
                f"/ ITL {kv['itl_ms']:4.1f} = {kv['gap_p95_over_itl']:.2f}, chunks/token "
                f"{kv.get('chunks_per_token', 0):.2f}, errors {kv['errors']} | mock {mk['tokens_per_s']:6.0f} tok/s, "
                f"CPU "
                f"{mk['cpu_us_per_token']:5.0f} µs/tok, added TTFT p95 {mk['added_ttft_ms']['p95']:6.1f} ms, gap "
                f"p95/ITL {mk['gap_p95_over_itl']:.2f}, errors {mk['errors']} | kvgate/mock: CPU "
                f"{kv['cpu_us_per_token'] / mk['cpu_us_per_token']:.2f}, added TTFT "
                f"{kv['added_ttft_ms']['p95'] / max(1e-3, mk['added_ttft_ms']['p95']):.2f}",
                flush=True,
            )
    finally:
        kvgate.stop()
        mock.stop()
    return rows


# ---------------------------------------------------------------------------- step timer
def timer_accuracy(step_ms: list[float], num: int) -> dict:
    """How late an asyncio timer fires for step-length sleeps (what the engine loop now does),
    against the old way (sleep to 1.5 ms before the end, then spin), with the CPU each costs."""

    async def run(spin: bool) -> tuple[np.ndarray, float]:
        late = []
        cpu = time.process_time()
        for i in range(num):
            delay = step_ms[i % len(step_ms)] / 1000
            end = time.monotonic() + delay
            if spin:
                await asyncio.sleep(max(0.0, delay - 0.0015))
                while time.monotonic() < end:
                    await asyncio.sleep(0)
            else:
                await asyncio.sleep(delay)
            late.append(time.monotonic() - end)
        return np.array(late) * 1e6, (time.process_time() - cpu) / num * 1e6

    out = {}
    for name, spin in (("sleep", False), ("sleep+spin", True)):
        late, cpu_us = asyncio.run(run(spin))
        out[name] = {"late_us": {q: percentile(late, q) for q in (50, 95, 99)}, "cpu_us_per_step": cpu_us}
        print(
            f"step timer {name:>10}: late p50 {out[name]['late_us'][50]:6.0f} µs, p95 {out[name]['late_us'][95]:6.0f}"
            f" µs, p99 {out[name]['late_us'][99]:6.0f} µs; CPU {cpu_us:5.0f} µs per step",
            flush=True,
        )
    return out


def engine_step_timing(config_path: str, num_requests: int, max_tokens: int) -> dict:
    """One stream through an in-process `EngineLoop` on the real clock (no HTTP): the engine's
    mean step period (start to next start, on its own clock and on the wall clock) ÷ the mean
    modelled step duration. 1.0 means a late timer wake-up did not delay the next step."""
    from reference_engine import EngineCore
    from reference_engine.server.engine_loop import EngineLoop

    config = load_config(config_path)
    tenant = next(iter(config.tenants))
    steps: list[tuple[float, float, float, int]] = []  # (wall at begin, modelled start, end, tokens)

    async def run() -> float:
        loop = EngineLoop(EngineCore(config))
        begin = loop.core.begin_step

        def recording(*args, **kwargs):
            wall = time.monotonic()
            step = begin(*args, **kwargs)
            if step is not None:
                steps.append((wall, step.t_start_s, step.t_end_s, step.plan.num_tokens))
            return step

        loop.core.begin_step = recording  # type: ignore[method-assign]
        await loop.start()
        await asyncio.sleep(0.5)  # past the warm-up
        cpu = time.process_time()
        for _ in range(num_requests):
            stream = loop.submit(
                tenant=tenant, prompt_token_ids=list(range(64)), max_new_tokens=max_tokens, streaming=True
            )
            while not stream.finished:
                await stream.wait(len(stream.request.output_token_ids))
        cpu = time.process_time() - cpu
        await loop.stop()
        return cpu

    cpu_s = asyncio.run(run())
    # consecutive decode steps (one token each): a request's prefill starts when it arrives
    pairs = [(a, b) for a, b in zip(steps, steps[1:]) if a[3] == b[3] == 1]
    modelled = statistics.fmean(b[2] - b[1] for _, b in pairs)
    engine_period = statistics.fmean(b[1] - a[1] for a, b in pairs)
    wall_period = statistics.fmean(b[0] - a[0] for a, b in pairs)
    out = {
        "steps": len(pairs),
        "modelled_ms": modelled * 1000,
        "engine_period_over_modelled": engine_period / modelled,
        "wall_period_over_modelled": wall_period / modelled,
        "cpu_us_per_step": cpu_s / max(1, len(steps)) * 1e6,
    }
    print(
        f"engine loop, 1 stream: {out['steps']} decode steps, modelled {out['modelled_ms']:.2f} ms; step period "
        f"÷ modelled: engine clock {out['engine_period_over_modelled']:.3f}, wall clock "
        f"{out['wall_period_over_modelled']:.3f}; CPU {out['cpu_us_per_step']:.0f} µs per step",
        flush=True,
    )
    return out


# --------------------------------------------------------------------------------- intake
async def raw_request(port: int, key: str, body: bytes, label: str) -> tuple[float, int, float]:
    """(sent, status, answered) of one non-streaming request on a raw socket: no client-side
    parsing in the way of 400 bodies of 220 KB."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nX-Request-Id: {label}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    sent = time.time()
    writer.write(head + body)
    status_line = await reader.readline()
    answered = time.time()
    writer.close()
    return sent, int(status_line.split()[1]) if status_line else 0, answered


def intake(args) -> dict:
    """400 prompts of 32K tokens at once from the interactive tenants, beside one system-class
    stream: how long each waits for its first decision (the engine's admitted, queued or
    rejected event, or a status the server sent before it), and the system stream's longest gap."""
    config = load_config(args.config)
    keys = [k for t in config.tenants.values() if t.traffic_class.value == "interactive" for k in t.api_keys]
    system_key = next(k for t in config.tenants.values() if t.traffic_class.value == "system" for k in t.api_keys)
    rng = random.Random(args.seed)
    bodies = [
        json.dumps(
            {
                "model": MODEL,
                "max_tokens": 64,
                "messages": [
                    {
                        "role": "user",
                        "content": " ".join(f"w{rng.randrange(1 << 20)}" for _ in range(args.intake_tokens - 4)),
                    }
                ],
            }
        ).encode()
        for _ in range(args.intake_requests)
    ]
    admin_key = secrets.token_urlsafe(24)
    kvgate = start_kvgate(args.config, admin_key)
    port = int(kvgate.base.rsplit(":", 1)[1])
    try:

        async def burst() -> tuple[list, Sample]:
            other = Sample("intake-system", system_key, [{"role": "user", "content": "keep talking"}], 400)
            async with httpx.AsyncClient(timeout=120) as client:
                watcher = asyncio.create_task(stream_one(client, kvgate.base, other, {}))
                await asyncio.sleep(0.5)  # the system stream is flowing before the burst
                results = await asyncio.gather(
                    *(raw_request(port, keys[i % len(keys)], b, f"intake-{i}") for i, b in enumerate(bodies))
                )
                await watcher
            return results, other

        results, other = asyncio.run(burst())
        events = httpx.get(
            kvgate.base + "/admin/events", headers={"Authorization": f"Bearer {admin_key}"}, timeout=120
        ).json()
    finally:
        kvgate.stop()
    cols = events["columns"]
    kind, t, label = (cols.index(c) for c in ("kind", "t_s", "client_request_id"))
    decided = {
        r[label]: r[t] + events["engine_clock_offset_unix"]
        for r in events["rows"]
        if r[kind] in ("admitted", "queued", "rejected") and r[label]
    }
    waits, statuses = [], {}
    for i, (sent, status, answered) in enumerate(results):
        statuses[status] = statuses.get(status, 0) + 1
        at = decided.get(f"intake-{i}")
        waits.append(((at if at is not None else answered) - sent) * 1000)
    burst_start = min(sent for sent, _, _ in results)
    other_gaps = np.diff([burst_start, *[c for c in other.chunks if c >= burst_start]]) * 1000
    out = {
        "requests": len(results),
        "statuses": statuses,
        "first_decision_ms": {q: percentile(np.array(waits), q) for q in (50, 95, 99)},
        "system_stream_max_gap_ms": float(other_gaps.max()) if other_gaps.size else None,
        "system_stream_tokens": len(other.chunks),
    }
    print(
        f"intake: {out['requests']} × {args.intake_tokens}-token prompts, statuses {statuses}; first decision "
        f"p50 {out['first_decision_ms'][50]:.0f} ms, p95 {out['first_decision_ms'][95]:.0f} ms, p99 "
        f"{out['first_decision_ms'][99]:.0f} ms; system stream: {out['system_stream_tokens']} tokens, longest gap "
        f"after the burst began {out['system_stream_max_gap_ms']:.0f} ms",
        flush=True,
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/default.toml")
    ap.add_argument("--streams", default="1,16,64,128,256", help="comma-separated stream counts")
    ap.add_argument("--seconds", type=float, default=5.0, help="measured seconds per server and stream count")
    ap.add_argument("--warmup", type=float, default=1.5, help="seconds before the measured window")
    ap.add_argument("--max-tokens", type=int, default=64, help="output tokens per request")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timer", action="store_true", help="only the step timer and the engine's step period")
    ap.add_argument("--intake", action="store_true", help="only the burst of long prompts")
    ap.add_argument("--intake-requests", type=int, default=400)
    ap.add_argument("--intake-tokens", type=int, default=32_000)
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--serve-mock", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_mock:
        serve_mock(args.port)
        return
    if args.timer:
        result: object = {
            "timer": timer_accuracy([6.0, 7.5, 9.0, 12.0], 400),
            "engine": engine_step_timing(args.config, 4, 128),
        }
    elif args.intake:
        result = intake(args)
    else:
        result = live(args)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
