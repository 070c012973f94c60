"""`kvgate demo`: push a mixed load through the engine core in-process and show what happened.

No server, no sockets: a seeded mix of short interactive Q&A, shared-prefix chats, 32K-token
prompts, long outputs and a batch flood arrives on a virtual clock; the table shows, per traffic
class, what the engine admitted, queued, rejected, preempted and how fast it answered.
"""

from __future__ import annotations

import argparse
import random
from collections import Counter, defaultdict

from rich.console import Console
from rich.table import Table

from harness.loadgen.prompts import DEFAULT_SYSTEM_PROMPT
from record.query import percentile
from reference_engine import EngineCore, RequestError, VirtualClock, load_config
from reference_engine.tokenizer import apply_chat_template


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="push a mixed load through the engine core in-process and print a summary")
    p.add_argument("--config", default="configs/default.toml", help="engine config (TOML)")
    p.add_argument("--seconds", type=float, default=60.0, help="virtual seconds of arrivals")
    p.add_argument("--rate", type=float, default=12.0, help="requests per virtual second")
    p.add_argument("--seed", type=int, default=7)
    p.set_defaults(func=run)


def _workload(rng: random.Random, seconds: float, rate: float):
    """(arrival_s, tenant, prompt text, max_tokens, label) tuples, sorted by arrival."""
    t, out = 0.0, []
    interactive = ["acme", "globex", "initech", "umbrella"]
    while t < seconds:
        t += rng.expovariate(rate)
        kind = rng.choices(["qa", "shared", "long_prompt", "long_output", "batch"], [40, 25, 5, 10, 20])[0]
        tenant = "batchco" if kind == "batch" else rng.choice(interactive)
        words = {"qa": 200, "shared": 400, "long_prompt": 32_000, "long_output": 300, "batch": 3000}[kind]
        body = " ".join(f"w{rng.randrange(50_000)}" for _ in range(words))
        system = DEFAULT_SYSTEM_PROMPT if kind == "shared" else f"Context {rng.randrange(10**9)} ."
        prompt = apply_chat_template([{"role": "system", "content": system}, {"role": "user", "content": body}])
        max_tokens = {"qa": 128, "shared": 128, "long_prompt": 256, "long_output": 2048, "batch": 512}[kind]
        out.append((t, tenant, prompt, max_tokens, kind))
    return out


def run(args: argparse.Namespace) -> int:
    console = Console()
    clock = VirtualClock()
    core = EngineCore(load_config(args.config), clock=clock)
    core.pin_prefixes()
    arrivals = _workload(random.Random(args.seed), args.seconds, args.rate)
    label_of: dict[str, str] = {}  # request id -> its traffic kind
    rejected: Counter[tuple[str, str]] = Counter()  # (kind, error code) -> refusals
    i = 0
    with console.status("running the engine on a virtual clock..."):
        while i < len(arrivals) or core.has_work():
            while i < len(arrivals) and arrivals[i][0] <= clock.now():
                _, tenant, prompt, max_tokens, kind = arrivals[i]
                try:
                    r = core.add_request(
                        tenant=tenant, prompt_token_ids=core.tokenizer.encode(prompt), max_new_tokens=max_tokens
                    )
                    label_of[r.request_id] = kind
                except RequestError as err:
                    rejected[(kind, err.code)] += 1
                i += 1
            next_arrival = arrivals[i][0] if i < len(arrivals) else float("inf")
            out = core.step(until_s=next_arrival)
            clock.advance_to(out.t_end_s if not out.idle else next_arrival)
    _print_summary(console, core, label_of, rejected)
    return 0


def _print_summary(
    console: Console, core: EngineCore, label_of: dict[str, str], rejected: Counter[tuple[str, str]]
) -> None:
    ttft: defaultdict[str, list[float]] = defaultdict(list)
    done: Counter[tuple[str, str | None]] = Counter()  # (kind, finish reason)
    preempted: Counter[str] = Counter()
    queued: Counter[str] = Counter()
    peak = 0.0
    for ev in core.events:
        kind = None if ev.request_id is None else label_of.get(ev.request_id)
        if ev.kind.value == "first_token" and kind and ev.latency_s is not None:
            ttft[kind].append(ev.latency_s)
        elif ev.kind.value == "finished" and kind:
            done[(kind, ev.reason)] += 1
        elif ev.kind.value == "preempted" and kind:
            preempted[kind] += 1
        elif ev.kind.value == "queued" and kind:
            queued[kind] += 1
        elif ev.kind.value == "watermark":
            peak = max(peak, ev.usage or 0.0)
    table = Table(title=f"kvgate demo — policy {core.policy.name}, config {core.digest}")
    for col in ("traffic", "finished", "queued", "rejected", "preempted", "TTFT p50 ms", "TTFT p95 ms"):
        table.add_column(col, justify="right" if col != "traffic" else "left")
    for kind in ("qa", "shared", "long_prompt", "long_output", "batch"):
        finished = sum(n for (k, _), n in done.items() if k == kind)
        rej = ", ".join(f"{code} {n}" for (k, code), n in rejected.items() if k == kind) or "0"
        lat = [t * 1000 for t in ttft[kind]]
        p50, p95 = (f"{percentile(lat, 50):.0f}", f"{percentile(lat, 95):.0f}") if lat else ("-", "-")
        table.add_row(kind, str(finished), str(queued[kind]), rej, str(preempted[kind]), p50, p95)
    console.print(table)
    s = core.snapshot()
    console.print(
        f"pool {s.num_blocks} blocks of {core.pool.block_tokens} tokens; OOM events "
        f"{core.scheduler.num_oom}; prefix hits {core.pool.num_prefix_hits}/{core.pool.num_prefix_queries} "
        f"blocks; highest watermark level entered at usage {peak:.0%}; "
        f"{core.num_steps} engine steps in {core.clock.now():.1f} virtual s"
    )
