"""Open-loop requests per second that one locust worker process sustains, and two, against a mock
that answers at once; the single-process sender kvgate had before, in the same run, as the anchor.

    .venv/bin/python bench/bench_open_loop.py                        # ≈ 5 min
    .venv/bin/python bench/bench_open_loop.py --seconds 4 --start-rate 200 --senders locust-1,locust-2

Sustained: the highest constant rate at which every scheduled request was answered (ok) and the
P99 client lag stayed within 50 ms (`MAX_LAG_P99_MS`, the bound a run is judged by) over a
`--seconds` schedule. Rates rise by `--factor` from `--start-rate` until one fails, then the gap
between the last that passed and the first that failed is bisected `--refine` times.

Senders, each run in processes of its own against the same mock:

    locust-1   python -m locust -f harness/loadgen/open_loop_locustfile.py --processes 1: the master
               makes and deals the schedule, one worker process sends it
    locust-2   the same with --processes 2
    old        the single-process thread pool kvgate sent open loops with before this engine
               (harness/loadgen/open_loop.py and threaded_transport.py), read from git history at
               the commit before the one that deleted them (`git show <commit>^:<path>`) into a
               temporary package, and run here as kvgate ran it: `dispatch` feeding
               `OpenLoopClient` (256 threads, one httpx client), through the same measurement core

The mock (`--serve-mock`, its own process): an asyncio server (uvloop) that answers every POST with
one fixed SSE answer (a content chunk, a finish, [DONE]) as soon as the request is in: no model,
no KV, a few microseconds of CPU a request. Every request is short_qa's chat (64 prompt tokens, 16
answer tokens), from one tenant.

Reported per sender: the sustained rate, and at it the P50/P99 lag and how many were answered;
then the ratios — locust-2 ÷ locust-1 (the goal: ≥ 1.7) and locust-1 ÷ old (≥ 1: no slower per
process). The machine's cores are shared by the mock, the master and the senders: on two cores
the figures are those of a crowded machine, and the ratios are what one run can compare.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import math
import re
import socket
import subprocess
import sys
import tempfile
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import cast

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.loadgen.client_lag import MAX_LAG_P99_MS  # noqa: E402
from harness.locust_process import OPEN_LOOP_LOCUSTFILE  # noqa: E402
from record.query import percentile  # noqa: E402

OLD_MODULES = ("harness/loadgen/threaded_transport.py", "harness/loadgen/open_loop.py")
PROMPT_TOKENS, MAX_TOKENS = 64, 16
TENANTS = "bench=sk-bench:interactive"
MIN_ANSWERED = 1.0
SSE = (
    b'data: {"id":"c","choices":[{"delta":{"content":"yes"}}]}\n\n'
    b'data: {"id":"c","choices":[{"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)
ANSWER = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n%s" % (len(SSE), SSE)


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0, help="schedule length of each trial")
    p.add_argument("--start-rate", type=float, default=100.0, help="first rate tried, requests/s")
    p.add_argument("--factor", type=float, default=2.0, help="rates rise by this until one fails")
    p.add_argument("--refine", type=int, default=3, help="bisections between the last pass and the first failure")
    p.add_argument("--max-rate", type=float, default=20000.0, help="stop rising here")
    p.add_argument("--senders", default="old,locust-1,locust-2", help="which senders, comma-separated")
    p.add_argument("--serve-mock", type=int, metavar="PORT", help=argparse.SUPPRESS)
    p.add_argument("--old-sender", nargs=3, metavar=("URL", "RATE", "OUT"), help=argparse.SUPPRESS)
    return p.parse_args()


class _Mock(asyncio.Protocol):
    """HTTP/1.1 keep-alive: every request (headers and Content-Length body) gets ANSWER."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport, self.buffer = cast(asyncio.WriteTransport, transport), b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            length = re.search(rb"(?i)content-length:\s*(\d+)", self.buffer[:end])
            total = end + 4 + (int(length.group(1)) if length else 0)
            if len(self.buffer) < total:
                return
            self.buffer = self.buffer[total:]
            self.transport.write(ANSWER)


def serve_mock(port: int) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(_Mock, "127.0.0.1", port, backlog=4096)
        await server.serve_forever()

    asyncio.run(main())


def load_old_sender() -> types.ModuleType:
    """The deleted sender, from the commit before the one that deleted it, as a temporary package."""
    deleted = subprocess.run(
        ["git", "log", "--diff-filter=D", "--format=%H", "-1", "--", OLD_MODULES[1]],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    package = types.ModuleType("old_sender")
    package.__path__ = []
    sys.modules["old_sender"] = package
    module = package
    for path in OLD_MODULES:
        source = subprocess.run(
            ["git", "show", f"{deleted}^:{path}"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout
        source = source.replace("harness.loadgen.threaded_transport", "old_sender.threaded_transport")
        name = f"old_sender.{Path(path).stem}"
        spec = importlib.util.spec_from_loader(name, loader=None)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        exec(compile(source, f"{deleted[:10]}^:{path}", "exec"), module.__dict__)
    return module  # open_loop, loaded last


def run_old_sender(url: str, rate: float, seconds: float) -> list[float]:
    """Lags (s) of one constant-rate schedule sent by the old sender, as kvgate ran it."""
    from harness.loadgen.exchange import Call
    from harness.loadgen.prompts import chat_prompt
    from harness.loadgen.tenants import parse_tenants

    old = load_old_sender()
    tenant = parse_tenants(TENANTS)[0]
    arrivals = (
        old.Arrival(
            n / rate,
            Call(
                request_id=f"old-{n}",
                scenario="open_loop_chat",
                phase="load",
                tenant=tenant,
                model="m",
                prompt=chat_prompt(PROMPT_TOKENS, seed=f"old-{n}"),
                max_tokens=MAX_TOKENS,
            ),
        )
        for n in range(int(rate * seconds))
    )
    rows: list[dict] = []
    client = old.OpenLoopClient(url, timeout_s=30.0, max_in_flight=256, origin_unix=time.time(), on_row=rows.append)
    try:
        old.dispatch(arrivals, client.submit)
        client.drain(60.0)
    finally:
        client.close()
    return [r["sent_s"] - r["intended_s"] if r["status"] == "ok" else math.inf for r in rows]


@dataclass(frozen=True)
class Trial:
    rate: float
    num_scheduled: int
    num_ok: int
    p50_ms: float
    p99_ms: float

    @property
    def passed(self) -> bool:
        return self.num_ok >= MIN_ANSWERED * self.num_scheduled and self.p99_ms <= MAX_LAG_P99_MS


def trial(sender: str, url: str, rate: float, seconds: float) -> Trial:
    num = int(rate * seconds)
    with tempfile.TemporaryDirectory(prefix="bench-open-loop-") as tmp:
        out = Path(tmp) / "rows"
        if sender == "old":
            cmd = [sys.executable, __file__, "--old-sender", url, str(rate), str(out), "--seconds", str(seconds)]
            subprocess.run(cmd, check=True, timeout=seconds + 120)
            lags = json.loads(out.read_text())
        else:
            processes = sender.split("-")[1]
            cmd = [sys.executable, "-m", "locust", "-f", str(OPEN_LOOP_LOCUSTFILE), "--headless", "--host", url]
            cmd += ["--processes", processes, "--only-summary", "--stop-timeout", "5"]
            cmd += ["--kvgate-rate", str(rate), "--kvgate-arrivals", "constant", "--kvgate-schedule-s", str(seconds)]
            cmd += ["--kvgate-requests-csv", str(out), "--kvgate-model", "m", "--kvgate-tenants", TENANTS]
            cmd += ["--kvgate-prompt-tokens", str(PROMPT_TOKENS), "--kvgate-max-tokens", str(MAX_TOKENS)]
            subprocess.run(cmd, check=True, timeout=seconds + 180, capture_output=True)
            lags = _csv_lags(out)
    ok = [lag for lag in lags if math.isfinite(lag)]
    ms = [lag * 1000 for lag in lags] or [math.inf]
    return Trial(rate, num, len(ok), percentile(ms, 50), percentile(ms, 99))


def _csv_lags(path: Path) -> list[float]:
    import pandas as pd

    rows = pd.read_csv(path)
    lag = rows["sent_s"] - rows["intended_s"]
    return [float(v) if status == "ok" else math.inf for v, status in zip(lag, rows["status"])]


def sustained(sender: str, url: str, args: argparse.Namespace) -> tuple[Trial | None, list[Trial]]:
    """The highest passing trial of the rising-then-bisected rates, and every trial run."""
    trials: list[Trial] = []
    best: Trial | None = None
    rate, failed = args.start_rate, None
    while rate <= args.max_rate:
        t = trial(sender, url, rate, args.seconds)
        trials.append(t)
        _show(sender, t)
        if not t.passed:
            failed = rate
            break
        best, rate = t, rate * args.factor
    for _ in range(args.refine if failed is not None else 0):
        low = best.rate if best is not None else 0.0
        rate = (low + failed) / 2 if failed is not None else low
        t = trial(sender, url, rate, args.seconds)
        trials.append(t)
        _show(sender, t)
        if t.passed:
            best = t
        else:
            failed = rate
    return best, trials


def _show(sender: str, t: Trial) -> None:
    print(
        f"  {sender:9s} {t.rate:8.0f}/s  answered {t.num_ok:6d}/{t.num_scheduled:<6d} lag P50 {t.p50_ms:7.1f} ms "
        f"P99 {t.p99_ms:7.1f} ms  {'pass' if t.passed else 'FAIL'}",
        flush=True,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    args = _parse()
    if args.serve_mock is not None:
        serve_mock(args.serve_mock)
        return
    if args.old_sender is not None:
        url, rate, out = args.old_sender
        Path(out).write_text(json.dumps(run_old_sender(url, float(rate), args.seconds)))
        return
    port = free_port()
    mock = subprocess.Popen([sys.executable, __file__, "--serve-mock", str(port)])
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        print(f"open-loop senders against a mock that answers at once; {args.seconds:g} s schedules, constant rates")
        results = {}
        for sender in args.senders.split(","):
            results[sender], _ = sustained(sender, url, args)
    finally:
        mock.terminate()
        mock.wait()
    print(f"\nsustained (every request answered, P99 lag ≤ {MAX_LAG_P99_MS:.0f} ms):")
    for sender, best in results.items():
        print(f"  {sender:9s} " + (f"{best.rate:8.0f} requests/s (P99 lag {best.p99_ms:.1f} ms)" if best else "none"))
    rate = {s: (b.rate if b else 0.0) for s, b in results.items()}
    if rate.get("locust-1"):
        if "locust-2" in rate:
            print(f"  locust-2 ÷ locust-1: {rate['locust-2'] / rate['locust-1']:.2f} (goal ≥ 1.7)")
        if rate.get("old"):
            print(f"  locust-1 ÷ old sender: {rate['locust-1'] / rate['old']:.2f} (goal ≥ 1)")


if __name__ == "__main__":
    main()
