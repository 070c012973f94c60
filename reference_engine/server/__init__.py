"""The reference engine's HTTP server (docs/server.md).

from reference_engine.server import create_app, serve
app = create_app(config)                              # one engine, an ASGI app
serve(config, host="127.0.0.1", port=8000)            # run it with uvicorn
serve(config, host="127.0.0.1", port=8000, workers=2) # router + 2 engine worker processes
serve(pd_config, host="127.0.0.1", port=8000)         # a P/D pair ([pd] enabled): pd_app.py
"""

from __future__ import annotations

import logging
import socket

from record.errors import StartupError
from reference_engine.config import DEV_ADMIN_KEY, EngineConfig, with_overrides
from reference_engine.server import http_edge
from reference_engine.server.app import create_app

__all__ = ["create_app", "serve", "with_admin_key"]

log = logging.getLogger("kvgate.server")


def with_admin_key(config: EngineConfig, admin_key: str | None = None, *, dev: bool = False) -> EngineConfig:
    """The config with the admin key it will serve with, or a StartupError. `admin_key` (what
    KVGATE_ADMIN_KEY holds) wins over `server.admin_key`. Without either, only a local dev run
    (`dev`) starts, with the public DEV_ADMIN_KEY; that key is refused anywhere else, since
    everybody knows it."""
    key = admin_key or config.server.admin_key
    if key is None and not dev:
        raise StartupError(
            "no admin key: set [server] admin_key in the config or KVGATE_ADMIN_KEY in the "
            "environment, or pass --dev for a local dev run"
        )
    if key is None:
        log.warning("local dev run: the admin API takes the public dev key %s", DEV_ADMIN_KEY)
        key = DEV_ADMIN_KEY
    elif key == DEV_ADMIN_KEY and not dev:
        raise StartupError(
            f"the admin key is the public dev key {DEV_ADMIN_KEY!r}: choose a secret one "
            f"([server] admin_key or KVGATE_ADMIN_KEY), or pass --dev for a local dev run"
        )
    return config if key == config.server.admin_key else with_overrides(config, {"server.admin_key": key})


def serve(
    config: EngineConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    fd: int | None = None,
    workers: int | None = None,
    log_level: str = "info",
    access_log: bool = False,
    admin_key: str | None = None,
    dev: bool = False,
) -> None:
    """Serve until interrupted. `workers` > 0 (None: the config's `server.workers`): a router in
    this process and that many engine worker processes under a supervisor that restarts them.
    `fd`: an inherited listening socket, bound by whoever started us, served instead of
    `host`:`port`. Refuses to start
    (StartupError) without an admin key (`with_admin_key`) or on an address that is taken."""
    config = with_admin_key(config, admin_key, dev=dev)
    workers = config.server.workers if workers is None else workers
    if config.pd.enabled and workers:  # one process holds both sides of the pair, and the link
        raise StartupError(f"[pd] enabled: a P/D pair is served by one process; serve it without workers ({workers})")
    sock = socket.socket(fileno=fd) if fd is not None else http_edge.listen(host, port)
    if config.pd.enabled:
        from reference_engine.server.pd_app import create_pd_app

        app = create_pd_app(config)
    elif workers:
        from reference_engine.server.router_app import create_router_app

        app = create_router_app(config, num_workers=workers, log_level=log_level)
    else:
        app = create_app(config)
    http_edge.run(app, config.server, sock, log_level=log_level, access_log=access_log)
