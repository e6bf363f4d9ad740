"""call_id= (issue 29): an application's own resend of a write, with the id it gave the
call, is applied once and answered with the first reply, sync and async; receipts off
(retry_window_s=0) apply it again, so these tests can fail."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio

from memevict import AsyncMemoryStore, MemoryStore, Policy

T0 = 1_800_000_000_000


def test_a_resend_with_the_same_call_id_is_applied_once(client: redis.Redis) -> None:
    store = MemoryStore(client, "ids", Policy(max_hot=10, protect_s=0))
    first = store.remember("a", 1.0, now=T0, call_id="app:1")
    again = store.remember("a", 5.0, now=T0 + 1, call_id="app:1")  # (a resend: its args too)
    assert again == first and store.get("a", now=T0 + 2).importance == 1.0  # type: ignore[union-attr]
    assert store.remember("a", 5.0, now=T0 + 3, call_id="app:2").score > first.score
    before = store.get("a", now=T0 + 4).score  # type: ignore[union-attr]
    for _ in range(2):
        store.decay(0.5, call_id="tick-7")
    after = store.get("a", now=T0 + 4).score  # type: ignore[union-attr]
    assert after == pytest.approx(before / 2, rel=1e-12)  # once, not twice
    store.forget("a", call_id="gone.a")
    assert store.forget("a", call_id="gone.a") is None  # answered from its receipt
    batch = [("b", 2.0), ("c", 3.0)]
    first_batch = store.remember_many(batch, now=T0 + 5, call_id="many")
    store.remember("b", 7.0, now=T0 + 6)
    assert store.remember_many(batch, now=T0 + 5, call_id="many") == first_batch
    assert store.get("b", now=T0 + 7).importance == 7.0  # type: ignore[union-attr]


def test_without_receipts_a_resend_applies_again(client: redis.Redis) -> None:
    store = MemoryStore(client, "noreceipt", Policy(max_hot=10, protect_s=0, retry_window_s=0))
    store.remember("a", 1.0, now=T0, call_id="app:1")
    store.remember("a", 5.0, now=T0 + 1, call_id="app:1")
    assert store.get("a", now=T0 + 2).importance == 5.0  # type: ignore[union-attr]


def test_an_async_resend_with_the_same_call_id_is_applied_once(client: redis.Redis) -> None:
    kwargs = client.connection_pool.connection_kwargs

    async def run() -> tuple[object, object, float]:
        aclient = redis.asyncio.Redis(host=kwargs["host"], port=kwargs["port"])
        store = AsyncMemoryStore(aclient, "aids", Policy(max_hot=10, protect_s=0))
        try:
            first = await store.remember("a", 1.0, now=T0, call_id="app:1")
            again = await store.remember("a", 5.0, now=T0 + 1, call_id="app:1")
            got = await store.get("a", now=T0 + 2)
            assert got is not None
            return first, again, got.importance
        finally:
            await store.aclose()

    first, again, importance = asyncio.run(run())
    assert first == again and importance == 1.0
