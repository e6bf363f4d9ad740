"""Fixtures: every test runs against real servers, the embedded Valkey and redis-server.

Without ``redis-server`` on the PATH the Redis leg is skipped, unless
MEMEVICT_REQUIRE_REDIS=1 (set by .ci/run), which turns the skip into a failure.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest
import redis

from memevict import MemoryStore, Policy
from memevict.state import read_state
from tests.cluster import KINDS, Cluster, shared
from tests.servers import Server, redis_binary, valkey_binary

# Both servers; MEMEVICT_SERVERS=valkey (or redis) runs one leg, for a quick run.
SERVERS = tuple(os.environ.get("MEMEVICT_SERVERS", "valkey,redis").split(","))

# The test files that take most of the suite's time (clusters, replicas, many processes,
# the benchmarks' smoke runs, long seeded hunts, whole conversations through the
# adapters): marked slow, so that `pytest -m "not slow"` is the quick run.
SLOW_FILES = frozenset(
    {
        "test_adapter_coverage.py", "test_adapter_turn.py", "test_bench.py", "test_cluster.py",
        "test_cluster_pool.py",
        "test_damage.py", "test_durable.py", "test_faults.py", "test_loader.py", "test_model.py",
        "test_readme.py", "test_stress.py",
    }
)  # fmt: skip


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n auto`` (pyproject's addopts): MEMEVICT_WORKERS, or twice the cores up
    to 8. Twice, because a test spends much of its time waiting on its servers, on a
    replica or on a timeout; each worker starts servers of its own."""
    wanted = os.environ.get("MEMEVICT_WORKERS")
    if wanted is not None:
        return int(wanted)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return min(8, 2 * (cores or 1))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", params=SERVERS)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    if request.param == "valkey":
        binary = valkey_binary()
    else:
        found = redis_binary()
        if found is None:
            if os.environ.get("MEMEVICT_REQUIRE_REDIS") == "1":
                pytest.fail("redis-server not found and MEMEVICT_REQUIRE_REDIS=1")
            pytest.skip("redis-server not installed")
        binary = found
    started = Server(binary).start()
    yield started
    started.stop()


@pytest.fixture(scope="session", params=KINDS)
def cluster(request: pytest.FixtureRequest) -> Cluster:
    """A 3-master cluster of each server kind, one per test session (per worker)."""
    return shared(request.config, request.param)


def fresh_client(server: Server) -> Iterator[redis.Redis]:
    """A client of ``server``, emptied (data and script cache) first, closed after."""
    c = server.client()
    c.flushall()
    c.script_flush()
    yield c
    c.close()


@pytest.fixture
def client(server: Server) -> Iterator[redis.Redis]:
    yield from fresh_client(server)


StoreFactory = Callable[..., MemoryStore]


def scenario_policy(**fields: float) -> Policy:
    """A policy for the rule scenarios (tests/test_rules.py), which are told in
    wall-clock time: the wall clock unless a scenario names another."""
    return Policy(**{"clock": "wall", **fields})  # type: ignore[arg-type]


@pytest.fixture
def make_store(client: redis.Redis) -> StoreFactory:
    def make(namespace: str = "t", **policy: float) -> MemoryStore:
        return MemoryStore(client, namespace, scenario_policy(**policy))

    return make


def state_of(client: redis.Redis, namespace: str) -> dict[str, float]:
    """A namespace's state fields (memevict.state), which must exist."""
    state = read_state(client, namespace)
    assert state is not None
    return state
