"""Bad input gets a typed error and changes nothing, through Python and through raw EVALSHA."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from memevict import (
    ArityError,
    BadArgument,
    BadId,
    BadImportance,
    BadNamespace,
    BadNow,
    BadPolicy,
    BadRate,
    MemevictError,
    MemoryStore,
    NotFound,
    Policy,
    WrongType,
)
from memevict.errors import from_response
from memevict.scripts import key_name, namespace_keys, specs

T0 = 1_700_000_000_000
NS = "bad"


def snapshot(client: redis.Redis) -> dict[bytes, bytes | None]:
    return {k.encode(): client.dump(k) for k in namespace_keys(NS)}  # type: ignore[misc]


@pytest.fixture
def store(client: redis.Redis) -> MemoryStore:
    s = MemoryStore(client, NS, Policy(max_hot=3, whitelist_cap=1))
    s.remember("a", 5.0, text="t", now=T0)
    s.remember("w", 5.0, whitelist=True, now=T0)
    s.remember("b", 1.0, now=T0 + 60_000)
    s.remember("c", 2.0, now=T0 + 60_000)
    s.remember("d", 3.0, now=T0 + 60_000)  # something is cold
    return s


PYTHON_CASES: list[tuple[str, Callable[[MemoryStore], object], type[MemevictError]]] = [
    ("nan importance", lambda s: s.remember("x", float("nan")), BadImportance),
    ("inf importance", lambda s: s.remember("x", float("inf")), BadImportance),
    ("-inf importance", lambda s: s.remember("x", float("-inf")), BadImportance),
    ("zero importance", lambda s: s.remember("x", 0), BadImportance),
    ("negative importance", lambda s: s.remember("x", -1), BadImportance),
    ("text importance", lambda s: s.remember("x", "10"), BadImportance),  # type: ignore[arg-type]
    ("bool importance", lambda s: s.remember("x", True), BadImportance),
    ("huge int importance", lambda s: s.remember("x", 10**400), BadImportance),
    ("empty id", lambda s: s.remember("", 1.0), BadId),
    ("long id", lambda s: s.remember("x" * 1025, 1.0), BadId),
    ("bytes id", lambda s: s.remember(b"x", 1.0), BadId),  # type: ignore[arg-type]
    ("negative now", lambda s: s.remember("x", 1.0, now=-1), BadNow),
    ("float now", lambda s: s.remember("x", 1.0, now=1.5), BadNow),  # type: ignore[arg-type]
    ("absurd now", lambda s: s.remember("x", 1.0, now=10**16), BadNow),
    ("rate 0", lambda s: s.decay(0), BadRate),
    ("rate > 1", lambda s: s.decay(1.5), BadRate),
    ("rate nan", lambda s: s.decay(float("nan")), BadRate),
    ("negative k", lambda s: s.top(-1), BadArgument),
    ("unknown whitelist", lambda s: s.whitelist("nope"), NotFound),
    ("unknown demote", lambda s: s.demote("nope"), NotFound),
    ("unknown recall", lambda s: s.recall("nope"), NotFound),
    ("empty touch id", lambda s: s.touch(""), BadId),
    ("empty forget id", lambda s: s.forget(""), BadId),
]


@pytest.mark.parametrize(("case", "call", "error"), PYTHON_CASES, ids=[c[0] for c in PYTHON_CASES])
def test_python_api_rejects_bad_input(
    client: redis.Redis,
    store: MemoryStore,
    case: str,
    call: Callable[[MemoryStore], object],
    error: type[MemevictError],
) -> None:
    before = snapshot(client)
    with pytest.raises(error):
        call(store)
    assert snapshot(client) == before


def good_args(script: str) -> dict[str, str]:
    base = {
        "id": "a",
        "importance": "2",
        "text": "",
        "has_text": "0",
        "whitelist": "0",
        "now": str(T0 + 120_000),
        "rate": "0.5",
        "k": "3",
        "mode": "replace",
        "call": "",
    }
    base.update(Policy(max_hot=2).to_args())
    return {name: base[name] for name in specs()[script].args}


# (script, argument, bad value, expected code)
RAW_CASES = [
    ("remember", "importance", "nan", "BAD_IMPORTANCE"),
    ("remember", "importance", "inf", "BAD_IMPORTANCE"),
    ("remember", "importance", "-inf", "BAD_IMPORTANCE"),
    ("remember", "importance", "0", "BAD_IMPORTANCE"),
    ("remember", "importance", "-3", "BAD_IMPORTANCE"),
    ("remember", "importance", "0x10", "BAD_IMPORTANCE"),
    ("remember", "importance", " 5", "BAD_IMPORTANCE"),
    ("remember", "importance", "ten", "BAD_IMPORTANCE"),
    ("remember", "importance", "1e999", "BAD_IMPORTANCE"),
    ("remember", "importance", "", "BAD_IMPORTANCE"),
    ("remember", "id", "", "BAD_ID"),
    ("remember", "id", "x" * 1025, "BAD_ID"),
    ("remember", "has_text", "yes", "BAD_ARG"),
    ("remember", "whitelist", "2", "BAD_ARG"),
    ("remember", "now", "-5", "BAD_NOW"),
    ("remember", "now", "1.5", "BAD_NOW"),
    ("remember", "now", "99999999999999999", "BAD_NOW"),
    ("decay", "rate", "0", "BAD_RATE"),
    ("decay", "rate", "1.01", "BAD_RATE"),
    ("decay", "rate", "nan", "BAD_RATE"),
    ("decay", "rate", "-0.5", "BAD_RATE"),
    ("top", "k", "-1", "BAD_ARG"),
    ("top", "k", "1e3", "BAD_ARG"),
    ("whitelist", "id", "nope", "NOT_FOUND"),
    ("demote", "id", "nope", "NOT_FOUND"),
    ("recall", "id", "nope", "NOT_FOUND"),
    ("touch", "now", "later", "BAD_NOW"),
    ("evict", "now", "x", "BAD_NOW"),
    ("get", "id", "", "BAD_ID"),
    ("forget", "id", "", "BAD_ID"),
    ("stats", "now", "-1", "BAD_NOW"),
    ("configure", "max_hot", "0", "BAD_POLICY"),
    ("configure", "half_life_s", "0", "BAD_POLICY"),
    ("configure", "jitter", "nan", "BAD_POLICY"),
    ("configure", "mode", "upsert", "BAD_ARG"),
]


def raw_call(client: redis.Redis, script: str, args: dict[str, str]) -> object:
    spec = specs()[script]
    keys = spec.key_names(NS)
    return client.evalsha(spec.sha, len(keys), *keys, *spec.argv(args))


@pytest.mark.parametrize(("script", "arg", "value", "code"), RAW_CASES)
def test_scripts_reject_bad_input_without_python(
    client: redis.Redis, store: MemoryStore, script: str, arg: str, value: str, code: str
) -> None:
    store.registry.load()
    args = good_args(script)
    args[arg] = value
    before = snapshot(client)
    with pytest.raises(redis.ResponseError) as raised:
        raw_call(client, script, args)
    assert str(raised.value).split(" ")[0] == code
    assert snapshot(client) == before


@pytest.mark.parametrize("script", sorted(specs()))
def test_wrong_arity_is_rejected(client: redis.Redis, store: MemoryStore, script: str) -> None:
    store.registry.load()
    spec = specs()[script]
    keys = spec.key_names(NS)
    args = spec.argv(good_args(script))
    before = snapshot(client)
    for k, a in ((keys[:-1], args), (keys, [*args, "extra"]), (keys, args[:-1])):
        with pytest.raises(redis.ResponseError) as raised:
            client.evalsha(spec.sha, len(k), *k, *a)
        assert isinstance(from_response(raised.value), ArityError)
    assert snapshot(client) == before


@pytest.mark.parametrize("script", sorted(specs()))
def test_a_key_of_the_wrong_type_is_rejected(
    client: redis.Redis, store: MemoryStore, script: str
) -> None:
    store.registry.load()
    spec = specs()[script]
    for role, key_type in zip(spec.keys, spec.key_types, strict=True):
        key = key_name(NS, role)
        saved = client.dump(key)
        client.delete(key)
        if key_type == "hash":
            client.zadd(key, {"planted": 1})
        else:
            client.hset(key, "planted", "1")
        before = snapshot(client)
        with pytest.raises(redis.ResponseError) as raised:
            raw_call(client, script, good_args(script))
        assert isinstance(from_response(raised.value), WrongType), (script, role)
        assert snapshot(client) == before
        client.delete(key)
        if saved is not None:
            client.restore(key, 0, saved)


def test_store_methods_raise_wrong_type(client: redis.Redis, store: MemoryStore) -> None:
    client.delete(key_name(NS, "cold"))
    client.set(key_name(NS, "cold"), "planted")
    before = snapshot(client)
    with pytest.raises(WrongType):
        store.remember("z", 1.0)
    assert snapshot(client) == before


@pytest.mark.parametrize("namespace", ["", "a{b", "a}b", "x" * 257])
def test_bad_namespaces_are_rejected(client: redis.Redis, namespace: str) -> None:
    with pytest.raises(BadNamespace):
        MemoryStore(client, namespace)


def test_bad_policy_through_the_store(client: redis.Redis) -> None:
    with pytest.raises(BadPolicy):
        MemoryStore(client, "ns", Policy(max_hot=-1))
    assert client.keys("*") == []
