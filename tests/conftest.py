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


# The tests that take longest (most of it waiting: on a failover, on replicas, on whole
# conversations through a framework, on a benchmark's own servers), longest first. Under
# pytest-xdist each worker starts with its share of them (lead_with_the_longest), so that
# none is left running alone at the end. None uses the cluster fixture: a worker that ran
# one out of order would build a cluster again.
LONGEST = (
    "test_adapter_turn.py::test_the_adapter_turn_script_runs",
    "test_cluster.py::test_a_call_waits_out_a_failover",
    "test_model.py::test_store_follows_the_model",
    "test_durable.py::test_no_confirmed_write_is_lost_when_a_primary_is_killed",
    "test_pydantic_ai.py::test_a_200_turn_agent_through_an_over_budget_message_a_flush_and_a_dynamic_prompt",
    "test_langchain.py::test_a_200_turn_agent_keeps_pairs_the_budget_and_the_instruction",
    "test_adapter_coverage.py::test_a_tiny_run_through_every_adapter",
    "test_bench.py::test_the_index_cost_script_runs",
    "test_readme.py::test_every_simulate_line_runs_as_written",
    "test_bench.py::test_quick_bench_reports_every_peer_and_target",
    "test_cluster.py::test_an_async_call_waits_out_a_failover",
    "test_pydantic_ai.py::test_a_200_turn_agent_keeps_pairs_the_budget_and_the_instruction",
    "test_bench.py::test_the_failover_campaign_script_runs",
)  # fmt: skip


@pytest.hookimpl(trylast=True)  # (after pytest's own reordering by fixture)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1:
        items[:] = lead_with_the_longest(items, workers)


def lead_with_the_longest(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """``items`` with the LONGEST ones at the heads of the ``workers`` parts that
    ``--dist worksteal`` first hands out (it splits the list into that many contiguous
    parts, and later moves tests from the end of a worker's queue), dealt out longest
    first, back and forth; the others in their order. Every worker computes the same
    list, as xdist requires."""
    rank = {name: i for i, name in enumerate(LONGEST)}

    def key(item: pytest.Item) -> int | None:
        return rank.get(f"{item.path.name}::{getattr(item, 'originalname', item.name)}")

    longest = sorted((item for item in items if key(item) is not None), key=key)
    if not longest:
        return items
    rest = [item for item in items if key(item) is None]
    heads: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for i, item in enumerate(longest):
        lap, at = divmod(i, workers)
        heads[at if lap % 2 == 0 else workers - 1 - at].append(item)
    ordered: list[pytest.Item] = []
    left, taken = len(items), 0
    for part in range(workers):
        size = left // (workers - part)  # (how worksteal sizes its first parts)
        left -= size
        more = max(0, size - len(heads[part]))
        ordered += heads[part] + rest[taken : taken + more]
        taken += more
    return ordered + rest[taken:]


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
    wall-clock time and protect by time alone: the wall clock and no protection by
    activity unless a scenario names them (rule 5's own scenarios do)."""
    return Policy(**{"clock": "wall", "protect_memories": 0, **fields})  # type: ignore[arg-type]


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
