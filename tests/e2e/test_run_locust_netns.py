"""Several hosts, proven on one machine: the target, the locust master and two workers each in a
network namespace of their own (tests/netns.py), and every kind of load across them — the
scenarios' users, chat at a rate, a trace, and a sweep of two steps — each request recorded
once, with the worker that sent it.

The workers are `kvgate worker --master HOST:PORT`, started once and serving every run and sweep
step in turn; each master is a `kvgate run` / `kvgate sweep` with `--master-bind` on the master's
address. The namespaces reach nothing but each other: the target answers only there. Skipped
where namespaces cannot be made (not root, no iproute2).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from record.run_record import RunRecord
from tests.e2e.run_support import REPO, assert_each_scheduled_request_once, clean_env
from tests.integration.server_process import ADMIN_KEY, CONFIG_TOML, SYSTEM_PROMPT
from tests.netns import NetnsLab

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif((why := NetnsLab.unavailable()) is not None, reason=f"no network namespaces: {why}"),
]

TENANTS = "acme=sk-acme,globex=sk-globex"
PORT, MASTER_PORT = 8000, 5557
MOONCAKE = REPO / "tests" / "data" / "traces" / "mooncake" / "conversation_trace_head200.jsonl"
LOOSE = ("--max-lag-ms", "5000")
LOOSE_SLO = "[slo]\nttft_ms = 600000\n\n[goodput]\nmin_fraction = 0.0\n"
KVGATE = [sys.executable, "-m", "harness.cli"]


class Hosts:
    def __init__(self, lab: NetnsLab, tmp: Path) -> None:
        self.lab, self.tmp = lab, tmp
        self.target = f"http://{lab.address('target')}:{PORT}"
        self.master = f"{lab.address('master')}:{MASTER_PORT}"

    def kvgate(self, *args: str, timeout_s: float = 300) -> str:
        """Run kvgate on the master's host; its output (it must exit 0 or 1: judged)."""
        done = self.lab.run("master", [*KVGATE, *args], env=clean_env(), timeout_s=timeout_s)
        assert done.returncode in (0, 1), done.stdout + done.stderr
        return done.stdout + done.stderr

    def on_workers(self) -> list[str]:
        """The options of a run whose load the two workers send: the target, and where they find the master."""
        return ["--target", self.target, "--tenants", TENANTS, "--master-bind", self.master, "--expect-workers", "2"]


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosts]:
    tmp = tmp_path_factory.mktemp("netns")
    config = tmp / "engine.toml"
    config.write_text(CONFIG_TOML.format(step_ms=2.0, system=SYSTEM_PROMPT))
    with NetnsLab.create(["target", "master", "w1", "w2"]) as lab:
        here = Hosts(lab, tmp)
        serve = [*KVGATE, "serve", "--config", str(config), "--host", lab.address("target"), "--port", str(PORT)]
        lab.start("target", serve, env={**clean_env(), "KVGATE_ADMIN_KEY": ADMIN_KEY}, log=str(tmp / "serve.log"))
        wait = (
            f"import httpx, time\nwhile httpx.get('{here.target}/ready', timeout=5).status_code != 200: time.sleep(0.2)"
        )
        ready = lab.run("master", [sys.executable, "-c", _retrying(wait)], env=clean_env(), timeout_s=120)
        assert ready.returncode == 0, ready.stderr + (tmp / "serve.log").read_text()[-3000:]
        for worker in ("w1", "w2"):
            lab.start(
                worker, [*KVGATE, "worker", "--master", here.master], env=clean_env(), log=str(tmp / f"{worker}.log")
            )
        yield here


def _retrying(body: str) -> str:
    """`body` again until it returns without raising (the server may not listen yet)."""
    return (
        "while True:\n    try:\n"
        + "".join(f"        {line}\n" for line in body.splitlines())
        + ("        break\n    except Exception:\n        import time; time.sleep(0.2)\n")
    )


def test_the_hosts_reach_each_other_and_nothing_else(hosts: Hosts) -> None:
    for host in ("target", "master", "w1", "w2"):
        (route,) = hosts.lab.routes(host)  # no default route: only the lab's own /24
        assert route.startswith(f"{hosts.lab.subnet}.0/24 ")


def test_the_scenarios_users_run_on_both_workers(hosts: Hosts) -> None:
    out = hosts.tmp / "closed"
    sent_before = {w: hosts.lab.bytes_sent(w) for w in ("w1", "w2")}
    hosts.kvgate(
        "run",
        *hosts.on_workers(),
        "--scenarios",
        "short_qa",
        "--users",
        "4",
        "--duration",
        "4",
        "--profile",
        "quick",
        "--out",
        str(out),
    )
    record = RunRecord.load(out)
    load = record.requests[record.requests["phase"] == "load"]
    assert len(load) and load["request_id"].is_unique and set(load["load_worker"]) == {"w0", "w1"}
    assert not record.meta.harness_error and len(record.meta.model_extra["live"]["load_workers"]) == 2
    assert all(hosts.lab.bytes_sent(w) > sent_before[w] + 10_000 for w in ("w1", "w2"))  # the requests left there


def test_chat_at_a_rate_is_sent_by_both_workers_each_request_once(hosts: Hosts) -> None:
    """`kvgate run --rate 20 --duration 20` with a master and two workers, shortened."""
    out = hosts.tmp / "rate"
    hosts.kvgate(
        "run", *hosts.on_workers(), "--rate", "20", "--duration", "4", "--profile", "quick", "--out", str(out), *LOOSE
    )
    assert_each_scheduled_request_once(RunRecord.load(out), {"w0", "w1"})


def test_a_trace_is_sent_by_both_workers_each_request_once(hosts: Hosts) -> None:
    out = hosts.tmp / "trace"
    hosts.kvgate(
        "run",
        *hosts.on_workers(),
        "--trace",
        str(MOONCAKE),
        "--rate-scale",
        "4",
        "--limit",
        "20",
        "--duration",
        "60",
        "--profile",
        "quick",
        "--out",
        str(out),
        *LOOSE,
    )
    record = RunRecord.load(out)
    assert_each_scheduled_request_once(record, {"w0", "w1"})
    assert set(record.requests.loc[record.requests["phase"] == "load", "scenario"]) == {"trace_mooncake"}


def test_each_sweep_step_is_sent_by_both_workers(hosts: Hosts) -> None:
    gates, out = hosts.tmp / "loose.toml", hosts.tmp / "sweep"
    gates.write_text(LOOSE_SLO)
    hosts.kvgate(
        "sweep",
        *hosts.on_workers(),
        "--rates",
        "20,40",
        "--duration",
        "1",
        "--arrivals",
        "constant",
        "--gates",
        str(gates),
        "--out",
        str(out),
        *LOOSE,
    )
    steps = json.loads((out / "sweep.json").read_text())["steps"]
    assert len(steps) == 2
    for step in steps:
        assert_each_scheduled_request_once(RunRecord.load(step["run_dir"]), {"w0", "w1"})
