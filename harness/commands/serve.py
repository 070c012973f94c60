"""`kvgate serve`: the reference engine behind its OpenAI-compatible HTTP API.

    kvgate serve --config configs/default.toml --port 8000            one engine, one process
    kvgate serve --config configs/default.toml --port 8000 --workers 2   router + 2 engine workers

Runs until interrupted (Ctrl-C / SIGTERM). docs/server.md describes the API. The admin key comes
from KVGATE_ADMIN_KEY, else the config's [server] admin_key; without one it starts only with
--dev. Exit 2, with one line, when it cannot start (no admin key, the address is taken).
"""

from __future__ import annotations

import argparse
import logging
import os

from reference_engine import load_config
from reference_engine.config import ADMIN_KEY_VAR
from reference_engine.server import serve


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the reference engine's OpenAI-compatible server")
    p.add_argument("--config", required=True, help="engine config (TOML)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--fd",
        type=int,
        default=None,
        metavar="FD",
        help="serve on this inherited, already bound listening socket instead of --host/--port "
        "(a harness that binds the port itself, so nothing can take it in between)",
    )
    p.add_argument(
        "--workers",
        type=_non_negative,
        default=None,
        metavar="N",
        help="N engine worker processes behind a router, each with its own KV pool "
        "(default: the config's [server] workers; 0: one engine in this process, no router)",
    )
    p.add_argument(
        "--dev",
        action="store_true",
        help="a local dev run: start without an admin key (the admin API then takes the public dev "
        "key sk-kvgate-admin); anywhere else give [server] admin_key or KVGATE_ADMIN_KEY",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument("--access-log", action="store_true", help="log every HTTP request (costs CPU under load)")
    p.set_defaults(func=run)


def _non_negative(value: str) -> int:
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError("must be 0 (one engine in this process) or a positive number of workers")
    return n


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # the router's own calls to workers
    serve(
        config,
        host=args.host,
        port=args.port,
        fd=args.fd,
        workers=args.workers,
        log_level=args.log_level,
        access_log=args.access_log,
        admin_key=os.environ.get(ADMIN_KEY_VAR) or None,
        dev=args.dev,
    )
    return 0
