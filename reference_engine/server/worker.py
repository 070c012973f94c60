"""Entry point of one engine worker process, started by the supervisor (not by users):

    python -m reference_engine.server.worker --config-json F --fd N --worker I [--kv-events-fd M]

It serves `create_app(config, worker=I)` on the listening socket inherited as file descriptor N
(with the HTTP edge of every kvgate server, `http_edge.run`), publishes its KV cache events on
the socket inherited as M (bound by the supervisor, kept across restarts), and asks Linux to SIGTERM it when
its parent (the supervisor) dies.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import signal
import socket
import sys
from pathlib import Path

from reference_engine.config import load_config
from reference_engine.server import http_edge
from reference_engine.server.app import create_app

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="kvgate-worker", description=__doc__.splitlines()[0])
    p.add_argument("--config-json", required=True, type=Path)
    p.add_argument("--fd", required=True, type=int)
    p.add_argument("--worker", required=True, type=int)
    p.add_argument("--kv-events-fd", type=int, default=None)
    p.add_argument("--log-level", default="info")
    args = p.parse_args(argv)
    _die_with_parent()
    logging.basicConfig(
        level=args.log_level.upper(), format=f"%(asctime)s worker-{args.worker} %(name)s %(levelname)s %(message)s"
    )
    config = load_config(args.config_json)
    app = create_app(config, worker=args.worker, kv_events_fd=args.kv_events_fd)
    http_edge.run(app, config.server, socket.socket(fileno=args.fd), log_level=args.log_level, access_log=False)


if __name__ == "__main__":
    main()
