"""A TCP proxy in front of a real server that loses replies on demand.

``drop_replies(n)`` makes the proxy swallow the next n replies and close the
client's connection: the server ran the command, the client never hears back,
and redis-py resends the command on a new connection (its default retry).
That is the double execution a retried write script must survive.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from tests.servers import free_port


class Proxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._to_drop = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def drop_replies(self, n: int) -> None:
        with self._lock:
            self._to_drop = n

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _take_drop(self) -> bool:
        with self._lock:
            if self._to_drop > 0:
                self._to_drop -= 1
                return True
            return False

    def _pump(self, source: socket.socket, sink: socket.socket, replies: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if replies and self._take_drop():
                    break
                sink.sendall(data)
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
