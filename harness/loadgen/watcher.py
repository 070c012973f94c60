"""A plain locust run that ends like `kvgate run`: recorded, gated, with the gates' exit code.

With `--kvgate-record-dir DIR` the locust process that owns the request log (the master, or the
only process) starts `kvgate watch` beside it when the test starts and waits until its
collectors run; the users start after that, so no engine event of the run is missed. The rows
go to `DIR/locust_requests.csv` (unless `--kvgate-requests-csv` names another file), with times
counted from the moment locust started, which the watcher is told. When locust quits, the
watcher learns that the load is over (its standard input closes), waits for the target to
drain, writes the run record into DIR, prints the verdict table and writes the report, and its
exit code (0 every measurable gate passed, 1 a gate failed, 2 a harness error) becomes
locust's. The watcher is a separate process because the collectors use threads and blocking
clients, which locust's gevent-patched process must not run.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import gevent

from harness.loadgen.load_workers import LOAD_JSON_FILE
from harness.loadgen.settings import LoadSettings

log = logging.getLogger("kvgate.scenarios")

ROWS_FILE = "locust_requests.csv"
READY_TIMEOUT_S = 60.0
FINISH_MARGIN_S = 120.0  # beyond the watcher's cooldown: writing the record, the gates, the report
COOLDOWN_MAX_S = 30.0


def default_rows(record_dir: str) -> str:
    return str(Path(record_dir) / ROWS_FILE)


def default_load_json(record_dir: str) -> str:
    return str(Path(record_dir) / LOAD_JSON_FILE)


@dataclass
class Watcher:
    """The `kvgate watch` process recording this run."""

    process: subprocess.Popen

    @classmethod
    def start(cls, settings: LoadSettings, host: str) -> Watcher:
        """Start `kvgate watch` for `host` and wait until it records (raises SystemExit if it cannot)."""
        cmd = [
            sys.executable,
            "-m",
            "harness.cli",
            "watch",
            "--target",
            host,
            "--out",
            settings.record_dir,
            "--rows",
            settings.requests_csv or default_rows(settings.record_dir),
            "--rows-origin-unix",
            repr(settings.t0_unix),
            "--cooldown-max",
            str(COOLDOWN_MAX_S),
        ]
        env = {**os.environ, **settings.to_env()}  # keys travel in the environment, never on a command line
        process = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
        watcher = cls(process)
        try:
            line = watcher._ready_line()
        except subprocess.TimeoutExpired:
            line = ""
        if line.strip() != "ready":
            process.kill()
            raise SystemExit(
                f"kvgate scenarios: kvgate watch did not start recording the run into "
                f"{settings.record_dir} (exit code {process.poll()}); see its messages above"
            )
        log.info("kvgate watch records this run into %s", settings.record_dir)
        return watcher

    def finish(self) -> int:
        """Tell the watcher the load is over, show what it printed (the verdict table), and return
        its exit code once it has judged the run."""
        try:
            out, _ = self.process.communicate(timeout=COOLDOWN_MAX_S + FINISH_MARGIN_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            log.error("kvgate watch did not finish the record in time: the run is not judged")
            return 2
        print(out, end="", flush=True)
        return self.process.returncode

    def _ready_line(self) -> str:
        """Its first line on stdout; read under gevent's timeout, the hub keeps running meanwhile."""
        assert self.process.stdout is not None
        with gevent.Timeout(READY_TIMEOUT_S, subprocess.TimeoutExpired("kvgate watch", READY_TIMEOUT_S)):
            return self.process.stdout.readline()
