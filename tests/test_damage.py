"""Hand damage between calls (issue 28): a seeded mix of every method on one namespace,
with, between calls, one key of it deleted, one byte of its packed policy or state
flipped, or one policy field set to nonsense. Every call either works or fails with a
typed error (a MemevictError other than UnexpectedReply, which says a script broke); the
CLI's reads answer or fail in one line, never with a traceback; and a writable store
opened after the damage always works (the namespace has healed)."""

from __future__ import annotations

import random

import pytest
import redis
from click.testing import CliRunner

from memevict import MemoryStore, Policy
from memevict.cli import main
from memevict.errors import UnexpectedReply
from memevict.scripts import key_name
from tests.test_functions import random_calls

ROLES = (
    "policy", "state", "meta", "text", "hot", "fresh", "prot", "wl", "cold", "ghot", "groups",
    "links",
)  # fmt: skip
POLICY = Policy(max_hot=5, whitelist_cap=2, protect_s=1, cold_max=4, half_life_s=60, max_tokens=12)


def damage(client: redis.Redis, namespace: str, rng: random.Random) -> str:
    """One piece of hand damage, described."""
    kind = rng.choice(("delete", "delete", "policy byte", "state byte", "policy field"))
    if kind == "delete":
        role = rng.choice(ROLES)
        client.delete(key_name(namespace, role))
        return f"DEL {role}"
    if kind == "policy field":
        field = rng.choice(tuple(Policy.__dataclass_fields__))
        client.hset(key_name(namespace, "policy"), field, rng.choice(("banana", "-1", "")))
        return f"HSET policy {field}"
    key = key_name(namespace, "policy" if kind == "policy byte" else "state")
    packed = client.hget(key, "packed")
    if not packed:
        return f"{kind}: none to flip"
    at = rng.randrange(len(packed))
    flipped = packed[:at] + bytes([packed[at] ^ (1 << rng.randrange(8))]) + packed[at + 1 :]
    client.hset(key, "packed", flipped)
    return f"{kind} {at}"


def healthy(store: MemoryStore) -> None:
    """What a healed namespace shows: every read works and the counts agree."""
    stats = store.stats()
    top = store.top(200)
    assert stats.hot >= len(top)  # (entries whose metadata was lost count until met)
    window = store.window(None)
    assert window.tokens == sum(m.tokens for m in window) and stats.tokens >= 0
    assert all(m.score > 0 for m in top)
    got = store.remember("probe", 1.0, tokens=1)
    assert got.id == "probe"
    assert store.get("probe") is not None


@pytest.mark.parametrize("seed", range(12))
def test_every_call_works_or_fails_typed_and_the_namespace_heals(
    client: redis.Redis, seed: int
) -> None:
    rng = random.Random(seed)
    namespace = f"damaged{seed}"
    kwargs = client.connection_pool.connection_kwargs
    url = f"redis://{kwargs['host']}:{kwargs['port']}/0"
    store = MemoryStore(client, namespace, POLICY, replace_policy=True)
    calls = random_calls(store, rng, 10_000)
    for step in range(40):
        for _ in range(rng.randrange(1, 8)):  # calls between two damages
            result = next(calls)
            assert result != UnexpectedReply.__name__, (step, result)
        what = damage(client, namespace, rng)
        for args in (["stats"], ["top"], ["window"], ["policy"], ["get", "m1"], ["namespaces"]):
            # the CLI on the damaged namespace: its answer, or one line, never a traceback
            ran = CliRunner().invoke(main, ["--url", url, "-n", namespace, *args])
            assert ran.exit_code in (0, 1) and isinstance(ran.exception, SystemExit | None), (
                what,
                args,
                ran.output,
                ran.exception,
            )
        for _ in range(3):  # calls on the damaged namespace (typed errors come as names)
            result = next(calls)
            assert result != UnexpectedReply.__name__, (step, what, result)
        reopened = MemoryStore(client, namespace, POLICY, replace_policy=True)
        healthy(reopened)
        store.policy = reopened.policy
