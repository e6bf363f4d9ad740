"""redis-py clients made from a URL, for the stores' ``from_url`` and the CLI.

A URL does not say whether it names a cluster node, so the server is asked
(INFO cluster): a node of a cluster gets a cluster client, which routes each
call to the node of its slot; anything else a plain client.

An asyncio client waits for a free connection rather than failing: on a single server
through a BlockingConnectionPool, on a cluster as a :class:`BlockingRedisCluster`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, cast

import redis
import redis.asyncio
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialWithJitterBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

from memevict.errors import BadArgument
from memevict.registry import AsyncClient, SyncClient

# The advice for asyncio (docs/python-api.md): a blocking pool makes a coroutine wait for a
# free connection where redis-py's default pool raises past its maximum. The connections
# of an asyncio client memevict makes: of its server, or of each node of a cluster.
ASYNC_MAX_CONNECTIONS = 50

__all__ = ["ASYNC_MAX_CONNECTIONS", "BlockingRedisCluster", "async_client"]


class BlockingRedisCluster(AsyncRedisCluster):
    """redis-py's asyncio ``RedisCluster``, whose calls wait for a free connection of
    their node, as a ``BlockingConnectionPool`` makes them wait on a single server.

    redis-py's asyncio cluster client opens up to ``max_connections`` connections per
    node (100 by default) and then raises ``MaxConnectionsError`` at once (issue 38: 500
    concurrent sessions failed 76 turns). Here at most ``max_connections`` calls (50 by
    default) are in flight on a node at a time; the others wait their turn, as long as it
    takes. redis-py's own ceiling is set to twice that: a call redirected (MOVED or ASK,
    while a slot migrates) to a node whose turns are all taken still finds a connection.
    Any other argument is RedisCluster's (``from_url`` too).
    """

    def __init__(
        self, *args: Any, max_connections: int = ASYNC_MAX_CONNECTIONS, **kwargs: Any
    ) -> None:
        if (
            isinstance(max_connections, bool)
            or not isinstance(max_connections, int)
            or max_connections < 1
        ):
            raise BadArgument(
                f"max_connections must be a whole number >= 1, got {max_connections!r}"
            )
        kwargs["max_connections"] = 2 * max_connections
        super().__init__(*args, **kwargs)
        self.connections_per_node = max_connections
        self._turns: dict[str, asyncio.Semaphore] = {}

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> BlockingRedisCluster:
        """RedisCluster.from_url, ``max_connections`` as the constructor's."""
        return cast(BlockingRedisCluster, super().from_url(url, **kwargs))

    async def _execute_command(self, target_node: Any, *args: Any, **kwargs: Any) -> Any:
        # Every command of RedisCluster.execute_command, each node of a multi-node one
        # too, is sent by this method to the node of its slot.
        turns = self._turns.get(target_node.name)
        if turns is None:
            turns = self._turns[target_node.name] = asyncio.Semaphore(self.connections_per_node)
        async with turns:
            return await super()._execute_command(target_node, *args, **kwargs)


def cluster_enabled(info: Mapping[str, Any]) -> bool:
    """Whether the reply to INFO cluster comes from a node of a cluster."""
    return info.get("cluster_enabled") == 1


# redis-py's Redis(host, port) resends a command after a lost connection or a timeout,
# up to 10 times; Redis.from_url makes a client that does not. memevict's clients
# resend as Redis() does (a resent write is answered from its receipt).
RESENDS = 10


def _backoff() -> ExponentialWithJitterBackoff:
    return ExponentialWithJitterBackoff(base=0.01, cap=1)


def client_from_url(url: str, *, routed: bool = True) -> SyncClient:
    """A client of ``url``, pinged (a wrong database index or password fails
    here); a cluster client if ``routed`` and the server is a cluster node.
    It resends a command after a lost connection or a timeout, as redis-py's
    ``Redis()`` does (RESENDS). Raises ValueError for a URL redis-py cannot parse."""
    client = redis.Redis.from_url(url, retry=Retry(_backoff(), RESENDS))
    try:
        client.ping()
        if not (routed and cluster_enabled(client.info("cluster"))):
            return client
    except BaseException:
        client.close()
        raise
    client.close()
    return RedisCluster.from_url(url)


def close_client(client: SyncClient) -> None:
    """Closes ``client`` and its connections: a RedisCluster's close() lets go
    of its nodes' clients but leaves their sockets open (redis-py 8)."""
    if isinstance(client, RedisCluster):
        cast(Any, client).disconnect_connection_pools()  # (not annotated in redis-py)
    client.close()


def async_client_from_url(url: str) -> redis.asyncio.Redis:
    """An asyncio client of ``url`` on a BlockingConnectionPool of its own,
    which closing the client closes; nothing is sent yet (see async_routed).
    A coroutine waits for a free connection as long as it takes (timeout=None):
    redis-py's default of 20 s raises ConnectionError under hundreds of sessions."""
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        url,
        max_connections=ASYNC_MAX_CONNECTIONS,
        timeout=None,
        retry=AsyncRetry(_backoff(), RESENDS),  # (as client_from_url's)
    )
    return redis.asyncio.Redis.from_pool(pool)


async def async_routed(client: redis.asyncio.Redis, url: str) -> AsyncClient:
    """``client`` (of ``url``), or, if its server is a cluster node, a
    :class:`BlockingRedisCluster` of ``url`` in its place (``client`` is then closed):
    ASYNC_MAX_CONNECTIONS per node."""
    if not cluster_enabled(await client.info("cluster")):
        return client
    await client.aclose()
    return BlockingRedisCluster.from_url(url)


async def async_client(url: str) -> AsyncClient:
    """An asyncio client of ``url`` for every session of a process to share (the adapters'
    ``client=``, any number of stores): on a server, a ``redis.asyncio.Redis`` on a
    BlockingConnectionPool of ASYNC_MAX_CONNECTIONS; on a cluster node, a
    :class:`BlockingRedisCluster` of as many connections per node. A call waits for a free
    connection instead of failing. Asks the server INFO cluster (an error there closes the
    client); yours to ``aclose()``."""
    client = async_client_from_url(url)
    try:
        return await async_routed(client, url)
    except BaseException:
        await client.aclose()
        raise
