"""Issue 29's campaign: acknowledged writes lost when a cluster primary is killed, default
writes against durable ones (durable_replicas=1), in one run per scenario.

A cluster of 3 masters with a replica each (node timeout 1 s, this machine's servers).
``--workers`` threads remember unique ids, each into its own namespace (so every one has
its memories' only writer), alternating default and durable stores; one of the
namespaces' masters (the "busy" slot's) is killed ``--kills`` times with SIGKILL, every
``--every`` seconds. After each kill the killed server is started again from its data
directory once a replica has taken over (it rejoins as a replica of the promoted one;
started before that, without persistence, it would keep its slots, empty) and the next
kill waits until it has synced. ``--lag`` freezes (SIGSTOP) the busy master's replica
for 2 s before each kill and thaws it right after, so the replica that takes over is
2 s behind.

A call that returns is acknowledged (for a durable store: confirmed); NotDurable
(applied, not confirmed) and errors are counted apart, and the worker goes on with a
new id. At the end every acknowledged id is looked for (``get``, after the cluster has
settled): a missing one is lost. Only the namespaces on the killed slot's master can
lose anything; the others are reported too (they must lose nothing).

The rules are checked through every kill (``rules``): on a namespace of the killed
master, ``--rule-threads`` threads send ``memevict stress``'s mix of calls (remember,
touch, decay, evict, whitelist, demote, recall, forget, bursts; a small policy, so every
rule fires) through durable stores, while a reader checks atomic snapshots; at the end
the backlog is drained and each id's tier and the call log are checked
(memevict.stress.Threaded). ``--replicas 2`` gives each master two replicas.

``--sentinel``: a primary and one replica under 3 Sentinels (quorum 2, down after 2 s)
instead of the cluster, the stores on redis-py's ``Sentinel.master_for`` clients with 10
resends; the primary is killed and, once every Sentinel names the promoted replica,
started again empty (no persistence, no dump), as a supervisor would: until the Sentinels make
it a replica it is an empty master at the old address, which calls still resent there
reach (the split brain of issue 29). With ``--lag`` the replica is frozen for 2 s before
each kill there too. A call that meets it raises
NamespaceLost (counted) instead of writing there; the Sentinels then make it a replica
of the promoted one.

``--sync-delay S``: the servers' repl-diskless-sync-delay (by default theirs, 5 s: a
restarted server's sync waits that long for more replicas, and a durable write on its
master is not confirmed meanwhile); the first sync of the replicas never waits.

    python benchmarks/failover_campaign.py [--server valkey|redis] [--kills 4]
        [--every 3] [--workers 8] [--rule-threads 2] [--replicas 1] [--lag] [--sentinel]
        [--sync-delay S] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis
from _harness import Process, Run, binary, cluster, free_port, node, parser, started, wait_synced
from redis.backoff import ExponentialBackoff
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, Sentinel

from memevict import MemoryStore, NotDurable, Policy
from memevict.commands import MAX_SCAN
from memevict.scripts import key_name
from memevict.stress import MemevictTarget, Threaded, stress_policy

if TYPE_CHECKING:
    from tests.cluster import Cluster

POLICY = Policy(max_hot=1_000_000, protect_s=0, cold_max=1_000_000)


def serving(c: Cluster, slot: int) -> Process:
    """The server that is master of ``slot`` now (asked of any node that answers)."""
    by_port = {s.port: s for s in [*c.nodes, *c.replicas]}
    for server in by_port.values():
        if server.process is None:
            continue
        try:
            for first, last, master, *_ in server.client().cluster("SLOTS"):
                if first <= slot <= last:
                    return by_port[int(master[1])]
        except redis.RedisError:
            continue
    raise RuntimeError(f"no node serves slot {slot}")


def replica_of(c: Cluster, master: Process) -> Process | None:
    info = master.client().info("replication")
    ports = [int(v["port"]) for k, v in info.items() if k.startswith("slave")]
    found = [s for s in [*c.nodes, *c.replicas] if s.port in ports and s.process is not None]
    return found[0] if found else None


class Worker(threading.Thread):
    def __init__(
        self, client: redis.Redis | redis.cluster.RedisCluster, namespace: str, durable: bool,
        stop: threading.Event,
    ) -> None:  # fmt: skip
        super().__init__(daemon=True)
        self.namespace, self.durable, self.stop = namespace, durable, stop
        self.client = client
        self.store = MemoryStore(
            self.client,
            namespace,
            POLICY,
            durable_replicas=1 if durable else 0,
            durable_timeout_ms=1000,
            migration_wait_s=30,
        )
        self.acked: list[str] = []
        self.counts: Counter[str] = Counter()
        self.gap = 0.0  # the longest time without an acknowledged call

    def run(self) -> None:
        n, last = 0, time.monotonic()
        while not self.stop.is_set():
            id = f"{self.namespace}-{n}"
            n += 1
            try:
                self.store.remember(id, 1.0 + n % 7)
                self.acked.append(id)
                now = time.monotonic()
                self.gap, last = max(self.gap, now - last), now
            except NotDurable:
                self.counts["not confirmed"] += 1
            except Exception as error:  # (a failover outlasting the resends)
                self.counts[type(error).__name__] += 1

    def lost(self) -> list[str]:
        """The acknowledged ids in neither tier (scanned 200 a call, not one get each)."""
        kept: set[str] = set()
        for tier in ("hot", "cold"):
            cursor = None
            while cursor != 0:
                page = self.store.scan(tier, cursor or 0, MAX_SCAN)
                kept.update(m.id for m in page.memories)
                cursor = page.cursor
        return [id for id in self.acked if id not in kept]


def rules(
    client_of: Callable[[], Any], namespace: str, threads: int, stop: threading.Event
) -> Threaded:
    """memevict stress's mix of calls on ``namespace`` through durable stores, checked
    through the kills. A confirmed call counts as done; NotDurable ones are known but may
    be lost; one whose connection failed may or may not have been applied (UNKNOWN)."""
    return Threaded(
        lambda: MemevictTarget(
            client_of(),
            namespace,
            stress_policy(),
            durable_replicas=1,
            durable_timeout_ms=1000,
            migration_wait_s=30,
        ),
        stress_policy(),
        threads,
        stop,
    )


def report_rules(run: Threaded) -> dict[str, Any]:
    records, c = run.finish(), run.checker
    found = {
        "calls": len(records),
        "outcomes": dict(Counter(r.outcome for r in records)),
        "snapshots": len(run.snapshots),
        "unreadable": run.unreadable,
        "checks": c.checks,
        "violations": dict(c.violations),
    }
    print(
        f"  rules (durable, memevict stress's mix): {len(records):,} calls "
        f"{found['outcomes']} | {len(run.snapshots):,} snapshots "
        f"({run.unreadable} unreadable) | {c.checks:,} checks, "
        f"{sum(c.violations.values())} violations"
    )
    for kind, n in sorted(c.violations.items()):
        print(f"    {kind}: {n}  e.g. {c.examples[kind]}")
    return found


def campaign(run: Run, opts: argparse.Namespace) -> dict[str, Any]:
    stop = threading.Event()
    kind, delay = binary(opts.server), opts.sync_delay
    with cluster(kind, replicas=opts.replicas, node_timeout_ms=1000, sync_delay=delay) as c:
        run.on(node(c.node(0), c.nodes[0].url))
        try:
            return _campaign(
                c, opts.server, opts.kills, opts.every, opts.workers, opts.lag,
                opts.rule_threads, opts.replicas, stop,
            )  # fmt: skip
        finally:
            stop.set()  # (the threads end on a failure too)


def _campaign(
    c: Cluster, kind: str, kills: int, every: float, workers: int, lag: bool,
    rule_threads: int, replicas: int, stop: threading.Event,
) -> dict[str, Any]:  # fmt: skip
    busy = c.keyslot(key_name("w0", "meta"))
    team = [Worker(c.client(), f"w{i}", i % 2 == 1, stop) for i in range(workers)]
    namespace = next(  # (the rules' namespace: one on the killed master)
        f"rules{k}"
        for k in range(100)
        if serving(c, c.keyslot(key_name(f"rules{k}", "meta"))) is serving(c, busy)
    )
    checked = rules(c.client, namespace, rule_threads, stop)
    first = serving(c, busy)  # (the namespaces of the same master are hit too)
    on_busy = {
        w.namespace for w in team if serving(c, c.keyslot(key_name(w.namespace, "meta"))) is first
    }
    for w in team:
        w.start()
    for _ in range(kills):
        time.sleep(every)
        master = serving(c, busy)
        replica = replica_of(c, master)
        if lag and replica is not None and replica.process is not None:
            os.kill(replica.process.pid, signal.SIGSTOP)
            time.sleep(2.0)
        master.crash()
        if lag and replica is not None and replica.process is not None:
            os.kill(replica.process.pid, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while serving(c, busy) is master:  # (a replica takes over first: restarted
            if time.monotonic() > deadline:  # before, an empty master keeps its slots)
                raise RuntimeError("no replica took over")
            time.sleep(0.1)
        master.start()  # (its data directory kept: it rejoins as a replica)
        wait_synced(master)
    time.sleep(every)
    stop.set()
    for w in team:
        w.join()
    time.sleep(2.0)  # (settled)
    print(
        f"{kind}, {replicas} replica(s) per master, {kills} kills"
        f"{' with the replica 2 s behind' if lag else ''}, {workers} workers"
    )
    return {"writes": report(team, on_busy), "rules": report_rules(checked)}


def report(team: list[Worker], on_busy: set[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """Acknowledged and lost, by kind of store and by whether the namespace was hit."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for durable in (False, True):
        for where in ("busy", "other"):
            group = [
                w
                for w in team
                if w.durable == durable and (w.namespace in on_busy) == (where == "busy")
            ]
            if not group:
                continue
            acked = sum(len(w.acked) for w in group)
            lost = sum(len(w.lost()) for w in group)
            counts = sum((w.counts for w in group), Counter())
            gap = max(w.gap for w in group)
            name = "durable_replicas=1" if durable else "default"
            print(
                f"  {name:18} {where:5} slot: acknowledged {acked:7,} lost {lost:5,} | "
                f"longest gap {gap:5.1f} s | {dict(counts) or 'no errors'}"
            )
            found.setdefault(name, {})[where] = {
                "acknowledged": acked,
                "lost": lost,
                "longest_gap_s": gap,
                "errors": dict(counts),
            }
    for w in team:
        w.client.close()
    return found


def sentinel_campaign(run: Run, opts: argparse.Namespace) -> dict[str, Any]:
    stop = threading.Event()
    with started(binary(opts.server), replicas=1, sync_delay=opts.sync_delay) as (primary, replica):
        run.on(node(primary.client(), primary.url))
        try:
            return _sentinel_campaign(
                primary, replica, opts.server, opts.kills, opts.every, opts.workers, opts.lag,
                opts.rule_threads, stop,
            )  # fmt: skip
        finally:
            stop.set()


def _sentinel_campaign(
    primary: Process, replica: Process, kind: str, kills: int, every: float, workers: int,
    lag: bool, rule_threads: int, stop: threading.Event,
) -> dict[str, Any]:  # fmt: skip
    sentinels, directory = [], Path(tempfile.mkdtemp(prefix="memevict-sentinel-"))
    try:
        ports = [free_port() for _ in range(3)]
        for port in ports:
            conf = directory / f"{port}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {directory}\n"
                f"sentinel monitor m 127.0.0.1 {primary.port} 2\n"
                "sentinel down-after-milliseconds m 2000\nsentinel failover-timeout m 10000\n"
            )
            sentinels.append(
                subprocess.Popen(
                    [binary(kind), str(conf), "--sentinel"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        sentinel = Sentinel([("127.0.0.1", p) for p in ports], socket_timeout=1.0)
        time.sleep(2.0)  # (the Sentinels find each other and the replica)
        servers = {s.port: s for s in (primary, replica)}

        def master() -> Process | None:  # (None while the Sentinels see it down)
            try:
                return servers[int(sentinel.discover_master("m")[1])]
            except MasterNotFoundError:
                return None

        def promoted(old: Process) -> bool:
            """Every Sentinel names another master, and that one says it is master."""
            try:
                named = {
                    int(redis.Redis(port=p).sentinel_get_master_addr_by_name("m")[1]) for p in ports
                }
                if len(named) != 1 or old.port in named:
                    return False
                info = servers[named.pop()].client().info("replication")
                return bool(info["role"] == "master")
            except (redis.RedisError, TypeError):
                return False

        def client() -> redis.Redis:
            retry = Retry(ExponentialBackoff(cap=0.5, base=0.05), 10)
            return sentinel.master_for("m", socket_timeout=1.0, retry=retry)

        team = [Worker(client(), f"w{i}", i % 2 == 1, stop) for i in range(workers)]
        checked = rules(client, "rules", rule_threads, stop)
        for w in team:
            w.start()
        for _ in range(kills):
            time.sleep(every)
            old = master()
            assert old is not None
            (behind,) = [s for s in servers.values() if s is not old]
            if lag and behind.process is not None:
                os.kill(behind.process.pid, signal.SIGSTOP)
                time.sleep(2.0)
            old.crash()
            if lag and behind.process is not None:
                os.kill(behind.process.pid, signal.SIGCONT)
            deadline = time.monotonic() + 30
            while not promoted(old):  # (restarted before, it may win the failover back)
                if time.monotonic() > deadline:
                    raise RuntimeError("the Sentinels promoted no replica")
                time.sleep(0.1)
            # Empty, as a supervisor restarts a server without persistence: without the
            # dump a replica's full sync left in its directory (stale data a master would
            # serve until the Sentinels convert it), and without the --replicaof of its
            # first start (a master until the Sentinels convert it).
            for dump in old.directory.glob("*.rdb"):
                dump.unlink()
            if "--replicaof" in old.extra:
                at = old.extra.index("--replicaof")
                old.extra = old.extra[:at] + old.extra[at + 3 :]
            old.start()
            wait_synced(old, timeout=90)
        time.sleep(every)
        stop.set()
        for w in team:
            w.join()
        time.sleep(2.0)
        print(
            f"{kind} under 3 Sentinels, {kills} kills each restarted empty"
            f"{', the replica 2 s behind' if lag else ''}, {workers} workers"
        )
        return {"writes": report(team, {w.namespace for w in team}), "rules": report_rules(checked)}
    finally:
        stop.set()
        for p in sentinels:
            p.kill()
            p.wait()
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--server", choices=("valkey", "redis"), default="valkey")
    cli.add_argument("--kills", type=int, default=4)
    cli.add_argument("--every", type=float, default=3.0)
    cli.add_argument("--workers", type=int, default=8)
    cli.add_argument("--rule-threads", type=int, default=2)
    cli.add_argument("--replicas", type=int, choices=(1, 2), default=1)
    cli.add_argument("--lag", action="store_true")
    cli.add_argument("--sentinel", action="store_true")
    cli.add_argument(
        "--sync-delay",
        type=int,
        help="the servers' repl-diskless-sync-delay, s (default: theirs, 5)",
    )
    opts = cli.parse_args()
    run = Run(opts)
    found = (sentinel_campaign if opts.sentinel else campaign)(run, opts)
    writes = found["writes"]
    lost = {name: sum(w["lost"] for w in where.values()) for name, where in writes.items()}
    acked = {name: sum(w["acknowledged"] for w in where.values()) for name, where in writes.items()}
    violations = sum(found["rules"]["violations"].values())
    setup = "Sentinel" if opts.sentinel else f"cluster, {opts.replicas} replica(s) per master"
    run.row(
        "The failover campaign",
        f"{setup}, {run.environment.get('server', opts.server)}"
        f"{', replica 2 s behind' if opts.lag else ''}: durable writes confirmed / lost "
        f"{acked['durable_replicas=1']:,} / {lost['durable_replicas=1']:,}, default "
        f"{acked['default']:,} / {lost['default']:,}; {violations} rule violations in "
        f"{found['rules']['checks']:,} checks",
    )
    run.finish(found)


if __name__ == "__main__":
    main()
