"""Hosts of their own on one machine: Linux network namespaces joined by a switch (iproute2).

    with NetnsLab.create(["target", "master", "w1", "w2"]) as lab:
        lab.address("target")                       # 10.x.y.2, an address in the lab's /24
        lab.start("target", [...command...])        # a process with that namespace's network
        lab.run("master", [...], timeout_s=240)     # one that runs to its end

Every host is a namespace with one veth into a switch namespace that holds a bridge, and an
address in a private /24; the namespaces have no route anywhere else, so their traffic stays
between them (and never reaches the machine's own network, nor it theirs). Names carry this
process's id and a random part, so two test runs never meet. `close` stops every process the lab
started (and any other process still in its namespaces), then deletes the namespaces, which takes
their veths and the bridge with them; it runs on any way out of the `with`, failures included.

Needs root and `ip` (iproute2): `NetnsLab.unavailable()` says why not, for a test to skip.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType

STOP_GRACE_S = 20.0


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


@dataclass
class NetnsLab:
    prefix: str
    subnet: str
    """The first three octets of the lab's /24."""
    hosts: dict[str, int] = field(default_factory=dict)
    """Host name -> last octet of its address."""
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)

    @staticmethod
    def unavailable() -> str | None:
        """Why this machine cannot hold a lab (None: it can)."""
        if shutil.which("ip") is None:
            return "no `ip` (iproute2)"
        if os.geteuid() != 0:
            return "network namespaces need root"
        probe = f"kvgprobe{os.getpid()}"
        try:
            _ip("netns", "add", probe)
        except (subprocess.CalledProcessError, OSError) as err:
            return f"`ip netns add` fails here: {getattr(err, 'stderr', '') or err}"
        _ip("netns", "del", probe)
        return None

    @classmethod
    def create(cls, names: Sequence[str]) -> NetnsLab:
        token = secrets.token_hex(2)
        lab = cls(
            prefix=f"kvg{os.getpid() % 100000}{token}",
            subnet=f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(256)}",
        )
        try:
            switch = lab._add_namespace("sw")
            _ip("-n", switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", switch, "link", "set", "br0", "up")
            for n, name in enumerate(names):
                lab._add_host(name, octet=2 + n, switch=switch)
        except BaseException:
            lab.close()
            raise
        return lab

    def _add_namespace(self, name: str) -> str:
        namespace = f"{self.prefix}-{name}"
        _ip("netns", "add", namespace)
        self.namespaces.append(namespace)
        _ip("-n", namespace, "link", "set", "lo", "up")
        return namespace

    def _add_host(self, name: str, *, octet: int, switch: str) -> None:
        namespace = self._add_namespace(name)
        veth, port = f"v{octet}", f"p{octet}"
        _ip("link", "add", veth, "netns", namespace, "type", "veth", "peer", "name", port, "netns", switch)
        _ip("-n", switch, "link", "set", port, "master", "br0", "up")
        _ip("-n", namespace, "addr", "add", f"{self.subnet}.{octet}/24", "dev", veth)
        _ip("-n", namespace, "link", "set", veth, "up")
        self.hosts[name] = octet

    def namespace(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def address(self, host: str) -> str:
        return f"{self.subnet}.{self.hosts[host]}"

    def routes(self, host: str) -> list[str]:
        """The host's routing table, a line a route."""
        done = subprocess.run(["ip", "-n", self.namespace(host), "route"], capture_output=True, text=True, check=True)
        return done.stdout.splitlines()

    def bytes_sent(self, host: str) -> int:
        """What the host's one interface has sent into the switch."""
        path = f"/sys/class/net/v{self.hosts[host]}/statistics/tx_bytes"
        done = subprocess.run(
            ["ip", "netns", "exec", self.namespace(host), "cat", path], capture_output=True, text=True, check=True
        )
        return int(done.stdout)

    def start(self, host: str, cmd: Sequence[str], *, env: dict[str, str], log: str) -> subprocess.Popen[bytes]:
        """A process in `host`'s network, its output to the file `log`; stopped by `close`."""
        with open(log, "w") as out:
            process = subprocess.Popen(
                ["ip", "netns", "exec", self.namespace(host), *cmd], env=env, stdout=out, stderr=subprocess.STDOUT
            )
        self.processes.append(process)
        return process

    def run(
        self, host: str, cmd: Sequence[str], *, env: dict[str, str], timeout_s: float
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", self.namespace(host), *cmd],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for namespace in self.namespaces:  # anything those processes left behind in the lab
            done = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True, check=False)
            for pid in done.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for namespace in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)
        self.namespaces.clear()

    def __enter__(self) -> NetnsLab:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
