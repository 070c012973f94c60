"""The master's roll of the processes that send the load: who each is, its clock, whether it stayed.

    roll = LoadWorkers(identity_of(locustfiles), expected=2)
    refusal = roll.admit(client_id, index, hello)     # None, or why this worker may not join
    roll.name_of(client_id), roll.offset_s(client_id)  # "w0", its clock minus the master's
    roll.to_dict()                                     # load.json's `workers` and `refused`

A locust worker says who it is when it connects (`hello`: its kvgate version and a digest of the
scenario files it loaded). A worker that differs from the master in either would send other
requests, or record other columns, than the master expects, and the record would mix two loads:
it is refused at connect, the reason naming both versions. An admitted worker is named `w<n>`
(locust's worker index, in the order they connected; a run without workers has one sender,
`local`), and its clock offset is measured (loadgen/clock_sync.py) before it is dealt a slot. A
worker that goes (its heartbeat stops, or it quits) before the test ends is `lost`: what was
dealt to it and never came back is named in the record, and the run is never judged on it.

The roll is plain data, written by the locust listeners (loadgen/plugin.py) on the master's one
event loop; `write_load_json` is how `kvgate run` hears of it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.loadgen.clock_sync import SAME_CLOCK, ClockOffset, ClockSample, estimate_offset

LOCAL = "local"
NUM_CLOCK_SAMPLES = 8
LOAD_JSON_FILE = "load.json"
"""The master's report's name where kvgate writes it (beside the record, deleted once read)."""


@dataclass(frozen=True, slots=True)
class Identity:
    """What a locust process runs: kvgate's version and the scenario files it loaded."""

    kvgate: str
    scenarios: str
    """A digest of the locustfiles (names and contents): the same files, the same digest."""

    def describe(self) -> str:
        return f"kvgate {self.kvgate} with scenario files {self.scenarios}"

    def to_message(self) -> dict[str, str]:
        return {"kvgate": self.kvgate, "scenarios": self.scenarios}

    @classmethod
    def from_message(cls, data: Mapping[str, Any]) -> Identity:
        return cls(str(data.get("kvgate", "unknown")), str(data.get("scenarios", "unknown")))


def kvgate_version() -> str:
    try:
        return importlib.metadata.version("kvgate")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def identity_of(locustfiles: Iterable[str]) -> Identity:
    """This process's identity. Files are named by their base name: a worker that downloaded the
    master's locustfiles (`locust --worker -f -`) holds them under another directory."""
    digest = hashlib.sha256()
    for path in sorted(locustfiles, key=os.path.basename):
        digest.update(os.path.basename(path).encode() + b"\0" + Path(path).read_bytes() + b"\0")
    return Identity(kvgate_version(), digest.hexdigest()[:12])


@dataclass
class LoadWorker:
    client_id: str
    name: str
    identity: Identity
    samples: list[ClockSample] = field(default_factory=list)
    clock: ClockOffset | None = None
    is_lost: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "client_id": self.client_id,
            "host": self.client_id.rsplit("_", 1)[0],  # locust's worker ids are <hostname>_<hex>
            "kvgate": self.identity.kvgate,
            "scenarios": self.identity.scenarios,
            **(self.clock.to_dict() if self.clock is not None else {"clock_offset_ms": None}),
            "lost": self.is_lost,
        }


class LoadWorkers:
    """The roll (module docstring). Only the master's listeners change it."""

    def __init__(self, identity: Identity, *, expected: int) -> None:
        self.identity = identity
        self.expected = expected
        """Workers the run waits for (0: it sends from the master's own process)."""
        self.workers: dict[str, LoadWorker] = {}
        self.refused: list[dict[str, str]] = []

    @classmethod
    def alone(cls, identity: Identity) -> LoadWorkers:
        """The roll of a run without workers: the one process sends, on the master's clock."""
        roll = cls(identity, expected=0)
        roll.workers[LOCAL] = LoadWorker(LOCAL, LOCAL, identity, clock=SAME_CLOCK)
        return roll

    def admit(self, client_id: str, index: int, hello: Identity) -> str | None:
        """Admit a worker that runs what the master runs; else the reason it is refused."""
        if hello != self.identity:
            reason = (
                f"locust worker {client_id} runs {hello.describe()}, this master runs {self.identity.describe()}: "
                f"install the same kvgate on both and start the worker with the master's scenario files "
                f"(kvgate worker, or locust --worker -f -)"
            )
            self.refused.append({"client_id": client_id, "kvgate": hello.kvgate, "scenarios": hello.scenarios})
            return reason
        self.workers[client_id] = LoadWorker(client_id, f"w{index}", hello)
        return None

    def is_admitted(self, client_id: str) -> bool:
        return client_id in self.workers

    def name_of(self, client_id: str) -> str:
        worker = self.workers.get(client_id)
        return worker.name if worker is not None else client_id

    def client_of(self, name: str) -> str:
        return next(w.client_id for w in self.workers.values() if w.name == name)

    def offset_s(self, client_id: str) -> float:
        """The worker's clock minus the master's; 0 until measured."""
        worker = self.workers.get(client_id)
        return worker.clock.offset_s if worker is not None and worker.clock is not None else 0.0

    def add_sample(self, client_id: str, sample: ClockSample) -> None:
        """One ping's answer; the offset is settled at `NUM_CLOCK_SAMPLES`."""
        worker = self.workers.get(client_id)
        if worker is None or worker.clock is not None:
            return
        worker.samples.append(sample)
        if len(worker.samples) >= NUM_CLOCK_SAMPLES:
            worker.clock = estimate_offset(worker.samples)

    def has_clock(self, client_id: str) -> bool:
        worker = self.workers.get(client_id)
        return worker is not None and worker.clock is not None

    def mark_lost(self, client_ids: Iterable[str]) -> list[str]:
        """Mark admitted workers that went before the test ended; the names newly lost."""
        lost = []
        for client_id in client_ids:
            worker = self.workers.get(client_id)
            if worker is not None and not worker.is_lost:
                worker.is_lost = True
                lost.append(worker.name)
        return lost

    def live(self) -> list[LoadWorker]:
        return [w for w in self.workers.values() if not w.is_lost]

    def to_dict(self) -> dict[str, Any]:
        return {
            "master": self.identity.to_message(),
            "expected_workers": self.expected,
            "workers": {w.name: w.to_dict() for w in self.workers.values()},
            "refused": list(self.refused),
        }


def write_load_json(path: str, report: Mapping[str, Any]) -> None:
    """Write the master's report whole or not at all (a reader never sees half of it)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(json.dumps(report, indent=2, default=str) + "\n")
    partial.replace(target)
