"""The replicas of a fleet behind a gateway: named on the command line, or the reference engine's workers.

    spec = parse_replica("http://10.0.0.5:8000,kv-events=tcp://10.0.0.5:5557,log=/var/log/a.log")
    specs = parse_replicas(["http://a:8000", "http://b:8000,name=b"])   # names must differ
    check_replicas(specs, key)        # preflight: every replica answers, else one line naming it
    specs = worker_replicas(admin)    # `kvgate serve --workers N`: each worker, from /admin/workers

`kvgate run --target GATEWAY --replica SPEC` (repeatable) sends the load to the gateway and
reads each replica as `--metrics-url`, `--kv-events` and `--target-log` read a single target:

    URL[,metrics=URL][,kv-events=ENDPOINT][,log=FILE][,name=NAME]

URL is the replica's root (its /health is watched); `metrics` defaults to URL/metrics ('' for
none); `kv-events` is vLLM's KV event endpoint as `--kv-events` takes it; `log` its log file;
`name` what the record calls it (default: the URL's host:port). The reference engine's workers
are read the same way: `worker<N>` at the loopback port the router lists for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from harness.collectors.admin import AdminApi
from harness.collectors.prometheus import bearer
from record.errors import KvgateError
from record.fleet import FLEET

PREFLIGHT_TIMEOUT_S = 10.0
OPTIONS = ("metrics", "kv-events", "log", "name")


class ReplicaSpecError(KvgateError):
    """A --replica that cannot be read: the message says which part and the form it takes."""


class ReplicaUnreachable(KvgateError):
    """A replica did not answer at preflight; the message names it."""


@dataclass(frozen=True, kw_only=True)
class ReplicaSpec:
    """Where one replica is read. `worker`: the reference engine's worker index behind it."""

    name: str
    url: str
    metrics_url: str
    kv_events: str = ""
    log: Path | None = None
    worker: int | None = None

    def describe(self) -> dict[str, Any]:
        """meta.target.replicas[i] (no key: a replica is read with the target's)."""
        return {
            "name": self.name,
            "url": self.url,
            "metrics_url": self.metrics_url,
            "kv_events": self.kv_events,
            "log": str(self.log) if self.log else "",
            "worker": self.worker,
        }


def parse_replica(text: str) -> ReplicaSpec:
    """One --replica value (module docstring)."""
    url, *parts = (part.strip() for part in text.split(","))
    split = urlsplit(url)
    if split.scheme not in ("http", "https") or not split.netloc:
        raise ReplicaSpecError(f"--replica {text!r}: it starts with the replica's URL, http://HOST:PORT")
    options: dict[str, str] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or key not in OPTIONS:
            raise ReplicaSpecError(
                f"--replica {text!r}: {part!r} is not one of {', '.join(f'{o}=...' for o in OPTIONS)}"
            )
        options[key] = value
    base = url.rstrip("/")
    name = options.get("name") or split.netloc
    if name == FLEET:
        raise ReplicaSpecError(f"--replica {text!r}: the name {FLEET!r} is the fleet's own; give name=...")
    return ReplicaSpec(
        name=name,
        url=base,
        metrics_url=options.get("metrics", f"{base}/metrics"),
        kv_events=options.get("kv-events", ""),
        log=Path(options["log"]) if options.get("log") else None,
    )


def parse_replicas(texts: Iterable[str]) -> tuple[ReplicaSpec, ...]:
    specs = tuple(parse_replica(text) for text in texts)
    names = [s.name for s in specs]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise ReplicaSpecError(f"--replica: the name {twice[0]!r} is given twice; give each replica name=...")
    return specs


def check_replicas(specs: Iterable[ReplicaSpec], key: str, *, transport: httpx.BaseTransport | None = None) -> None:
    """Every replica answers where it is read: its metrics URL with Prometheus' 200, else its
    /health. Raises ReplicaUnreachable naming the first that does not (`transport`: a test seam)."""
    with httpx.Client(timeout=PREFLIGHT_TIMEOUT_S, headers=bearer(key), transport=transport) as client:
        for spec in specs:
            url = spec.metrics_url or f"{spec.url}/health"
            try:
                status = client.get(url).status_code
            except httpx.HTTPError as err:
                raise ReplicaUnreachable(
                    f"replica {spec.name} is unreachable: GET {url}: {type(err).__name__}: {err}"
                ) from err
            if status != 200:
                raise ReplicaUnreachable(f"replica {spec.name} does not answer: GET {url}: HTTP {status}")


def worker_replicas(admin: AdminApi) -> tuple[ReplicaSpec, ...]:
    """The reference engine's workers as replicas, from its /admin/workers: a router's each at
    its loopback port (a restarted worker keeps its port), with its KV event endpoint when it
    lists one; a P/D pair's two sides each at its `path` on the pair's own address, named by role."""
    specs = []
    for worker in admin.workers()["workers"]:
        path = worker.get("path")
        url = f"{admin.base_url}{path}" if path else f"http://127.0.0.1:{worker['port']}"
        specs.append(
            ReplicaSpec(
                name=str(worker.get("role") or f"worker{worker['worker']}"),
                url=url,
                metrics_url=f"{url}/metrics",
                kv_events=str(worker.get("kv_events_endpoint") or ""),
                worker=int(worker["worker"]),
            )
        )
    return tuple(specs)
