"""Security: a least-privilege ACL user per namespace, namespace isolation, no injection.

memevict.acl derives a user's ACL rules from the Lua sources. These tests
create that user on the real servers and prove the rules are enough (every
method and the rule scenarios run under it), that each derived command is
needed, that the user reaches no other namespace, that a namespace's ids
cannot reach another namespace even without an ACL, and that nothing a caller
passes ever becomes Lua source.
"""

from __future__ import annotations

import inspect
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
import redis
from redis.connection import Connection
from redis.exceptions import NoPermissionError

import tests.test_rules
from memevict import (
    BadArgument,
    BadNamespace,
    Item,
    MemevictError,
    MemoryStore,
    NotFound,
    PermissionDenied,
    Policy,
)
from memevict.acl import LOADER_COMMANDS, acl_rules, acl_setuser_line, commands, script_commands
from memevict.functions import library
from memevict.scripts import RECEIPT, key_name, namespace_keys, specs
from tests.conftest import scenario_policy
from tests.servers import Server

T0 = 1_700_000_000_000
S = 1000

Snapshot = dict[bytes, bytes | None]


def snapshot(client: redis.Redis, namespace: str) -> Snapshot:
    """DUMP of every key the namespace can have."""
    keys = [k.encode() for k in namespace_keys(namespace)]
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.dump(key)
    return dict(zip(keys, pipe.execute(), strict=True))


def all_keys(client: redis.Redis) -> set[bytes]:
    """Every key but the write receipts (<prefix>call:<id>), which expire on their own."""
    return {k for k in client.keys("*") if b":call:" not in k}


def of_namespaces(*namespaces: str) -> set[str]:
    """The fixed keys of these namespaces, and the names their receipts can take."""
    return {*(k for ns in namespaces for k in namespace_keys(ns)),
            *(key_name(ns, role) for ns in namespaces for role in ("call:", RECEIPT))}  # fmt: skip


def in_namespaces(key: str, *namespaces: str) -> bool:
    receipts = tuple(key_name(ns, "call:") for ns in namespaces)
    return key in of_namespaces(*namespaces) or key.startswith(receipts)


def acl_log(admin: redis.Redis) -> list[tuple[str, str, str]]:
    """(user, reason, object) of every ACL LOG entry."""
    return [
        (e[b"username"].decode(), e[b"reason"].decode(), e[b"object"].decode())
        for e in admin.execute_command("ACL", "LOG")
    ]


UserFactory = Callable[..., redis.Redis]


@pytest.fixture
def make_user(server: Server, client: redis.Redis) -> Iterator[UserFactory]:
    """Makes an ACL user with the given rules (acl_rules(namespace) by default)
    and returns a client authenticated as that user."""
    made: list[tuple[str, redis.Redis]] = []

    def make(
        namespace: str,
        rules: Sequence[str] | None = None,
        connection_class: type[Connection] | None = None,
        **kwargs: Any,
    ) -> redis.Redis:
        user, password = f"user-{secrets.token_hex(4)}", secrets.token_hex(16)
        rules = acl_rules(namespace) if rules is None else rules
        client.execute_command("ACL", "SETUSER", user, "reset", "on", f">{password}", *rules)
        if connection_class is None:
            restricted = server.client(username=user, password=password, **kwargs)
        else:
            # A pool built directly: redis-py 8 then also sends HELLO 3 and
            # CLIENT MAINT_NOTIFICATIONS on connect.
            pool = redis.ConnectionPool(
                host="127.0.0.1",
                port=server.port,
                username=user,
                password=password,
                connection_class=connection_class,
                **kwargs,
            )
            restricted = redis.Redis(connection_pool=pool)
        made.append((user, restricted))
        return restricted

    client.execute_command("ACL", "LOG", "RESET")
    yield make
    for user, restricted in made:
        restricted.close()
        client.execute_command("ACL", "DELUSER", user)


# ---------------------------------------------------------------------------
# One scenario that runs every method and every path of every script: eviction,
# whitelist cap demotion, the cold tier and its trimming, recall, decay ticks,
# receipts and their expiry, a policy replaced with a new half-life, and the
# EVAL fallback after SCRIPT FLUSH. Ids go through `ids` so the same scenario
# runs with hostile ids.

POLICY = Policy(
    max_hot=3, whitelist_cap=1, cold_max=1, protect_s=30, retry_window_s=0.001, log_max=50
)


@dataclass
class Run:
    client: redis.Redis  # the client under test (often a restricted user)
    admin: redis.Redis
    namespace: str
    ids: dict[str, str] = field(default_factory=dict)
    store: MemoryStore | None = None

    def id(self, name: str) -> str:
        return self.ids.get(name, name)

    @property
    def s(self) -> MemoryStore:
        assert self.store is not None
        return self.store


def evals(admin: redis.Redis) -> int:
    stats = admin.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("eval", "eval_ro"))


def construct(r: Run) -> None:
    # EVALSHA, whose NOSCRIPT paths the scenario goes through (script_flush);
    # the default mode's choice for this user: test_the_default_mode_...
    r.store = MemoryStore(r.client, r.namespace, POLICY, mode="scripts")
    assert r.store.policy == POLICY


def load(r: Run) -> None:
    assert r.s.registry.load() == {name: spec.sha for name, spec in specs().items()}


def remember_a(r: Run) -> None:
    assert r.s.remember(r.id("a"), 5.0, text="kept", now=T0).evicted == ()


def remember_w(r: Run) -> None:
    assert 40.0 <= r.s.remember(r.id("w"), 4.0, whitelist=True, now=T0).score < 40.01


def remember_v_past_the_cap(r: Run) -> None:
    time.sleep(0.005)  # the receipts of earlier calls expire: this call drops them
    assert r.s.remember(r.id("v"), 3.0, whitelist=True, now=T0).demoted == (r.id("v"),)


def remember_b_evicts_v(r: Run) -> None:
    assert r.s.remember(r.id("b"), 1.0, now=T0 + 60 * S).evicted == (r.id("v"),)


def remember_c_evicts_a_and_trims_cold(r: Run) -> None:
    assert r.s.remember(r.id("c"), 2.0, now=T0 + 61 * S).evicted == (r.id("a"),)
    assert r.s.get(r.id("v"), now=T0 + 61 * S) is None  # cold_max 1: v is gone for good
    a = r.s.get(r.id("a"), now=T0 + 61 * S)
    assert a is not None and (a.tier, a.text) == ("cold", "kept")


def touch(r: Run) -> None:
    assert r.s.touch(r.id("c"), now=T0 + 62 * S) is not None


def decay(r: Run) -> None:
    r.s.decay(0.5)


def evict(r: Run) -> None:
    assert r.s.evict(now=T0 + 100 * S).evicted == ()


def remember_d(r: Run) -> None:
    assert r.s.remember(r.id("d"), 9.0, now=T0 + 100 * S).evicted == (r.id("b"),)
    assert r.s.get(r.id("a"), now=T0 + 100 * S) is None  # trimmed from the cold tier


def whitelist_cold(r: Run) -> None:
    got = r.s.whitelist(r.id("b"), now=T0 + 200 * S)
    assert (got.demoted, got.evicted) == ((r.id("b"),), (r.id("c"),))


def demote(r: Run) -> None:
    assert r.s.demote(r.id("w"), now=T0 + 300 * S).demoted == (r.id("w"),)


def recall(r: Run) -> None:
    assert r.s.recall(r.id("c"), now=T0 + 300 * S).evicted == (r.id("b"),)


def reads(r: Run) -> None:
    c = r.s.get(r.id("c"), now=T0 + 300 * S)
    assert c is not None and (c.id, c.tier, c.text) == (r.id("c"), "hot", None)
    assert r.s.get(r.id("c")) is not None  # the server clock
    top = [m.id for m in r.s.top(10, now=T0 + 300 * S)]
    assert top == [r.id("d"), r.id("w"), r.id("c")]
    stats = r.s.stats(now=T0 + 300 * S)
    assert (stats.hot, stats.cold, stats.whitelisted, stats.protected) == (3, 1, 0, 1)
    assert r.s.stats().protected == 0  # the server clock is years past T0
    window = r.s.window(tokens=2, now=T0 + 300 * S)
    assert [m.id for m in window] == [r.id("w"), r.id("d")]  # the top two, in time order
    why = r.s.explain(r.id("c"), 2, now=T0 + 300 * S)  # (recalled: protected, third)
    assert (why.tier, why.rank) == ("protected", 3) and why.window is not None
    assert (why.window.included, why.window.reason) == (False, "ranked_out")
    context = r.s.context(tokens=2, now=T0 + 300 * S, detail=True)
    assert [(id, text) for id, text in context] == [(m.id, m.text) for m in window]
    assert context.sizes == tuple(m.tokens for m in window)
    version = r.s.version()  # (a plain HGETALL of the state: allowed by the rules)
    assert version is not None and (version.epoch, version.version) == (
        context.epoch,
        context.version,
    )
    page = r.s.scan("cold", 0, 100, now=T0 + 300 * S)
    cold = [
        r.id(x) for x in "abcdvw" if (m := r.s.get(r.id(x), now=T0 + 300 * S)) and m.tier == "cold"
    ]
    assert [m.id for m in page.memories] == cold and len(cold) == 1 and page.cursor == 0
    log = r.s.evictions()  # (a plain XREVRANGE of the log: allowed by the rules)
    assert cold[0] in {e.id for e in log if e.to_tier == "cold"}
    assert r.s.evictions(since=log[0].log_id, count=200) == log[1:]
    assert r.s.search("kept", 5, now=T0 + 300 * S) == []  # (a, trimmed: gone from the index)


def read_only_store(r: Run) -> None:
    replica_view = MemoryStore(r.client, r.namespace, read_only=True, mode="scripts")
    assert replica_view.policy == POLICY
    assert [m.id for m in replica_view.top(2, now=T0 + 300 * S)] == [r.id("d"), r.id("w")]


def forget(r: Run) -> None:
    r.s.forget(r.id("d"))
    assert r.s.get(r.id("d"), now=T0) is None
    with pytest.raises(NotFound):
        r.s.forget(r.id("d"))


def remember_many(r: Run) -> None:
    batch = r.s.remember_many([(r.id("d"), 2.0), Item(r.id("e"), 3.0, text="t")], now=T0 + 350 * S)
    assert batch.ids == (r.id("d"), r.id("e"))
    e = r.s.get(r.id("e"), now=T0 + 350 * S)
    assert e is not None and (e.tier, e.text) == ("hot", "t")


def set_policy(r: Run) -> None:
    r.s.set_policy(Policy(max_hot=1, half_life_s=60, cold_max=1, retry_window_s=0.001))
    assert r.s.reload_policy().max_hot == 1
    assert r.s.stats().hot == 1


def script_flush(r: Run) -> None:
    r.admin.script_flush()


def after_script_flush(r: Run) -> None:
    before = evals(r.admin)
    r.s.remember(r.id("e"), 50.0, now=T0 + 400 * S)
    e = r.s.get(r.id("e"), now=T0 + 400 * S)
    assert e is not None and e.tier == "hot"
    assert evals(r.admin) - before == 2  # EVAL, then EVAL_RO, re-sent the sources


def drop(r: Run) -> None:
    assert r.s.drop() > 0
    assert not any(in_namespaces(k.decode(), r.namespace) for k in all_keys(r.admin))
    r.s.close()  # the caller's client stays open
    assert r.s.stats().hot == 0  # (a fresh, empty namespace, configured again)
    assert r.s.recreate() == r.s.policy  # (there: configure changes nothing)


STEPS: list[Callable[[Run], None]] = [
    construct,
    load,
    remember_a,
    remember_w,
    remember_v_past_the_cap,
    remember_b_evicts_v,
    remember_c_evicts_a_and_trims_cold,
    touch,
    decay,
    evict,
    remember_d,
    whitelist_cold,
    demote,
    recall,
    reads,
    read_only_store,
    forget,
    remember_many,
    set_policy,
    script_flush,
    after_script_flush,
    drop,
]


def run_scenario(r: Run) -> None:
    for step in STEPS:
        step(r)


def test_the_scenario_calls_every_public_method() -> None:
    source = "\n".join(inspect.getsource(step) for step in STEPS)
    public = {n for n, _ in inspect.getmembers(MemoryStore, inspect.isfunction) if n[0] != "_"}
    assert public == set(re.findall(r"r\.s\.(\w+)\(", source))


def fill_other(admin: redis.Redis, namespace: str) -> MemoryStore:
    """Another namespace with data in every state, which nothing may change."""
    store = MemoryStore(admin, namespace, Policy(max_hot=2, whitelist_cap=1, protect_s=0))
    store.remember("x", 1.0, text="other", now=T0)
    store.remember("y", 2.0, whitelist=True, now=T0)
    store.remember("z", 3.0, now=T0)
    store.remember("q", 4.0, now=T0)
    return store


# ---------------------------------------------------------------------------
# (a) The derived rules are enough.


@pytest.mark.parametrize("protocol", [2, 3], ids=["RESP2", "RESP3"])
def test_the_derived_user_runs_every_method(
    client: redis.Redis, make_user: UserFactory, protocol: int
) -> None:
    fill_other(client, "B")
    run_scenario(Run(make_user("A", protocol=protocol), client, "A"))
    assert all(in_namespaces(k.decode(), "A", "B") for k in all_keys(client))
    # Only refusals of CLIENT SETINFO, which redis-py sends on connect and ignores
    # refused (Valkey; Redis 7.0 does not know it).
    assert {obj for _, _, obj in acl_log(client)} <= {"client|setinfo"}


def rule_cases() -> list[Any]:
    """Every test of tests/test_rules.py, one case per parameter set of the
    parametrized ones (each has at most one parametrize mark)."""
    cases = []
    for name, test in inspect.getmembers(tests.test_rules, inspect.isfunction):
        if not name.startswith("test_"):
            continue
        marks = [m for m in getattr(test, "pytestmark", []) if m.name == "parametrize"]
        if not marks:
            cases.append(pytest.param(name, {}, id=name))
            continue
        (mark,) = marks
        argnames, sets = mark.args[0], mark.args[1]
        names = [argnames] if isinstance(argnames, str) else list(argnames)
        for values in sets:
            kwargs = dict(zip(names, values if len(names) > 1 else [values], strict=True))
            cases.append(pytest.param(name, kwargs, id=f"{name}{list(kwargs.values())}"))
    return sorted(cases, key=lambda case: str(case.id))


@pytest.mark.parametrize(("name", "params"), rule_cases())
def test_the_rule_scenarios_run_as_the_derived_user(
    client: redis.Redis, make_user: UserFactory, name: str, params: dict[str, Any]
) -> None:
    # tests/test_rules.py, with its stores made on the restricted client
    # (its namespace is "t"); `client` stays the admin it inspects with.
    restricted = make_user("t")

    def make_store(namespace: str = "t", **policy: Any) -> MemoryStore:
        return MemoryStore(restricted, namespace, scenario_policy(**policy))

    test = getattr(tests.test_rules, name)
    available = {"make_store": make_store, "client": client, **params}
    test(**{p: available[p] for p in inspect.signature(test).parameters})


# ---------------------------------------------------------------------------
# (b) The user is refused everywhere else, before anything is written.

OTHER_NAMESPACES = ["B", "AB", "A:B", "a", "A:"]


@pytest.mark.parametrize("other", OTHER_NAMESPACES)
def test_the_user_is_refused_on_another_namespace(
    client: redis.Redis, make_user: UserFactory, other: str
) -> None:
    fill_other(client, other)
    user_a = make_user("A")
    before, keys = snapshot(client, other), all_keys(client)
    with pytest.raises(PermissionDenied):
        MemoryStore(user_a, other)
    for name, spec in specs().items():
        argv = [""] * len(spec.args)
        # B's keys, and A's keys with one of B's among them (as KEYS[1] and as the last)
        mixed_first = [key_name(other, spec.keys[0]), *spec.key_names("A")[1:]]
        mixed_last = [*spec.key_names("A")[:-1], key_name(other, spec.keys[-1])]
        for refused in (spec.key_names(other), mixed_first, mixed_last):
            with pytest.raises(NoPermissionError):
                user_a.evalsha(spec.sha, len(refused), *refused, *argv)
            with pytest.raises(NoPermissionError):
                user_a.eval(spec.source, len(refused), *refused, *argv)
        assert snapshot(client, other) == before, name
    assert all_keys(client) == keys
    log = acl_log(client)
    refused_keys = {obj for _, reason, obj in log if reason == "key"}
    assert refused_keys and all(in_namespaces(k, other) for k in refused_keys), log
    assert {obj for _, reason, obj in log if reason != "key"} <= {"client|setinfo"}, log


def test_a_read_only_store_is_refused_on_another_namespace(
    client: redis.Redis, make_user: UserFactory
) -> None:
    fill_other(client, "B")
    before = snapshot(client, "B")
    with pytest.raises((MemevictError, NoPermissionError)) as raised:
        MemoryStore(make_user("A"), "B", read_only=True)
    assert snapshot(client, "B") == before
    assert isinstance(raised.value, PermissionDenied), raised.value


# ---------------------------------------------------------------------------
# (c) Every derived command is needed, and a missing one is refused in time.

# SCRIPT EXISTS is granted for operators checking a preload; memevict sends none.
# FCALL and FCALL_RO are for functions mode (tests/test_functions.py); the scenario runs EVALSHA.
NEEDED = [c for c in commands() if c not in ("script|exists", "fcall", "fcall_ro")]


class WatchedConnection(Connection):
    """Calls `before_send` before every command, so a test can take a snapshot
    right before the command that fails."""

    before_send: ClassVar[Callable[[], None] | None] = None

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        if WatchedConnection.before_send is not None:
            WatchedConnection.before_send()
        super().send_command(*args, **kwargs)


def run_until_refused(
    admin: redis.Redis, make_user: UserFactory, rules: Sequence[str]
) -> tuple[str, BaseException, bool]:
    """Runs the scenario as a user with `rules` up to its first error:
    (step, error, whether the refused command wrote anything)."""
    last: list[tuple[Snapshot, set[bytes]]] = []

    def take() -> None:
        last[:] = [(snapshot(admin, "A"), all_keys(admin))]

    r = Run(make_user("A", rules, WatchedConnection), admin, "A")
    WatchedConnection.before_send = take
    try:
        for step in STEPS:
            try:
                step(r)
            except Exception as error:
                WatchedConnection.before_send = None
                wrote = last != [(snapshot(admin, "A"), all_keys(admin))]
                return step.__name__, error, wrote
    finally:
        WatchedConnection.before_send = None
    raise AssertionError("the scenario ran without the command")


@pytest.mark.parametrize("command", NEEDED)
def test_every_derived_command_is_needed(
    client: redis.Redis, make_user: UserFactory, command: str
) -> None:
    rules = [rule for rule in acl_rules("A") if rule != f"+{command}"]
    assert len(rules) == len(acl_rules("A")) - 1
    step, error, _ = run_until_refused(client, make_user, rules)
    assert isinstance(error, MemevictError | NoPermissionError), (step, error)
    # The refused command is the missing one: the ACL LOG names it, or (a
    # script that checks its commands up front) the error does.
    logged = {obj for _, reason, obj in acl_log(client) if reason == "command"}
    assert command in logged or command in str(error).lower(), (step, error, logged)


@pytest.mark.parametrize("command", NEEDED)
def test_a_missing_command_is_refused_before_any_write(
    client: redis.Redis, make_user: UserFactory, command: str
) -> None:
    rules = [rule for rule in acl_rules("A") if rule != f"+{command}"]
    step, error, wrote = run_until_refused(client, make_user, rules)
    assert not wrote, f"{step} wrote before {command} was refused"
    assert isinstance(error, PermissionDenied), (step, error)


# ---------------------------------------------------------------------------
# (d) Namespace isolation by construction: ids that look like another
# namespace's keys stay ids, with or without an ACL.

HOSTILE_IDS = {
    "a": "memevict:{B}:hot",
    "w": "{B}",
    "v": "memevict:{B}:policy",
    "b": "memevict:{B}:meta",
    "c": "}{B}{",
    "d": "B",
    "e": "memevict:{B}:*",
}


@pytest.mark.parametrize("as_user", [False, True], ids=["admin", "derived user"])
def test_ids_shaped_like_another_namespace_stay_in_theirs(
    client: redis.Redis, make_user: UserFactory, as_user: bool
) -> None:
    other = fill_other(client, "B")
    before, stats = snapshot(client, "B"), other.stats(now=T0)
    runner = make_user("A") if as_user else client
    run_scenario(Run(runner, client, "A", ids=HOSTILE_IDS))
    assert snapshot(client, "B") == before
    assert other.stats(now=T0) == stats
    assert all(in_namespaces(k.decode(), "A", "B") for k in all_keys(client))


# ---------------------------------------------------------------------------
# (e) Nothing a caller passes becomes Lua source: every script sent is one of
# the package's, byte for byte, and ids travel in ARGV only.


class RecordingConnection(Connection):
    sent: ClassVar[list[tuple[Any, ...]]] = []

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        RecordingConnection.sent.append(args)
        super().send_command(*args, **kwargs)


def as_bytes(arg: object) -> bytes:
    if isinstance(arg, bytes):
        return arg
    return str(arg).encode("utf-8", "surrogateescape")


INJECTIONS = {
    "a": "'); redis.call('FLUSHALL') --",
    "w": "]]..redis.call('FLUSHALL')..[[",
    "v": '"); redis.call("FLUSHALL") --',
    "b": "\x00'\n\r\\",
    "c": "memevict:{B}:hot",
    "d": "%s%d",
    "e": "KEYS[1]",
}
HOSTILE_NAMESPACES = ["x');redis.call('FLUSHALL');--", 'x")..redis.call("FLUSHALL")..("', "'--"]


@pytest.mark.parametrize("namespace", HOSTILE_NAMESPACES)
def test_only_the_package_scripts_are_sent(
    server: Server, client: redis.Redis, namespace: str
) -> None:
    fill_other(client, "B")
    before = snapshot(client, "B")
    pool = redis.ConnectionPool(
        host="127.0.0.1", port=server.port, connection_class=RecordingConnection
    )
    recorded = redis.Redis(connection_pool=pool)
    RecordingConnection.sent.clear()
    run_scenario(Run(recorded, client, namespace, ids=INJECTIONS))
    sent = list(RecordingConnection.sent)
    recorded.close()
    assert snapshot(client, "B") == before  # nothing was flushed

    by_source = {spec.source.encode(): spec for spec in specs().values()}
    by_sha = {spec.sha.encode(): spec for spec in specs().values()}
    ids = {as_bytes(i) for i in INJECTIONS.values()}
    in_argv: set[bytes] = set()
    names = set()
    for args in sent:
        name = str(args[0]).upper()
        names.add(name)
        if name == "SCRIPT LOAD":
            assert as_bytes(args[1]) in by_source
        elif name == "HMGET":  # a read-only store reads the policy
            assert as_bytes(args[1]) == key_name(namespace, "policy").encode()
        elif name == "HGETALL":  # version() reads the state
            assert as_bytes(args[1]) == key_name(namespace, "state").encode()
        elif name in ("XRANGE", "XREVRANGE"):  # evictions() reads the log
            assert as_bytes(args[1]) == key_name(namespace, "log").encode()
        elif name == "FCALL_RO":  # a default-mode store asks the library's version
            assert [as_bytes(a) for a in args[1:]] == [
                library().version_function.encode(),
                b"1",
                key_name(namespace, "policy").encode(),
            ]
        elif name in ("EVAL", "EVAL_RO", "EVALSHA", "EVALSHA_RO"):
            # The script is one of the package's, byte for byte...
            body = as_bytes(args[1])
            spec = by_sha[body] if name.startswith("EVALSHA") else by_source[body]
            # ...its KEYS are the namespace's, in header order...
            numkeys = int(args[2])
            keys = [as_bytes(k) for k in args[3 : 3 + numkeys]]
            # (a write's last key is its receipt, <prefix>call:<fresh hex call id>)
            call = keys[-1].rsplit(b":call:", 1)[-1].decode() if RECEIPT in spec.keys else ""
            assert re.fullmatch("[0-9a-f]{16}|", call)
            assert keys == [k.encode() for k in spec.key_names(namespace, call)]
            # ...and an id is one whole ARGV.
            argv = [as_bytes(a) for a in args[3 + numkeys :]]
            fixed = len(spec.args) - 1 if spec.group else len(spec.args)
            assert len(argv) == fixed or (spec.group and (len(argv) - fixed) % spec.group == 0)
            in_argv |= ids & set(argv)
    handshake = {"HELLO", "CLIENT"}  # redis-py's, on connect (CLIENT SETINFO, MAINT_NOTIFICATIONS)
    scripts = {"SCRIPT LOAD", "EVAL", "EVAL_RO", "EVALSHA", "EVALSHA_RO"}
    # A store of the default user asks CONFIG GET maxmemory-policy once, to warn
    # if the server may evict its keys; one of a named ACL user never does.
    admin = {"CONFIG GET"}
    # (EXISTS: the namespace's keys, when the store finds no policy after the drop)
    assert names <= {
        *handshake,
        *scripts,
        "HMGET",
        "HGETALL",
        "XRANGE",
        "XREVRANGE",
        "EXISTS",
        *admin,
    }
    assert scripts <= names
    # Every other command the store sends is in the derived ACL.
    assert {n.lower().replace(" ", "|") for n in names - handshake - admin} <= set(commands())
    assert in_argv == ids


# ---------------------------------------------------------------------------
# The rules themselves.


def test_the_commands_are_read_from_every_call_in_the_sources() -> None:
    # Every redis.call in the scripts goes through rcall with a literal command,
    # or through each_chunk, whose callers pass literals: acl.py reads both forms.
    for spec in specs().values():
        calls = r"(?<!function )\b(rcall|redis\.p?call|typed_read|each_chunk)\(\s*([^,)]*)"
        for match in re.finditer(calls, spec.source):
            helper, first = match.groups()
            if (helper, first) in (("rcall", "cmd"), ("redis.pcall", "cmd")):  # the helpers
                continue
            assert re.fullmatch(r"'[A-Z]+'", first), (spec.name, match.group(0))
    assert "hdel" in script_commands() and "time" in script_commands()
    assert set(commands()) == set(LOADER_COMMANDS) | set(script_commands())
    assert len(set(commands())) == len(commands())


def test_the_rules_grant_one_namespace_and_the_commands_only() -> None:
    rules = acl_rules("agent42")
    assert rules[:4] == ["resetkeys", "~memevict:{agent42}:*", "resetchannels", "-@all"]
    assert rules[4:] == [f"+{c}" for c in commands()]
    assert key_name("agent42", "*") == "memevict:{agent42}:*"


@pytest.mark.parametrize("namespace", ["*", "a*", "a?", "a[b]", "a\\b", "{a}", "a b", ""])
def test_a_namespace_that_would_widen_the_pattern_is_refused(namespace: str) -> None:
    with pytest.raises(BadNamespace):
        acl_rules(namespace)
    with pytest.raises(BadNamespace):
        acl_setuser_line("u", namespace, "pw")


def test_the_setuser_line() -> None:
    line = acl_setuser_line("agent42", "agent42", "PASSWORD")
    assert line == "ACL SETUSER agent42 reset on >PASSWORD " + " ".join(acl_rules("agent42"))


@pytest.mark.parametrize(
    ("user", "password"), [("", "pw"), ("a b", "pw"), ("a\x00", "pw"), ("u", "")]
)
def test_a_user_or_password_the_line_cannot_carry_is_refused(user: str, password: str) -> None:
    with pytest.raises(BadArgument):
        acl_setuser_line(user, "agent42", password)


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli not installed")
@pytest.mark.parametrize(
    ("namespace", "password"),
    [("agent42", "PASSWORD"), ("o'k\"ns", "p w\"'\\ü\x01>x")],
    ids=["plain", "quotes and spaces"],
)
def test_the_setuser_line_pasted_into_redis_cli(
    server: Server, client: redis.Redis, namespace: str, password: str
) -> None:
    line = acl_setuser_line("pasted", namespace, password)
    result = subprocess.run(
        ["redis-cli", "-p", str(server.port)], input=line.encode() + b"\n", capture_output=True
    )
    try:
        assert result.stdout.strip() == b"OK", result
        user = client.execute_command("ACL", "GETUSER", "pasted")
        assert user[b"keys"] == acl_rules(namespace)[1].encode()
        granted = set(user[b"commands"].decode().split())
        assert granted == {"-@all", *(f"+{c}" for c in commands())}
        pasted = server.client(username="pasted", password=password)
        store = MemoryStore(pasted, namespace)
        store.remember("a", 1.0)
        assert [m.id for m in store.top(1)] == ["a"]
        pasted.close()
    finally:
        client.execute_command("ACL", "DELUSER", "pasted")


def test_the_derived_acl_user_runs_functions_but_cannot_load_them(
    client: redis.Redis, make_user: UserFactory
) -> None:
    client.function_flush()
    user = make_user("ns")
    with pytest.raises(PermissionDenied):  # the library is missing and the user may not load it
        MemoryStore(user, "ns", Policy(protect_s=0), mode="functions")
    assert not client.function_list(library=library().name)
    MemoryStore(client, "warm", mode="functions")  # an admin loads the library
    store = MemoryStore(user, "ns", Policy(protect_s=0), mode="functions")
    store.remember("a", 2.0, now=T0)
    assert [m.id for m in store.top(5, now=T0)] == ["a"]
    with pytest.raises(NoPermissionError):
        user.function_load(library().source, replace=True)


def test_the_default_mode_uses_functions_only_where_this_user_can(
    client: redis.Redis, make_user: UserFactory
) -> None:
    """mode="auto" and the derived user (no FUNCTION LOAD): EVALSHA while the
    library is missing; FCALL once an admin has loaded it; EVALSHA again, with
    nothing lost, when the library goes away under a store that chose it."""
    client.function_flush()
    user = make_user("ns")
    store = MemoryStore(user, "ns", Policy(protect_s=0))
    assert store.mode == "scripts"
    store.remember("a", 2.0, now=T0)
    assert not client.function_list(library=library().name)
    assert MemoryStore(client, "warm").mode == "functions"  # an admin's store loads it
    store = MemoryStore(user, "ns")
    assert store.mode == "functions"
    before = client.info("commandstats").get("cmdstat_fcall", {}).get("calls", 0)
    store.remember("b", 3.0, now=T0)
    assert client.info("commandstats")["cmdstat_fcall"]["calls"] == before + 1
    client.function_flush()
    assert store.remember("c", 4.0, now=T0).score == pytest.approx(4.0, rel=1e-3)
    assert store.mode == "scripts"
    assert [m.id for m in store.top(5, now=T0)] == ["c", "b", "a"]
    assert not client.function_list(library=library().name)
