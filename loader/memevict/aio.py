"""AsyncMemoryStore: MemoryStore for asyncio agents, over ``redis.asyncio``.

Same methods, arguments and results as :class:`memevict.MemoryStore`, each
awaited; the argument building and reply parsing are the same functions
(memevict/commands.py), and so are the keys and policy checks (StoreBase).

    store = await AsyncMemoryStore(redis.asyncio.Redis(), "agent-42", Policy(max_hot=100))
    r = await store.remember("pw", 10, text="the password is swordfish")

Awaiting the store configures it (as MemoryStore's constructor does); a store
used without that is configured by its first call (a durable store's first
write then waits for the replicas to reach both).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Generator, Sequence
from typing import Any, TypeVar, cast

import redis.asyncio
from redis.exceptions import RedisError, ResponseError

from memevict import commands
from memevict.clientcache import cache_of
from memevict.clients import async_client_from_url, async_routed
from memevict.commands import POLICY_FIELDS, Call, Item
from memevict.errors import (
    MemevictError,
    NamespaceChanged,
    NoPolicy,
    NotDurable,
    WrongType,
    from_response,
)
from memevict.log import evictions_of, read_command
from memevict.namespaces import SCAN_COUNT, Namespace, names_of, policy_pattern, unreadable
from memevict.policy import Policy
from memevict.registry import (
    MIGRATION_WAIT_S,
    AsyncClient,
    AsyncScriptRegistry,
    Choice,
    Durability,
)
from memevict.results import (
    Batch,
    Context,
    Evicted,
    Eviction,
    Explanation,
    Match,
    Memory,
    Remembered,
    ScanPage,
    Stats,
    Tier,
    Version,
    Window,
)
from memevict.scripts import key_name
from memevict.state import version_of
from memevict.store import StoreBase

T = TypeVar("T")
S = TypeVar("S", bound="AsyncMemoryStore")


class AsyncMemoryStore(StoreBase):
    """One namespace of memories, for ``redis.asyncio.Redis`` or its ``RedisCluster``;
    see :class:`memevict.MemoryStore` for the arguments."""

    registry: AsyncScriptRegistry

    def __init__(
        self,
        client: AsyncClient,
        namespace: str = "default",
        policy: Policy | None = None,
        *,
        replace_policy: bool = False,
        adopt_policy: bool = False,
        read_only: bool = False,
        mode: Choice = "auto",
        migration_wait_s: float = MIGRATION_WAIT_S,
        durable_replicas: int = 0,
        durable_timeout_ms: int = 1000,
        durable_aof: bool = False,
        cached_open: bool = False,
    ) -> None:
        super().__init__(namespace, mode, read_only, cached_open)
        durable = Durability.of(durable_replicas, durable_timeout_ms, durable_aof)
        self.adopt_policy = adopt_policy
        self.client = client
        self.registry = AsyncScriptRegistry(
            client,
            self.mode_asked,
            may_load=not read_only,
            migration_wait_s=migration_wait_s,
            cached=cached_open,
        )
        self.registry.durable = durable
        self._wanted = policy
        self._replace = replace_policy
        self._policy: Policy | None = None
        self._opening: asyncio.Future[Policy] | None = None
        self._url: str | None = None  # from_url: ask at opening whether it names a cluster

    @classmethod
    def from_url(
        cls: type[S], url: str, namespace: str, policy: Policy | None = None, **kwargs: Any
    ) -> S:
        """A store on a client of its own of ``url``, which :meth:`aclose` closes;
        ``kwargs`` as the constructor's. The client has a BlockingConnectionPool
        of 50 connections; opening the store (awaiting it, ``async with``, or its
        first call) swaps it for a cluster client if the URL names a cluster node.
        ``async with AsyncMemoryStore.from_url(url, "agent-42") as store:``"""
        store = cls(async_client_from_url(url), namespace, policy, **kwargs)
        store.owns_client = True
        store._url = url
        return store

    async def aclose(self) -> None:
        """Closes the client if this store made it (from_url); a client passed to
        the constructor stays open for its owner. (aclose, as redis.asyncio names it.)"""
        if self.owns_client:
            await self.client.aclose()

    async def __aenter__(self: S) -> S:
        try:
            await self._ready(confirm=True)
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __await__(self) -> Generator[Any, None, AsyncMemoryStore]:
        return self._opened().__await__()

    async def _opened(self) -> AsyncMemoryStore:
        await self._ready(confirm=True)
        return self

    @property
    def policy(self) -> Policy:
        if self._policy is None:
            raise MemevictError("the store is not open yet: store = await AsyncMemoryStore(...)")
        return self._policy

    async def _ready(self, confirm: bool = False) -> None:
        """Opens the store once, however many coroutines ask at the same time; a
        durable store's configure waits for the replicas when the store is opened on
        purpose (``confirm``: awaited, ``async with``), not when a call opens it (the
        call's own WAIT confirms both)."""
        if self._policy is not None:
            return
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._open(confirm))
        try:
            self._policy = await self._opening
        except BaseException:
            self._opening = None  # the next call tries again
            raise

    async def _route(self) -> None:
        """A from_url store's client: a cluster client if the URL names a cluster node
        (asked once, before anything else is sent)."""
        if self._url is not None and isinstance(self.client, redis.asyncio.Redis):
            routed = await async_routed(self.client, self._url)
            if routed is not self.client:  # nothing was sent through the old one yet
                self.client = routed
                durable = self.registry.durable
                self.registry = AsyncScriptRegistry(
                    routed,
                    self.mode_asked,
                    may_load=not self.read_only,
                    migration_wait_s=self.registry.migration_wait_s,
                    cached=self.cached_open,
                )
                self.registry.durable = durable
            self._url = None

    async def _open(self, confirm: bool) -> Policy:
        await self._route()
        self.registry.check_durable()  # (its first call: a read too)
        await self.registry.ensure_library(self.policy_key)
        if self.read_only:
            return await self._stored_policy()
        policy = self._opened_before(self._wanted, self._replace)
        if policy is None:
            try:
                stored = await self._configure(self._wanted, self._replace, wait=confirm)
            except WrongType:  # (as MemoryStore._open)
                return self._wanted if self._wanted is not None else Policy()
            policy = self._checked(self._wanted, stored)
        config = self._maxmemory_policy()
        if config is None:  # (as MemoryStore's constructor)
            config = cache_of(self.client).maxmemory = {}
            with contextlib.suppress(RedisError):
                config = await self.client.config_get("maxmemory-policy")
                cache_of(self.client).maxmemory = config
        self._warn_if_keys_can_be_evicted(config, policy)
        return policy

    async def _send(self, call: Call[T], *, seen: str | None = None, wait: bool = True) -> T:
        """As MemoryStore._send."""
        try:
            reply = await self.registry.run(*self._parts(call, seen), wait=wait)
        except ResponseError as error:
            raise from_response(error) from None
        except NotDurable as error:  # (applied: its result is the caller's)
            error.result = call.parse(error.reply)
            raise
        return call.parse(reply)

    async def _run(self, call: Call[T]) -> T:
        """As MemoryStore._run."""
        await self._ready()
        pending, sends = self._first_pending(call), 0
        while True:
            sends += 1
            try:
                if pending is not None:
                    await self._take(pending)
                    pending = None
                result = await self._send(call)
            except NotDurable:
                self._wrote(call)  # (applied)
                raise
            except (NoPolicy, NamespaceChanged) as error:
                pending = self._after(error, sends, self.policy)
            else:
                self._wrote(call)
                return result

    async def _take(self, seen: str) -> None:
        """As MemoryStore._take."""
        if not seen:
            left = await self.client.exists(*self._data_keys)
            lost = self._lost(left, self.policy)
            if lost is not None:
                raise lost
            seen = self._seen if left and self._acked else ""
        self._policy = await self._configure(self.policy, False, seen=seen, wait=False)

    async def _configure(self, policy: Policy | None, replace: bool, **how: Any) -> Policy:
        """As MemoryStore._configure."""
        call = self._configure_call(policy, replace)
        try:
            return self._configured(await self._send(call, **{"seen": "", **how}))
        except NotDurable as error:
            self._not_confirmed(error)
            raise

    async def recreate(self) -> Policy:
        """As :meth:`MemoryStore.recreate`."""
        await self._ready()
        try:
            stored = await self._configure(self.policy, False)
        except NotDurable as error:
            self._policy = cast(Policy, error.result)
            raise
        self._policy = self._checked(self.policy, stored)
        return self._policy

    async def _stored_policy(self) -> Policy:
        try:
            values = await self.client.hmget(self.policy_key, POLICY_FIELDS)
        except ResponseError as error:
            raise from_response(error) from None
        return self._parse_stored_policy(values)

    async def set_policy(
        self, policy: Policy | None = None, *, now: int | None = None, **changes: Any
    ) -> Policy:
        """As MemoryStore.set_policy."""
        try:
            done = await self._run(self._set_policy_call(policy, changes, now))
        except NotDurable as error:
            self._policy = cast(Policy, self._not_confirmed(error).result)
            raise
        self._policy = self._configured(done)
        return self._policy

    async def reload_policy(self) -> Policy:
        """As MemoryStore.reload_policy."""
        await self._ready()
        self._policy = await self._stored_policy()
        return self._policy

    async def remember(
        self,
        id: str,
        importance: float,
        *,
        text: str | None = None,
        whitelist: bool = False,
        tokens: int = 1,
        group: str | None = None,
        now: int | None = None,
        call_id: str | None = None,
        terms: Sequence[str] | None = None,
    ) -> Remembered:
        """As :meth:`MemoryStore.remember`."""
        return await self._run(
            commands.remember(
                id,
                importance,
                text=text,
                whitelist=whitelist,
                tokens=tokens,
                group=group,
                now=now,
                call_id=call_id,
                terms=self._terms(terms, self._policy),
            )
        )

    async def remember_many(
        self,
        items: Sequence[Item | tuple[str, float]],
        *,
        now: int | None = None,
        call_id: str | None = None,
        evicted_texts: bool = False,
    ) -> Batch:
        """Remembers up to 100 memories in one atomic call, as if one by one
        at the same now, then evicts once; items are Item or (id, importance).
        ``evicted_texts``: the batch also holds the text of each memory it evicted,
        read in the same call (for a summariser of what leaves)."""
        return await self._run(
            commands.remember_many(
                self._indexed(items, self._policy),
                now=now,
                call_id=call_id,
                evicted_texts=evicted_texts,
            )
        )

    async def touch(
        self, id: str, *, now: int | None = None, call_id: str | None = None
    ) -> Remembered | None:
        """Marks a hot memory as used now (evicting if that made the hot tier
        too full); None if it is cold; NotFound if unknown."""
        return await self._run(commands.touch(id, now=now, call_id=call_id))

    async def decay(self, rate: float, *, call_id: str | None = None) -> None:
        """Multiplies every non-whitelisted hot score by rate (0 < rate <= 1), in O(1)."""
        await self._run(commands.decay(rate, call_id=call_id))

    async def evict(self, *, now: int | None = None, call_id: str | None = None) -> Evicted:
        """Evicts down to max_hot (plus evict_batch) if the hot tier is over it."""
        return await self._run(commands.evict(now=now, call_id=call_id))

    async def whitelist(
        self, id: str, *, now: int | None = None, call_id: str | None = None
    ) -> Remembered:
        """Whitelists a memory (recalling it if cold); raises NotFound for an unknown id."""
        return await self._run(commands.whitelist(id, now=now, call_id=call_id))

    async def demote(
        self, id: str, *, now: int | None = None, call_id: str | None = None
    ) -> Remembered:
        """Makes a whitelisted memory ordinary (``demoted == (id,)``), evicting if that
        made the hot tier too full; ``demoted`` is empty if it was not whitelisted."""
        return await self._run(commands.demote(id, now=now, call_id=call_id))

    async def recall(
        self, id: str, *, now: int | None = None, call_id: str | None = None
    ) -> Remembered:
        """Brings a cold memory back to hot (or refreshes a hot one); NotFound if unknown."""
        return await self._run(commands.recall(id, now=now, call_id=call_id))

    async def forget(self, id: str, *, call_id: str | None = None) -> None:
        """Deletes a memory everywhere; NotFound if it is unknown."""
        return await self._run(commands.forget(id, call_id=call_id))

    async def get(self, id: str, *, now: int | None = None) -> Memory | None:
        """One memory, hot or cold, or None."""
        return await self._run(commands.get(id, now=now))

    async def search(
        self, query: str, k: int = 10, *, tier: str = "all", now: int | None = None
    ) -> list[Match]:
        """As :meth:`MemoryStore.search`."""
        return await self._run(commands.search(query, k, tier=tier, now=now))

    async def top(self, k: int, *, now: int | None = None) -> list[Memory]:
        """The k highest-scored hot memories, highest first."""
        return await self._run(commands.top(k, now=now))

    async def stats(self, *, now: int | None = None) -> Stats:
        """Counts of hot, cold, whitelisted and protected memories."""
        return await self._run(commands.stats(now=now))

    async def window(
        self,
        tokens: int | None = None,
        *,
        query: str | None = None,
        share: float | None = None,
        now: int | None = None,
    ) -> Window:
        """As :meth:`MemoryStore.window`."""
        return await self._run(commands.window(tokens, now=now, query=query, share=share))

    async def explain(
        self, id: str, tokens: int | None = None, *, now: int | None = None
    ) -> Explanation:
        """As :meth:`MemoryStore.explain`."""
        return await self._run(commands.explain(id, tokens, now=now))

    async def context(
        self,
        tokens: int | None = None,
        *,
        query: str | None = None,
        share: float | None = None,
        skip: Sequence[str] = (),
        now: int | None = None,
        detail: bool = False,
    ) -> Context:
        """As :meth:`MemoryStore.context`."""
        return await self._run(
            commands.context(tokens, now=now, skip=skip, query=query, share=share, detail=detail)
        )

    async def version(self) -> Version | None:
        """As :meth:`MemoryStore.version`."""
        await self._ready()
        try:
            fields = await self.client.hgetall(self.state_key)
        except ResponseError as error:
            raise from_response(error) from None
        return version_of(fields)

    async def evictions(self, since: str | None = None, count: int = 100) -> list[Eviction]:
        """As :meth:`MemoryStore.evictions`."""
        command, newest_first = read_command(self.log_key, since, count)
        await self._ready()
        try:
            entries = await self.client.execute_command(*command)
        except ResponseError as error:
            raise from_response(error) from None
        return evictions_of(entries, newest_first)

    async def scan(
        self, tier: Tier = "hot", cursor: int = 0, count: int = 100, *, now: int | None = None
    ) -> ScanPage:
        """As :meth:`MemoryStore.scan`."""
        return await self._run(commands.scan(tier, cursor, count, now=now))

    async def drop(self) -> int:
        """As :meth:`MemoryStore.drop`; a store not yet open drops without opening (a
        namespace no store can open is dropped too)."""
        if self._policy is None:
            await self._route()  # (a from_url store learns here whether it talks to a cluster)
            await self.registry.ensure_library(self.policy_key)
        try:
            dropped = await self._send(commands.drop())
        finally:  # (as MemoryStore.drop)
            self._dropped()
        return dropped


async def drop_namespace(client: AsyncClient, namespace: str) -> int:
    """As memevict.drop_namespace, on a ``redis.asyncio`` client or its ``RedisCluster``."""
    return await AsyncMemoryStore(client, namespace).drop()


async def namespaces(
    client: AsyncClient, *, now: int | None = None, prefix: str = ""
) -> list[Namespace]:
    """As memevict.namespaces, on a ``redis.asyncio`` client or its ``RedisCluster``."""
    scan = client.scan_iter(match=policy_pattern(prefix), count=SCAN_COUNT, _type="hash")
    keys = [key async for key in scan]
    found: list[Namespace] = []
    for name in names_of(keys):
        try:
            stats = await AsyncMemoryStore(client, name, read_only=True).stats(now=now)
        except MemevictError as error:
            there = bool(await client.hexists(key_name(name, "policy"), "packed"))
            entry = unreadable(name, error, there)
            found += [entry] if entry else []
            continue
        found.append(Namespace(name, stats))
    return found
