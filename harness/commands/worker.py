"""`kvgate worker`: locust workers on this host for a kvgate master on another.

    kvgate worker --master 10.0.0.5:5557                  # one worker process, run after run
    kvgate worker --master 10.0.0.5:5557 --processes 4    # four of them
    kvgate worker --master 10.0.0.5:5557 --once           # serve one run, then exit

The master is a `kvgate run` or `kvgate sweep` started with `--master-bind HOST:PORT
--expect-workers N` (docs/load.md). This runs `locust --worker -f - --master-host HOST
--master-port PORT`: the scenario files come from the master (locust's `-f -`) and every setting
with its spawn message, so this host needs kvgate installed and nothing else; at connect the
master refuses a worker that runs another kvgate or other scenario files, naming both (exit 2).

A master serves one run (one `kvgate run`, one sweep step) and then tells its workers to quit;
without --once the next worker starts at once and waits for the next master, so one `kvgate
worker` serves every run and step until Ctrl-C or SIGTERM. Each worker gets a directory of its
own for the files it downloads (locust writes them to the temp directory, and two workers on one
host would otherwise share them, and delete them under each other).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from harness.cli import EXIT_HARNESS_ERROR, EXIT_OK
from harness.commands.run import at_least_zero, host_port, raise_keyboard_interrupt

RECONNECT_PAUSE_S = 2.0
"""Between two runs: time for the master that has just quit its workers to be gone, so that the
next worker meets the next master, not the last one."""
STOP_GRACE_S = 20.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("worker", help="run locust workers for a kvgate master on another host (run --master-bind)")
    p.add_argument("--master", type=host_port, required=True, metavar="HOST:PORT", help="the master's --master-bind")
    p.add_argument("--processes", type=at_least_zero, default=0, metavar="N", help="worker processes (default: one)")
    p.add_argument("--once", action="store_true", help="serve one run, then exit with its worker's exit code")
    p.set_defaults(func=run)


def worker_command(host: str, port: int, processes: int) -> list[str]:
    cmd = [sys.executable, "-m", "locust", "--worker", "-f", "-", "--master-host", host, "--master-port", str(port)]
    cmd += ["--exit-code-on-error", "0"]  # the target's errors are the run's to judge, not the worker's
    return cmd + (["--processes", str(processes)] if processes else [])


def run(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, raise_keyboard_interrupt)
    host, port = args.master
    cmd = worker_command(host, port, args.processes)
    print(f"kvgate worker: serving the master at {host}:{port}", file=sys.stderr, flush=True)
    while True:
        code = _serve_one_run(cmd)
        if args.once:
            return code
        if code != EXIT_OK:
            print(f"kvgate worker: the locust worker exited with code {code}; stopping", file=sys.stderr)
            return EXIT_HARNESS_ERROR
        time.sleep(RECONNECT_PAUSE_S)


def _serve_one_run(cmd: list[str]) -> int:
    """One locust worker (or --processes of them), in a temp directory of its own, until it exits."""
    own_tmp = tempfile.mkdtemp(prefix="kvgate-worker-")
    worker = subprocess.Popen(cmd, env={**os.environ, "TMPDIR": own_tmp})
    try:
        return worker.wait()
    except KeyboardInterrupt:
        worker.send_signal(signal.SIGINT)
        try:
            worker.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        raise
    finally:
        shutil.rmtree(own_tmp, ignore_errors=True)
