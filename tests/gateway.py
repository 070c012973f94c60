"""A gateway in front of several replicas, for the fleet tests: nginx when installed, else a small proxy.

    with gateway(["http://127.0.0.1:8001", "http://127.0.0.1:8002"], workdir) as url:
        ...                                  # url: http://127.0.0.1:<free port>, round robin

nginx (the Debian package) runs as a child of the test, in the foreground (`daemon off`), with a
config the test writes into `workdir`: a free loopback port, its pid file, logs and temporary
files there too (nothing under /etc or /var), streamed answers passed on as they come
(`proxy_buffering off`), and a replica that refuses connections skipped for the next one; it is
stopped with SIGQUIT, then SIGKILL. Without nginx the same shape is a Starlette app relaying
round robin (`create_gateway_app`), trying the next replica when one refuses the connection.
`KVGATE_TEST_GATEWAY=python` picks the proxy even where nginx is installed.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from harness.target import free_port
from tests.fault_proxy import relay_to, serving
from tests.waiting import wait_for

NGINX_CONF = """\
user {user};
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    client_max_body_size 64m;
    upstream replicas {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://replicas;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 600s;
            proxy_next_upstream error timeout;
        }}
    }}
}}
"""
STOP_GRACE_S = 10.0


def nginx_config(upstreams: Sequence[str], port: int, workdir: Path) -> str:
    servers = "\n".join(f"        server {urlsplit(u).netloc} max_fails=1 fail_timeout=2s;" for u in upstreams)
    user = pwd.getpwuid(os.geteuid()).pw_name  # nginx as root would hand its workers to nobody
    return NGINX_CONF.format(user=user, dir=workdir, servers=servers, port=port)


@contextmanager
def nginx_gateway(upstreams: Sequence[str], workdir: Path) -> Iterator[str]:
    nginx = shutil.which("nginx")
    assert nginx is not None
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = workdir / "nginx.conf"
    conf.write_text(nginx_config(upstreams, port, workdir))
    log = open(workdir / "nginx.out", "wb")  # noqa: SIM115 - closed below, after the process
    proc = subprocess.Popen(
        [nginx, "-p", str(workdir), "-c", str(conf), "-g", "daemon off;"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(url), "nginx listens", alive=lambda: proc.poll() is None, bound_s=30)
        yield url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGQUIT)  # nginx's graceful stop
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


def _answers(url: str) -> bool:
    try:
        httpx.get(f"{url}/health", timeout=2.0)
    except httpx.HTTPError:
        return False
    return True


def create_gateway_app(upstreams: Sequence[str]) -> Starlette:
    """Round robin over `upstreams`; a replica that refuses the connection is skipped."""
    clients = [httpx.AsyncClient(base_url=u, timeout=None) for u in upstreams]
    turn = itertools.count()

    async def route(request: Request) -> Response:
        first = next(turn)
        for i in range(len(clients)):
            try:
                return await relay_to(clients[(first + i) % len(clients)], request)
            except httpx.ConnectError:
                continue
        return JSONResponse(
            {"error": {"message": "no replica answered", "type": "bad_gateway", "code": "bad_gateway"}},
            status_code=502,
        )

    return Starlette(routes=[Route("/{path:path}", route, methods=["GET", "POST"])])


@contextmanager
def gateway(upstreams: Sequence[str], workdir: Path) -> Iterator[str]:
    """nginx in front of `upstreams` if installed (and not told otherwise), else the proxy."""
    if shutil.which("nginx") and os.environ.get("KVGATE_TEST_GATEWAY") != "python":
        with nginx_gateway(upstreams, workdir) as url:
            yield url
    else:
        with serving(create_gateway_app(upstreams), "the gateway") as url:
            yield url
