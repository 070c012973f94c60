"""The load phase of `kvgate run`: `locust --headless` in a subprocess, its rows tailed.

Why a subprocess and not locust's in-process `Environment` API: importing locust
monkey-patches the importing process with gevent, which the harness's own threads (collectors)
and the engine subprocess handling must not run under; a separate process also keeps the
load generator's CPU (the TTFT measurement) apart from the collectors' JSON parsing on a
2-core machine, gives `--processes N` (locust's master + workers) for free, and runs exactly
the code path of a plain `locust -f scenarios/` run.

The same subprocess runs every kind of load: the scenarios' users (closed loop), or the open
loop's locustfile (`OPEN_LOOP_LOCUSTFILE`: arrivals at a rate, a trace), whose master deals one
schedule to every locust process. Its workers are `--processes N` on this host, or processes on
other hosts that connect to a master bound where they can reach it (`Master`): `kvgate worker
--master HOST:PORT` there.

The locust master writes each request as a run-record row to a CSV (`--kvgate-requests-csv`),
flushed as it goes; `RowTail` reads the complete lines appended since the last call, so the
harness copies rows into the record and counts them for the progress display while the load
runs. At the end it writes who sent the load (`--kvgate-load-json`). Settings reach the locust
process through KVGATE_* environment variables.
"""

from __future__ import annotations

import csv
import io
import math
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from harness.loadgen.settings import LoadSettings
from harness.scenario_catalog import Scenario

STOP_GRACE_S = 20.0
OPEN_LOOP_LOCUSTFILE = Path(__file__).resolve().parent / "loadgen" / "open_loop_locustfile.py"


@dataclass(frozen=True)
class Master:
    """A locust master that workers on other hosts connect to."""

    host: str
    port: int
    expect_workers: int
    wait_s: float
    """How long it waits for them before it gives up."""

    def options(self) -> list[str]:
        return [
            "--master",
            "--master-bind-host",
            self.host,
            "--master-bind-port",
            str(self.port),
            "--expect-workers",
            str(self.expect_workers),
            "--expect-workers-max-wait",
            str(math.ceil(self.wait_s)),
        ]


class RowTail:
    """Complete CSV rows appended to `path` since the last `read()` (the header is read first)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._header: list[str] | None = None

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1  # only whole lines; a half-written one waits for the next read
        if end == 0:
            return []
        self._offset += end
        lines = chunk[:end].decode().splitlines()
        if self._header is None:
            self._header, lines = next(csv.reader([lines[0]])), lines[1:]
        return [dict(zip(self._header, values)) for values in csv.reader(io.StringIO("\n".join(lines))) if values]


def locust_command(
    *,
    scenarios: Sequence[Scenario],
    mixed_dir: Path | None,
    host: str,
    users: int,
    spawn_rate: float,
    duration_s: float,
    stop_timeout_s: float,
    processes: int,
    html_path: Path | None,
    open_loop: bool = False,
    master: Master | None = None,
) -> list[str]:
    """`open_loop`: the open loop's locustfile, whose shape runs one sender per process and ends
    the test when the schedule is done (its length is a setting, not -t). `mixed_dir`: run the
    whole directory (the mixed default, users/spawn rate drive it); otherwise the named
    scenarios' files, with their user classes named (so a chosen step-load scenario's shape
    drives the run). `master`: workers on other hosts instead of `processes` on this one."""
    if open_loop:
        files = str(OPEN_LOOP_LOCUSTFILE)
    else:
        files = str(mixed_dir) if mixed_dir is not None else ",".join(str(s.path) for s in scenarios)
    cmd = [sys.executable, "-m", "locust", "-f", files, "--headless", "--host", host]
    if not open_loop:
        cmd += ["-u", str(users), "-r", str(spawn_rate), "-t", f"{max(1, round(duration_s))}s"]
    cmd += [
        "--stop-timeout",
        f"{math.ceil(stop_timeout_s)}s",  # locust reads whole seconds only: "1.0" is an error
        "--exit-code-on-error",
        "0",
        "--only-summary",
    ]
    if master is not None:
        cmd += master.options()
    elif processes:
        cmd += ["--processes", str(processes)]
    if html_path is not None:
        cmd += ["--html", str(html_path)]
    if mixed_dir is None and not open_loop:
        cmd += [c for s in scenarios for c in s.user_classes]
    return cmd


class LocustProcess:
    """A started locust subprocess; `stop()` ends it (SIGINT, then SIGKILL) if it still runs."""

    def __init__(self, cmd: list[str], settings: LoadSettings, log_path: Path) -> None:
        self._log: IO[bytes] = open(log_path, "wb")
        env = {**os.environ, **settings.to_env()}
        self.process = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env)

    def wait(self, timeout_s: float) -> int | None:
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            if self.wait(STOP_GRACE_S) is None:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode
