"""redis-py clients made from a URL, for the stores' ``from_url`` and the CLI.

A URL does not say whether it names a cluster node, so the server is asked
(INFO cluster): a node of a cluster gets a cluster client, which routes each
call to the node of its slot; anything else a plain client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import redis
import redis.asyncio
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialWithJitterBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

from memevict.registry import AsyncClient, SyncClient

# The advice for asyncio (docs/python-api.md): a blocking pool makes a coroutine wait for a
# free connection where redis-py's default pool raises past its maximum.
ASYNC_MAX_CONNECTIONS = 50


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
    """``client`` (of ``url``), or, if its server is a cluster node, a cluster
    client of ``url`` in its place (``client`` is then closed)."""
    if not cluster_enabled(await client.info("cluster")):
        return client
    await client.aclose()
    return AsyncRedisCluster.from_url(url)
