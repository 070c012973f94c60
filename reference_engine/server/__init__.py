"""The reference engine's HTTP server (docs/server.md).

    from reference_engine.server import create_app, serve
    app = create_app(config)                              # one engine, an ASGI app
    serve(config, host="127.0.0.1", port=8000)            # run it with uvicorn
    serve(config, host="127.0.0.1", port=8000, workers=2) # router + 2 engine worker processes
"""

from __future__ import annotations

import uvicorn

from reference_engine.config import EngineConfig
from reference_engine.server.app import create_app

__all__ = ["create_app", "serve"]


def serve(config: EngineConfig, *, host: str = "127.0.0.1", port: int = 8000, fd: int | None = None,
          workers: int = 0, log_level: str = "info", access_log: bool = False) -> None:
    """Serve until interrupted. `workers` > 0: a router in this process and that many engine
    worker processes under a supervisor that restarts them. `fd`: an inherited listening
    socket, bound by whoever started us, served instead of `host`:`port`."""
    if workers:
        from reference_engine.server.router_app import create_router_app
        app = create_router_app(config, num_workers=workers, log_level=log_level)
    else:
        app = create_app(config)
    where = {"fd": fd} if fd is not None else {"host": host, "port": port}
    uvicorn.run(app, **where, log_level=log_level, access_log=access_log, timeout_graceful_shutdown=5)
