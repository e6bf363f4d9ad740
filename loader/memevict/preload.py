"""``memevict load``: the scripts (or the functions library) on every node of a
deployment before traffic arrives.

From one node's URL it finds the others: on a cluster every node CLUSTER NODES
lists, else the node itself and the replicas its INFO replication lists. It
connects to each with the URL's credentials. Scripts are loaded on every node,
replicas included: each server keeps its own script cache, and a replica
serves get, top and stats. The functions library is loaded on primaries only;
replicas receive it through replication (and refuse FUNCTION LOAD).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import redis

from memevict.functions import library
from memevict.registry import ScriptRegistry


@dataclass(frozen=True, slots=True)
class Node:
    address: str  # host:port, or the Unix socket path
    primary: bool


@dataclass(frozen=True, slots=True)
class Loaded:
    nodes: tuple[Node, ...]
    mode: str  # "scripts" or "functions"
    names: dict[str, str]  # script -> SHA1, or script -> function name
    library_version: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "nodes": [{"address": n.address, "primary": n.primary} for n in self.nodes],
            "loaded": self.names,
            "library": None if self.mode == "scripts" else library().name,
            "library_version": self.library_version,
        }


def _nodes(client: redis.Redis) -> list[tuple[Node, dict[str, Any]]]:
    """Every node of the deployment, with the connection arguments for it."""
    kwargs = dict(client.connection_pool.connection_kwargs)
    if "path" in kwargs:  # a Unix socket: this server alone
        return [(Node(str(kwargs["path"]), True), kwargs)]
    if client.info("cluster").get("cluster_enabled"):
        found = []
        listing = cast(Any, client).execute_command("CLUSTER", "NODES")  # raw: no callback
        text = listing.decode() if isinstance(listing, bytes) else str(listing)
        for line in text.splitlines():
            if not line.strip():
                continue
            _id, address, flags, *_ = line.split()
            if "fail" in flags or "noaddr" in flags or "handshake" in flags:
                continue
            host, port = address.split("@")[0].rsplit(":", 1)
            node = Node(f"{host}:{port}", "master" in flags)
            found.append((node, {**kwargs, "host": host, "port": int(port)}))
        return found
    replication = client.info("replication")
    self_node = Node(f"{kwargs['host']}:{kwargs['port']}", replication.get("role") == "master")
    found = [(self_node, kwargs)]
    for key, value in replication.items():
        if key.startswith("slave") and isinstance(value, dict) and "port" in value:
            ip, number = str(value["ip"]), int(value["port"])
            found.append((Node(f"{ip}:{number}", False), {**kwargs, "host": ip, "port": number}))
    return found


def preload(client: redis.Redis, *, functions: bool = False) -> Loaded:
    """Loads every script (or the library, on primaries) on every node ``client`` leads to."""
    nodes = _nodes(client)
    connection_class = client.connection_pool.connection_class  # TCP, TLS or Unix socket
    names: dict[str, str] = {}
    for node, kwargs in nodes:
        if functions and not node.primary:
            continue
        pool = redis.ConnectionPool(connection_class=connection_class, **kwargs)
        with redis.Redis(connection_pool=pool) as each:
            names = ScriptRegistry(each, "functions" if functions else "scripts").load()
    return Loaded(
        tuple(node for node, _ in nodes),
        "functions" if functions else "scripts",
        names,
        library().version if functions else None,
    )
