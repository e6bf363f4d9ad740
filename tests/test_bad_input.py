"""Bad input gets a typed error and changes nothing; odd but valid input round-trips.

Every case runs through the Python API and, with the Python checks bypassed,
through raw EVALSHA. The cases are generated: each MemoryStore method gets the
bad values of each of its parameters (read from its signature), each script
the bad values of each of its ARGV and the ARITY, BAD_KEYS and WRONG_TYPE cases
of its KEYS (read from its header), so a new method or script is covered
without editing the tables. After every rejected call a DUMP of every key in
the database is byte-identical to the one taken before, and no key appeared.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import secrets
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
import redis

from memevict import (
    BadArgument,
    BadGroup,
    BadId,
    BadImportance,
    BadNamespace,
    BadNow,
    BadPolicy,
    BadRate,
    BadTerms,
    BadTokens,
    InvalidArgument,
    Item,
    MemevictError,
    MemoryStore,
    NotFound,
    Policy,
    WrongType,
)
from memevict.errors import from_response
from memevict.scripts import RECEIPT, key_name, namespace_keys, specs
from tests.servers import Server

T0 = 1_700_000_000_000
# The first value above each bounded policy field's range (docs/rules.md: Ranges):
# half_life_s=1e-310 or retry_window_s=1e14 used to break a call half-way.
ABOVE_RANGE: dict[str, float] = {
    "evict_batch": 101,
    "half_life_memories": 1.000001e12,
    "half_life_s": 1.000001e12,
    "whitelist_boost": 1000001.0,
    "whitelist_cap": 201,
    "protect_s": 1.000001e9,
    "score_min": 1.000001e12,
    "jitter": 1.5,
    "retry_window_s": 86401.0,
    "idle_ttl_s": 1.000001e9,
}
LATER = T0 + 120_000  # past the fixture's protection windows
NS = "bad"
OTHER = "other"  # a second namespace with data, which no call may touch
MB = 1 << 20
MAX_NOW_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
NAN, INF = float("nan"), float("inf")

Snapshot = dict[bytes, bytes | None]


# KEYS * and a DUMP of each key and of each name in ARGV, in one round trip: the ~45 DUMPs
# of a pipeline took most of a case's time (two snapshots a case, ~7,000 cases).
SNAPSHOT = """
local keys = redis.call('KEYS', '*')
for _, key in ipairs(ARGV) do keys[#keys + 1] = key end
local out = {}
for i, key in ipairs(keys) do
  out[2 * i - 1] = key
  out[2 * i] = redis.call('DUMP', key)
end
return out
"""
SNAPSHOT_SHA = hashlib.sha1(SNAPSHOT.encode()).hexdigest()


def snapshot(client: redis.Redis) -> Snapshot:
    """DUMP of every key in the database and of every key NS could have (None: no key)."""
    names = namespace_keys(NS)
    try:
        reply = client.evalsha(SNAPSHOT_SHA, 0, *names)
    except redis.exceptions.NoScriptError:
        reply = client.eval(SNAPSHOT, 0, *names)
    return dict(zip(reply[::2], reply[1::2], strict=True))  # (a Lua false: None)


def fill(store: MemoryStore) -> None:
    """Memories in every state, so every key role of the namespace exists."""
    # (texts with terms, so that the lexical index's keys exist: "a", cold at LATER,
    # holds "tea" and "leaves"; "q", hot, holds "queue" and "tea")
    store.remember("a", 1.0, text="tea leaves", now=T0)
    store.remember("w", 5.0, whitelist=True, now=T0)
    store.remember("e", 9.0, now=T0)
    store.remember("p", 3.0, tokens=2, group="pair", now=T0)  # evictable together: ghot, groups
    store.remember("q", 3.0, text="Queue tea", group="pair", now=T0)
    for memory_id in ("b", "c", "d"):  # protected; the last makes a, past its protection, cold
        store.remember(memory_id, 2.0, now=T0 + 60_000)


@pytest.fixture(scope="module")
def connections(server: Server) -> Iterator[redis.ConnectionPool]:
    """The connection of the module's cases on ``server`` (~3,600 of them), its script
    cache flushed once: every case runs the same scripts, and ``evalsha`` loads one the
    cache lacks. (conftest's client opened a connection and flushed the script cache for
    each case, which then loaded its scripts again: about a quarter of the file's time.)"""
    pool = redis.ConnectionPool(host="127.0.0.1", port=server.port)
    redis.Redis(connection_pool=pool).script_flush()
    yield pool
    pool.disconnect()


@pytest.fixture
def client(connections: redis.ConnectionPool) -> redis.Redis:
    """Overrides conftest's for this module: the data flushed, and a new client object (a
    store keeps what it found out about a server per client object: each case opens its
    store afresh, as before), on the module's connection."""
    c = redis.Redis(connection_pool=connections)
    c.flushall()
    return c


@pytest.fixture(scope="session")
def filled(server: Server) -> Snapshot:
    """The DUMP of NS and OTHER filled, made once per server and restored by each test."""
    client = server.client()
    client.flushall()
    fill(MemoryStore(client, OTHER, Policy(max_hot=7, whitelist_cap=1, index=1, log_max=50)))
    fill(MemoryStore(client, NS, Policy(max_hot=7, whitelist_cap=1, index=1, log_max=50)))
    dumps = snapshot(client)
    client.flushall()
    client.close()
    return dumps


@pytest.fixture
def filled_db(client: redis.Redis, filled: Snapshot) -> redis.Redis:
    pipe = client.pipeline(transaction=False)
    for key, dump in filled.items():
        if dump is not None:
            pipe.restore(key, 0, dump)
    pipe.execute()
    return client


@pytest.fixture
def store(filled_db: redis.Redis) -> MemoryStore:
    return MemoryStore(filled_db, NS)


def test_the_fixture_fills_every_key_role(client: redis.Redis, store: MemoryStore) -> None:
    # So WRONG_TYPE cases replace real data and snapshots cover every role.
    assert all(client.exists(k) for k in namespace_keys(NS))
    assert all(client.exists(k) for k in namespace_keys(OTHER))
    cold = store.get("a", now=LATER)
    assert cold is not None and cold.tier == "cold"
    # The index holds the fixture's texts, so a search's valid call finds something.
    assert [m.memory.id for m in store.search("tea", tier="cold", now=LATER)] == ["a"]
    assert [m.memory.id for m in store.search("queue", now=LATER)] == ["q"]


def assert_rejected(
    client: redis.Redis, call: Callable[[], object], error: type[MemevictError]
) -> MemevictError:
    """call raises exactly `error` (a MemevictError) and writes nothing."""
    before = snapshot(client)
    with pytest.raises(MemevictError) as raised:
        call()
    assert snapshot(client) == before
    assert type(raised.value) is error, raised.value
    return raised.value


# ---------------------------------------------------------------------------
# The Python API: every public method, every parameter, from the signatures.

# A call of each public method that succeeds (and writes, for a writing method);
# every bad-input case below is one of these with one argument replaced.
VALID_CALLS: dict[str, dict[str, Any]] = {
    "remember": {
        "id": "a",
        "importance": 2.0,
        "text": "x",
        "whitelist": False,
        "tokens": 2,
        "group": "g",
        "now": LATER,
        "call_id": "app:call-1",
        "terms": ["xylophone", "tea"],
    },
    "touch": {"id": "b", "now": LATER, "call_id": None},
    "decay": {"rate": 0.5, "call_id": None},
    "evict": {"now": LATER, "call_id": None},
    "whitelist": {"id": "b", "now": LATER, "call_id": None},
    "demote": {"id": "w", "now": LATER, "call_id": None},
    "recall": {"id": "a", "now": LATER, "call_id": None},
    "forget": {"id": "b", "call_id": "app.forget_2"},
    "get": {"id": "a", "now": LATER},
    "search": {"query": "Tea?", "k": 3, "tier": "all", "now": LATER},
    "top": {"k": 3, "now": LATER},
    "stats": {"now": LATER},
    "window": {"tokens": 10, "query": "tea", "share": 0.5, "now": LATER},
    "explain": {"id": "q", "tokens": 3, "now": LATER},
    "context": {
        "tokens": 10,
        "skip": ["a", "nope"],
        "query": "tea",
        "share": 0.5,
        "now": LATER,
        "detail": True,
    },
    "version": {},
    "evictions": {"since": None, "count": 10},
    "scan": {"tier": "hot", "cursor": 0, "count": 10, "now": LATER},
    "drop": {},
    "close": {},
    "set_policy": {"policy": Policy(max_hot=2), "now": LATER},
    "reload_policy": {},
    "recreate": {},
    "remember_many": {
        "items": [("a", 2.0), Item("n", 1.0, text="x", whitelist=True)],
        "now": LATER,
        "call_id": None,
        "evicted_texts": True,
    },
}
READ_ONLY_METHODS = {
    "get", "top", "stats", "reload_policy", "window", "context", "scan", "close", "search",
    "version", "evictions", "explain",
}  # fmt: skip


def public_methods() -> list[str]:
    return sorted(
        name
        for name, member in inspect.getmembers(MemoryStore, inspect.isfunction)
        if not name.startswith("_")
    )


def forged_policy(**fields: object) -> Policy:
    """A Policy holding values its constructor refuses, to reach the scripts' own checks."""
    policy = object.__new__(Policy)
    for field in dataclasses.fields(Policy):
        object.__setattr__(
            policy, field.name, fields.get(field.name, getattr(Policy(), field.name))
        )
    return policy


def bad(label: str, value: object, error: type[InvalidArgument], *marks: Any) -> Any:
    return pytest.param(value, error, id=label, marks=marks)


# Bad values of each parameter, by parameter name.
BAD_PYTHON_VALUES: dict[str, list[Any]] = {
    "call_id": [
        bad("empty", "", BadArgument),
        bad("65 characters", "c" * 65, BadArgument),
        bad("a space", "call 1", BadArgument),
        bad("a brace", "call{1}", BadArgument),
        bad("non-ASCII", "appel-é", BadArgument),
        bad("bytes", b"call-1", BadArgument),
        bad("int", 1, BadArgument),
    ],
    "id": [
        bad("empty", "", BadId),
        bad("1025 bytes", "x" * 1025, BadId),
        bad("1026 bytes in 513 chars", "é" * 513, BadId),
        bad("1 MB", "x" * MB, BadId),
        bad("bytes", b"a", BadId),
        bad("None", None, BadId),
        bad("int", 5, BadId),
        bad("lone surrogate", "\ud800", BadId),
        bad("escaped UTF-8", "\udcc3\udcbf", BadId),
    ],
    "importance": [
        bad("nan", NAN, BadImportance),
        bad("+inf", INF, BadImportance),
        bad("-inf", -INF, BadImportance),
        bad("0", 0, BadImportance),
        bad("-0.0", -0.0, BadImportance),
        bad("negative", -1.0, BadImportance),
        bad("10**400", 10**400, BadImportance),
        bad("above 1e12", 1.0000001e12, BadImportance),
        bad("1e308", 1e308, BadImportance),
        bad("str", "10", BadImportance),
        bad("bool", True, BadImportance),
        bad("None", None, BadImportance),
    ],
    "now": [
        bad("negative", -1, BadNow),
        bad("0", 0, BadNow),
        bad("seconds", T0 // 1000, BadNow),
        bad("1999-12-31", 946684799999, BadNow),
        bad("fractional", 1.5, BadNow),
        bad("float", float(T0), BadNow),
        bad("year 10000", MAX_NOW_MS + 1, BadNow),
        bad("10**400", 10**400, BadNow),
        bad("nan", NAN, BadNow),
        bad("inf", INF, BadNow),
        bad("str", str(T0), BadNow),
        bad("bool", True, BadNow),
    ],
    "rate": [
        bad("0", 0, BadRate),
        bad("> 1", 1.5, BadRate),
        bad("nan", NAN, BadRate),
        bad("inf", INF, BadRate),
        bad("negative", -0.5, BadRate),
        bad("str", "0.5", BadRate),
        bad("bool", True, BadRate),
        bad("None", None, BadRate),
    ],
    "k": [
        bad("negative", -1, BadArgument),
        bad("201", 201, BadArgument),
        bad("100001", 100_001, BadArgument),
        bad("10**20", 10**20, BadArgument),
        bad("float", 3.0, BadArgument),
        bad("str", "3", BadArgument),
        bad("bool", True, BadArgument),
        bad("None", None, BadArgument),
    ],
    "policy": [
        bad("max_hot 0 past the constructor", forged_policy(max_hot=0), BadPolicy),
        bad("half_life_s nan past the constructor", forged_policy(half_life_s=NAN), BadPolicy),
        bad("jitter -1 past the constructor", forged_policy(jitter=-1.0), BadPolicy),
        *(
            bad(
                f"{field} {value!r} past the constructor",
                forged_policy(**{field: value}),
                BadPolicy,
            )
            for field, value in ABOVE_RANGE.items()
        ),
        bad("None", None, BadPolicy),
        bad("dict", {"max_hot": 3}, BadPolicy),
    ],
    "text": [bad("int", 5, BadArgument), bad("bytes", b"x", BadArgument)],
    # (remember's tokens and window's budget: bad for both)
    "tokens": [
        bad("0", 0, BadTokens),
        bad("negative", -1, BadTokens),
        bad("2**60", 2**60, BadTokens),
        bad("float", 2.0, BadTokens),
        bad("str", "2", BadTokens),
        bad("bool", True, BadTokens),
    ],
    "group": [
        bad("empty", "", BadGroup),
        bad("NUL", "a\0b", BadGroup),
        bad("257 bytes", "g" * 257, BadGroup),
        bad("bytes", b"g", BadGroup),
        bad("int", 5, BadGroup),
        bad("lone surrogate", "\ud800", BadGroup),
    ],
    "tier": [
        bad("warm", "warm", BadArgument),
        bad("upper case", "HOT", BadArgument),
        bad("empty", "", BadArgument),
        bad("None", None, BadArgument),
    ],
    "cursor": [
        bad("negative", -1, BadArgument),
        bad("2**64", 2**64, BadArgument),
        bad("str", "0", BadArgument),
        bad("float", 0.0, BadArgument),
        bad("bool", False, BadArgument),
    ],
    "count": [
        bad("0", 0, BadArgument),
        bad("201", 201, BadArgument),
        bad("str", "10", BadArgument),
        bad("bool", True, BadArgument),
        bad("None", None, BadArgument),
    ],
    "since": [
        bad("empty", "", BadArgument),
        bad("not an id", "yesterday", BadArgument),
        bad("a range", "-", BadArgument),
        bad("exclusive already", "(1-0", BadArgument),
        bad("int", 5, BadArgument),
        bad("bytes", b"1-0", BadArgument),
    ],
    "whitelist": [bad("str 'no'", "no", BadArgument)],
    "detail": [bad("int 1", 1, BadArgument), bad("str '1'", "1", BadArgument)],
    "evicted_texts": [bad("int 1", 1, BadArgument), bad("None", None, BadArgument)],
    "skip": [
        bad("str", "ab", BadArgument),
        bad("None", None, BadArgument),
        bad("101 ids", ["a"] * 101, BadArgument),
        bad("an empty id", ["a", ""], BadId),
        bad("a bytes id", [b"a"], BadId),
    ],
    "items": [
        bad("empty", [], BadArgument),
        bad("101 items", [("a", 1.0)] * 101, BadArgument),
        bad("str", "ab", BadArgument),
        bad("None", None, BadArgument),
        bad("a set", {("a", 1.0)}, BadArgument),
        bad("a 3-tuple", [("a", 1.0, "t")], BadArgument),
        bad("a bare id", ["a"], BadArgument),
        bad("an empty id", [("b", 1.0), ("", 1.0)], BadId),
        bad("a nan importance", [("b", 1.0), ("c", NAN)], BadImportance),
        bad("a bytes text", [Item("b", 1.0, text=b"x")], BadArgument),  # type: ignore[arg-type]
        bad("whitelist 'no'", [Item("b", 1.0, whitelist="no")], BadArgument),  # type: ignore[arg-type]
        bad("0 tokens", [("b", 1.0), Item("c", 1.0, tokens=0)], BadTokens),
        bad("a NUL group", [("b", 1.0), Item("c", 1.0, group="a\0")], BadGroup),
        bad("terms a str", [("b", 1.0), Item("c", 1.0, text="x", terms="tea")], BadTerms),
        bad("a term with a space", [Item("c", 1.0, text="x", terms=["a b"])], BadTerms),
        bad("a 65-byte term", [("b", 1.0), Item("c", 1.0, text="x", terms=["t" * 65])], BadTerms),
        bad("terms without text", [("b", 1.0), Item("c", 1.0, terms=["tea"])], BadTerms),
    ],
    "query": [
        bad("bytes", b"tea", BadArgument),
        bad("int", 5, BadArgument),
        bad("list", ["tea"], BadArgument),
        bad("lone surrogate", "\ud800", BadArgument),
        bad("escaped UTF-8", "\udcc3\udcbf", BadArgument),
    ],
    "share": [
        bad("negative", -0.1, BadArgument),
        bad("over 1", 1.5, BadArgument),
        bad("nan", NAN, BadArgument),
        bad("inf", INF, BadArgument),
        bad("str", "0.5", BadArgument),
        bad("bool", True, BadArgument),
    ],
    # (remember's terms; the text they need is VALID_CALLS': terms without text
    # are in MULTI_ARGUMENT_CASES)
    "terms": [
        bad("str", "tea", BadTerms),
        bad("bytes", b"tea", BadTerms),
        bad("a set", {"tea"}, BadTerms),
        bad("int", 5, BadTerms),
        bad("a term with a space", ["tea time"], BadTerms),
        bad("an empty term", ["tea", ""], BadTerms),
        bad("a NUL", ["a\0b"], BadTerms),
        bad("a 65-byte term", ["t" * 65], BadTerms),
        bad("a 66-byte term in 33 chars", ["é" * 33], BadTerms),
        bad("257 distinct terms", [f"t{i}" for i in range(257)], BadTerms),
        bad("a bytes term", [b"tea"], BadTerms),
        bad("an int term", [5], BadTerms),
        bad("a None term", [None], BadTerms),
        bad("a lone surrogate", ["\ud800"], BadTerms),
        bad("escaped UTF-8", ["\udcc3\udcbf"], BadTerms),
    ],
}

# Bad values of a parameter of one method only (good for the others of that name).
BAD_METHOD_VALUES: dict[tuple[str, str], list[Any]] = {
    ("search", "k"): [bad("101", 101, BadArgument)],
    ("search", "query"): [bad("None", None, BadArgument)],  # (context's: no query)
    ("scan", "tier"): [bad("all", "all", BadArgument)],
}


def python_cases() -> list[Any]:
    return [
        pytest.param(
            method, param, *case.values, id=f"{method} {param}={case.id}", marks=case.marks
        )
        for method in public_methods()
        for param in inspect.signature(getattr(MemoryStore, method)).parameters
        for case in [
            *BAD_PYTHON_VALUES.get(param, []),
            *BAD_METHOD_VALUES.get((method, param), []),
        ]
    ]


PYTHON_CASES = python_cases()


def test_the_tables_cover_every_public_method_and_parameter() -> None:
    assert set(VALID_CALLS) == set(public_methods())
    for method in public_methods():
        signature = inspect.signature(getattr(MemoryStore, method))
        # (set_policy's **changes: bad field values are in tests/test_edges.py)
        params = {
            name
            for name, p in signature.parameters.items()
            if p.kind is not inspect.Parameter.VAR_KEYWORD
        } - {"self"}
        assert params == set(VALID_CALLS[method]), method
        assert params <= set(BAD_PYTHON_VALUES), (method, params - set(BAD_PYTHON_VALUES))


@pytest.mark.parametrize("method", sorted(VALID_CALLS))
def test_the_valid_python_calls_succeed(
    client: redis.Redis, store: MemoryStore, method: str
) -> None:
    # Each bad case differs from one of these in one argument, so its error is that argument's.
    before = snapshot(client)
    getattr(store, method)(**VALID_CALLS[method])
    # (recreate of a namespace that is there configures it with its own policy: no change)
    unchanged = READ_ONLY_METHODS | {"recreate"}
    assert (snapshot(client) == before) == (method in unchanged), method


@pytest.mark.parametrize(("method", "param", "value", "error"), PYTHON_CASES)
def test_python_api_rejects_bad_input(
    client: redis.Redis,
    store: MemoryStore,
    method: str,
    param: str,
    value: object,
    error: type[InvalidArgument],
) -> None:
    kwargs = {**VALID_CALLS[method], param: value}
    assert_rejected(client, lambda: getattr(store, method)(**kwargs), error)


# Arguments each good alone but bad together.
MULTI_ARGUMENT_CASES = [
    pytest.param("remember", {"text": None, "terms": ["tea"]}, BadTerms, id="terms without text"),
    pytest.param("remember", {"text": None, "terms": ("tea",)}, BadTerms, id="tuple without text"),
]


@pytest.mark.parametrize(("method", "changes", "error"), MULTI_ARGUMENT_CASES)
def test_python_api_rejects_bad_combinations(
    client: redis.Redis,
    store: MemoryStore,
    method: str,
    changes: dict[str, Any],
    error: type[InvalidArgument],
) -> None:
    kwargs = {**VALID_CALLS[method], **changes}
    assert_rejected(client, lambda: getattr(store, method)(**kwargs), error)


# The one convention: every call naming a memory raises NotFound for an unknown
# id and writes nothing, except get, a lookup, which returns None.
@pytest.mark.parametrize("method", ["touch", "whitelist", "demote", "recall", "forget"])
def test_an_unknown_id_is_not_found(client: redis.Redis, store: MemoryStore, method: str) -> None:
    kwargs = {**VALID_CALLS[method], "id": "nope"}
    assert_rejected(client, lambda: getattr(store, method)(**kwargs), NotFound)


# Which script each method runs, to plant a key of the wrong type under it.
# The script each method runs (reload_policy runs none: an HMGET of the policy).
METHOD_SCRIPTS = {
    **{m: m for m in VALID_CALLS if m not in ("reload_policy", "close", "version", "evictions")},
    "set_policy": "configure",
    "recreate": "configure",
}


# Every role but the receipt, whose key names a call id the store draws itself
# (test_scripts_reject_a_key_of_the_wrong_type plants one).
WRONG_TYPE_ROLES = [
    (m, r)
    for m in sorted(METHOD_SCRIPTS)
    if m != "drop"  # (it deletes a key of any type: test_drop_deletes_a_key_of_the_wrong_type)
    for r in specs()[METHOD_SCRIPTS[m]].keys
    if r != RECEIPT
] + [("version", "state"), ("evictions", "log")]  # (no script: an HMGET, an XREVRANGE)


@pytest.mark.parametrize(
    ("method", "role"), WRONG_TYPE_ROLES, ids=[f"{m} {r}" for m, r in WRONG_TYPE_ROLES]
)
def test_python_api_raises_wrong_type(
    client: redis.Redis, store: MemoryStore, method: str, role: str
) -> None:
    key = key_name(NS, role)
    client.delete(key)
    client.set(key, "planted")
    assert_rejected(client, lambda: getattr(store, method)(**VALID_CALLS[method]), WrongType)


BAD_NAMESPACES = [
    ("empty", ""),
    ("open brace", "a{b"),
    ("close brace", "a}b"),
    ("hash tag", "{x}"),
    ("star", "a*"),
    ("lone star", "*"),
    ("question mark", "a?"),
    ("open bracket", "a[b"),
    ("close bracket", "a]b"),
    ("backslash", "a\\b"),
    ("space", "a b"),
    ("tab", "a\tb"),
    ("newline", "a\nb"),
    ("NUL", "a\x00b"),
    ("no-break space", "a\u00a0b"),
    ("257 bytes", "x" * 257),
    ("258 bytes in 129 chars", "é" * 129),
    ("bytes", b"ns"),
    ("None", None),
    ("int", 5),
]


@pytest.mark.parametrize(
    "namespace", [n for _, n in BAD_NAMESPACES], ids=[i for i, _ in BAD_NAMESPACES]
)
def test_bad_namespaces_are_rejected(client: redis.Redis, namespace: Any) -> None:
    before = snapshot(client)
    with pytest.raises(BadNamespace):
        MemoryStore(client, namespace)
    assert snapshot(client) == before


@pytest.mark.parametrize("namespace", ["x" * 256, "é" * 128, "🧠", "agent-42:v2", "ns'\"--"])
def test_unusual_namespaces_work(client: redis.Redis, namespace: str) -> None:
    store = MemoryStore(client, namespace)
    store.remember("a", 1.0, now=T0)
    assert [m.id for m in store.top(1, now=T0)] == ["a"]
    found = {k.decode() for k in client.keys("*")}
    receipt = key_name(namespace, "call:")
    assert {k for k in found if not k.startswith(receipt)} <= set(namespace_keys(namespace))


def test_a_bad_policy_at_construction_writes_nothing(client: redis.Redis) -> None:
    with pytest.raises(BadPolicy):
        MemoryStore(client, NS, Policy(max_hot=-1))
    with pytest.raises(BadPolicy):
        MemoryStore(client, NS, forged_policy(whitelist_boost=0.5))
    assert client.keys("*") == []


# ---------------------------------------------------------------------------
# Raw EVALSHA: the scripts' own checks, from the headers.

# ARGV that make each script succeed and, for a writing script, write.
GOOD_ARGS: dict[str, Any] = {
    "id": "b",
    "importance": "2",
    "text": "t",
    "has_text": "1",
    "whitelist": "1",
    "detail": "1",
    "texts": "1",
    "now": str(LATER),
    "rate": "0.5",
    "k": "3",
    "mode": "replace",
    "items": ["a", "2", "t", "1", "0", "1", "", "t", "w", "3", "", "0", "1", "2", "g", ""],
    "terms": "t x",
    "share": "0.5",
    "skip": ["a", "nope"],
    "tokens": "2",
    "group": "g",
    "budget": "10",
    "tier": "hot",
    "cursor": "0",
    "count": "10",
    "seen": "",
    **Policy(max_hot=2).to_args(),
}
GOOD_OVERRIDES = {"demote": {"id": "w"}, "recall": {"id": "a"}}


def good_args(script: str) -> dict[str, Any]:
    args = {**GOOD_ARGS, **GOOD_OVERRIDES.get(script, {})}
    return {name: args[name] for name in specs()[script].args}


def evalsha(
    client: redis.Redis, script: str, keys: Sequence[str | bytes], args: Sequence[str | bytes]
) -> Any:
    spec = specs()[script]
    try:
        return client.evalsha(spec.sha, len(keys), *keys, *args)
    except redis.exceptions.NoScriptError:  # (the first call of a script on a server)
        client.script_load(spec.source)
        return client.evalsha(spec.sha, len(keys), *keys, *args)


def raw_call(
    client: redis.Redis, script: str, args: dict[str, str | bytes], call: str | None = None
) -> Any:
    """One raw call, a write with a fresh call id unless `call` names one."""
    spec = specs()[script]
    keys = spec.key_names(NS, secrets.token_hex(8) if call is None else call)
    return evalsha(client, script, keys, spec.argv(args))


def assert_raw_rejected(client: redis.Redis, call: Callable[[], object], code: str) -> None:
    before = snapshot(client)
    with pytest.raises(redis.ResponseError) as raised:
        call()
    assert snapshot(client) == before
    assert str(raised.value).split(" ")[0] == code, raised.value
    assert from_response(raised.value).code == code


@pytest.mark.parametrize("script", sorted(specs()))
@pytest.mark.usefixtures("filled_db")
def test_the_good_raw_calls_succeed(client: redis.Redis, script: str) -> None:
    # Each bad case is one of these with one argument or key replaced: if a check
    # were missing, the bad call would write too.
    before = snapshot(client)
    raw_call(client, script, good_args(script))
    assert (snapshot(client) == before) == specs()[script].read_only, script


POLICY_INTS = {f.name for f in dataclasses.fields(Policy) if f.type == "int"}
NOT_A_NUMBER = [
    ("empty", ""),
    ("nan", "nan"),
    ("NaN", "NaN"),
    ("inf", "inf"),
    ("-inf", "-inf"),
    ("Infinity", "Infinity"),
    ("1e999", "1e999"),
    ("hex", "0x10"),
    ("leading space", " 5"),
    ("trailing space", "5 "),
    ("word", "ten"),
    ("65 chars", "1" * 65),
    ("dot", "."),
    ("exponent only", "e5"),
    ("dangling exponent", "1e"),
    ("sign only", "+"),
    ("inner sign", "1+1"),
    ("NUL", "1\x00"),
]
NOT_WHOLE = [  # '' is not here: it is a valid now (the server clock)
    ("negative", "-1"),
    ("minus zero", "-0"),
    ("plus", "+1"),
    ("fractional", "1.5"),
    ("exponent", "1e3"),
    ("hex", "0x10"),
    ("padded", " 1"),
    ("word", "later"),
    ("nan", "nan"),
    ("inf", "inf"),
    ("20 digits", "9" * 20),
    ("400 digits", "9" * 400),
]
NOT_A_FLAG = [("word", "yes"), ("2", "2"), ("empty", ""), ("padded", " 1"), ("01", "01")]


def bad_policy_values(field: str) -> list[tuple[str, str]]:
    values = [("negative", "-1"), *NOT_A_NUMBER]
    if field in POLICY_INTS:
        values += [("fractional", "1.5"), ("exponent", "1e3"), ("2**53 + 2", str(2**53 + 2))]
    lowest = {
        "max_hot": ["0"],
        "half_life_s": ["0", "-0", "1e-310", "1e-300", "0.0009"],
        "half_life_memories": ["0", "0.0009"],
        "whitelist_boost": ["0.5"],
    }
    above = [repr(ABOVE_RANGE[field])] if field in ABOVE_RANGE else []
    return (
        values
        + [(f"{v} (below range)", v) for v in lowest.get(field, [])]
        + [(f"{v} (above range)", v) for v in above]
    )


# Bad values of each ARGV name, and the code they must get.
BAD_RAW_VALUES: dict[str, tuple[str, list[tuple[str, str | bytes]]]] = {
    "id": (
        "BAD_ID",
        [
            ("empty", ""),
            ("1025 bytes", "x" * 1025),
            ("1025 binary", b"\xff" * 1025),
            ("1 MB", "x" * MB),
        ],
    ),
    "importance": (
        "BAD_IMPORTANCE",
        [
            ("0", "0"),
            ("-0", "-0"),
            ("0.0", "0.0"),
            ("negative", "-3"),
            ("underflow", "1e-400"),
            ("above 1e12", "1000000000001"),
            ("1e308", "1e308"),
            *NOT_A_NUMBER,
        ],
    ),
    "now": (
        "BAD_NOW",
        [
            ("year 10000", str(MAX_NOW_MS + 1)),
            ("17 digits", "9" * 17),
            ("0", "0"),
            ("seconds", str(T0 // 1000)),
            ("1999-12-31", "946684799999"),
            *NOT_WHOLE,
        ],
    ),
    "rate": (
        "BAD_RATE",
        [
            ("0", "0"),
            ("-0", "-0"),
            ("> 1", "1.01"),
            ("2", "2"),
            ("1e1", "1e1"),
            ("negative", "-0.5"),
            *NOT_A_NUMBER,
        ],
    ),
    "k": ("BAD_ARG", [("201", "201"), ("100001", "100001"), ("empty", ""), *NOT_WHOLE]),
    "has_text": ("BAD_ARG", NOT_A_FLAG),
    "whitelist": ("BAD_ARG", NOT_A_FLAG),
    "detail": ("BAD_ARG", NOT_A_FLAG),
    "texts": ("BAD_ARG", NOT_A_FLAG),
    "mode": (
        "BAD_ARG",
        [("upsert", "upsert"), ("empty", ""), ("upper case", "INIT"), ("padded", "init ")],
    ),
    **{field: ("BAD_POLICY", bad_policy_values(field)) for field in Policy().to_args()},
    "text": ("", []),  # any bytes are a text
    "tokens": (
        "BAD_TOKENS",
        [("0", "0"), ("1e9 + 1", "1000000001"), ("empty", ""), *NOT_WHOLE],
    ),
    "group": ("BAD_GROUP", [("NUL", "a\0b"), ("257 bytes", "g" * 257)]),
    "terms": (
        "BAD_TERMS",
        [
            ("leading space", " t"),
            ("trailing space", "t "),
            ("two spaces", "t  x"),
            ("NUL", "t\0x"),
            ("65 bytes", "t" * 65),
            ("257 terms", " ".join(f"t{i}" for i in range(257))),
        ],
    ),
    "skip": ("BAD_ID", [("empty", ["a", ""]), ("1025 bytes", ["x" * 1025])]),
    "budget": ("BAD_ARG", [("0", "0"), ("2^53", str(2**53)), *NOT_WHOLE]),
    "tier": ("BAD_ARG", [("warm", "warm"), ("empty", ""), ("upper case", "HOT")]),
    "share": (
        "BAD_ARG",
        [("negative", "-0.1"), ("over 1", "1.5"), *(c for c in NOT_A_NUMBER if c[1] != "")],
    ),
    "cursor": ("BAD_ARG", [("empty", ""), ("21 digits", "1" * 21), *NOT_WHOLE]),
    "count": ("BAD_ARG", [("0", "0"), ("201", "201"), ("empty", ""), *NOT_WHOLE]),
    "seen": (
        "BAD_ARG",
        [
            ("no revision", str(T0)),
            ("word", "later:1"),
            ("inf", "inf:1"),
            ("fractional revision", "1:1.5"),
            ("two colons", "1:2:3"),
            ("65 bytes", "1" * 62 + ":11"),
        ],
    ),
}


# Bad values of an ARGV of one script only (good for the others of that name).
BAD_SCRIPT_VALUES: dict[tuple[str, str], list[tuple[str, str | bytes]]] = {
    ("search", "k"): [("101", "101")],
    ("search", "terms"): [("33 terms", " ".join(f"t{i}" for i in range(33)))],
    ("scan", "tier"): [("all", "all")],
}


# remember_many's items: eight values each, as remember's id, importance, text,
# has_text, whitelist, tokens, group and terms. A bad one is the second of two items.
ITEM_FIELDS = ("id", "importance", "text", "has_text", "whitelist", "tokens", "group", "terms")
GOOD_ITEM = ["n", "2", "t", "1", "0", "3", "g", "t"]


def item_cases(script: str) -> list[Any]:
    cases = [
        pytest.param(script, "items", values, "ARITY", id=f"{script} items={label}")
        for label, values in [
            ("none", []),
            ("7 values", GOOD_ITEM[:7]),
            ("9 values", [*GOOD_ITEM, "x"]),
            (
                "101 items",
                [str(i) if j == 0 else v for i in range(101) for j, v in enumerate(GOOD_ITEM)],
            ),
        ]
    ]
    for j, field in enumerate(ITEM_FIELDS):
        code, values = BAD_RAW_VALUES[field]
        for label, value in values:
            bad_item = [*GOOD_ITEM[:j], value, *GOOD_ITEM[j + 1 :]]
            items = ["a", "1", "", "0", "0", "1", "", "", *bad_item]
            cases.append(
                pytest.param(script, "items", items, code, id=f"{script} item {field}={label}")
            )
    # (terms index a text: with has_text 0 they must be '')
    no_text = [*GOOD_ITEM[:2], "", "0", *GOOD_ITEM[4:]]
    items = ["a", "1", "", "0", "0", "1", "", "", *no_text]
    cases.append(pytest.param(script, "items", items, "BAD_TERMS", id=f"{script} item no text"))
    return cases


def raw_value_cases() -> list[Any]:
    cases = []
    for script, spec in sorted(specs().items()):
        for arg in spec.args:
            if arg == "items":
                cases += item_cases(script)
                continue
            assert arg in BAD_RAW_VALUES, f"no bad values for {script} ARGV {arg}: add them"
            code, values = BAD_RAW_VALUES[arg]
            cases += [
                pytest.param(script, arg, value, code, id=f"{script} {arg}={label}")
                for label, value in [*values, *BAD_SCRIPT_VALUES.get((script, arg), [])]
            ]
    return cases


RAW_VALUE_CASES = raw_value_cases()


@pytest.mark.parametrize(("script", "arg", "value", "code"), RAW_VALUE_CASES)
@pytest.mark.usefixtures("filled_db")
def test_scripts_reject_bad_arguments(
    client: redis.Redis, script: str, arg: str, value: Any, code: str
) -> None:
    args = {**good_args(script), arg: value}
    assert_raw_rejected(client, lambda: raw_call(client, script, args), code)


@pytest.mark.usefixtures("filled_db")
def test_remember_rejects_terms_without_text(client: redis.Redis) -> None:
    args = {**good_args("remember"), "has_text": "0"}
    assert args["terms"] != ""
    assert_raw_rejected(client, lambda: raw_call(client, "remember", args), "BAD_TERMS")


@pytest.mark.parametrize("script", ["whitelist", "demote", "recall"])
@pytest.mark.usefixtures("filled_db")
def test_scripts_report_an_unknown_id(client: redis.Redis, script: str) -> None:
    args = {**good_args(script), "id": "nope"}
    assert_raw_rejected(client, lambda: raw_call(client, script, args), "NOT_FOUND")


def bad_layouts(
    keys: list[str], roles: Sequence[str], argv: list[Any], fixed: int | None = None
) -> list[Any]:
    """(label, keys, argv, code) of one script; ``fixed``: the number of its arguments
    before a variadic last one of one value per item (which takes any count to a bound)."""
    n = len(keys)
    short = argv[:-1] if fixed is None else argv[: fixed - 1]
    extra = ["extra"] if fixed is None else ["extra"] * 101

    def replace(i: int, key: str) -> list[str]:
        return [*keys[:i], key, *keys[i + 1 :]]

    out = [
        ("no keys", [], argv, "ARITY"),
        ("one key short", keys[:-1], argv, "ARITY"),
        ("one key extra", [*keys, key_name(NS, "extra")], argv, "ARITY"),
        *(
            [("no args", keys, [], "ARITY"), ("one arg short", keys, short, "ARITY")]
            if argv
            else []
        ),
        ("one arg extra", keys, [*argv, *extra], "ARITY"),
        ("keys reversed", keys[::-1], argv, "BAD_KEYS"),
        ("prefix without a colon", [f"memevict{{{NS}}}{r}" for r in roles], argv, "BAD_KEYS"),
        (
            "keys of two namespaces",
            [key_name((NS, OTHER)[i % 2], r) for i, r in enumerate(roles)],
            argv,
            "BAD_KEYS",
        ),
    ]
    for i in range(n - 1):
        swapped = [*keys[:i], keys[i + 1], keys[i], *keys[i + 2 :]]
        out.append((f"KEYS[{i + 1}] and KEYS[{i + 2}] swapped", swapped, argv, "BAD_KEYS"))
    for i, role in enumerate(roles):
        if role == RECEIPT:  # <prefix>call:<call id>, the id at most 64 bytes
            bad_receipts = {
                f"of namespace {OTHER}": key_name(OTHER, "call:c"),
                "without call:": key_name(NS, "c"),
                "a 65-byte call id": key_name(NS, "call:" + "x" * 65),
                "a 1 MB call id": key_name(NS, "call:" + "x" * MB),
                "empty": "",
            }
            for label, key in bad_receipts.items():
                out.append((f"KEYS[{i + 1}] {label}", replace(i, key), argv, "BAD_KEYS"))
            continue
        out += [
            (
                f"KEYS[{i + 1}] of namespace {OTHER}",
                replace(i, key_name(OTHER, role)),
                argv,
                "BAD_KEYS",
            ),
            (
                f"KEYS[{i + 1}] with another prefix",
                replace(i, f"evil:{{{NS}}}:{role}"),
                argv,
                "BAD_KEYS",
            ),
            (
                f"KEYS[{i + 1}] with a suffix",
                replace(i, key_name(NS, role) + "x"),
                argv,
                "BAD_KEYS",
            ),
            (f"KEYS[{i + 1}] empty", replace(i, ""), argv, "BAD_KEYS"),
        ]
    return out


def layout_cases() -> list[Any]:
    return [
        pytest.param(script, keys, argv, code, id=f"{script} {label}")
        for script, spec in sorted(specs().items())
        for label, keys, argv, code in bad_layouts(
            spec.key_names(NS),
            spec.keys,
            spec.argv(good_args(script)),
            len(spec.args) - 1 if spec.group == 1 else None,
        )
    ]


LAYOUT_CASES = layout_cases()


@pytest.mark.parametrize(("script", "keys", "argv", "code"), LAYOUT_CASES)
@pytest.mark.usefixtures("filled_db")
def test_scripts_reject_a_bad_layout(
    client: redis.Redis,
    script: str,
    keys: list[str],
    argv: list[str | bytes],
    code: str,
) -> None:
    assert_raw_rejected(client, lambda: evalsha(client, script, keys, argv), code)


PLANT: dict[str, Callable[[redis.Redis, str], object]] = {
    "string": lambda c, k: c.set(k, "planted"),
    "hash": lambda c, k: c.hset(k, "planted", "1"),
    "zset": lambda c, k: c.zadd(k, {"planted": 1}),
}


# drop deletes every key of the namespace whatever its type
# (test_drop_deletes_a_key_of_the_wrong_type): it takes no argument and
# reads no key, so it has no bad input.
NO_BAD_INPUT = {"drop"}


def wrong_type_cases() -> list[Any]:
    cases = []
    for script, spec in sorted(specs().items()):
        if script in NO_BAD_INPUT:
            continue
        for role, key_type in zip(spec.keys, spec.key_types, strict=True):
            for planted in sorted(set(PLANT) - {key_type}):
                cases.append(pytest.param(script, role, planted, id=f"{script} {role}={planted}"))
    return cases


WRONG_TYPE_CASES = wrong_type_cases()


@pytest.mark.usefixtures("filled_db")
def test_drop_deletes_a_key_of_the_wrong_type(client: redis.Redis) -> None:
    client.delete(key_name(NS, "groups"))
    PLANT["string"](client, key_name(NS, "groups"))
    other = snapshot(client)
    assert raw_call(client, "drop", {}) == len(namespace_keys(NS))
    assert [k for k in client.keys(f"memevict:{{{NS}}}:*") if b":call:" not in k] == []
    assert {k: v for k, v in snapshot(client).items() if NS.encode() not in k} == {
        k: v for k, v in other.items() if NS.encode() not in k
    }  # OTHER untouched


@pytest.mark.parametrize(("script", "role", "planted"), WRONG_TYPE_CASES)
@pytest.mark.usefixtures("filled_db")
def test_scripts_reject_a_key_of_the_wrong_type(
    client: redis.Redis, script: str, role: str, planted: str
) -> None:
    key = key_name(NS, "call:c1" if role == RECEIPT else role)
    client.delete(key)
    PLANT[planted](client, key)
    call = lambda: raw_call(client, script, good_args(script), call="c1")  # noqa: E731
    assert_raw_rejected(client, call, "WRONG_TYPE")


# ---------------------------------------------------------------------------
# Odd but valid input works and round-trips byte for byte.

ODD_IDS = [
    ("emoji", "🧠💾"),
    ("ZWJ sequence", "👩‍👩‍👧"),
    ("right to left", "שלום مرحبا"),
    ("combining marks", "e\u0301\u0302a\u0308"),
    ("BOM", "\ufeffid"),
    ("open brace", "{"),
    ("close brace", "}"),
    ("hash tag", "{other}"),
    ("own hash tag", "{bad}"),
    ("colon", ":"),
    ("colons", "a:b:c"),
    ("space", " "),
    ("spaces around", " id "),
    ("newline", "line\nbreak"),
    ("CRLF", "\r\n"),
    ("tab", "tab\there"),
    ("NUL", "\x00"),
    ("inner NUL", "nul\x00byte"),
    ("DEL", "\x7f"),
    ("glob", "*?[a-z]\\"),
    ("another namespace's key", "memevict:{other}:hot"),
    ("this namespace's key", "memevict:{bad}:meta"),
    ("Lua injection", "'); redis.call('FLUSHALL') --"),
    ("Lua long string", "]]..redis.call('FLUSHALL')..[["),
    ("format string", "%s%d%%"),
    ("1024 bytes", "x" * 1024),
    ("1024 bytes in 256 chars", "😀" * 256),
]
BINARY_IDS = [
    ("0xff", b"\xff"),
    ("lone continuation byte", b"\x80abc"),
    ("truncated UTF-8", b"ab\xc3"),
    ("encoded surrogate", b"\xed\xa0\x80"),
    ("NUL and 0xff", b"\x00\xff\x00"),
    ("1024 binary bytes", bytes(range(256)) * 4),
]


def odd_store(client: redis.Redis) -> MemoryStore:
    fill(MemoryStore(client, OTHER, Policy(max_hot=5, index=1)))
    return MemoryStore(client, NS, Policy(max_hot=2, protect_s=0, whitelist_cap=1, index=1))


def namespace_dump(client: redis.Redis, namespace: str) -> dict[str, bytes | None]:
    return {k: client.dump(k) for k in namespace_keys(namespace)}  # type: ignore[misc]


def assert_only_namespace_keys(client: redis.Redis) -> None:
    # No key was made from an id: every key is one of the two namespaces',
    # or a receipt <prefix>call:<call id> of one.
    allowed = set(namespace_keys(NS)) | set(namespace_keys(OTHER))
    receipts = (key_name(NS, "call:"), key_name(OTHER, "call:"))
    found = {k.decode() for k in client.keys("*")}
    assert {k for k in found if not k.startswith(receipts)} <= allowed


@pytest.mark.parametrize("memory_id", [i for _, i in ODD_IDS], ids=[label for label, _ in ODD_IDS])
def test_odd_ids_work_through_python(client: redis.Redis, memory_id: str) -> None:
    store = odd_store(client)
    other = namespace_dump(client, OTHER)
    store.remember("filler", 0.5, now=T0)
    assert store.remember(memory_id, 3.0, text=f"text of {memory_id}", now=T0).id == memory_id
    m = store.get(memory_id, now=T0)
    assert m is not None and (m.id, m.text, m.tier) == (memory_id, f"text of {memory_id}", "hot")
    assert [x.id for x in store.top(5, now=T0)] == [memory_id, "filler"]
    assert store.touch(memory_id, now=T0 + 1) is not None
    assert store.whitelist(memory_id, now=T0 + 2).id == memory_id
    assert store.demote(memory_id, now=T0 + 3).demoted == (memory_id,)
    assert store.remember("high", 9.0, now=T0 + 4).evicted == ("filler",)
    assert store.remember("higher", 9.5, now=T0 + 5).evicted == (memory_id,)
    cold = store.get(memory_id, now=T0 + 5)
    assert cold is not None and cold.tier == "cold"
    store.forget("high")
    assert store.recall(memory_id, now=T0 + 6).evicted == ()
    assert [x.id for x in store.top(5, now=T0 + 6)] == ["higher", memory_id]
    store.forget(memory_id)
    assert store.get(memory_id, now=T0 + 6) is None
    with pytest.raises(NotFound):
        store.forget(memory_id)
    assert_only_namespace_keys(client)
    assert namespace_dump(client, OTHER) == other


RAW_IDS = [(label, i.encode()) for label, i in ODD_IDS] + BINARY_IDS


@pytest.mark.parametrize("raw_id", [i for _, i in RAW_IDS], ids=[label for label, _ in RAW_IDS])
def test_odd_ids_round_trip_through_raw_evalsha(client: redis.Redis, raw_id: bytes) -> None:
    store = odd_store(client)
    other = namespace_dump(client, OTHER)
    text = b"\xff\x00text of " + raw_id
    args = {**good_args("remember"), "id": raw_id, "text": text, "whitelist": "0", "now": str(T0)}
    raw_call(client, "remember", args)
    reply = raw_call(client, "get", {"id": raw_id, "now": str(T0)})
    assert (reply[0], reply[8]) == (raw_id, text)
    assert [m[0] for m in raw_call(client, "top", {"k": "5", "now": str(T0)})] == [raw_id]
    # Python reads an id that is not UTF-8 as str with surrogate escapes, and
    # sends that str back as the same bytes.
    (m,) = store.top(5, now=T0)
    assert m.id.encode("utf-8", "surrogateescape") == raw_id
    assert m.text is not None and m.text.encode("utf-8", "surrogateescape") == text
    again = store.get(m.id, now=T0)
    assert again is not None and again.id == m.id
    assert store.whitelist(m.id, now=T0 + 1).id == m.id
    store.forget(m.id)
    assert raw_call(client, "get", {"id": raw_id, "now": str(T0)}) is None
    assert_only_namespace_keys(client)
    assert namespace_dump(client, OTHER) == other


TEXTS = [
    pytest.param("", id="empty"),
    pytest.param("ü" * (MB // 2), id="1 MB"),
    pytest.param("a\x00b\r\nc", id="NUL and newlines"),
    pytest.param("שלום 🧠 e\u0301", id="unicode"),
    pytest.param("]]..redis.call('FLUSHALL')..[[", id="looks like Lua"),
    pytest.param(b"\xff\xfe".decode("utf-8", "surrogateescape"), id="binary read back"),
]


@pytest.mark.parametrize("text", TEXTS)
def test_texts_round_trip_through_python(client: redis.Redis, text: str) -> None:
    store = odd_store(client)
    store.remember("a", 1.0, text=text, now=T0)
    m = store.get("a", now=T0)
    assert m is not None and m.text == text
    store.remember("a", 2.0, now=T0)  # no text given: the stored one is kept
    (top,) = store.top(1, now=T0)
    assert top.text == text


RAW_TEXTS = [
    ("empty", b""),
    ("every byte", bytes(range(256))),
    ("1 MB binary", b"\xff\x00" * (MB // 2)),
]


@pytest.mark.parametrize("text", [t for _, t in RAW_TEXTS], ids=[label for label, _ in RAW_TEXTS])
def test_texts_round_trip_through_raw_evalsha(client: redis.Redis, text: bytes) -> None:
    store = odd_store(client)
    args = {**good_args("remember"), "id": "a", "text": text, "now": str(T0)}
    raw_call(client, "remember", args)
    assert raw_call(client, "get", {"id": "a", "now": str(T0)})[8] == text
    m = store.get("a", now=T0)
    assert m is not None and m.text is not None
    assert m.text.encode("utf-8", "surrogateescape") == text
    # (has_text 0 keeps the text, and takes no terms)
    raw_call(client, "remember", {**args, "has_text": "0", "text": "ignored", "terms": ""})
    assert raw_call(client, "get", {"id": "a", "now": str(T0)})[8] == text


def test_no_text_reads_back_as_none_and_empty_text_as_empty(client: redis.Redis) -> None:
    store = odd_store(client)
    store.remember("none", 1.0, now=T0)
    store.remember("empty", 1.0, text="", now=T0)
    none, empty = store.get("none", now=T0), store.get("empty", now=T0)
    assert none is not None and none.text is None
    assert empty is not None and empty.text == ""


def test_every_script_and_method_has_cases() -> None:
    # A guard against a generator that silently produces nothing.
    for script in set(specs()) - NO_BAD_INPUT:
        for table in (RAW_VALUE_CASES, LAYOUT_CASES, WRONG_TYPE_CASES):
            assert any(c.values[0] == script for c in table), script
    for method, params in VALID_CALLS.items():
        if params:  # (reload_policy takes nothing to get wrong)
            assert any(c.values[0] == method for c in PYTHON_CASES), method
