"""A throwaway Redis/Valkey Cluster of master nodes on free loopback ports, for the tests.

Built from one server binary and nothing else: each node starts with
``cluster-enabled``, takes its share of the 16384 slots with CLUSTER
ADDSLOTSRANGE and a distinct config epoch, and the nodes are joined with
CLUSTER MEET sent from here. ``migrate_slot`` moves one slot the way a
resharding tool does (SETSLOT IMPORTING/MIGRATING, GETKEYSINSLOT + MIGRATE in
batches, SETSLOT NODE), calling back between the steps so a test can make
calls while the slot is half-migrated.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
import redis
import redis.asyncio.cluster
import redis.cluster

from tests.servers import Server, free_port, redis_binary, valkey_binary

SLOTS = 16384
KINDS = ("valkey", "redis")
# Called by migrate_slot after each step with the step's name and the number
# of keys moved so far: "marked" (SETSLOT IMPORTING/MIGRATING done, no key
# moved), "batch" (a MIGRATE left keys on the source: the slot's keys are
# split between the two nodes), "moved" (every key is on the target, the
# source still owns the slot and answers ASK; SETSLOT NODE comes next).
Between = Callable[[str, int], None]


def _ports(count: int) -> list[int]:
    """Distinct ports whose bus ports (+10000) collide with none of them."""
    taken: set[int] = set()
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if {port, port + 10000} & taken:
            continue
        taken |= {port, port + 10000}
        ports.append(port)
    return ports


@dataclass
class Cluster:
    """``size`` master nodes of ``binary``; ``stop()`` kills them all.
    ``add_replicas(n)`` gives each master n replicas (``replicas[i + k * size]`` of node i)."""

    binary: str
    size: int = 3
    node_timeout_ms: int = 5000
    nodes: list[Server] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    replicas: list[Server] = field(default_factory=list)

    def start(self, timeout: float = 20.0) -> Cluster:
        try:
            for port in _ports(self.size):
                self.nodes.append(self._start_node(port))
            self.ids = [str(self.node(i).cluster("MYID")) for i in range(self.size)]
            for i in range(self.size):
                first = i * SLOTS // self.size
                last = (i + 1) * SLOTS // self.size - 1
                self.command(i, "CLUSTER ADDSLOTSRANGE", first, last)
                # Distinct epochs up front, as redis-cli --cluster create does,
                # so the nodes need not resolve a collision after meeting.
                self.command(i, "CLUSTER SET-CONFIG-EPOCH", i + 1)
            for other in self.nodes[1:]:
                self.command(0, "CLUSTER MEET", "127.0.0.1", other.port)
            self.wait_stable(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_node(self, port: int) -> Server:
        for attempt in range(3):
            server = Server(self.binary, port=port if attempt == 0 else free_port())
            server.extra = (
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                str(server.directory / "nodes.conf"),
                "--cluster-node-timeout",
                str(self.node_timeout_ms),
            )
            try:
                return server.start()
            except RuntimeError:  # most likely its port or bus port was taken meanwhile
                server.stop()
        raise RuntimeError(f"could not start a cluster node of {self.binary}")

    def node(self, i: int, **kwargs: Any) -> redis.Redis:
        """A plain client of node ``i``: it sees only that node's keys, and
        gets MOVED / ASK for the others."""
        return self.nodes[i].client(decode_responses=True, **kwargs)

    def command(self, i: int, *args: Any) -> Any:
        """One raw command to node ``i``."""
        return cast(Any, self.node(i)).execute_command(*args)

    def client(self, **kwargs: Any) -> redis.cluster.RedisCluster:
        """A cluster client, which routes each command to the node of its slot."""
        return redis.cluster.RedisCluster(host="127.0.0.1", port=self.nodes[0].port, **kwargs)

    def stable_url(self) -> str:
        """The URL of node 0 (a cluster client finds the others from it), once the cluster
        is stable."""
        self.wait_stable()
        return f"redis://127.0.0.1:{self.nodes[0].port}"

    def async_client(self, **kwargs: Any) -> redis.asyncio.cluster.RedisCluster:
        """An asyncio cluster client (create and use it inside the event loop)."""
        return redis.asyncio.cluster.RedisCluster(
            host="127.0.0.1", port=self.nodes[0].port, **kwargs
        )

    def asking(self, i: int, *command: Any) -> Any:
        """``command`` sent to node ``i`` right after ASKING, on one connection,
        as a client does after an ASK redirection."""
        pipe: Any = self.node(i).pipeline(transaction=False)
        pipe.execute_command("ASKING")
        pipe.execute_command(*command)
        return pipe.execute()[1]

    def _nodes_view(self, i: int) -> dict[str, Any]:
        return dict(self.node(i).cluster("NODES"))  # parsed by redis-py

    def _ranges(self, i: int) -> list[tuple[int, int, str]]:
        """Node ``i``'s view as (first, last, owner id) slot ranges, in slot order, adjacent
        ranges of one owner merged: two nodes agree on every slot's owner if and only if
        their lists are equal (3 ranges, where a slot map is 16,384 entries)."""
        return _merged(self._nodes_view(i))

    def slot_map(self, i: int) -> list[str]:
        """Node ``i``'s view: the id of the owner of every slot ('' if none)."""
        owners = [""] * SLOTS
        for first, last, node_id in self._ranges(i):
            owners[first : last + 1] = [node_id] * (last - first + 1)
        return owners

    def owner(self, slot: int) -> int:
        """The index of the node that owns ``slot``; every node must agree."""
        views = {
            next((node_id for first, last, node_id in self._ranges(i) if first <= slot <= last), "")
            for i in range(self.size)
        }
        assert len(views) == 1, f"nodes disagree on the owner of slot {slot}: {views}"
        return self.ids.index(views.pop())

    def keyslot(self, key: str) -> int:
        """The slot of ``key``, as the server computes it (CLUSTER KEYSLOT)."""
        return int(self.node(0).cluster("KEYSLOT", key))

    def wait_stable(self, timeout: float = 20.0) -> None:
        """Until every node says cluster_state:ok, knows every node, no slot is
        being migrated, and all agree on the owner of every slot."""
        deadline = time.monotonic() + timeout
        while True:
            infos = [self.node(i).cluster("INFO") for i in range(self.size)]
            if all(
                info["cluster_state"] == "ok"
                and int(info["cluster_known_nodes"]) == self.size
                and int(info["cluster_slots_assigned"]) == SLOTS
                for info in infos
            ):
                views = [self._nodes_view(i) for i in range(self.size)]
                maps = [_merged(view) for view in views]
                migrating = any(e["migrations"] for view in views for e in view.values())
                if not migrating and all(m == maps[0] for m in maps) and _every_slot(maps[0]):
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"cluster did not become stable: {infos}")
            time.sleep(0.05)

    def migrate_slot(
        self,
        slot: int,
        source: int,
        target: int,
        *,
        between: Between | None = None,
        first: Sequence[str] = (),
        batch: int = 10,
        timeout_ms: int = 5000,
    ) -> int:
        """Moves ``slot`` from node ``source`` to node ``target``: the keys
        ``first`` in one MIGRATE, then the rest ``batch`` keys per MIGRATE,
        calling ``between`` after each step (see Between). Returns the number
        of keys it sent to the target. If ``between`` raises, the migration still completes
        (the cluster is left stable) and the exception is raised after it."""
        failure: BaseException | None = None

        def step(name: str, moved: int) -> None:
            nonlocal failure
            if between is not None and failure is None:
                try:
                    between(name, moved)
                except BaseException as error:
                    failure = error

        src, dst = self.node(source), self.node(target)
        dst.cluster("SETSLOT", slot, "IMPORTING", self.ids[source])
        src.cluster("SETSLOT", slot, "MIGRATING", self.ids[target])
        step("marked", 0)
        moved = 0
        keys: list[str] = list(first)
        while keys or (keys := src.cluster("GETKEYSINSLOT", slot, batch)):
            self.command(
                source,
                "MIGRATE",
                "127.0.0.1",
                self.nodes[target].port,
                "",
                0,
                timeout_ms,
                "KEYS",
                *keys,
            )
            moved += len(keys)
            keys = []
            if int(src.cluster("COUNTKEYSINSLOT", slot)) > 0:
                step("batch", moved)
        step("moved", moved)
        # The target first, so that a client sent there by the source's MOVED
        # finds it owning the slot (the order the Redis Cluster specification gives).
        for i in (target, source, *(i for i in range(self.size) if i not in (source, target))):
            self.node(i).cluster("SETSLOT", slot, "NODE", self.ids[target])
        self.wait_stable()
        if failure is not None:
            raise failure
        return moved

    def add_replicas(self, per_master: int = 1, timeout: float = 20.0) -> Cluster:
        """``per_master`` replicas per master (node i's are ``replicas[i + k * size]``),
        joined and in sync (master_link_status up: a replica that never synced may not
        take over)."""
        for i, port in enumerate(_ports(self.size * per_master)):
            i %= self.size
            replica = self._start_node(port)
            self.replicas.append(replica)
            self.command(0, "CLUSTER MEET", "127.0.0.1", replica.port)
            deadline = time.monotonic() + timeout
            while True:  # until the replica has heard of its master
                try:
                    replica.client().execute_command("CLUSTER REPLICATE", self.ids[i])
                    break
                except redis.ResponseError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        deadline = time.monotonic() + timeout
        while any(
            r.client().info("replication").get("master_link_status") != "up" for r in self.replicas
        ):
            if time.monotonic() > deadline:
                raise RuntimeError("the replicas did not sync")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        for server in [*self.nodes, *self.replicas]:
            server.stop()
        self.nodes.clear()
        self.replicas.clear()


def _merged(view: dict[str, Any]) -> list[tuple[int, int, str]]:
    """A parsed CLUSTER NODES as (first, last, owner id) slot ranges, in slot order, adjacent
    ranges of one owner merged."""
    ranges = sorted(
        (int(bounds[0]), int(bounds[-1]), entry["node_id"])
        for entry in view.values()
        for bounds in entry["slots"]  # [first] or [first, last]
    )
    merged: list[tuple[int, int, str]] = []
    for first, last, node_id in ranges:
        if merged and merged[-1][2] == node_id and merged[-1][1] + 1 == first:
            merged[-1] = (merged[-1][0], last, node_id)
        else:
            merged.append((first, last, node_id))
    return merged


def _every_slot(ranges: list[tuple[int, int, str]]) -> bool:
    """Whether the ranges (in slot order) give every slot exactly one owner."""
    expected = 0
    for first, last, _ in ranges:
        if first != expected:  # a slot without an owner, or one with two
            return False
        expected = last + 1
    return expected == SLOTS


def binary(kind: str) -> str:
    """The server binary of ``kind``; skips the Redis leg when redis-server is
    missing, unless MEMEVICT_REQUIRE_REDIS=1 (as tests/conftest.py does)."""
    if kind == "valkey":
        return valkey_binary()
    found = redis_binary()
    if found is None:
        if os.environ.get("MEMEVICT_REQUIRE_REDIS") == "1":
            pytest.fail("redis-server not found and MEMEVICT_REQUIRE_REDIS=1")
        pytest.skip("redis-server not installed")
    return found


_CLUSTERS = pytest.StashKey[dict[str, Cluster]]()


def shared(config: pytest.Config, kind: str) -> Cluster:
    """One cluster of ``kind`` per test session, however many modules ask for
    it (a fixture imported into two modules would otherwise build two)."""
    clusters = config.stash.setdefault(_CLUSTERS, {})
    if kind not in clusters:
        clusters[kind] = Cluster(binary(kind)).start()
        config.add_cleanup(clusters[kind].stop)
    return clusters[kind]
